#!/usr/bin/env bash
# Installs what is missing, builds ukb, and runs the Monte Carlo example
# examples/ring_friction.toml: a bead released level with the centre of a
# rough vertical ring, mu uniform on [0.05, 0.5], 100 000 samples, each run
# until it sticks. Prints where the bead comes to rest and where the files
# and plots are.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install_deps.sh

jobs="${UKB_JOBS:-2}"
# The demo runs on the CPU backend: a CPU-only build is quicker to make.
build=build-demo
echo "== Building ukb and its Python module in $build/ (CPU backend; the first build takes about 3 minutes on 2 cores)..."
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DUKB_ENABLE_CUDA=OFF -DUKB_BUILD_TESTS=OFF \
      -DUKB_BUILD_BENCH=OFF -DUKB_BUILD_EXAMPLES=OFF >/dev/null
targets=(ukb_cli)
# The Python module too where it is configured (Python's development files
# and pybind11 found), so that PYTHONPATH=build-demo/python works after the demo.
if grep -q '^UKB_PYTHON:BOOL=ON' "$build/CMakeCache.txt"; then targets+=(ukb_python); fi
cmake --build "$build" -j"$jobs" --target "${targets[@]}" >/dev/null

out=build-demo/ring_friction
start=$(date +%s%N)
# Ctrl-C stops the run after the current chunk and leaves a checkpoint; the
# next scripts/demo.sh continues it (results identical to an uninterrupted run).
if [ -f "$out/checkpoint.ukb" ]; then
  echo
  echo "== $build/bin/ukb run --resume $out   (continuing the interrupted run)"
  cmd=("$build/bin/ukb" run --resume "$out")
else
  echo
  echo "== $build/bin/ukb run examples/ring_friction.toml --out $out"
  cmd=("$build/bin/ukb" run examples/ring_friction.toml --out "$out")
fi
rc=0
"${cmd[@]}" || rc=$?
if [ "$rc" -eq 130 ] || [ "$rc" -eq 143 ]; then
  echo "== Interrupted: run scripts/demo.sh again to continue where it stopped."
  exit "$rc"
elif [ "$rc" -ne 0 ]; then
  exit "$rc"
fi
echo
echo "== scripts/plot.py $out"
/usr/bin/python3 scripts/plot.py "$out"
end=$(date +%s%N)

/usr/bin/python3 - "$out" <<'PY'
import json, sys
out = sys.argv[1]
s = json.load(open(f"{out}/summary.json"))
n = s["samples"]
rest = s["status_counts"].get("at_rest", 0)
th = s["observables"]["theta_final"]["successful"]["quantiles"]
ts = s["observables"]["t_stop"]["successful"]["quantiles"]
print()
print(f"== Summary: {rest} of {n} beads came to rest.")
print(f"   resting angle theta (from +x, counter-clockwise; -pi/2 is the bottom):")
print(f"     median {th['p50']:.6f} rad, 5-95 % range [{th['p05']:.4f}, {th['p95']:.4f}] rad")
print(f"   time to rest: median {ts['p50']:.4f} s, 5-95 % range [{ts['p05']:.3f}, {ts['p95']:.3f}] s")
PY
ms=$(( (end - start) / 1000000 ))
printf '   run and plots took %d.%01d s\n' $(( ms / 1000 )) $(( ms % 1000 / 100 ))
echo
echo "== Results are in $out/:"
echo "   results.csv, results.npy   one row per sample: mu, status, final state, theta_final, t_stop, energies, residuals"
echo "   summary.json               counts per status; statistics and histograms of every observable"
echo "   trajectories.csv           samples 0-3 every 5 steps"
echo "   run.json                   the resolved config, seed, version, backend, threads, wall time"
echo "   plots/                     histograms, observables against mu, trajectories (PNG)"
echo "Next: edit examples/ring_friction.toml (docs/config.md), $build/bin/ukb --help,"
[ -f "$build/python/ukb/__init__.py" ] && echo "PYTHONPATH=$build/python /usr/bin/python3 (import ukb; docs/python.md),"
echo "a model of your own (docs/adding-a-model.md), and scripts/test.sh to run the test suite."
