// The `ukb` command line as a function (src/cli/main.cpp): the executable's
// main (src/cli/entry.cpp) and the fuzzer (fuzz/fuzz_accel.cpp) call it.
#pragma once

namespace ukb::run {
class Cluster;
}

/// Runs `ukb` with these arguments (argv[0] is the program name) and returns
/// its exit code: 0 success, 1 failed evaluation, 2 bad input, 3 internal error.
/// `cluster`: the ranks of an MPI job (`ukb run` then runs on all of them;
/// only rank 0 speaks, but for errors of its own), or null.
int ukb_cli_main(int argc, char** argv, ukb::run::Cluster* cluster = nullptr);
