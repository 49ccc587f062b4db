// The `ukb` executable: the CLI itself is ukb_cli_main (main.cpp). Built
// with MPI (UKB_ENABLE_MPI), a `ukb` that an MPI launcher started joins its
// job: `mpirun -n P ukb run CONFIG` runs one ensemble on P ranks.
#include <csignal>

#include "cli.hpp"

#ifdef UKB_HAVE_MPI
#include "ukb/mpi.hpp"
#endif

int main(int argc, char** argv) {
  // A closed standard output (`ukb ... | head`) is a write error, reported
  // with exit code 4 as a full disk is, not a silent death by SIGPIPE.
  std::signal(SIGPIPE, SIG_IGN);
#ifdef UKB_HAVE_MPI
  const ukb::mpi::Session mpi(argc, argv);
  return ukb_cli_main(argc, argv, mpi.cluster());
#else
  return ukb_cli_main(argc, argv);
#endif
}
