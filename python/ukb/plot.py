"""Pictures of a `ukb run` output directory (docs/outputs.md).

    python3 -m ukb.plot OUT_DIR [--max-points N]      # installed with ukb
    scripts/plot.py OUT_DIR [--max-points N]          # in the source tree
    ukb.plot.plot_run(OUT_DIR, max_points=20000)      # from Python: the paths written

Reads results.npy (or results.csv), run.json and trajectories.csv from
OUT_DIR and writes PNGs into OUT_DIR/plots/:

  hist_<observable>.png              histogram over the successful samples
                                     (status finished or at_rest)
  scatter_<observable>_vs_<input>.png  the observable against each sampled
                                     input (at most --max-points samples,
                                     evenly spaced in sample order)
  trajectories.png                   the recorded samples against time
  stop.png                           with [stop]: the statistic and its interval
                                     at each check against the samples
  sensitivity_<output>.png           with [sensitivity]: each input's first-order
                                     and total Sobol index with its interval
                                     (summary.json's sensitivity)

Uses numpy and matplotlib (Debian's python3-numpy and python3-matplotlib;
no display needed; matplotlib is imported when a plot is drawn, not with
ukb). Needs nothing of ukb's compiled part.
"""
import argparse
import csv
import json
import os
import sys

import numpy as np

SUCCESS = (b"finished", b"at_rest")
# Observables plotted against the inputs: what a study asks about.
HEADLINE_SUFFIXES = ("_final",)
HEADLINE = ("t_stop", "energy_dissipated", "steps", "events")


def load_results(out):
    npy = os.path.join(out, "results.npy")
    if os.path.exists(npy):
        return np.load(npy)
    # Fallback: the CSV (slower, same columns).
    with open(os.path.join(out, "results.csv")) as f:
        rows = list(csv.reader(f))
    names = rows[0]
    cols = list(zip(*rows[1:])) if len(rows) > 1 else [[] for _ in names]
    dtype, data = [], []
    for name, col in zip(names, cols):
        if name == "status":
            dtype.append((name, "S32"))
            data.append([c.encode() for c in col])
        else:
            dtype.append((name, "f8"))
            data.append([float(c) for c in col])
    return np.array(list(zip(*data)), dtype=dtype)


def load_trajectories(out):
    path = os.path.join(out, "trajectories.csv")
    if not os.path.exists(path):
        return None, []
    with open(path) as f:
        rows = list(csv.reader(f))
    names = rows[0]
    table = {n: [] for n in names}
    for r in rows[1:]:
        for n, v in zip(names, r):
            table[n].append(v)
    return table, names


def safe(name):
    return "".join(c if c.isalnum() or c in "_-" else "_" for c in name)


