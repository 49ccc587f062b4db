#!/usr/bin/env python3
"""The table of bench/gpu.sh from its raw results (standard library only).

    python3 bench/gpu_table.py DIR

DIR holds workloads*.json (ukb_bench_workloads, cuda rows; the rows of a
run that was stopped part-way are read up to its last whole row), flops.json
(ukb_flops --json), device.txt (nvidia-smi's name first) and, where run,
ring-cuda/ and ring-cpu/ (`ukb run` of the scaled ring demo). The share of
the peak is flops per RK4 step x system-steps/s over the device's vector
FP64 / FP32 peak: from UKB_GPU_PEAK_GFLOPS="FP64,FP32" where set, else from
the device's name (the boost-clock figures of NVIDIA's data sheets, without
tensor cores), else left out.
"""
import csv
import glob
import json
import math
import os
import re
import sys

from report import fmt as rate, ratio  # bench/report.py, beside this script

# GFLOP/s, vector (non-tensor) FP64 and FP32 at boost clock, NVIDIA data sheets.
PEAKS = [("H200", 34000, 67000), ("H100 PCIe", 25600, 51200), ("H100 NVL", 30000, 60000),
         ("H100", 34000, 67000), ("A100", 9700, 19500)]


def peak(device):
    env = os.environ.get("UKB_GPU_PEAK_GFLOPS")
    if env:
        fp64, fp32 = (float(x) for x in env.split(","))
        return {"double": fp64, "float": fp32}
    for key, fp64, fp32 in PEAKS:
        if key in device:
            return {"double": fp64, "float": fp32}
    return None


def benchmarks(path):
    """The whole rows of a Google Benchmark JSON file, also of one whose run
    was killed before the file was closed (a time limit on a GPU machine)."""
    with open(path) as f:
        text = f.read()
    try:
        return json.loads(text)["benchmarks"]
    except (json.JSONDecodeError, KeyError):
        pass
    start = text.find('"benchmarks": [')
    if start < 0:
        return []
    dec, pos, rows = json.JSONDecoder(), start + len('"benchmarks": ['), []
    sep = re.compile(r"\s*,?\s*")
    while True:
        pos = sep.match(text, pos).end()
        try:
            row, pos = dec.raw_decode(text, pos)
        except json.JSONDecodeError:
            return rows
        rows.append(row)


