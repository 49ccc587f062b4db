#!/usr/bin/env bash
# Builds the libFuzzer targets (clang, ASan+UBSan, CPU only) and runs them:
#   fuzz_config  the `ukb run` config parser (parse_config, then to_json);
#   fuzz_accel   `ukb accel` argument parsing (one argument per input line);
#   fuzz_checkpoint  the checkpoint reader of `ukb run --resume` (any bytes).
# Usage: scripts/fuzz.sh [--build DIR] [SECONDS]   (default 60)
#  1. replays every input of fuzz/corpus/ (-runs=0): a regression input
#     stored there fails at once;
#  2. fuzzes the targets at once for SECONDS/2 of wall time (SECONDS of CPU
#     time on two cores, shared among them), with fuzz/corpus/<target>/ as a
#     read-only seed; new inputs go to the scratch corpus DIR/corpus/<target>/
#     (kept between runs), crash inputs to DIR/artifacts/.
# DIR defaults to build-fuzz/ (configured here); scripts/test.sh passes its
# sanitizer build (build-san/, configured with UKB_FUZZ=ON), which has the
# fuzz targets too.
# UKB_FUZZ_MERGE=1 then merges the scratch inputs that add coverage (edges)
# into fuzz/corpus/ (-merge=1), for committing. Exits non-zero on any crash,
# sanitizer report, leak, timeout (10 s per input) or out-of-memory.
# UKB_JOBS sets the build parallelism (default 2).
set -euo pipefail
cd "$(dirname "$0")/.."

build=build-fuzz
configure=1
if [ "${1:-}" = "--build" ]; then
  build="${2:?--build needs a directory}"
  configure=0
  shift 2
fi
seconds="${1:-60}"
if ! [[ "$seconds" =~ ^[0-9]+$ ]] || [ "$seconds" -lt 2 ]; then
  echo "usage: scripts/fuzz.sh [--build DIR] [SECONDS >= 2]" >&2
  exit 2
fi
per_target=$(( seconds / 2 ))
jobs="${UKB_JOBS:-2}"
targets=(config accel checkpoint)

if [ "$configure" = 1 ]; then
  scripts/install_deps.sh
  generator=()
  if command -v ninja >/dev/null && { [ ! -f "$build/CMakeCache.txt" ] || grep -q 'CMAKE_GENERATOR:INTERNAL=Ninja' "$build/CMakeCache.txt"; }; then
    generator=(-G Ninja)
  fi
  # -O1 with line tables only: a quarter faster to build than -O2 -g, with
  # about 8 % fewer runs per second. NDEBUG: toml++'s own assertions fail on
  # some bad input (see src/run/config.cpp); without them the parser reports
  # the error.
  cmake "${generator[@]}" -S . -B "$build" -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=RelWithDebInfo \
        "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -gline-tables-only -DNDEBUG" -DUKB_FUZZ=ON \
        -DUKB_WERROR=ON -DUKB_ENABLE_CUDA=OFF -DUKB_BUILD_TESTS=OFF -DUKB_BUILD_BENCH=OFF \
        -DUKB_BUILD_EXAMPLES=OFF >/dev/null
fi
cmake --build "$build" -j"$jobs" --target "${targets[@]/#/fuzz_}"

# Any report is fatal (libFuzzer turns it into a crash with an artifact).
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1:halt_on_error=1:detect_stack_use_after_return=1:strict_string_checks=1"
export UBSAN_OPTIONS="halt_on_error=1:abort_on_error=1:print_stacktrace=1:report_error_type=1"
if ! command -v llvm-symbolizer >/dev/null && [ -x /usr/lib/llvm-14/bin/llvm-symbolizer ]; then
  export ASAN_SYMBOLIZER_PATH=/usr/lib/llvm-14/bin/llvm-symbolizer
fi
mkdir -p "$build/artifacts"

# run_fuzzer TARGET LOG ARGS...: runs DIR/bin/fuzz_TARGET; on failure prints
# the end of the log and returns 1.
run_fuzzer() {
  local target=$1 log=$2
  shift 2
  if ! "$build/bin/fuzz_$target" -dict="fuzz/$target.dict" -max_len=4096 -timeout=10 -rss_limit_mb=2048 \
       -artifact_prefix="$build/artifacts/$target-" -print_final_stats=1 "$@" >"$log" 2>&1 ||
     grep -qE '^(==[0-9]+==ERROR|SUMMARY: )|runtime error:' "$log"; then
    tail -n 60 "$log" >&2
    echo "ukb fuzz: fuzz_$target FAILED (log: $log; inputs: $build/artifacts/$target-*)" >&2
    return 1
  fi
}

for t in "${targets[@]}"; do
  run_fuzzer "$t" "$build/replay_$t.log" -runs=0 "fuzz/corpus/$t"
  echo "ukb fuzz: fuzz_$t replayed $(find "fuzz/corpus/$t" -type f | wc -l) corpus inputs"
done

# The fuzzers at once (each is one process).
pids=()
for t in "${targets[@]}"; do
  mkdir -p "$build/corpus/$t"
  run_fuzzer "$t" "$build/fuzz_$t.log" -max_total_time="$per_target" "$build/corpus/$t" "fuzz/corpus/$t" &
  pids+=($!)
done
failed=0
for p in "${pids[@]}"; do wait "$p" || failed=1; done
[ "$failed" = 0 ] || exit 1

for t in "${targets[@]}"; do
  scratch="$build/corpus/$t"
  log="$build/fuzz_$t.log"
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
  added=$(sed -n 's/^stat::new_units_added: *//p' "$log")
  cov=$(grep -oE 'cov: [0-9]+' "$log" | tail -n 1 | cut -d' ' -f2)
  echo "ukb fuzz: fuzz_$t: ${runs:-?} runs in ${per_target} s, ${added:-?} new inputs," \
       "corpus $(find "fuzz/corpus/$t" -type f | wc -l) in the repo + $(find "$scratch" -type f | wc -l) scratch," \
       "coverage ${cov:-?} edges"
  if [ "${UKB_FUZZ_MERGE:-0}" = 1 ]; then
    before=$(find "fuzz/corpus/$t" -type f | wc -l)
    run_fuzzer "$t" "$build/merge_$t.log" -merge=1 -use_counters=0 "fuzz/corpus/$t" "$scratch"
    echo "ukb fuzz: fuzz_$t: merged $(( $(find "fuzz/corpus/$t" -type f | wc -l) - before )) inputs into fuzz/corpus/$t/"
  fi
done
