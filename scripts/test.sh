#!/usr/bin/env bash
# Installs what is missing, builds and runs the whole test suite with ctest:
#  1. build/      g++, Release, CUDA backend compiled when nvcc is found,
#                 warnings as errors, for the x86-64 baseline (UKB_NATIVE=OFF:
#                 the CPU backend's SIMD lanes as SSE2 packs, and g++'s
#                 -Wuninitialized / -Wmaybe-uninitialized, which g++ 12.2
#                 cannot keep on with AVX-512's own headers); every test;
#  2. the package installed from build/, and examples/custom_model built and
#     run against it, and the installed Python module run; the model file examples/models/rotating_hoop.hpp run by
#     the installed `ukb run` (a plugin compiled from the installed headers)
#     gives results.csv bitwise equal to the same model compiled into
#     custom_model (ukb::run::load_config<Model>), on cpu and reference; then
#     scripts/pip_check.sh: `pip wheel .` and its wheel installed into a
#     fresh venv, the `ukb` command, `python -m ukb` and `import ukb` from
#     it (in the background while stage 3 compiles; its output,
#     build/stage2.log, is shown when it ends, and a failure of either stops
#     the other);
#  3. build-san/  clang, CPU only, for this machine's CPU (-march=native: the
#                 lanes in its widest vectors), AddressSanitizer and
#                 UndefinedBehaviorSanitizer, -O1; every test; the same build
#                 has the libFuzzer targets (UKB_FUZZ=ON);
#  4. the fuzz corpus replayed and 60 s of fuzzing (scripts/fuzz.sh 60: both
#     fuzzers at once, 30 s each).
# Exits non-zero on any failure; a test that runs past 600 s fails (a hang
# must not eat the CI limit). UKB_JOBS sets the parallelism (default 2).
#
# scripts/test.sh --quick: one CPU-only build (build-quick/, Release, this
# machine's CPU, no benchmarks or examples) and its tests: the inner loop
# after a change.
set -euo pipefail
cd "$(dirname "$0")/.."
if (( BASH_VERSINFO[0] * 100 + BASH_VERSINFO[1] < 501 )); then
  echo "scripts/test.sh needs bash 5.1 or later (wait -n -p); this is bash $BASH_VERSION" >&2
  exit 2
fi

quick=0
case "${1:-}" in
  --quick) quick=1 ;;
  "") ;;
  *) echo "usage: scripts/test.sh [--quick]" >&2; exit 2 ;;
esac

scripts/install_deps.sh
jobs="${UKB_JOBS:-2}"
start=$(date +%s)

# Ninja where it is installed (and the directory is not configured with
# another generator); ccache where it is installed (a fresh machine has no
# cache: the time budget does not count on it).
config() {  # config DIR ARGS...
  local dir=$1
  shift
  local extra=()
  if command -v ninja >/dev/null && { [ ! -f "$dir/CMakeCache.txt" ] || grep -q 'CMAKE_GENERATOR:INTERNAL=Ninja' "$dir/CMakeCache.txt"; }; then
    extra+=(-G Ninja)
  fi
  if command -v ccache >/dev/null; then
    extra+=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
  fi
  cmake "${extra[@]}" -S . -B "$dir" "$@" >/dev/null
}
stamp() { echo "== ukb: $1 ($(( $(date +%s) - start )) s)"; }

if [ "$quick" = 1 ]; then
  stamp "quick: CPU-only build (build-quick/)"
  config build-quick -DCMAKE_BUILD_TYPE=Release -DUKB_WERROR=ON -DUKB_ENABLE_CUDA=OFF \
         -DUKB_BUILD_BENCH=OFF -DUKB_BUILD_EXAMPLES=OFF
  cmake --build build-quick -j"$jobs"
  ctest --test-dir build-quick --output-on-failure --timeout 600 -j"$jobs"
  stamp "quick: all tests passed"
  exit 0
fi