def main(d):
    with open(os.path.join(d, "device.txt")) as f:
        lines = f.read().splitlines()
    device = lines[1].split(",")[0].strip() if len(lines) > 1 and lines[0].startswith("name") else lines[0]
    pk = peak(device)
    with open(os.path.join(d, "flops.json")) as f:
        flops = {r["workload"]: r["flops_per_step"] for r in json.load(f)}
    rows, skipped = {}, set()
    for path in sorted(glob.glob(os.path.join(d, "workloads*.json"))):
        # The engine's route: workloads_thread.json was run with
        # UKB_BENCH_CUDA_TEAMS=0 (one thread per system); otherwise the
        # chains of 8 coordinates or more take a team (kernels::team_size).
        forced = "thread" in os.path.basename(path)
        for b in benchmarks(path):
            parts = b["run_name"].split("/")
            team = parts[1].startswith("planar_chain_") and parts[1] != "planar_chain_3"
            key = (parts[0], parts[1], parts[2], int(parts[5].split(":")[1]),
                   "thread" if forced or not team else "team")
            if b.get("error_occurred"):
                skipped.add(b.get("error_message", "skipped"))
                continue
            if b.get("aggregate_name") == "median":
                rows[key] = b["items_per_second"]
    print(f"Device: {device}; peak used: "
          + (f"FP64 {pk['double']:.0f} GFLOP/s, FP32 {pk['float']:.0f} GFLOP/s" if pk else "unknown") + "\n")
    print("| workload | N | double steps/s | % FP64 peak | float steps/s | % FP32 peak | float / double | route |")
    print("|---|---|---|---|---|---|---|---|")
    for (w, model, N, route) in sorted({(k[0], k[1], k[3], k[4]) for k in rows}):
        cells = []
        for s in ("double", "float"):
            r = rows.get((w, model, s, N, route))
            share = f"{100 * r * flops[w] / (pk[s] * 1e9):.1f} %" if (r and pk) else ""
            cells += [rate(r) if r else "", share]
        fd = ratio(rows.get((w, model, "float", N, route)), rows.get((w, model, "double", N, route)))
        print(f"| {w} {model} | {N:.0e} | {cells[0]} | {cells[1]} | {cells[2]} | {cells[3]} | {fd} | {route} |")
    for why in sorted(skipped):
        print(f"\n(skipped rows: {why})")

    runs = {}
    for be in ("cuda", "cpu"):
        p = os.path.join(d, f"ring-{be}")
        if os.path.exists(os.path.join(p, "run.json")):
            with open(os.path.join(p, "run.json")) as f:
                info = json.load(f)
            runs[be] = (info, read_table(p))
    if len(runs) == 2:
        (gi, gt), (ci, ct) = runs["cuda"], runs["cpu"]
        same_status = sum(a == b for a, b in zip(gt["status"], ct["status"]))
        dtheta = max(abs(a - b) for a, b in zip(gt["theta_final"], ct["theta_final"]))
        dstop = max((abs(a - b) for a, b in zip(gt["t_stop"], ct["t_stop"])
                     if math.isfinite(a) and math.isfinite(b)), default=float("nan"))
        ct = ct["status"]
        print(f"\n`ukb run` of the ring demo with {len(ct)} samples: cuda {gi['wall_seconds']:.2f} s, "
              f"cpu with {ci.get('threads', '?')} threads {ci['wall_seconds']:.2f} s: "
              f"{ci['wall_seconds'] / gi['wall_seconds']:.1f}x; statuses equal in {same_status} of {len(ct)}; "
              f"largest |theta_final difference| {dtheta:.2e} rad, |t_stop difference| {dstop:.2e} s")
        # Where each run's wall time went (run.json's phase_seconds, and
        # within samples its samples_seconds; absent in runs of older builds).
        seconds_table("", "phase_seconds", ("setup", "samples", "checkpoint", "results_csv", "results_npy", "summary"),
                      gi, ci)
        seconds_table("Within `samples` (run.json's samples_seconds):\n", "samples_seconds",
                      ("record", "states", "integrate", "rows", "merge"), gi, ci)


def seconds_table(title, key, names, cuda, cpu):
    """A table of the seconds under run.json's `key` for the two runs."""
    names = [k for k in names if k in cuda.get(key, {}) or k in cpu.get(key, {})]
    if not names:
        return
    print("\n" + title + "\n| backend | " + " | ".join(names) + " |")
    print("|---|" + "---|" * len(names))
    for be, info in (("cuda", cuda), ("cpu", cpu)):
        sec = info.get(key, {})
        print(f"| {be} | " + " | ".join(f"{sec[k]:.3f} s" if k in sec else "" for k in names) + " |")


def read_table(p):
    """The columns status, theta_final and t_stop of a run's results:
    results.npy where numpy reads it, else results.csv."""
    npy = os.path.join(p, "results.npy")
    if os.path.exists(npy):
        return read_npy(npy, ("status", "theta_final", "t_stop"))
    if True:
        with open(os.path.join(p, "results.csv")) as f:
            rows = list(csv.DictReader(f))
        num = lambda v: float(v) if v not in ("", "nan") else float("nan")
        return {"status": [r["status"] for r in rows], "theta_final": [num(r["theta_final"]) for r in rows],
                "t_stop": [num(r["t_stop"]) for r in rows]}


def read_npy(path, names):
    """Columns of ukb's results.npy (a structured array, format 1.0 or 2.0),
    without numpy: {name: list}, status as text."""
    import ast
    import struct
    with open(path, "rb") as f:
        data = f.read()
    major = data[6]
    hlen, start = (struct.unpack("<H", data[8:10])[0], 10) if major == 1 else (struct.unpack("<I", data[8:12])[0], 12)
    header = ast.literal_eval(data[start:start + hlen].decode("latin1"))
    codes = {"<f8": "d", "<i8": "q"}
    fmt = "<" + "".join(codes.get(t) or (t[2:] + "s") for _, t in header["descr"])
    fields = [n for n, _ in header["descr"]]
    at = {n: fields.index(n) for n in names}
    out = {n: [] for n in names}
    for rec in struct.iter_unpack(fmt, data[start + hlen:]):
        for n in names:
            v = rec[at[n]]
            out[n].append(v.rstrip(b"\0").decode() if isinstance(v, bytes) else v)
    return out


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
