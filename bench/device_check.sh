#!/bin/bash
# One call of a lent GPU machine (the `device` tool: at most 600 s a call),
# in the order of what it is worth: build what gpu.sh and the GPU tests
# need, the GPU tests, bench/gpu.sh; then, while time is left, the other
# test executables and ctest. Run from the project root, with .deps/ made by
# ../shared/gpu/prepare.sh carried along:
#
#   . .deps/env.sh && bash bench/device_check.sh        (results in $OUT)
#
# $OUT gets: machine.txt, build.log (on failure), gpu_tests.log, the
# bench/gpu.sh results in gpu/ (table.md: the workloads, the demo, the team
# probe), ctest.log, console.txt. UKB_CHECK_BUDGET (default 560) is the
# seconds the whole call may take; a step that would not fit is skipped and
# says so. If gpu.sh was cut short (it needs about 5 minutes after a build
# of about 3 on 16 cores, not measured together yet), a second call right
# after, while the machine is warm and /tmp/b is still there, runs it alone:
#   . .deps/env.sh && CMAKE_PREFIX_PATH=$PWD/.deps/prefix/usr bench/gpu.sh --build /tmp/b --out $OUT/gpu
set -u
R=$(pwd)
T0=$(date +%s)
budget=${UKB_CHECK_BUDGET:-560}
out=${OUT:-/tmp/device-check}
mkdir -p "$out"
el() { echo $(($(date +%s) - T0)); }
left() { echo $((budget - $(el))); }
log() { echo "== [$(el) s] $*" | tee -a "$out/console.txt"; }
export CMAKE_PREFIX_PATH=$R/.deps/prefix/usr
{ nvidia-smi; nproc; uname -r; git -C "$R" rev-parse HEAD 2>/dev/null; } > "$out/machine.txt" 2>&1
head -n 12 "$out/machine.txt"

export UKB_CMAKE_ARGS="-DUKB_ENABLE_CUDA=ON -DUKB_BENCH_GPU_STUDY=ON -DUKB_BUILD_EXAMPLES=OFF -DUKB_BUILD_BASELINE=OFF -DUKB_PYTHON=OFF -DUKB_ENABLE_MPI=OFF"
build() {  # build TARGET...: .deps/build.sh into /tmp/b; false (and the log kept) on failure
  if ! bash .deps/build.sh "$@" >> "$out/console.txt" 2>&1; then
    log "build of $* failed"
    cp /tmp/b.log "$out/build.log" 2>/dev/null
    tail -n 30 "$out/console.txt"
    return 1
  fi
}
log "build (/tmp/b, CUDA, UKB_BENCH_GPU_STUDY): what gpu.sh and the GPU tests need"
build ukb_cli ukb_bench_workloads ukb_flops ukb_team_probe ukb_tests ukb_engine_tests || exit 1

log "GPU tests (Engine.Cuda*, Cuda.*)"
{
  timeout 150 /tmp/b/bin/ukb_engine_tests --gtest_filter='Engine.Cuda*'
  timeout 90 /tmp/b/bin/ukb_tests --gtest_filter='Cuda.*'
} > "$out/gpu_tests.log" 2>&1
grep -E "^\[  (PASSED|FAILED|SKIPPED) |GPU vs CPU" "$out/gpu_tests.log" | tee -a "$out/console.txt"

if [ "$(left)" -gt 300 ]; then
  log "bench/gpu.sh"
  timeout $(($(left) - 60)) bench/gpu.sh --build /tmp/b --out "$out/gpu" >> "$out/console.txt" 2>&1
  log "bench/gpu.sh: rc $?"
  find "$out/gpu" -name 'results.*' -size +1M -delete 2>/dev/null
  cat "$out/gpu/table.md" 2>/dev/null
else
  log "bench/gpu.sh skipped: $(left) s left"
fi

if [ "$(left)" -gt 150 ] && build ukb_run_tests ukb_cuda_emulation_tests && [ "$(left)" -gt 60 ]; then
  log "ctest (no Mpi, no Python: not in this build)"
  (cd /tmp/b && timeout $(($(left) - 20)) ctest -j"$(nproc)" --output-on-failure -E "^(Mpi|Python)\." > "$out/ctest.log" 2>&1)
  log "ctest: rc $?"
  grep -E "tests passed|Failed|\*\*\*|Not Run|Timeout" "$out/ctest.log" | head -n 30 | tee -a "$out/console.txt"
else
  log "ctest skipped: $(left) s left, or its build failed"
fi
log "done"
