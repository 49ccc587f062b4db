"""Bad input reaches the user as a Python exception of the right type whose
message names the argument, what was given and what was expected; every
error of the C++ side arrives with its message, never as a crash; and
nothing leaks over many calls."""
import gc
import os
import sys

import numpy as np
import pytest

import ukb

RING_Q, RING_QD = ukb.initial_state("bead_on_ring", theta=np.zeros(4))


def sim(**kw):
    args = dict(q0=RING_Q, qd0=RING_QD, dt=0.01, t_end=1.0)
    args.update(kw)
    return ukb.simulate("bead_on_ring", args.pop("q0"), args.pop("qd0"), **args)


def ring_dict(**over):
    c = {"model": "bead_on_ring", "samples": 10, "integrator": {"dt": 0.01, "t_end": 1.0}}
    c.update(over)
    return c


CASES = [
    # (what, call, exception, words in the message)
    ("a misspelt model", lambda: ukb.model("bead_on_rign"), ValueError, ["bead_on_rign", "did you mean 'bead_on_ring'"]),
    ("a model that is not a name", lambda: ukb.model(42), TypeError, ["model", "int"]),
    ("a model file that does not exist", lambda: ukb.model("no/such/model.hpp"), ukb.ModelFileError, ["no/such/model.hpp"]),
    ("q of the wrong length", lambda: ukb.accel("bead_on_ring", [1, 0, 0], [0, 0]), ValueError, ["q", "(2,)", "(3,)"]),
    ("q of text", lambda: ukb.accel("bead_on_ring", ["1", "0"], [0, 0]), TypeError, ["q", "real numbers", "<U1"]),
    ("an unknown backend", lambda: ukb.accel("bead_on_ring", [1, 0], [0, 0], backend="gpu"), ValueError, ["backend", "'gpu'", "cpu"]),
    ("a misspelt parameter", lambda: ukb.accel("bead_on_ring", [1, 0], [0, 0], muu=0.1), ValueError, ["muu", "did you mean 'mu'"]),
    ("a parameter out of range", lambda: ukb.accel("bead_on_ring", [1, 0], [0, 0], mu=-1), ValueError, ["mu", "-1", ">= 0"]),
    ("a subnormal parameter", lambda: ukb.accel("bead_on_ring", [1, 0], [0, 0], m=5e-324), ValueError, ["'m'", "5e-324", "> 0"]),
    ("a subnormal parameter in a config (the C++ check)", lambda: ukb.run(ring_dict(params={"m": 1e-310}), progress=False), ukb.ConfigError, ["params.m", "subnormal"]),
    ("a time that is not finite", lambda: ukb.accel("bead_on_ring", [1, 0], [0, 0], t=float("nan")), ValueError, ["t", "finite"]),
    ("q0 of the wrong width", lambda: sim(q0=np.zeros((4, 3))), ValueError, ["q0", "(N, 2)", "(4, 3)"]),
    ("qd0 of another shape than q0", lambda: sim(qd0=np.zeros((3, 2))), ValueError, ["qd0", "(4, 2)", "(3, 2)"]),
    ("q0 with NaN", lambda: sim(q0=np.array([[1.0, 0], [np.nan, 0], [1, 0], [1, 0]])), ValueError, ["q0", "system 1", "coordinate x", "nan"]),
    ("complex q0", lambda: sim(q0=RING_Q.astype(complex)), TypeError, ["q0", "complex"]),
    ("a parameter array of the wrong length", lambda: sim(params={"mu": np.ones(3)}), ValueError, ["mu", "(4,)", "(3,)"]),
    ("a parameter out of range in one system", lambda: sim(params={"R": np.array([1, 1, 0, 1.0])}), ValueError, ["'R'", "system 2", "> 0"]),
    ("neither t_end nor steps", lambda: sim(t_end=None), ValueError, ["t_end", "steps"]),
    ("a negative step", lambda: sim(dt=-0.01), ValueError, ["dt", "-0.01"]),
    ("an event tolerance wider than the step", lambda: sim(event_tol=1e300), ValueError, ["event_tol", "at most dt", "1e+300"]),
    ("an event tolerance wider than dt_max", lambda: sim(method="dopri5", dt_max=0.5, event_tol=0.75), ValueError, ["event_tol", "at most dt_max = 0.5"]),
    ("an inconsistent initial state", lambda: sim(q0=RING_Q * np.array([[1], [1], [1.5], [1]])), ValueError, ["system 2", "violates the constraints", "initial_tol"]),
    ("an unknown method", lambda: sim(method="euler"), ValueError, ["method", "'euler'"]),
    ("an unknown stabilisation", lambda: sim(stabilization="magic"), ValueError, ["stabilization", "'magic'"]),
    ("Baumgarte too fast for the step (the C++ check)", lambda: sim(stabilization="baumgarte", baumgarte_alpha=1000.0), ValueError, ["stabilization", "Baumgarte rates are too fast", "dt = 0.01"]),
    ("an option of another method", lambda: sim(rtol=1e-8), ValueError, ["rtol", "applies to method = \"dopri5\" only", "\"rk4\""]),
    ("an option out of its range (the C++ table)", lambda: sim(method="dopri5", rtol=2.0), ValueError, ["rtol", "expected a relative tolerance in (0, 1), got 2"]),
    ("an unknown integrator option", lambda: sim(dtt=0.1), ValueError, ["dtt", "did you mean 'dt'", "options: method, dt,"]),
    ("an option misspelt", lambda: sim(projection_tool=1e-9), ValueError, ["projection_tool", "did you mean 'projection_tol'"]),
    ("a config file's name for an option", lambda: sim(stabilization="projection", max_iter=3), ValueError, ["did you mean 'projection_iters'"]),
    ("a negative thread count", lambda: sim(threads=-1), ValueError, ["threads", "-1"]),
    ("an initial quantity out of range", lambda: ukb.initial_state("rolling_sphere", theta=[1.0, -1.0]), ValueError, ["'theta'", "system 1", "> 0"]),
    ("a choice that is not one", lambda: ukb.initial_state("two_link_arm", elbow=0.5), ValueError, ["'elbow'", "one of 1, -1"]),
    ("an unknown initial quantity", lambda: ukb.initial_state("bead_on_ring", theta=0, omegaa=1), ValueError, ["omegaa", "did you mean 'omega'"]),
    ("a config key misspelt (the C++ parser)", lambda: ukb.run(ring_dict(sampels=10), progress=False), ukb.ConfigError, ["sampels", "samples"]),
    ("a config value of another type", lambda: ukb.run(ring_dict(samples="ten"), progress=False), ukb.ConfigError, ["samples", "integer"]),
    ("a config value Python cannot write", lambda: ukb.run(ring_dict(seed=object()), progress=False), TypeError, ["seed", "object"]),
    ("a config file that does not exist", lambda: ukb.run("no_such_config.toml", progress=False), ukb.ConfigError, ["no_such_config.toml"]),
    ("a step count that is a bool", lambda: sim(steps=True), ValueError, ["steps", "True"]),
    ("a thread count beyond int", lambda: sim(threads=2 ** 40), ValueError, ["threads", str(2 ** 40)]),
    ("an integer with no exact double", lambda: ukb.accel("bead_on_ring", [2 ** 53 + 1, 0], [0, 0]), ValueError, ["q", str(2 ** 53 + 1), "exact"]),
    ("an option of the wrong type", lambda: sim(monitor="no"), ValueError, ["monitor", "'no'"]),
    ("an integer option out of range", lambda: sim(projection_iters=2 ** 40), ValueError, ["projection_iters"]),
    ("a negative initial_tol", lambda: sim(initial_tol=-1.0), ValueError, ["initial_tol", "-1.0"]),
    ("t0 that is text", lambda: sim(t0="x"), ValueError, ["t0", "'x'"]),
    ("params that are not a dict", lambda: ukb.initial_state("bead_on_ring", params=[1, 2]), TypeError, ["params", "list"]),
    ("resume without out", lambda: ukb.run(ring_dict(), resume=True), ValueError, ["resume", "out"]),
]