def plot_run(out, max_points=20000):
    """Writes the PNGs of the `ukb run` output directory `out` into
    out/plots/ and returns their paths. ValueError where `out` is not such a
    directory; ImportError where matplotlib is missing."""
    # Figures of their own (no pyplot): nothing global, such as a notebook's
    # backend, is changed.
    from matplotlib.figure import Figure

    out = os.fspath(out)
    if not os.path.isdir(out):
        raise ValueError(f"'{out}' is not a directory (expected the output of `ukb run`)")
    if not (isinstance(max_points, int) and max_points >= 1):
        raise ValueError(f"max_points: expected an integer >= 1, got {max_points!r}")
    try:
        with open(os.path.join(out, "run.json")) as f:
            run = json.load(f)
        res = load_results(out)
    except OSError as e:
        raise ValueError(f"{e} (expected the output of `ukb run`)") from None
    model = run["config"]["model"]
    plots = os.path.join(out, "plots")
    os.makedirs(plots, exist_ok=True)

    names = list(res.dtype.names)
    status = res["status"]
    ok = np.isin(status, SUCCESS)
    first_obs = names.index("status") + 1
    inputs = [n for n in names[1:names.index("status")]]
    observables = names[first_obs:]
    written = []

    for obs in observables:
        v = np.asarray(res[obs][ok], dtype=float)
        v = v[np.isfinite(v)]
        if v.size == 0 or np.all(v == v[0]):
            continue  # nothing to show (e.g. a velocity that is zero at rest)
        fig = Figure(figsize=(6, 4))
        ax = fig.subplots()
        ax.hist(v, bins=min(60, max(10, int(np.sqrt(v.size)))), color="tab:blue")
        ax.set_xlabel(obs)
        ax.set_ylabel("samples")
        ax.set_title(f"{model}: {obs} ({v.size} successful samples)")
        fig.tight_layout()
        path = os.path.join(plots, f"hist_{safe(obs)}.png")
        fig.savefig(path, dpi=110)
        written.append(path)

    step = max(1, len(res) // max_points)
    sub = res[::step]
    headline = [o for o in observables if o.endswith(HEADLINE_SUFFIXES) or o in HEADLINE]
    headline = [o for o in headline if not (o.startswith("q_") or o.startswith("qd_"))]
    for x in inputs:
        for obs in headline:
            y = np.asarray(sub[obs], dtype=float)
            if not np.any(np.isfinite(y)) or np.nanmin(y) == np.nanmax(y):
                continue
            fig = Figure(figsize=(6, 4))
            ax = fig.subplots()
            for st in np.unique(sub["status"]):
                m = sub["status"] == st
                ax.scatter(sub[x][m], y[m], s=2, alpha=0.5, label=st.decode())
            ax.set_xlabel(x)
            ax.set_ylabel(obs)
            ax.set_title(f"{model}: {obs} against {x}")
            ax.legend(markerscale=5, fontsize=8)
            fig.tight_layout()
            path = os.path.join(plots, f"scatter_{safe(obs)}_vs_{safe(x)}.png")
            fig.savefig(path, dpi=110)
            written.append(path)

    traj, tnames = load_trajectories(out)
    if traj is not None and traj["sample"]:
        natural = [n for n in tnames if n not in ("sample", "t", "status") and not n.startswith("q")]
        shown = natural or [n for n in tnames if n.startswith("q_")]
        fig = Figure(figsize=(7, 2.2 * len(shown) + 0.6))
        axes = fig.subplots(len(shown), 1, sharex=True, squeeze=False)
        samples = sorted(set(traj["sample"]), key=int)
        t = np.array(traj["t"], dtype=float)
        s = np.array(traj["sample"])
        for ax, name in zip(axes[:, 0], shown):
            y = np.array(traj[name], dtype=float)
            for k in samples:
                m = s == k
                ax.plot(t[m], y[m], label=f"sample {k}")
            ax.set_ylabel(name)
        axes[0, 0].legend(fontsize=8)
        axes[-1, 0].set_xlabel("t")
        axes[0, 0].set_title(f"{model}: recorded trajectories")
        fig.tight_layout()
        path = os.path.join(plots, "trajectories.png")
        fig.savefig(path, dpi=110)
        written.append(path)

    summary_path = os.path.join(out, "summary.json")
    sens = stop = None
    if os.path.exists(summary_path):
        with open(summary_path) as f:
            summary = json.load(f)
        sens, stop = summary.get("sensitivity"), summary.get("stop")
    checks = [k for k in (stop or {}).get("checks", []) if k["estimate"] is not None]
    if checks:
        n = np.array([k["samples"] for k in checks], dtype=float)
        est = np.array([k["estimate"] for k in checks], dtype=float)
        half = np.array([k["halfwidth"] if k["halfwidth"] is not None else np.nan for k in checks], dtype=float)
        fig = Figure(figsize=(6, 4))
        ax = fig.subplots()
        ax.errorbar(n, est, yerr=half, fmt="o-", capsize=3)
        ax.set_xscale("log")
        ax.set_xlabel("samples")
        ax.set_ylabel(stop["statistic"])
        verdict = f"met at {stop['samples']}" if stop["met"] else f"not met by {stop['samples']}"
        ax.set_title(f"{model}: {stop['statistic']} and its interval ({verdict})")
        fig.tight_layout()
        path = os.path.join(plots, "stop.png")
        fig.savefig(path, dpi=110)
        written.append(path)
    for name, o in ((sens or {}).get("outputs") or {}).items():
        if "first" not in o:
            continue  # too few base points counted
        xs = np.arange(len(sens["inputs"]))
        fig = Figure(figsize=(max(5, 1.2 * len(xs) + 2), 4))
        ax = fig.subplots()
        for shift, kind, color in ((-0.2, "first", "tab:blue"), (0.2, "total", "tab:orange")):
            est = np.array([o[kind][x] if o[kind][x] is not None else np.nan for x in sens["inputs"]], dtype=float)
            lo = np.array([o[kind + "_interval"][x][0] or np.nan for x in sens["inputs"]], dtype=float)
            hi = np.array([o[kind + "_interval"][x][1] or np.nan for x in sens["inputs"]], dtype=float)
            ax.bar(xs + shift, est, width=0.4, color=color, label=f"{kind} order" if kind == "first" else "total",
                   yerr=np.vstack([est - lo, hi - est]), capsize=3)
        ax.set_xticks(xs, sens["inputs"])
        ax.set_ylabel("Sobol index")
        ax.set_title(f"{model}: sensitivity of {name} ({o['base_points_used']} base points)")
        ax.legend(fontsize=8)
        fig.tight_layout()
        path = os.path.join(plots, f"sensitivity_{safe(name)}.png")
        fig.savefig(path, dpi=110)
        written.append(path)

    return written


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python3 -m ukb.plot", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out_dir")
    ap.add_argument("--max-points", type=int, default=20000)
    args = ap.parse_args(argv)
    try:
        written = plot_run(args.out_dir, args.max_points)
    except (ValueError, ImportError) as e:
        sys.exit(f"ukb.plot: {e}")
    print(f"ukb.plot: {len(written)} PNGs in {os.path.join(args.out_dir, 'plots')}/")


if __name__ == "__main__":
    main()
