#!/usr/bin/env bash
# The GPU throughput table (issue 22) in one command, on a machine with an
# NVIDIA GPU and the CUDA toolkit:
#
#   bench/gpu.sh [--build DIR] [--out DIR] [--quick] [--no-build] [--no-studies]
#
# 1. builds, in DIR (default build-gpu/), only what it runs: ukb, the
#    workload benchmarks, the flop counter and the team probe (Release, CUDA
#    on, UKB_BENCH_GPU_STUDY on; a new DIR
#    without tests, examples, Python or MPI, an existing one keeps its other
#    options), for the GPU found (nvidia-smi's compute
#    capability, unless UKB_CUDA_ARCHITECTURES is set). Nothing is
#    downloaded: the Debian packages of scripts/install_deps.sh must be
#    installed or unpacked, a directory of unpacked ones given by
#    CMAKE_PREFIX_PATH (e.g. CMAKE_PREFIX_PATH=$PWD/.deps/prefix/usr after
#    ../shared/gpu/prepare.sh, with its .deps/env.sh sourced for the
#    shared libraries);
# 2. runs W1-W4 on the cuda backend at N = 10^4, 10^5, 10^6 (W3 to 10^5),
#    double and float, 3 repetitions each (ukb_bench_workloads; copies to
#    and from the device included, at least 100 steps per call);
# 3. runs the ring demo (examples/ring_friction.toml) scaled to 10^6 samples,
#    in one chunk, with `ukb run` on cuda and on the cpu backend with every
#    core, and compares the two results tables (statuses equal; the largest
#    differences of theta_final and t_stop);
# 4. runs ukb_team_probe: the Gram route's linear algebra of the chains W2,
#    W3, W5, W6 by one thread per system against teams of 4-32 threads on
#    shared memory and against cuSOLVER/cuBLAS batched calls (systems/s,
#    and the largest difference from one thread), then whole RK4 steps of
#    W2 and W3 by one thread against teams (system-steps/s);
# 5. runs the longer chains W5 (planar_chain_24, N = 10^4 and 10^5) and W6
#    (planar_chain_48, N = 10^4; UKB_BENCH_GPU_STUDY, nvcc's longest
#    compiles), double and float, as in 2 with at least 2 steps per call;
# 6. prints one table (bench/gpu_table.py): system-steps/s per workload, N
#    and precision, and the share of the device's FP64 / FP32 peak (flops
#    per step from ukb_flops; the peak from the device's name, or
#    UKB_GPU_PEAK_GFLOPS="FP64,FP32"); then the demo's times and speed-up;
#    then the probe's table.
#
# The steps go from what issue 22's targets are measured on to the studies,
# so a run cut short by a time limit keeps the first ones: each writes its
# own files, and gpu_table.py reads the rows of a benchmark file that was
# not closed. On one H100 (2026-11-26) steps 2 and 5 took more than 7.5 minutes
# before the benchmark's steps per iteration were scaled by n^3 on the GPU
# (one iteration of W5 at N = 10^4 took 30 s); not timed since.
# --no-build runs DIR's binaries as they are (built on another machine, e.g.
# by bench/device_check.sh's UKB_PREBUILT route: a GPU machine's minutes are
# better spent measuring than compiling).
# Raw results go to --out (default bench/results/gpu-DATE-HHMM/): workloads.json
# (W1-W4), workloads_long.json (W5, W6), flops.json, team_probe.json and .md, device.txt, the two runs'
# directories, table.md. --no-studies: steps 2, 3 and 6 only (the
# workloads' rates and the demo: no probe, no W5 or W6). --quick: N = 10^4 and 10^5 only (W5 and W6 at
# 10^4), a tenth of the probe's systems and a 10^5-sample demo (a check of
# the command). The table's route: the engine runs the chains W2, W3,
# W5 and W6 by a team per system (kernels::team_size), the others by one
# thread; W2 and W3 are also run by one thread per system
# (UKB_BENCH_CUDA_TEAMS=0, workloads_thread.json) at N = 10^5.
set -euo pipefail
cd "$(dirname "$0")/.."

build="build-gpu"
out=bench/results/gpu-$(date +%F-%H%M)
quick=0
studies=1
nobuild=0
while [ $# -gt 0 ]; do
  case "$1" in
    --build) build=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --quick) quick=1; shift ;;
    --no-studies) studies=0; shift ;;
    --no-build) nobuild=1; shift ;;
    *) echo "usage: bench/gpu.sh [--build DIR] [--out DIR] [--quick] [--no-build] [--no-studies]" >&2; exit 2 ;;
  esac
done
start=$(date +%s)
stamp() { echo "== bench/gpu.sh: $1 ($(( $(date +%s) - start )) s)" >&2; }

if ! command -v nvcc >/dev/null && [ -x /usr/local/cuda/bin/nvcc ]; then
  export PATH=/usr/local/cuda/bin:$PATH
fi
# nvcc builds; a carried build (--no-build) runs without it (its version
# then reads "none" in device.txt).
[ "$nobuild" = 1 ] || command -v nvcc >/dev/null ||
  { echo "bench/gpu.sh: no nvcc (the CUDA toolkit) on PATH or in /usr/local/cuda" >&2; exit 2; }
if ! nvidia-smi -L >/dev/null 2>&1; then
  echo "bench/gpu.sh: no GPU here (nvidia-smi -L fails): the cuda rows would all be skipped" >&2
  [ "${UKB_GPU_ALLOW_NONE:-0}" = 1 ] || exit 2
fi
arch=${UKB_CUDA_ARCHITECTURES:-}
if [ -z "$arch" ]; then
  arch=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -n 1 | tr -d ' .' || true)
  arch=${arch:-90}