stamp "default build (build/), x86-64 baseline"
# Without a GPU (CI has none) the CUDA backend's device code is compiled and
# linked but never run: there it is compiled to PTX only (CUDA architecture
# 90-virtual: cicc compiles every kernel, ptxas does not assemble them for
# sm_90), with cicc at -O1 (the host code and every flag that decides what
# compiles stay as released): a fraction of the released compile time.
# With a GPU, the device code the GPU
# tests run is built as released (-O3, PTX and code for sm_90).
# The Eigen baseline benchmark (bench/baseline_eigen.cpp, a long compile)
# is no test's: bench/compare.sh builds and checks it.
# (Both settings are given either way: they stay in build/'s cache. With a
# GPU that is not sm_90, set UKB_CUDA_ARCHITECTURES, e.g. to native.)
extra_build=(-DUKB_BUILD_BASELINE=OFF)
if nvidia-smi -L >/dev/null 2>&1; then
  extra_build+=("-DCMAKE_CUDA_FLAGS=" "-DUKB_CUDA_ARCHITECTURES=${UKB_CUDA_ARCHITECTURES:-90}")
else
  extra_build+=("-DCMAKE_CUDA_FLAGS=-Xcicc -O1" -DUKB_CUDA_ARCHITECTURES=90-virtual)
fi
config build -DCMAKE_BUILD_TYPE=Release -DUKB_WERROR=ON -DUKB_NATIVE=OFF "${extra_build[@]}"
cmake --build build -j"$jobs"
ctest --test-dir build --output-on-failure --timeout 600 -j"$jobs"

# stop_tree PID...: each process and its descendants (SIGTERM), found in
# /proc: `ukb run` compiles its plugin in a child process.
tree() {
  local c
  echo "$1"
  for c in $(grep -l "^PPid:[[:space:]]*$1\$" /proc/[0-9]*/status 2>/dev/null | cut -d/ -f3); do tree "$c"; done
}
stop_tree() {
  local p
  for p in "$@"; do kill $(tree "$p") 2>/dev/null || true; done
}

