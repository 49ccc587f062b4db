#!/usr/bin/env bash
# The throughput comparison of bench/README.md in one run on one machine:
# builds the benchmarks (Release, CPU), checks both baselines against the
# reference backend (and stops if either disagrees), counts the flops, runs
# the workloads W1-W4 on the reference and CPU backends (1 and 2 threads,
# double and float), the Eigen fixed-size loop, the numpy baseline and the
# peers of issue 56 (JAX and numba: bench/peer_jax.py, bench/peer_numba.py,
# installed from PyPI into a virtual environment of the build directory;
# UKB_BENCH_PEERS=0 leaves them out), and writes the tables.
#
#   bench/compare.sh [OUT_DIR]        # default bench/results/<date>
#
# Environment: UKB_BENCH_BUILD (build directory, default build-bench),
# UKB_BENCH_MIN_TIME (seconds per benchmark, default 0.1), UKB_BENCH_SIZES
# (the batch sizes N, a regex alternative, default "1000|100000"; the full
# sweep is "100|1000|10000|100000|1000000", which takes about an hour on 2
# cores). The default takes about 5 minutes on 2 cores, plus the build,
# plus up to 10 minutes for the peers (16 configurations, at most
# 20 s each, and their installation).
# Outputs in OUT_DIR: cpu.json, eigen.json, numpy.json, jax.json,
# numba.json, flops.json (raw) and tables.md (bench/report.py).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install_deps.sh

build=${UKB_BENCH_BUILD:-build-bench}
min_time=${UKB_BENCH_MIN_TIME:-0.1}
sizes=${UKB_BENCH_SIZES:-1000|100000}
out=${1:-bench/results/$(date +%F)}
mkdir -p "$out"

cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DUKB_ENABLE_CUDA=OFF -DUKB_BUILD_BASELINE=ON >/dev/null
cmake --build "$build" -j2 --target ukb_bench_workloads ukb_bench_baseline_eigen ukb_flops
bin=$build/bin
py=/usr/bin/python3
one_thread=(env OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1)

echo "== Baselines against the reference backend"
"$bin"/ukb_bench_baseline_eigen --check
"$bin"/ukb_bench_baseline_eigen --export "$out/check" >/dev/null  # (git-ignored)
"${one_thread[@]}" "$py" bench/baseline_numpy.py --check "$out/check"

echo "== Flops per RK4 step"
"$bin"/ukb_flops | tee "$out/flops.md"
"$bin"/ukb_flops --json >"$out/flops.json"

common=(--benchmark_min_time="$min_time" --benchmark_repetitions=3
        --benchmark_report_aggregates_only=true --benchmark_out_format=json)
echo "== ukb: reference and CPU backends"
"$bin"/ukb_bench_workloads --benchmark_filter="/(cpu|reference)/.*/N:($sizes)/" "${common[@]}" \
    --benchmark_out="$out/cpu.json"
echo "== Eigen fixed-size loop"
"$bin"/ukb_bench_baseline_eigen --benchmark_filter="/N:($sizes)/" "${common[@]}" \
    --benchmark_out="$out/eigen.json"
echo "== numpy"
"${one_thread[@]}" "$py" bench/baseline_numpy.py --bench "$out/numpy.json" --sizes "$sizes"

# The peers of issue 56 (JAX, numba), from PyPI into a virtual environment
# of the build directory (never by the build itself); each checked against
# the reference backend before it is timed, on one core.
if [ "${UKB_BENCH_PEERS:-1}" != 0 ]; then
  venv=$build/peers-venv
  if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c 'import jax, numba, scipy' 2>/dev/null; then
    echo "== Peers: installing jax, numba and scipy from PyPI into $venv"
    "$py" -m venv "$venv" && "$venv/bin/pip" install --quiet --upgrade pip &&
      "$venv/bin/pip" install --quiet jax numba scipy numpy ||
      echo "compare.sh: the peers could not be installed (no PyPI?); their columns stay empty" >&2
  fi
  if "$venv/bin/python" -c 'import jax, numba, scipy' 2>/dev/null; then
    "$venv/bin/python" -c 'import jax, numba, numpy; print("jax", jax.__version__, "numba", numba.__version__, "numpy", numpy.__version__)' |
      tee "$out/peers_versions.txt"
    one_core=(env NUMBA_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1)
    command -v taskset >/dev/null && one_core+=(taskset -c 0)  # (util-linux; else XLA may take both cores)
    for peer in jax numba; do
      echo "== $peer: checked against the reference backend, then timed on one core"
      if ! "${one_core[@]}" "$venv/bin/python" bench/peer_$peer.py --check "$out/check" ||
         ! "${one_core[@]}" "$venv/bin/python" bench/peer_$peer.py --bench "$out/$peer.json" --sizes "$sizes"; then
        echo "compare.sh: $peer failed its check or its run; its column stays empty" >&2
        rm -f "$out/$peer.json"
      fi
    done
  fi
fi

"$py" bench/report.py "$out" >"$out/tables.md"
echo "== Tables: $out/tables.md"
