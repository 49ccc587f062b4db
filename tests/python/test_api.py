"""ukb.models, ukb.model, ukb.accel, ukb.initial_state and ukb.simulate
against independent truths: the ring's closed form, the `ukb accel`
executable, the Monte Carlo driver (`ukb run`, the C++ API), and themselves
under other threads, chunks and lanes."""
import math
import os
import subprocess
import sys

import numpy as np
import pytest

import ukb
from conftest import cli, cli_json

G = 9.81


def ring_closed_form(R, mu, x, y, xd, yd, m=1.0, g=G):
    """q'' of a bead on a vertical ring (gravity along -y) with Coulomb
    friction mu |N| against the sliding velocity, from Newton's law in polar
    coordinates (the source paper's example): the normal force is what keeps
    the bead on the circle, N = m (g sin th - R w^2) along the radius."""
    th = math.atan2(y, x)
    w = (x * yd - y * xd) / R ** 2
    normal = m * (g * math.sin(th) - R * w * w)
    tangential = -m * g * math.cos(th) - mu * abs(normal) * np.sign(w)
    wd = tangential / (m * R)
    e_t = np.array([-math.sin(th), math.cos(th)])
    e_r = np.array([math.cos(th), math.sin(th)])
    return R * wd * e_t - R * w * w * e_r


def test_models_list_every_builtin_with_coordinates_parameters_and_hooks():
    ms = ukb.models()
    names = [m.name for m in ms]
    for expected in ("bead_on_ring", "planar_chain_6", "chaplygin_sleigh", "rolling_sphere"):
        assert expected in names
    listed = cli("models")[1]
    for n in names:
        assert n in listed  # the same models as `ukb models`
    ring = ukb.model("bead_on_ring")
    assert (ring.n, ring.m, ring.coords) == (2, 1, ["x", "y"])
    mu = [p for p in ring.params if p["name"] == "mu"][0]
    assert mu["default"] == 0.2 and mu["range"] == ">= 0"
    assert ring.hooks["events"] and ring.hooks["potential"]
    # M = m I: the kernels factor its diagonal; the arm's M is not diagonal.
    assert ring.hooks["mass_diagonal"] and not ukb.model("two_link_arm").hooks["mass_diagonal"]
    # A chain's rows touch four columns each; the ring's one row all of its two.
    assert ukb.model("planar_chain_6").hooks["constraint_columns"] and not ring.hooks["constraint_columns"]
    assert [p["name"] for p in ring.initial] == ["theta", "omega"]


@pytest.mark.parametrize("backend", ["cpu", "reference"])
def test_accel_agrees_with_the_closed_form_and_with_the_cli(backend):
    rng = np.random.default_rng(7)
    for _ in range(20):
        R, mu = rng.uniform(0.5, 2.0), rng.uniform(0.0, 0.6)
        th, w = rng.uniform(-np.pi, np.pi), rng.uniform(-3, 3)
        q = np.array([R * math.cos(th), R * math.sin(th)])
        qd = R * w * np.array([-math.sin(th), math.cos(th)])
        r = ukb.accel("bead_on_ring", q, qd, backend=backend, R=R, mu=mu)
        expected = ring_closed_form(R, mu, *q, *qd)
        assert r.status == "ok" and r.rank == 1
        np.testing.assert_allclose(r.qdd, expected, rtol=0, atol=1e-12 * (1 + np.linalg.norm(expected)))
        # The same numbers as `ukb accel` prints (17 significant digits).
        j = cli_json("accel", "--model", "bead_on_ring", "--backend", backend, "--param", f"R={R!r}",
                     "--param", f"mu={mu!r}", "--q", ",".join(repr(float(v)) for v in q),
                     "--qd", ",".join(repr(float(v)) for v in qd))
        for key in ("qdd", "Qc_ideal", "Qc_nonideal", "lambda"):
            assert list(r[key]) == j[key], key
        assert r.rank == j["rank"] and r.status == j["status"]
    # Guard: friction changes the acceleration here.
    a = ukb.accel("bead_on_ring", [0.6, 0.8], [-0.8, 0.6], mu=0.0).qdd
    b = ukb.accel("bead_on_ring", [0.6, 0.8], [-0.8, 0.6], mu=0.5).qdd
    assert np.linalg.norm(a - b) > 0.1


