#!/usr/bin/env python3
"""Tables of bench/README.md from the JSON files of bench/compare.sh.

    python3 bench/report.py DIR > DIR/tables.md

Reads DIR/cpu.json, eigen.json, numpy.json, flops.json and, where present,
jax.json and numba.json (the peers of issue 56), gpu_double.json and gpu_float.json (ukb_bench_workloads run on a GPU
machine). Rates are medians of the repetitions where a file has them.
GFLOP/s = flops per RK4 step (ukb_flops) x system-steps/s; the peak is
PEAK_GFLOPS per core (see bench/README.md for its derivation).
"""
import json
import os
import sys

PEAK_GFLOPS = {"double": 41.6, "float": 83.2}  # one core: 16 (32) flop/cycle x 2.6 GHz


def load(path):
    if not os.path.exists(path):
        return {}
    rates = {}
    for b in json.load(open(path))["benchmarks"]:
        if b.get("run_type") == "aggregate" and b.get("aggregate_name") != "median":
            continue
        if "error_occurred" in b and b["error_occurred"]:
            continue
        parts = b["name"].split("/")
        w, model, scalar, backend = parts[:4]
        threads = int(parts[4].split(":")[1])
        N = int(parts[5].split(":")[1].split("_")[0])
        rates[(w, scalar, backend, threads, N)] = (b["items_per_second"], model)
    return rates


def fmt(x):
    if x is None:
        return ""
    for unit, scale in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if x >= scale:
            return f"{x / scale:.3g} {unit}"
    return f"{x:.3g}"


def ratio(a, b):
    return f"{a / b:.3g}x" if a and b else ""


def main(d):
    rates = {}
    for f in ("cpu.json", "eigen.json", "numpy.json", "jax.json", "numba.json", "gpu_double.json", "gpu_float.json"):
        rates.update(load(os.path.join(d, f)))
    flops = {r["workload"]: r["flops_per_step"] for r in json.load(open(os.path.join(d, "flops.json")))}
    workloads = sorted({k[0] for k in rates})
    Ns = sorted({k[4] for k in rates})

    def get(w, scalar, backend, threads, N):
        v = rates.get((w, scalar, backend, threads, N))
        return v[0] if v else None

    for w in workloads:
        model = next(v[1] for k, v in rates.items() if k[0] == w)
        print(f"\n### {w}: {model}, double (system-steps/s)\n")
        print("| N | reference | cpu 1 thr | cpu 2 thr | eigen loop 1 thr | eigen loop 2 thr | numpy | cuda "
              "| cpu/reference | cpu/numpy | cpu/eigen (1 thr) | 2 thr/1 thr | cpu GFLOP/s | % of peak |")
        print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
        for N in Ns:
            # The reference is a loop over systems: its rate does not depend
            # on N, and it runs up to N = 10^4; larger N use the largest below.
            r = next((get(w, "double", "reference", 1, M) for M in reversed(Ns)
                      if M <= N and get(w, "double", "reference", 1, M)), None)
            c1, c2 = get(w, "double", "cpu", 1, N), get(w, "double", "cpu", 2, N)
            e1, e2 = get(w, "double", "eigen_loop", 1, N), get(w, "double", "eigen_loop", 2, N)
            npy, gpu = get(w, "double", "numpy", 1, N), get(w, "double", "cuda", 0, N)
            if not any((r, c1, c2, e1, e2, npy, gpu)):
                continue
            gf = c1 * flops[w] / 1e9 if c1 else None
            gfs = f"{gf:.2f}" if gf else ""
            peak = f"{100 * gf / PEAK_GFLOPS['double']:.1f}" if gf else ""
            print(f"| {N:g} | {fmt(r)} | {fmt(c1)} | {fmt(c2)} | {fmt(e1)} | {fmt(e2)} | {fmt(npy)} | {fmt(gpu)} "
                  f"| {ratio(c1, r)} | {ratio(c1, npy)} | {ratio(c1, e1)} | {ratio(c2, c1)} "
                  f"| {gfs} | {peak} |")
        peers = [(N, get(w, "double", "cpu", 1, N), get(w, "double", "jax", 1, N), get(w, "double", "numba", 1, N))
                 for N in Ns]
        if any(j or nb for _, _, j, nb in peers):
            print(f"\n{w}: {model}, against the peers of issue 56, double, 1 thread (system-steps/s)\n")
            print("| N | ukb cpu | jax | numba | ukb / fastest peer |")
            print("|---|---|---|---|---|")
            for N, c1, j, nb in peers:
                if not any((j, nb)):
                    continue
                print(f"| {N:g} | {fmt(c1)} | {fmt(j)} | {fmt(nb)} | {ratio(c1, max(x for x in (j, nb) if x))} |")
        print(f"\n{w}: {model}, float (system-steps/s)\n")
        print("| N | cpu 1 thr | cpu 2 thr | cuda | float/double (cpu 1 thr) |")
        print("|---|---|---|---|---|")
        for N in Ns:
            c1, c2, gpu = get(w, "float", "cpu", 1, N), get(w, "float", "cpu", 2, N), get(w, "float", "cuda", 0, N)
            if not any((c1, c2, gpu)):
                continue
            print(f"| {N:g} | {fmt(c1)} | {fmt(c2)} | {fmt(gpu)} | {ratio(c1, get(w, 'double', 'cpu', 1, N))} |")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else ".")
