"""ukb.run against `ukb run` (the same files for the same config, given as
a dict or as a file), and its Ctrl-C: KeyboardInterrupt, a checkpoint, and a
resume that ends with the files of an uninterrupted run."""
import filecmp
import json
import math
import os
import signal
import tomllib
import warnings

import numpy as np
import pytest

import ukb
from conftest import cli


def demo_text(source_dir, samples):
    with open(os.path.join(source_dir, "examples", "ring_friction.toml")) as f:
        text = f.read()
    assert "samples = 100000" in text and "\n[integrator]\n" in text
    return text.replace("samples = 100000", f"samples = {samples}").replace("\n[integrator]\n",
                                                                         "\n[integrator]\nchunk = 500\n")


def same_files(a, b, names=("results.csv", "results.npy", "summary.json", "trajectories.csv")):
    for n in names:
        assert filecmp.cmp(os.path.join(a, n), os.path.join(b, n), shallow=False), n


def test_run_of_a_dict_writes_the_files_of_ukb_run_with_the_same_config(tmp_path, source_dir, monkeypatch):
    monkeypatch.chdir(tmp_path)  # where the config's output.dir would be
    text = demo_text(source_dir, 2000)
    (tmp_path / "ring.toml").write_text(text)
    cli("run", str(tmp_path / "ring.toml"), "--out", str(tmp_path / "cli"), "--quiet")
    config = tomllib.loads(text)
    table, summary = ukb.run(config, out=tmp_path / "py", progress=False)
    same_files(tmp_path / "cli", tmp_path / "py")
    # A path works as well, and without `out` nothing is written.
    table2, summary2 = ukb.run(tmp_path / "ring.toml", progress=False)
    assert sorted(os.listdir(tmp_path)) == ["cli", "py", "ring.toml"]  # no ring_friction_out
    assert (table == table2).all() and summary == summary2
    # The table is results.csv's, the summary summary.json's.
    with open(tmp_path / "cli" / "summary.json") as f:
        assert summary == json.load(f)
    rows = (tmp_path / "cli" / "results.csv").read_text().splitlines()
    header = rows[0].split(",")
    assert list(table.dtype.names) == header and len(table) == 2000
    first = dict(zip(header, rows[1].split(",")))
    assert table["status"][0] == first["status"] and table["mu"][0] == float(first["mu"])
    assert table["steps"].dtype == np.int64 and int(first["steps"]) == table["steps"][0]
    df = table.to_pandas()
    assert list(df.columns) == header and df["theta_final"].iloc[5] == table["theta_final"][5]


def test_ctrl_c_stops_after_the_chunk_and_resume_gives_the_same_files(tmp_path, source_dir):
    config = tomllib.loads(demo_text(source_dir, 2000))
    ukb.run(config, out=tmp_path / "whole", progress=False)
    seen = []

    def interrupt(done, samples):
        seen.append(done)
        if done == 1000:
            os.kill(os.getpid(), signal.SIGINT)  # what Ctrl-C sends

    try:
        ukb.run(config, out=tmp_path / "cut", progress=False, on_chunk=interrupt)
        raise AssertionError("no KeyboardInterrupt")
    except KeyboardInterrupt as e:
        assert "1000 of 2000" in str(e) and "resume=True" in str(e)
    assert seen == [500, 1000]
    assert os.listdir(tmp_path / "cut") == ["checkpoint.ukb"]
    table, _ = ukb.run(config, out=tmp_path / "cut", progress=False, resume=True)
    same_files(tmp_path / "whole", tmp_path / "cut")
    assert len(table) == 2000


def test_an_exception_in_the_callback_stops_the_run_with_a_checkpoint(tmp_path, source_dir):
    config = tomllib.loads(demo_text(source_dir, 1500))

    def fail(done, samples):
        raise RuntimeError("stop here")

    try:
        ukb.run(config, out=tmp_path / "x", progress=False, on_chunk=fail)
        raise AssertionError("no exception")
    except RuntimeError as e:
        assert str(e) == "stop here"
    assert os.listdir(tmp_path / "x") == ["checkpoint.ukb"]
    table, _ = ukb.run(None, out=tmp_path / "x", progress=False, resume=True)
    whole, _ = ukb.run(config, progress=False)
    assert (table == whole).all()


