#!/usr/bin/env bash
# Installs what is missing, builds and runs the whole test suite with ctest.
#  1. build/           default configuration (CUDA backend compiled when nvcc
#                      is found), warnings as errors, all tests;
#  2. build-cpu-asan/  CPU-only configuration (UKB_ENABLE_CUDA=OFF) with
#                      AddressSanitizer and UndefinedBehaviorSanitizer, the
#                      same tests;
#  3. build-fuzz/      the libFuzzer targets (clang, ASan+UBSan): the corpus
#                      in fuzz/corpus/ replayed, then 60 s of fuzzing
#                      (scripts/fuzz.sh 60).
# Exits non-zero on any failure. UKB_JOBS sets the parallelism (default 2).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install_deps.sh

jobs="${UKB_JOBS:-2}"
start=$(date +%s)

echo "== ukb: default build (build/)"
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DUKB_WERROR=ON
cmake --build build -j"$jobs"
ctest --test-dir build --output-on-failure -j"$jobs"

echo "== ukb: install, then build and run examples/custom_model against the installed package"
rm -rf build/install build/custom_model
cmake --install build --prefix build/install >/dev/null
cmake -S examples/custom_model -B build/custom_model -DCMAKE_PREFIX_PATH="$PWD/build/install" \
      -DCMAKE_BUILD_TYPE=Release -DCMAKE_COMPILE_WARNING_AS_ERROR=ON >/dev/null
cmake --build build/custom_model -j"$jobs"
build/custom_model/custom_model

# With UKB_NATIVE (the default): for the x86-64 baseline a SIMD pack is 4
# SSE2 registers, and the sanitized build of the lanes then took 16 of the
# run's 31 minutes to compile.
echo "== ukb: CPU-only build with ASan+UBSan (build-cpu-asan/)"
cmake -S . -B build-cpu-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DUKB_ENABLE_CUDA=OFF -DUKB_SANITIZE=ON \
      -DUKB_WERROR=ON -DUKB_BUILD_BENCH=OFF -DUKB_BUILD_EXAMPLES=OFF
cmake --build build-cpu-asan -j"$jobs"
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ctest --test-dir build-cpu-asan --output-on-failure -j"$jobs"

echo "== ukb: libFuzzer targets, corpus replay and 60 s of fuzzing (build-fuzz/)"
scripts/fuzz.sh 60

echo "== ukb: all tests passed in $(( $(date +%s) - start )) s"
