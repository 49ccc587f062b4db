#!/bin/bash
# Device check of 2026-11-26, kept as the record of results/gpu-2026-11-26-0714/: run on the
# device machine from the project root as `bash .deps/run.sh`, with .deps/ made by
# ../shared/gpu/prepare.sh (unpacked Debian packages, .deps/build.sh) and .deps/chain.toml =
# crosscheck/chain.toml here. Its console output: logs/console.txt.
# build (16 cores) -> GPU tests verbose -> bench/gpu.sh -> cross-checks -> ctest (if time is left) -> ncu of chain kernels.
set -u
R=$(pwd); T0=$(date +%s)
el() { echo $(( $(date +%s) - T0 )); }
log() { echo "== [$(el) s] $*"; }
O=/tmp/o; mkdir -p $O
pack() { cp /tmp/b.log $O/build.log 2>/dev/null; tar -C /tmp -czf "$OUT/o.tgz" o; log "packed"; }
. .deps/env.sh
export CMAKE_PREFIX_PATH=$R/.deps/prefix/usr
{ nvidia-smi; nproc; uname -r; python3 --version; } > $O/machine.txt 2>&1
head -20 $O/machine.txt
log build
UKB_CMAKE_ARGS="-DUKB_ENABLE_CUDA=ON -DUKB_BUILD_EXAMPLES=OFF -DUKB_BUILD_BASELINE=OFF -DUKB_PYTHON=OFF -DUKB_ENABLE_MPI=OFF" \
  bash .deps/build.sh ukb_cli ukb_bench_workloads ukb_flops ukb_tests ukb_engine_tests ukb_run_tests \
  || { log "build failed"; tail -5 /tmp/b.cfg.log; pack; exit 1; }
log "GPU tests verbose"
(timeout 120 /tmp/b/bin/ukb_engine_tests --gtest_filter='Engine.Cuda*'; timeout 60 /tmp/b/bin/ukb_tests --gtest_filter='Cuda.*:Cli.*') > $O/gpu_tests.log 2>&1
grep -E "GPU vs CPU|OK \]|FAILED|SKIPPED|PASSED" $O/gpu_tests.log | head -40
pack
log "bench/gpu.sh"
timeout 300 bench/gpu.sh --build /tmp/b --out /tmp/o/gpu 2>&1 | tail -60
find /tmp/o/gpu -name 'results.*' -size +1M -delete 2>/dev/null
if [ "$(el)" -lt 470 ]; then
  log "cross-checks"
  X=/tmp/xc; mkdir -p $X $O/xc
  xc() { # name config backend other samples
    local t=$(date +%s%N)
    timeout 120 /tmp/b/bin/ukb run "$2" --backend "$3" --crosscheck "$4" --crosscheck-samples "$5" --out $X/$1 --quiet > $X/$1.log 2>&1
    local rc=$?
    echo "$1 ($3 vs $4, $5): rc $rc, $(( ($(date +%s%N) - t) / 1000000 )) ms: $(tail -2 $X/$1.log | tr '\n' ' ')"
    cp $X/$1/crosscheck.json $O/xc/$1.json 2>/dev/null; cp $X/$1.log $O/xc/$1.log
  }
  xc ring_cpu examples/ring_friction.toml cuda cpu 2000
  xc ring_ref examples/ring_friction.toml cuda reference 256
  xc adaptive examples/ring_adaptive.toml cuda cpu 512
  xc incline examples/incline_sweep.toml cuda cpu 512
  xc sleigh examples/sleigh_heading.toml cuda cpu 512
  xc chain .deps/chain.toml cuda cpu 512
  xc hoop examples/models/rotating_hoop.toml cuda cpu 256
  for be in cuda cpu; do
    t=$(date +%s%N); th=(); [ $be = cpu ] && th=(--threads 16); /tmp/b/bin/ukb run examples/ring_friction.toml --backend $be "${th[@]}" --out $X/demo_$be --quiet >/dev/null 2>&1; rc=$?
    echo "demo 1e5 (chunk 10000) on $be: rc $rc, $(( ($(date +%s%N) - t) / 1000000 )) ms"
  done
  cmp $X/demo_cuda/results.csv $X/demo_cpu/results.csv && echo "demo results.csv cuda == cpu bytewise"
fi
pack
if [ "$(el)" -lt 420 ]; then
log "ctest"
(cd /tmp/b && timeout 150 ctest -j12 --output-on-failure -E "^(Mpi|Python)\.|NOT_BUILT" > $O/ctest.log 2>&1)
echo "ctest rc $?"; grep -E "tests passed|Failed|\*\*\*|Not Run|Timeout" $O/ctest.log | head -30
fi
pack
if [ "$(el)" -lt 520 ]; then
  log "ncu"
  for w in "W2/planar_chain_6/double/cuda/threads:0/N:100000/" "W3/planar_chain_12/double/cuda/threads:0/N:10000/" "W2/planar_chain_6/float/cuda/threads:0/N:100000/"; do
    timeout 25 ncu -k regex:body_kernel -c 1 --section LaunchStats --section Occupancy --section SpeedOfLight --section MemoryWorkloadAnalysis \
      /tmp/b/bin/ukb_bench_workloads --benchmark_filter="^$w" --benchmark_min_time=0.01 > $O/ncu_$(echo $w | cut -d/ -f1,3 | tr / _).txt 2>&1
    echo "ncu $w rc $?"
  done
fi
pack