def long_ring_batch(N):
    # Frictionless beads never rest: the batch runs until t_end.
    q0, qd0 = ukb.initial_state("bead_on_ring", theta=np.linspace(0, 1, N))
    return dict(model="bead_on_ring", q0=q0, qd0=qd0, params={"mu": 0.0}, dt=0.01)


def test_ctrl_c_stops_simulate_with_keyboard_interrupt():
    import threading

    b = long_ring_batch(100)
    # 1e6 steps per system: minutes if the signal were not seen.
    timer = threading.Timer(0.3, lambda: os.kill(os.getpid(), signal.SIGINT))
    timer.start()
    try:
        ukb.simulate(b.pop("model"), b.pop("q0"), b.pop("qd0"), t_end=1e4, threads=1, **b)
        raise AssertionError("no KeyboardInterrupt")
    except KeyboardInterrupt:
        pass
    finally:
        timer.cancel()


def test_other_python_threads_run_while_simulate_works():
    import threading

    b = long_ring_batch(2000)
    started = threading.Event()
    box = {}

    def work():
        started.set()
        box["r"] = ukb.simulate(b.pop("model"), b.pop("q0"), b.pop("qd0"), t_end=15.0, threads=1, **b)

    t = threading.Thread(target=work)
    t.start()
    started.wait()
    t.join(0.2)  # the worker is in the solver by now (3e6 system-steps take about a second)
    # With the GIL held by the solver, this thread could not run on until
    # the worker had finished.
    n = sum(1 for _ in range(10000))
    alive = t.is_alive()
    t.join()
    assert n == 10000 and alive
    assert list(box["r"].status_name) == ["finished"] * 2000


def test_a_table_from_csv_alone_is_the_table_from_npy(tmp_path, source_dir):
    config = tomllib.loads(demo_text(source_dir, 300))
    both, _ = ukb.run(config, out=tmp_path / "both", progress=False)
    config["output"]["formats"] = ["csv"]
    csv, _ = ukb.run(config, out=tmp_path / "csv", progress=False)
    assert not os.path.exists(tmp_path / "csv" / "results.npy")
    assert csv.dtype.names == both.dtype.names
    for n in both.dtype.names:
        assert csv[n].dtype.kind == both[n].dtype.kind, n
        np.testing.assert_array_equal(csv[n], both[n], err_msg=n)


def test_a_stop_during_the_last_chunk_comes_too_late_and_the_run_completes(tmp_path, source_dir):
    import warnings

    config = tomllib.loads(demo_text(source_dir, 400))  # one chunk of 500
    whole, _ = ukb.run(config, progress=False)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        table, _ = ukb.run(config, out=tmp_path / "a", progress=False,
                           on_chunk=lambda d, s: os.kill(os.getpid(), signal.SIGINT))
    assert any("last chunk" in str(x.message) for x in w)
    assert (table == whole).all()

    def fail(done, samples):
        raise LookupError("from the callback")

    try:
        ukb.run(config, out=tmp_path / "b", progress=False, on_chunk=fail)
        raise AssertionError("no exception")
    except LookupError as e:
        # The callback's own frame is in the traceback.
        import traceback
        assert "fail" in "".join(traceback.format_tb(e.__traceback__))
    same_files(tmp_path / "a", tmp_path / "b")  # complete, no checkpoint
    assert "checkpoint.ukb" not in os.listdir(tmp_path / "b")


