// The `ukb` executable: the CLI itself is ukb_cli_main (main.cpp).
#include "cli.hpp"

int main(int argc, char** argv) { return ukb_cli_main(argc, argv); }