fi
mkdir -p "$out"
{ nvidia-smi --query-gpu=name,memory.total,clocks.max.sm,driver_version --format=csv 2>/dev/null || echo "no GPU"
  { nvcc --version 2>/dev/null || echo "nvcc: none"; } | tail -n 1; nproc; date -u; git rev-parse HEAD 2>/dev/null || true; } > "$out/device.txt"

if [ "$nobuild" = 1 ]; then
  for b in ukb ukb_bench_workloads ukb_flops ukb_team_probe; do
    [ -x "$build/bin/$b" ] || { echo "bench/gpu.sh --no-build: no $build/bin/$b" >&2; exit 2; }
  done
  stamp "using the binaries in $build/bin (--no-build)"
else
  stamp "building in $build/ for sm_$arch"
  extra=()
  if [ ! -f "$build/CMakeCache.txt" ]; then
    # A new build directory: nothing but what is measured.
    command -v ninja >/dev/null && extra+=(-G Ninja)
    extra+=(-DUKB_BUILD_TESTS=OFF -DUKB_BUILD_EXAMPLES=OFF -DUKB_BUILD_BASELINE=OFF -DUKB_PYTHON=OFF -DUKB_ENABLE_MPI=OFF)
  fi
  # An existing one (--build of one's own) keeps its other options, its tests too.
  cmake "${extra[@]}" -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DUKB_ENABLE_CUDA=ON -DUKB_BUILD_BENCH=ON \
        -DUKB_BENCH_GPU_STUDY=ON -DUKB_CUDA_ARCHITECTURES="$arch" >/dev/null
  cmake --build "$build" -j"$(nproc)" --target ukb_cli ukb_bench_workloads ukb_flops ukb_team_probe >/dev/null
fi

stamp "workloads W1-W4 on the GPU"
if [ "$quick" = 1 ]; then sizes='10000|100000'; long='10000'; else sizes='10000|100000|1000000'; long='10000|100000'; fi
"$build/bin/ukb_flops" --json > "$out/flops.json"
bench() {  # bench FILTER FILE: ukb_bench_workloads' cuda rows, 3 repetitions, to FILE
  "$build/bin/ukb_bench_workloads" --benchmark_filter="$1" \
      --benchmark_repetitions=3 --benchmark_report_aggregates_only=true \
      --benchmark_format=json --benchmark_out="$2" --benchmark_out_format=json >/dev/null
}
bench "^(W[124]/[a-z_0-9]+/(double|float)/cuda/threads:0/N:($sizes)|W3/[a-z_0-9]+/(double|float)/cuda/threads:0/N:(10000|100000))/" \
      "$out/workloads.json" || echo "bench/gpu.sh: the W1-W4 benchmark failed (exit $?)" >&2
# The chains W2 and W3 again by one thread per system (their default is a
# team per system), for the table's comparison of the two routes.
UKB_BENCH_CUDA_TEAMS=0 bench "^W[23]/[a-z_0-9]+/(double|float)/cuda/threads:0/N:100000/" \
      "$out/workloads_thread.json" || echo "bench/gpu.sh: the thread-route benchmark failed (exit $?)" >&2

samples=1000000
[ "$quick" = 1 ] && samples=100000
# One chunk of every sample on both backends (cuda's default, 2^20, would do),
# no checkpoint between, the default outputs (npy alone above 10^5 samples).
sed -E -e "s/^samples = [0-9]+/samples = $samples/" -e "s/^\[integrator\]$/[integrator]\nchunk = $samples/" \
    -e "s/^checkpoint_interval = [0-9.]+/checkpoint_interval = 1e9/" examples/ring_friction.toml > "$out/ring.toml"
grep -q "^chunk = $samples" "$out/ring.toml" || { echo "bench/gpu.sh: could not set chunk in $out/ring.toml" >&2; exit 2; }
for be in cuda cpu; do
  stamp "ukb run of $samples ring samples on $be"
  rm -rf "$out/ring-$be"
  threads=()
  [ "$be" = cpu ] && threads=(--threads "$(nproc)")
  # A failed run leaves the rest of the table (and says so).
  "$build/bin/ukb" run "$out/ring.toml" --backend "$be" "${threads[@]}" --out "$out/ring-$be" --quiet >/dev/null \
    || echo "bench/gpu.sh: ukb run on $be failed (exit $?)" >&2
done

if [ "$studies" = 1 ]; then
  stamp "teams of threads per system against one thread (ukb_team_probe)"
  probe=()
  [ "$quick" = 1 ] && probe=(--quick)
  # A failure of the probe (a GPU it cannot use) leaves the rest of the table.
  if ! "$build/bin/ukb_team_probe" "${probe[@]}" --json "$out/team_probe.json" > "$out/team_probe.md" 2> "$out/team_probe.err"; then
    echo "(ukb_team_probe failed: $(tail -n 1 "$out/team_probe.err"))" >> "$out/team_probe.md"
  fi

  stamp "the longer chains W5 and W6 on the GPU"
  bench "^(W5/[a-z_0-9]+/(double|float)/cuda/threads:0/N:($long)|W6/[a-z_0-9]+/(double|float)/cuda/threads:0/N:10000)/" \
        "$out/workloads_long.json" || echo "bench/gpu.sh: the W5/W6 benchmark failed (exit $?)" >&2
fi

stamp "table"
{ python3 bench/gpu_table.py "$out"; echo; cat "$out/team_probe.md" 2>/dev/null; } | tee "$out/table.md"
stamp "done: raw results in $out/"