def test_cross_checks_from_python_pass_and_a_planted_error_fails_naming_its_sample():
    import warnings

    config = {"model": "bead_on_ring", "samples": 300, "seed": 4,
              "integrator": {"dt": 0.01, "t_end": 60.0, "event_tol": 1e-10},
              "params": {"mu": {"dist": "uniform", "min": 0.05, "max": 0.5}}}
    # ukb.run with a cross-check: the report joins the summary.
    table, summary = ukb.run(config, progress=False, crosscheck="reference", crosscheck_samples=40)
    assert summary["crosscheck"]["pass"] and summary["crosscheck"]["samples"] == 40
    # ukb.compare of two finished tables under the same rules.
    on_reference, _ = ukb.run(dict(config, backend="reference"), progress=False)
    report = ukb.compare(config, table, on_reference, names=("cpu", "reference"))
    assert report["pass"] and report["samples"] == 300 and "cpu against reference" in report["verdict"]
    planted = on_reference.copy()
    planted["theta_final"][7] += 1e-6  # far above rounding, far below the physics
    report = ukb.compare(config, table, planted)
    assert not report["pass"]
    failed = [c for c in report["columns"] if not c["pass"]]
    assert [c["column"] for c in failed] == ["theta_final"]
    assert failed[0]["failures"] == 1 and failed[0]["worst"][0]["sample"] == 7
    assert failed[0]["worst"][0]["inputs"]["mu"] == table["mu"][7]
    # A failing cross-check of a run warns (and says so in the summary).
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("error")
        ukb.run(config, progress=False, crosscheck="reference", crosscheck_samples=10)  # passes: no warning