@pytest.mark.parametrize("what,call,exc,words", CASES, ids=[c[0] for c in CASES])
def test_bad_input_raises_a_useful_exception(what, call, exc, words):
    with pytest.raises(exc) as info:
        call()
    for w in words:
        assert w in str(info.value), f"{what}: {w!r} not in {str(info.value)!r}"


def test_a_backend_that_cannot_run_here_is_an_exception_not_a_crash():
    try:
        r = ukb.simulate("bead_on_ring", RING_Q, RING_QD, dt=0.01, t_end=0.1, backend="cuda")
    except ukb.BackendUnavailable as e:
        assert "cuda" in str(e)
    else:  # a machine with a GPU: it ran, and agrees with the cpu backend's statuses
        assert list(r.status_name) == ["finished"] * 4


def test_an_output_directory_that_holds_another_runs_checkpoint_is_refused(tmp_path):
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "checkpoint.ukb").write_bytes(b"x")
    with pytest.raises(ukb.ConfigError) as info:
        ukb.run(ring_dict(), out=tmp_path / "out", progress=False)
    assert "checkpoint" in str(info.value)


def rss_bytes():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def test_nothing_leaks_over_a_thousand_calls():
    q0, qd0 = ukb.initial_state("bead_on_ring", theta=np.zeros(2000))
    mu = np.full(2000, 0.3)
    refs = [sys.getrefcount(x) for x in (q0, qd0, mu)]

    def calls(n=1000):
        for _ in range(n):
            r = ukb.simulate("bead_on_ring", q0, qd0, params={"mu": mu}, dt=0.01, steps=1, record_every=1)
            assert r.q.shape == (2000, 2)
            e = ukb.accel("bead_on_ring", q0[0], qd0[0], mu=0.3)
            assert e.status == "ok"
            with pytest.raises(ValueError):
                ukb.accel("bead_on_ring", q0[0], qd0[0], mu=-1)

    calls(100)  # warm-up: caches, lazily allocated pools
    gc.collect()
    objects, rss = len(gc.get_objects()), rss_bytes()
    calls()
    gc.collect()
    assert [sys.getrefcount(x) for x in (q0, qd0, mu)] == refs
    assert len(gc.get_objects()) - objects < 100
    # Each call's ensemble (about 2000 systems x 40 fields x 8 bytes = 640 kB)
    # and trajectory are freed with their arrays: 1000 kept would be > 600 MB.
    assert rss_bytes() - rss < 64 << 20