def test_initial_quantities_not_given_take_their_defaults():
    # two_link_arm's elbow is one of 1, -1, default 1: as in a config.
    a = ukb.initial_state("two_link_arm", theta1=0.5)
    b = ukb.initial_state("two_link_arm", theta1=0.5, elbow=1.0)
    c = ukb.initial_state("two_link_arm", theta1=0.5, elbow=-1.0)
    np.testing.assert_array_equal(a[0], b[0])
    assert not np.array_equal(a[0], c[0])


def test_initial_state_puts_the_bead_on_the_ring_at_its_angle():
    th = np.linspace(-3, 3, 7)
    q, qd = ukb.initial_state("bead_on_ring", theta=th, omega=0.5, params={"R": 2.0})
    np.testing.assert_allclose(q, 2.0 * np.c_[np.cos(th), np.sin(th)], atol=1e-15)
    np.testing.assert_allclose(qd, 2.0 * 0.5 * np.c_[-np.sin(th), np.cos(th)], atol=1e-15)


def ring_config(samples, backend="cpu"):
    return {"model": "bead_on_ring", "samples": samples, "seed": 11, "backend": backend, "threads": 2,
            "integrator": {"dt": 0.01, "t_end": 60.0, "event_tol": 1e-10, "chunk": 64},
            "params": {"mu": {"dist": "uniform", "min": 0.05, "max": 0.5}},
            "initial": {"theta": 0.3, "omega": -0.2}}


@pytest.mark.parametrize("backend,samples,method", [("cpu", 300, "rk4"), ("reference", 40, "rk4"),
                                                  ("cpu", 100, "dopri5")])
def test_simulate_gives_bit_for_bit_the_results_of_the_cpp_driver(backend, samples, method):
    config = ring_config(samples, backend)
    adaptive = {"rtol": 1e-8, "atol": 1e-10} if method == "dopri5" else {}
    config["integrator"].update(method=method, **adaptive)
    table, _ = ukb.run(config, progress=False)
    mu = table["mu"]
    q0, qd0 = ukb.initial_state("bead_on_ring", theta=0.3, omega=-0.2, N=mu.size)
    r = ukb.simulate("bead_on_ring", q0, qd0, params={"mu": mu}, dt=0.01, t_end=60.0, event_tol=1e-10,
                     backend=backend, method=method, **adaptive)
    assert list(r.status_name) == list(table["status"])
    assert (table["status"] == "at_rest").sum() > samples // 2  # the events are exercised
    for col, mine in (("t_final", r.t), ("t_stop", r.t_stop), ("theta_final", r.final["theta"]),
                      ("q_x_final", r.q[:, 0]), ("qd_y_final", r.qd[:, 1]), ("steps", r.counters["steps"]),
                      ("events", r.counters["events"]), ("energy_end", r.energy_end),
                      ("res_pos_max", r.counters["res_pos_max"])):
        np.testing.assert_array_equal(mine, table[col], err_msg=col)


def test_threads_chunks_and_lanes_do_not_change_results():
    N = 257
    rng = np.random.default_rng(3)
    th = rng.uniform(-1, 1, N)
    q0, qd0 = ukb.initial_state("bead_on_ring", theta=th, omega=rng.uniform(-2, 2, N))
    mu = rng.uniform(0, 0.5, N)
    runs = [ukb.simulate("bead_on_ring", q0, qd0, params={"mu": mu}, dt=0.01, t_end=5.0, threads=t, chunk=c,
                         simd=s, record_every=40)
            for t, c, s in ((1, 64, True), (2, 1, True), (2, 7, False))]
    for other in runs[1:]:
        for key in ("q", "qd", "t", "t_stop", "status", "traj_q", "traj_t"):
            np.testing.assert_array_equal(runs[0][key], other[key], err_msg=key)