def test_unconverged_projections_give_the_warning_of_ukb_run(source_dir):
    # The demo's ring with projection at tol = 1e-15 and one correction per
    # level: no correction reaches that tolerance (as in the C++ test
    # Outputs.TheEndShowsTheLargestResidualsAndWarnsOfUnconvergedProjections).
    # The warning counts the samples whose projection_failures is above 0,
    # as `ukb run` does on stderr; at the defaults there is none.
    config = tomllib.loads(demo_text(source_dir, 6))
    config["integrator"]["t_end"] = 3.0
    config["stabilization"] = {"method": "projection", "tol": 1e-15, "max_iter": 1}
    with pytest.warns(RuntimeWarning, match=r"ukb.run: 6 of 6 samples had projections that did not reach") as got:
        table, _ = ukb.run(config, progress=False)
    assert (table["projection_failures"] > 0).sum() == 6
    assert len(got) == 1
    del config["stabilization"]["tol"], config["stabilization"]["max_iter"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        table, _ = ukb.run(config, progress=False)
    assert (table["projection_failures"] == 0).all()


def test_summary_statistics_are_numpys_of_the_table(source_dir):
    """summary.json's statistics against NumPy's own of the returned table:
    quantiles are numpy.percentile's to the last bit, histograms
    numpy.histogram's (edges and counts, values on edges included), mean and
    std numpy's within a few ulps (NumPy sums pairwise, ukb with
    compensation), a constant column's mean its value and its std 0."""
    ring, ring_summary = ukb.run(tomllib.loads(demo_text(source_dir, 2000)), progress=False)
    # A sweep whose points lie on histogram edges (0.58 = 29 * 0.02 is one;
    # 0.7 and 0.82 lie just below 35 * 0.02 and 41 * 0.02).
    grid = {"model": "nonholonomic_particle", "samples": 5,
            "integrator": {"dt": 0.01, "t_end": 0.02},
            "initial": {"x": [0.0, 0.58, 0.7, 0.82, 1.0]}}
    sweep, sweep_summary = ukb.run(grid, progress=False)
    checked = set()
    for table, summary in ((ring, ring_summary), (sweep, sweep_summary)):
        successful = np.isin(table["status"], ["finished", "at_rest"])
        for name, obs in summary["observables"].items():
            v = table[name][successful].astype(np.float64)
            v = v[np.isfinite(v)]
            s = obs["successful"]
            assert s["count"] == len(v), name
            if len(v) == 0:
                continue
            for key, p in (("p01", 1), ("p05", 5), ("p25", 25), ("p50", 50), ("p75", 75), ("p95", 95), ("p99", 99)):
                assert s["quantiles"][key] == np.percentile(v, p), (name, key)
            assert s["min"] == v.min() and s["max"] == v.max(), name
            bins = len(s["histogram"]["counts"])
            if v.min() == v.max():  # NumPy widens a zero range by 0.5 each side; ukb keeps it
                assert s["mean"] == v[0] and (len(v) == 1 or s["std"] == 0.0), name
                assert s["histogram"]["counts"][0] == len(v), name
                continue
            counts, edges = np.histogram(v, bins=bins)
            assert s["histogram"]["edges"] == edges.tolist(), name
            assert s["histogram"]["counts"] == counts.tolist(), name
            spread = max(abs(v.min()), abs(v.max()))
            assert abs(s["mean"] - v.mean()) <= 4 * np.spacing(spread), name
            if len(v) > 1:
                assert abs(s["std"] - v.std(ddof=1)) <= 1e-12 * max(v.std(ddof=1), np.spacing(spread)), name
            checked.add(name)
    assert {"theta_final", "t_stop", "q_x_final"} <= checked


def test_the_pictures_of_a_run_come_with_the_module(tmp_path):
    # ukb.plot (python -m ukb.plot; scripts/plot.py in the source tree):
    # the histograms, scatters against the sampled input and the recorded
    # trajectories of a run, as PNGs; bad directories are a ValueError.
    pytest.importorskip("matplotlib", reason="python3-matplotlib is missing (scripts/install_deps.sh installs it)")
    import ukb.plot
    cfg = {"model": "bead_on_ring", "samples": 60, "seed": 3,
           "integrator": {"dt": 0.01, "t_end": 20.0},
           "params": {"mu": {"dist": "uniform", "min": 0.1, "max": 0.4}},
           "output": {"record": [0, 1], "record_every": 10}}
    ukb.run(cfg, out=tmp_path / "o", progress=False)
    written = ukb.plot.plot_run(tmp_path / "o")
    names = sorted(os.path.basename(p) for p in written)
    for png in ("hist_theta_final.png", "hist_t_stop.png", "scatter_theta_final_vs_mu.png", "trajectories.png"):
        assert png in names, names
        with open(tmp_path / "o" / "plots" / png, "rb") as f:
            assert f.read(4) == b"\x89PNG", png
    with pytest.raises(ValueError, match="not a directory"):
        ukb.plot.plot_run(tmp_path / "nowhere")
    with pytest.raises(ValueError, match="expected the output of `ukb run`"):
        ukb.plot.plot_run(tmp_path)


def test_sobol_points_are_scipys_unscrambled_and_the_runs_inputs_are_the_scrambled_ones():
    """ukb.sobol_points(n, d) is scipy.stats.qmc.Sobol(d, scramble=False)'s
    points bit for bit (SciPy builds them from Joe and Kuo's table by its own
    code); and a run with sampling = "sobol" puts each uniform input at its
    scrambled point (sample i of replicate i mod R at point i // R) and each
    normal at the normal's quantile of it (scipy.stats.norm.ppf)."""
    qmc = pytest.importorskip("scipy.stats.qmc")
    norm = pytest.importorskip("scipy.stats").norm
    for d, bits in ((1, 30), (5, 30), (40, 52), (ukb._core.sobol_dimensions(), 30)):
        n = 1024 if d < 100 else 64
        ours = ukb.sobol_points(n, d)
        theirs = qmc.Sobol(d, scramble=False, bits=bits).random(n)
        assert ours.shape == (n, d)
        assert np.array_equal(ours, theirs), (d, bits)
    with pytest.raises(ValueError, match=r"d: expected an integer in \[1, 1024\], got 1025"):
        ukb.sobol_points(4, 1025)
    config = {"model": "incline_block", "samples": 64, "seed": 11, "sampling": "sobol", "replicates": 4,
              "integrator": {"dt": 0.01, "t_end": 0.02},
              "params": {"mu": {"dist": "uniform", "min": 0.2, "max": 0.6}},
              "initial": {"v": {"dist": "normal", "mean": 1.0, "sd": 0.25}}}
    table, summary = ukb.run(config, progress=False)
    for r in range(4):
        u = ukb.sobol_points(16, 2, seed=11, replicate=r)
        rows = np.arange(r, 64, 4)
        assert np.array_equal(table["mu"][rows], 0.2 + (0.6 - 0.2) * u[:, 0]), r
        assert np.allclose(table["v"][rows], 1.0 + 0.25 * norm.ppf(u[:, 1]), rtol=0, atol=1e-14), r
        # a scrambled (0, 4, 2)-net: one point in each of 16 equal strips of each input
        assert sorted(np.floor(u[:, 0] * 16).astype(int)) == list(range(16))
        assert sorted(np.floor(u[:, 1] * 16).astype(int)) == list(range(16))


def test_summary_intervals_are_what_scipy_computes_from_the_table(source_dir):
    """summary.json's intervals against SciPy's own from the returned table:
    random sampling, the mean's is mean +- norm.ppf((1 + c) / 2) std / sqrt(n)
    and each quantile's lies between two order statistics whose exact
    binomial coverage (scipy.stats.binom) reaches c; sobol, the mean's is
    t.ppf((1 + c) / 2, R - 1) times the replicates' means' standard deviation
    over sqrt(R); status fractions Wilson's (each end solves Wilson's
    equation); the confidence level from [output] confidence."""
    stats = pytest.importorskip("scipy.stats")
    base = {"model": "incline_block", "samples": 512, "seed": 5,
            "integrator": {"dt": 0.01, "t_end": 3.0},
            "params": {"alpha": 0.1, "mu": {"dist": "uniform", "min": 0.3, "max": 0.6}},
            "initial": {"v": {"dist": "normal", "mean": 2.0, "sd": 0.3, "min": 1.0}},
            "output": {"confidence": 0.9, "histogram_bins": 8}}
    table, summary = ukb.run(base, progress=False)
    assert summary["intervals"]["confidence"] == 0.9 and summary["intervals"]["sampling"] == "random"
    v = np.sort(table["s_final"][np.isin(table["status"], ["finished", "at_rest"])])
    n = len(v)
    s = summary["observables"]["s_final"]["successful"]
    z = stats.norm.ppf(0.95)
    half = z * v.std(ddof=1) / np.sqrt(n)
    assert np.allclose(s["mean_interval"], [s["mean"] - half, s["mean"] + half], rtol=1e-12, atol=0)
    for key, p in (("p05", 0.05), ("p50", 0.5), ("p95", 0.95)):
        lo, hi = s["quantile_intervals"][key]
        l = int(np.searchsorted(v, lo)) + 1  # 1-based ranks of the two order statistics
        u = int(np.searchsorted(v, hi)) + 1
        assert v[l - 1] == lo and v[u - 1] == hi
        coverage = stats.binom.cdf(u - 1, n, p) - stats.binom.cdf(l - 1, n, p)
        assert 0.9 <= coverage <= 0.93, (key, coverage)
    for name, (lo, hi) in summary["status_intervals"].items():
        k, N = summary["status_counts"][name], base["samples"]
        ph = k / N
        for e in (lo, hi):  # the ends of Wilson's interval solve |ph - e| = z sqrt(e (1 - e) / N)
            if 0 < e < 1:
                assert abs(abs(ph - e) - z * np.sqrt(e * (1 - e) / N)) < 1e-12
    counts = s["histogram"]["counts"]
    assert len(s["histogram"]["fraction_intervals"]) == len(counts)

    sobol = dict(base, sampling="sobol", replicates=16)
    table, summary = ukb.run(sobol, progress=False)
    assert summary["intervals"]["sampling"] == "sobol" and summary["intervals"]["replicates"] == 16
    ok = np.isin(table["status"], ["finished", "at_rest"])
    means = [table["s_final"][ok & (table["sample"] % 16 == r)].mean() for r in range(16)]
    half = stats.t.ppf(0.95, 15) * np.std(means, ddof=1) / np.sqrt(16)
    s = summary["observables"]["s_final"]["successful"]
    assert np.allclose(s["mean_interval"], [s["mean"] - half, s["mean"] + half], rtol=1e-6, atol=0)
    # the design's interval is narrower than the independent samples' for this smooth output
    assert s["mean_interval"][1] - s["mean_interval"][0] < 0.2 * 2 * z * table["s_final"][ok].std(ddof=1) / np.sqrt(ok.sum())


def test_sensitivity_indices_are_saltellis_and_jansens_estimators_of_the_table_and_are_drawn(tmp_path):
    """[sensitivity]: the indices in summary.json are Saltelli's first-order
    and Jansen's total estimators computed here with NumPy from the returned
    table's rows (A, B, A_B^j per base point), and ukb.plot draws them."""
    cfg = {"model": "incline_block", "samples": 4 * 256, "seed": 9, "sampling": "sobol",
           "integrator": {"dt": 0.01, "t_end": 3.0},
           "params": {"alpha": 0.1, "mu": {"dist": "uniform", "min": 0.3, "max": 0.6}},
           "initial": {"v": {"dist": "uniform", "min": 1.5, "max": 2.5}},
           "sensitivity": {"outputs": ["s_final", "t_stop"]}}
    table, summary = ukb.run(cfg, out=tmp_path / "o", progress=False)
    s = summary["sensitivity"]
    assert s["inputs"] == ["mu", "v"] and s["base_points"] == 256
    for name in ("s_final", "t_stop"):
        y = table[name].reshape(256, 4)
        fa, fb, fab = y[:, 0], y[:, 1], y[:, 2:]
        centre = np.concatenate([fa, fb]).mean()
        V = np.concatenate([fa, fb]).var()
        for j, x in enumerate(("mu", "v")):
            first = np.mean((fb - centre) * (fab[:, j] - fa)) / V
            total = np.mean((fa - fab[:, j]) ** 2) / (2 * V)
            o = s["outputs"][name]
            assert abs(o["first"][x] - first) <= 1e-9 * abs(first) + 1e-12, (name, x)
            assert abs(o["total"][x] - total) <= 1e-9 * abs(total) + 1e-12, (name, x)
            assert o["first_interval"][x][0] < o["first"][x] < o["first_interval"][x][1]
    pytest.importorskip("matplotlib", reason="python3-matplotlib is missing (scripts/install_deps.sh installs it)")
    from ukb import plot
    names = [os.path.basename(p) for p in plot.plot_run(tmp_path / "o")]
    for png in ("sensitivity_s_final.png", "sensitivity_t_stop.png"):
        assert png in names, names
        with open(tmp_path / "o" / "plots" / png, "rb") as f:
            assert f.read(4) == b"\x89PNG", png


def test_a_run_with_a_stop_rule_from_python_ends_where_its_target_is_met_and_is_drawn(tmp_path):
    """[stop] through ukb.run: the table has the samples of the check that met
    the target, summary.json says so, and ukb.plot draws the checks."""
    cfg = {"model": "incline_block", "samples": 100000, "seed": 4, "sampling": "sobol", "replicates": 8,
           "integrator": {"dt": 0.01, "t_end": 3.0},
           "params": {"alpha": 0.1, "mu": {"dist": "uniform", "min": 0.3, "max": 0.6}},
           "initial": {"v": {"dist": "uniform", "min": 1.5, "max": 2.5}},
           "stop": {"statistic": "mean(s_final)", "rel_halfwidth": 1e-4}}
    table, summary = ukb.run(cfg, out=tmp_path / "o", progress=False)
    stop = summary["stop"]
    assert stop["met"] and stop["max_samples"] == 100000
    assert len(table) == stop["samples"] == summary["samples"] < 100000
    last = stop["checks"][-1]
    assert last["halfwidth"] <= 1e-4 * abs(last["estimate"])
    assert all(k["halfwidth"] > 1e-4 * abs(k["estimate"]) for k in stop["checks"][:-1])
    pytest.importorskip("matplotlib", reason="python3-matplotlib is missing (scripts/install_deps.sh installs it)")
    from ukb import plot
    assert "stop.png" in [os.path.basename(p) for p in plot.plot_run(tmp_path / "o")]


def salib_layout(y, d):
    """ukb's [sensitivity] rows per base point (A, B, A_B^1 .. A_B^d) in
    SALib's order (A, A_B^1 .. A_B^d, B): docs/python.md's example."""
    rows = y.reshape(-1, d + 2)
    return np.concatenate([rows[:, :1], rows[:, 2:], rows[:, 1:2]], axis=1).ravel()


def test_sensitivity_indices_agree_with_salibs_on_the_same_samples():
    """SALib (from PyPI: pip install SALib; skipped without it) on ukb's own
    samples: the total indices to rounding (Jansen's estimator is the same
    and does not depend on where the values are centred), the first-order
    ones within SALib's confidence (SALib centres on the mean of every row,
    ukb on the mean of the A and B rows)."""
    sobol = pytest.importorskip("SALib.analyze.sobol", reason="SALib is not installed (pip install SALib)")
    cfg = {"model": "incline_block", "samples": 5 * 512, "seed": 3, "sampling": "sobol",
           "integrator": {"dt": 0.01, "t_end": 3.0},
           "params": {"alpha": {"dist": "uniform", "min": 0.05, "max": 0.15},
                      "mu": {"dist": "uniform", "min": 0.3, "max": 0.6}},
           "initial": {"v": {"dist": "uniform", "min": 1.5, "max": 2.5}},
           "sensitivity": {"outputs": ["s_final"]}}
    table, summary = ukb.run(cfg, progress=False)
    ours = summary["sensitivity"]["outputs"]["s_final"]
    names = summary["sensitivity"]["inputs"]
    assert names == ["alpha", "mu", "v"]
    problem = {"num_vars": 3, "names": names, "bounds": [[0.05, 0.15], [0.3, 0.6], [1.5, 2.5]]}
    s = sobol.analyze(problem, salib_layout(table["s_final"], 3), calc_second_order=False, seed=1)
    for j, x in enumerate(names):
        assert abs(ours["total"][x] - s["ST"][j]) <= 1e-9 * abs(s["ST"][j]) + 1e-12, x
        assert abs(ours["first"][x] - s["S1"][j]) <= s["S1_conf"][j], x


def test_the_quantiles_behind_the_intervals_are_scipys():
    """The normal and Student's t quantiles that summary.json's intervals use
    (ukb._core) against scipy.stats.norm.ppf and t.ppf, at the levels and
    degrees of freedom a run can ask for. SciPy 1.10's t.ppf is itself
    good to about 4e-9 here (for one degree of freedom it is 1.5e-11 from
    the Cauchy quantile tan(pi (p - 1/2)), which ukb's gives to the last
    bits): the t quantiles are compared within 1e-8."""
    stats = pytest.importorskip("scipy.stats")
    for p in (0.5, 0.8, 0.95, 0.975, 0.995, 0.9995, 1 - 1e-9):
        assert abs(ukb._core.normal_quantile(p) - stats.norm.ppf(p)) <= 4e-16 * max(1.0, abs(stats.norm.ppf(p))), p
        if p > 0.9995:
            continue  # confidence levels up to 0.999 for the t quantiles
        for dof in (1, 2, 3, 4, 7, 15, 31, 200, 999, 1001, 5000):
            want = stats.t.ppf(p, dof)
            assert abs(ukb._core.t_quantile(p, dof) - want) <= 1e-8 * max(1.0, abs(want)), (p, dof)
        assert abs(ukb._core.t_quantile(p, 1) - math.tan(math.pi * (p - 0.5))) <= 4e-16 * math.tan(math.pi * (p - 0.5)) + 1e-300
        assert abs(ukb._core.t_quantile(p, 2) - (2 * p - 1) / math.sqrt(2 * p * (1 - p))) <= 1e-15 * max(1.0, ukb._core.t_quantile(p, 2))