# Stage 2, in a function: it runs in the background beside the sanitizer
# build (its steps leave a core idle part of the time: most of them are
# single-threaded compiles and runs). Its output
# goes to build/stage2.log, shown when it ends; a failure of stage 2 or of
# the sanitizer build stops the other and the script.
stage2() {
  rm -rf build/install build/custom_model build/model-cache-install
  cmake --install build --prefix build/install >/dev/null
  mkdir -p build/custom_model
  # Single-threaded work side by side (about 40 % less time than one step
  # after the other on 2 cores): the installed `ukb run` compiles the model
  # file into its plugin (one g++) and runs it on cpu while custom_model
  # compiles (its main.cpp by g++, and with CUDA its model's .cu by nvcc);
  # then the two runs on the reference backend (one thread each) at once. A failure stops the stage and the job
  # beside it, with its children (the trap).
  trap 'stop_tree $(jobs -p)' EXIT
  model_file_run() {  # model_file_run BACKEND &  (always a job: exec makes the job ukb itself)
    UKB_CACHE_DIR="$PWD/build/model-cache-install" exec build/install/bin/ukb run examples/models/rotating_hoop.toml \
        --backend "$1" --out "build/custom_model/model-file-$1" --quiet
  }
  model_file_run cpu &
  plugin=$!
  cmake -S examples/custom_model -B build/custom_model -DCMAKE_PREFIX_PATH="$PWD/build/install" \
        -DCMAKE_COMPILE_WARNING_AS_ERROR=ON >/dev/null
  cmake --build build/custom_model -j"$jobs"
  wait "$plugin"
  build/custom_model/custom_model
  build/custom_model/custom_model examples/models/rotating_hoop.toml build/custom_model/compiled-in-cpu cpu
  model_file_run reference &
  reference=$!
  build/custom_model/custom_model examples/models/rotating_hoop.toml build/custom_model/compiled-in-reference reference
  wait "$reference"
  trap - EXIT
  for be in cpu reference; do
    cmp build/custom_model/compiled-in-$be/results.csv build/custom_model/model-file-$be/results.csv
    echo "== ukb: $be: results.csv of the model file (installed ukb run) and of the compiled-in model are the same bits"
  done
  # The installed Python package: the same model file through ukb.run gives
  # the installed `ukb run`'s results.csv (its plugin found in the cache).
  pysite=$(ls -d "$PWD"/build/install/lib/python3*/*-packages 2>/dev/null | head -n 1)
  if [ -n "$pysite" ]; then
    UKB_CACHE_DIR="$PWD/build/model-cache-install" PYTHONPATH="$pysite" /usr/bin/python3 - <<'PY'
import filecmp, os, ukb
assert ukb.__file__.startswith(os.environ["PYTHONPATH"]), ukb.__file__
ukb.run("examples/models/rotating_hoop.toml", out="build/custom_model/python-cpu", backend="cpu", progress=False)
assert filecmp.cmp("build/custom_model/python-cpu/results.csv", "build/custom_model/model-file-cpu/results.csv", shallow=False)
print("== ukb: the installed Python package (" + os.path.dirname(ukb.__file__) + ") gives the same results.csv")
PY
  fi
  # `pip install .` as a pip user does it (pyproject.toml), into a fresh venv,
  # and the same model file's results.
  scripts/pip_check.sh --quick-compile --against build/custom_model/model-file-cpu/results.csv build/pip-check
}

stamp "install, then build and run examples/custom_model against the installed package (in the background, output in build/stage2.log)"
rm -f build/stage2.log
# Stage 2 in a process group of its own (set -m; it writes to its log, not
# to the terminal), so that on any exit (a failure, Ctrl-C) it goes with
# every process it started; the sanitizer build (ninja and its compilers)
# with its process tree.
set -m
stage2 >build/stage2.log 2>&1 &
stage2_pid=$!
set +m
san_pid=
trap 'kill -- -$stage2_pid 2>/dev/null || true; [ -z "$san_pid" ] || stop_tree "$san_pid"' EXIT

stamp "clang build with ASan+UBSan and the fuzz targets (build-san/)"
# -O1 with line tables only: half the compile time of -O2 -g, with stack
# traces that name the lines. NDEBUG: toml++'s own assertions fail on some
# bad input (src/run/config.cpp); without them the parser reports the error.
config build-san -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=RelWithDebInfo \
       "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -gline-tables-only -DNDEBUG" \
       -DUKB_ENABLE_CUDA=OFF -DUKB_SANITIZE=ON -DUKB_FUZZ=ON -DUKB_WERROR=ON \
       -DUKB_BUILD_BENCH=OFF -DUKB_BUILD_EXAMPLES=OFF
cmake --build build-san -j"$jobs" &
san_pid=$!
# Whichever ends first; a failure of either stops the other (the trap).
show_stage2() {  # show_stage2 STATUS
  stamp "stage 2 ended (build/stage2.log):"
  cat build/stage2.log
  if [ "$1" != 0 ]; then
    echo "== ukb: stage 2 (the installed package, examples/custom_model, the model file) failed; its output is above" >&2
    exit 1
  fi
}
first=; rc=0
wait -n -p first "$stage2_pid" "$san_pid" || rc=$?
if [ "$first" = "$stage2_pid" ]; then
  show_stage2 "$rc"
  wait "$san_pid"
else
  if [ "$rc" != 0 ]; then
    echo "== ukb: the sanitizer build failed; stage 2 is stopped (its output so far: build/stage2.log)" >&2
    exit "$rc"
  fi
  rc=0
  wait "$stage2_pid" || rc=$?
  show_stage2 "$rc"
fi
trap - EXIT
if ! command -v llvm-symbolizer >/dev/null && [ -x /usr/lib/llvm-14/bin/llvm-symbolizer ]; then
  export ASAN_SYMBOLIZER_PATH=/usr/lib/llvm-14/bin/llvm-symbolizer
fi
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ctest --test-dir build-san --output-on-failure --timeout 600 -j"$jobs"

stamp "fuzz corpus replay and 60 s of fuzzing (build-san/)"
scripts/fuzz.sh --build build-san 60

echo "== ukb: all tests passed in $(( $(date +%s) - start )) s"