def test_shapes_dtypes_statuses_and_a_failing_system_in_a_batch():
    # rolling_sphere at theta = 0 is gimbal lock: its mass matrix is
    # singular, and that system alone fails.
    q0 = np.array([[0, 0, 0, 1.0, 0], [0, 0, 0, 0.0, 0], [0, 0, 0, 2.0, 0]])
    qd0 = np.zeros_like(q0)
    r = ukb.simulate("rolling_sphere", q0, qd0, params={"Fx": 1.0}, dt=1e-3, steps=50, record_every=10)
    # steps without t_end: the systems that take them all are finished.
    assert list(r.status_name) == ["finished", "failed_mass_matrix", "finished"]
    assert r.q.shape == (3, 5) and r.q.dtype == np.float64
    assert r.status.dtype == np.int32 and r.counters["steps"].dtype == np.int64
    assert list(r.counters["steps"]) == [50, 0, 50]
    assert r.traj_q.shape == (3, 6, 5) and r.traj_t.shape == (3, 6)
    np.testing.assert_allclose(r.traj_t[0], np.arange(6) * 0.01, atol=1e-15)
    # The failing system: its row after the call in which it failed holds
    # its last good state (the start), NaN after that.
    assert r.traj_t[1, 0] == r.traj_t[1, 1] == 0 and np.isnan(r.traj_t[1, 2:]).all()
    # The sphere's centre under a constant force: x'' = 5 F / (7 m).
    np.testing.assert_allclose(r.q[0, 0], 5 / 7 * 0.5 * 0.05 ** 2, rtol=1e-10)
    # Adaptive steps: the dopri5 counters come with them.
    a = ukb.simulate("bead_on_ring", *ukb.initial_state("bead_on_ring", theta=0.0), dt=0, t_end=10.0,
                     method="dopri5", rtol=1e-8, atol=1e-10)
    assert {"rejected", "rhs_evals"} <= set(a.counters)
    assert a.status_name[0] == "at_rest"
    # A step limit before t_end: max_steps.
    m = ukb.simulate("bead_on_ring", *ukb.initial_state("bead_on_ring", theta=0.0), dt=0.01, t_end=10.0, steps=5)
    assert m.status_name[0] == "max_steps" and m.counters["steps"][0] == 5


def test_outputs_are_views_of_the_solvers_memory_not_copies():
    q0, qd0 = ukb.initial_state("bead_on_ring", theta=np.zeros(10))
    r = ukb.simulate("bead_on_ring", q0, qd0, dt=0.01, steps=30, record_every=10)
    owner = r.q.base
    assert type(owner).__name__ == "PyCapsule" and not r.q.flags.owndata
    # One ensemble's fields: every array has the same owner, structure of
    # arrays (x of every system, then y), so q is an (N, n) column-major view.
    for a in (r.qd, r.t, r.status, r.t_stop, r.counters["steps"]):
        assert a.base is owner
    assert r.q.strides == (8, 8 * 10)
    assert r.traj_q.base is r.traj_t.base and np.may_share_memory(r.traj_q, r.traj_t)
    assert not np.shares_memory(r.traj_q, r.q)
    e = ukb.accel("bead_on_ring", [1.0, 0.0], [0.0, 0.0])
    assert type(e.qdd.base).__name__ == "PyCapsule"


