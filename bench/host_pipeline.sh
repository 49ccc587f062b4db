#!/usr/bin/env bash
# The host pipeline of `ukb run` against the raw kernel rate (issue 48's
# target: at most 6 times), on the cpu backend, in one run:
#
#   bench/host_pipeline.sh [--build DIR] [--threads T] [--rounds R] [--chunk C] [--out DIR]
#
# A: `ukb run` of the ring demo (examples/ring_friction.toml) with 10^6
#    samples of ONE RK4 step each (t_end = dt), the demo's chunks (the cpu
#    backend's default, 65536; --chunk C for C samples at a time, 1000000
#    for one chunk, as the figures before 2026-11-29), the default
#    outputs, --threads T: its wall time and run.json's phase_seconds and
#    samples_seconds;
# B: ukb_bench_workloads' W1 (the same model, RK4) on the cpu backend with T
#    threads at N = 10^5: the time of 10^6 raw system-steps.
# A and B alternate for R rounds (default 3); the ratio of the medians A / B
# is the host's cost per sample in ring RK4 steps. DIR (default build/) needs
# bin/ukb and bin/ukb_bench_workloads (UKB_BUILD_BENCH). Raw results go to
# --out (default bench/results/host-DATE-HHMM/).
set -euo pipefail
cd "$(dirname "$0")/.."
build=build threads=2 rounds=3 chunk= out=bench/results/host-$(date +%F-%H%M)
while [ $# -gt 0 ]; do
  case "$1" in
    --build) build=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --chunk) chunk=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    *) echo "usage: bench/host_pipeline.sh [--build DIR] [--threads T] [--rounds R] [--chunk C] [--out DIR]" >&2; exit 2 ;;
  esac
done
for b in ukb ukb_bench_workloads; do
  [ -x "$build/bin/$b" ] || { echo "bench/host_pipeline.sh: no $build/bin/$b (build with UKB_BUILD_BENCH=ON)" >&2; exit 2; }
done
mkdir -p "$out"
cfg=$out/one_step.toml
chunk_line=()
[ -n "$chunk" ] && chunk_line=(-e "s/^\[integrator\]\$/[integrator]\nchunk = $chunk/")
sed -E -e 's/^samples = [0-9]+/samples = 1000000/' -e 's/^t_end = [0-9.]+/t_end = 0.01/' \
    "${chunk_line[@]}" examples/ring_friction.toml > "$cfg"
grep -q '^t_end = 0.01' "$cfg" && grep -q '^dt = 0.01' "$cfg" && { [ -z "$chunk" ] || grep -q "^chunk = $chunk\$" "$cfg"; } ||
  { echo "bench/host_pipeline.sh: could not make $cfg from the demo config" >&2; exit 2; }
{ date -u; git rev-parse HEAD; nproc; lscpu | grep -E "Model name" || true; } > "$out/machine.txt" 2>&1
for r in $(seq 1 "$rounds"); do
  rm -rf "$out/run"
  "$build/bin/ukb" run "$cfg" --threads "$threads" --out "$out/run" --quiet > /dev/null
  cp "$out/run/run.json" "$out/run.$r.json"
  "$build/bin/ukb_bench_workloads" --benchmark_filter="^W1/[a-z_]+/double/cpu/threads:$threads/N:100000/" \
    --benchmark_format=json > "$out/w1.$r.json" 2> /dev/null
done
rm -rf "$out/run"
python3 - "$out" "$rounds" "$threads" <<'PY' | tee "$out/table.md"
import json, os, statistics, sys
out, rounds, threads = sys.argv[1], int(sys.argv[2]), sys.argv[3]
walls, raw, phases, parts = [], [], {}, {}
for r in range(1, rounds + 1):
    j = json.load(open(os.path.join(out, f"run.{r}.json")))
    walls.append(j["wall_seconds"])
    for k, v in j.get("phase_seconds", {}).items():
        phases.setdefault(k, []).append(v)
    for k, v in j.get("samples_seconds", {}).items():
        parts.setdefault(k, []).append(v)
    b = [x for x in json.load(open(os.path.join(out, f"w1.{r}.json")))["benchmarks"] if x.get("run_type") == "iteration"]
    raw.append(1e6 / b[0]["items_per_second"])
a, w = statistics.median(walls), statistics.median(raw)
print(f"1e6 one-step ring samples, --threads {threads}: `ukb run` {a:.3f} s (median of {rounds}); "
      f"1e6 raw W1 RK4 system-steps {w:.4f} s; ratio {a / w:.1f} (target <= 6)\n")
print("| phase | median s |\n|---|---|")
for k, v in phases.items():
    print(f"| {k} | {statistics.median(v):.3f} |")
for k, v in parts.items():
    print(f"| samples: {k} | {statistics.median(v):.3f} |")
PY