def test_python_dash_m_ukb_runs_the_command_line():
    # python -m ukb ARGS is the `ukb` executable beside the package (in the
    # build tree build/bin/ukb for build/python/ukb): the same output.
    p = subprocess.run([sys.executable, "-m", "ukb", "accel", "--model", "bead_on_ring", "--q", "1,0", "--qd", "0,-1"],
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert p.stdout == cli("accel", "--model", "bead_on_ring", "--q", "1,0", "--qd", "0,-1")[1]
    bad = subprocess.run([sys.executable, "-m", "ukb", "accel", "--model", "no_such_model", "--q", "1,0", "--qd", "0,0"],
                         capture_output=True, text=True)
    assert bad.returncode == 2 and "no_such_model" in bad.stderr


def ring_friction_power(q, qd, t, p):
    """The power of the ring's Coulomb friction from Newton's law alone:
    -mu |N| |v|, N = m (g sin th - R w^2) (ring_closed_form)."""
    th = math.atan2(q[1], q[0])
    w = (q[0] * qd[1] - q[1] * qd[0]) / p["R"] ** 2
    normal = p["m"] * (p["g"] * math.sin(th) - p["R"] * w * w)
    return -p["mu"] * abs(normal) * p["R"] * abs(w)


def test_energy_balance_holds_where_the_power_is_the_physics_and_fails_where_it_is_not():
    # Below the ring's horizontal diameter the normal force keeps its sign
    # (its kink where it passes zero would cost the rule and RK4 their order).
    mu = np.array([0.0, 0.1, 0.3, 0.5])
    q0, qd0 = ukb.initial_state("bead_on_ring", params={"R": 0.7}, theta=-1.3, omega=3.0, N=mu.size)
    common = dict(params={"mu": mu, "R": 0.7}, t_end=0.6)
    last = lambda a: np.array([row[np.isfinite(row)][-1] for row in a])
    # Friction from Newton's law: the model's energy follows it to RK4's
    # O(dt^4).
    ok = ukb.energy_balance("bead_on_ring", q0, qd0, power=ring_friction_power, dt=1e-3, rtol=1e-8, **common)
    assert ok.passed, ok.message
    assert list(ok.status_name) == ["finished"] * 4
    assert last(ok.work)[0] == 0 and np.all(last(ok.work)[1:] < -0.2 * ok.scale[1:]), (last(ok.work), ok.scale)
    np.testing.assert_allclose(last(ok.energy_change), last(ok.work), rtol=1e-8, atol=1e-9)
    # The normal force from the solver's evaluation (power's fifth argument).
    with_a = ukb.energy_balance("bead_on_ring", q0, qd0, dt=1e-3, rtol=1e-8, **common,
                                power=lambda q, qd, t, p, a: -p["mu"] * np.linalg.norm(a.Qc_ideal) * np.linalg.norm(qd))
    assert with_a.passed, with_a.message
    np.testing.assert_allclose(with_a.work, ok.work, rtol=1e-9, atol=1e-12)
    # Claimed conservative, or with friction that adds energy: the balance
    # fails by the order of the friction's work, except where mu = 0.
    for wrong in (None, lambda q, qd, t, p: -ring_friction_power(q, qd, t, p)):
        bad = ukb.energy_balance("bead_on_ring", q0, qd0, power=wrong, dt=1e-3, **common)
        assert not bad.passed and "FAILS" in bad.message and bad.worst != 0
        assert bad.relative[0] < 1e-9 and np.all(bad.relative[1:] > 0.2), bad.relative
    # The rule's order matches RK4's: at coarse steps the mismatch falls
    # about 16-fold when dt is halved.
    coarse = [ukb.energy_balance("bead_on_ring", q0, qd0, power=ring_friction_power, dt=h, **common).mismatch
              for h in (2e-2, 1e-2)]
    assert np.all(coarse[0] > 1e-9) and np.all(coarse[0] / coarse[1] > 8), coarse


def test_energy_balance_refuses_what_it_cannot_check():
    q0, qd0 = ukb.initial_state("bead_on_ring", theta=0.3, omega=1.0)
    for call, text in ((lambda: ukb.energy_balance("bead_on_ring", q0, qd0, dt=1e-3, t_end=1, method="dopri5"),
                        "RK4 at fixed steps"),
                       (lambda: ukb.energy_balance("bead_on_ring", q0, qd0, dt=1e-3, t_end=1, power=3.0),
                        "power: expected a function"),
                       (lambda: ukb.energy_balance("bead_on_ring", q0, qd0, dt=1e-3, t_end=1,
                                                   power=lambda q, qd, t, p: math.nan), "power: returned nan"),
                       (lambda: ukb.energy_balance("bead_on_ring", q0, qd0, dt=1e-3, t_end=1, rtol=0),
                        "rtol: expected a number > 0"),
                       (lambda: ukb.energy_balance("bead_on_ring", q0, qd0, dt=1e-3, t_end=1, record_every=5),
                        "records every step itself")):
        with pytest.raises((ValueError, TypeError)) as e:
            call()
        assert text in str(e.value), str(e.value)


def test_energy_balance_does_not_pass_a_system_that_failed():
    # The ring's B has rank 1: expected_rank=0 fails the system at its first
    # step, so nothing was checked and the balance cannot hold.
    q0, qd0 = ukb.initial_state("bead_on_ring", theta=-1.3, omega=3.0)
    r = ukb.energy_balance("bead_on_ring", q0, qd0, dt=1e-3, t_end=0.1, power=ring_friction_power, expected_rank=0)
    assert list(r.status_name) == ["failed_rank"]
    assert r.relative[0] == 0 and not r.passed, (r.relative, r.message)
    assert "system 0 failed (failed_rank) at t = 0" in r.message, r.message


def test_the_balance_rule_is_exact_for_cubics_on_runs_of_equal_steps():
    # The rule behind energy_balance's work: a run of four or more equal
    # steps integrates a cubic exactly, a run of two a parabola, a single
    # step a line; a step of length zero (a located event) adds nothing.
    integral = ukb._cumulative_integral
    cubic = lambda x: 2 - x + 3 * x**2 - 0.5 * x**3
    prim = lambda x: 2 * x - x**2 / 2 + x**3 - x**4 / 8
    t = np.linspace(0.3, 1.5, 7)  # one run of six steps
    np.testing.assert_allclose(integral(t, cubic(t)), prim(t) - prim(t[0]), rtol=0, atol=1e-14)
    para = lambda x: 1 + x - 2 * x**2
    pprim = lambda x: x + x**2 / 2 - 2 * x**3 / 3
    t = np.array([0.0, 0.2, 0.4, 0.4, 0.45, 0.5])  # runs: two of 0.2, a zero step, two of 0.05
    np.testing.assert_allclose(integral(t, para(t)), pprim(t) - pprim(t[0]), rtol=0, atol=1e-15)
    line = lambda x: 4 - 3 * x
    t = np.array([0.0, 0.1, 0.35, 0.35, 1.0, 1.01])  # every step its own run
    np.testing.assert_allclose(integral(t, line(t)), 4 * t - 1.5 * t**2, rtol=0, atol=1e-15)


def test_every_run_option_of_the_table_reaches_simulate():
    # The table of run options (ukb/options.hpp) is simulate's: each option
    # is named by ukb.run_options() with its meaning, and one added to the
    # table (integrator.safety) works by its name with no Python of its own:
    # a smaller safety factor takes more steps over the same swing.
    opts = ukb.run_options()
    assert {"rtol", "atol", "event_tol", "baumgarte_alpha", "projection_iters", "safety"} <= set(opts)
    assert all(isinstance(doc, str) and doc for doc in opts.values())
    q0, qd0 = ukb.initial_state("bead_on_ring", theta=np.array([0.5, 1.0]), omega=np.array([1.0, 2.0]))
    steps = {s: ukb.simulate("bead_on_ring", q0, qd0, params={"mu": 0.0}, method="dopri5", dt=0.0, t_end=2.0,
                             events=False, safety=s).counters["steps"] for s in (0.9, 0.45)}
    assert (steps[0.45] > steps[0.9]).all(), steps
    with pytest.raises(ValueError, match="safety: expected a factor in \\(0, 1\\], got 1.5"):
        ukb.simulate("bead_on_ring", q0, qd0, method="dopri5", dt=0.0, t_end=1.0, safety=1.5)
