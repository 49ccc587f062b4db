"""A model file from Python: compiled on first use, then simulated, against
its closed form and against the `ukb` executable."""
import os

import numpy as np

import ukb
from conftest import cli_json


def resting_position(x0, mu, k=10.0, m=1.0, g=9.81):
    """A block released at rest at x0 on a spring (stiffness k) on a rough
    floor: each half swing is harmonic about +-d, d = mu m g / k (the centre
    shifted by friction), so its turning points are |x| - 2 d in turn, and it
    sticks at the first one where |k x| <= mu m g (static friction holds)."""
    d = mu * m * g / k
    x = x0
    while abs(x) > d:
        x = -np.sign(x) * (abs(x) - 2 * d)
    return x


def test_a_model_file_runs_from_python(tmp_path, source_dir, monkeypatch):
    # The cache of the C++ model-file tests (tests/models/test_model_files.cpp,
    # example_cache; ctest sets UKB_TEST_MODEL_CACHE): ctest runs this after
    # the test that compiles spring_block.hpp there, so the plugin is found,
    # not compiled again (either way the module loads it through the same
    # code). Run alone, it compiles into a cache of its own.
    monkeypatch.setenv("UKB_CACHE_DIR", os.environ.get("UKB_TEST_MODEL_CACHE", str(tmp_path / "cache")))
    path = os.path.join(source_dir, "examples", "models", "spring_block.hpp")
    M = ukb.model(path)
    assert M.name == "spring_block" and M.coords == ["x", "y"]
    assert [p["name"] for p in M.params] == ["m", "k", "g", "mu"]
    assert M.observables == ["spring_force"] and M.hooks["observables"]
    mu = np.array([0.05, 0.1, 0.17, 0.3])
    q0, qd0 = ukb.initial_state(M, x=1.0, v=0.0, N=mu.size)
    r = ukb.simulate(M, q0, qd0, params={"mu": mu}, dt=1e-3, t_end=30.0, event_tol=1e-12)
    assert list(r.status_name) == ["at_rest"] * 4
    expected = [resting_position(1.0, m) for m in mu]
    np.testing.assert_allclose(r.final["x"], expected, atol=1e-8)
    # The model's own observable at the end: the spring's pull, held by
    # static friction.
    np.testing.assert_array_equal(r.observables["spring_force"], -10.0 * r.final["x"])
    assert np.all(np.abs(r.observables["spring_force"]) <= mu * 9.81 * (1 + 1e-12))
    # Each system's own parameters reach its observables.
    k = np.array([5.0, 10.0, 20.0, 40.0])
    s = ukb.simulate(M, q0, qd0, params={"k": k, "mu": 0.0}, dt=1e-3, steps=20)
    assert list(s.status_name) == ["max_steps"] * 4 or list(s.status_name) == ["finished"] * 4
    np.testing.assert_array_equal(s.observables["spring_force"], -k * s.final["x"])
    assert len(set(s.observables["spring_force"])) == 4
    # The same acceleration as `ukb accel --model FILE` (the same cached plugin).
    a = ukb.accel(path, [0.4, 0.0], [0.3, 0.0], mu=0.25)
    j = cli_json("accel", "--model", path, "--param", "mu=0.25", "--q", "0.4,0", "--qd", "0.3,0")
    assert list(a.qdd) == j["qdd"]
    np.testing.assert_allclose(a.qdd[0], -10 * 0.4 - 0.25 * 9.81, rtol=1e-14)


def test_a_model_files_energy_balance_checks_its_friction_against_the_law(tmp_path, source_dir, monkeypatch):
    # The model file's friction and stick-slip against the power of Coulomb's
    # law on a flat floor, -mu m g |v|, through every swing to rest; the same
    # run claimed conservative fails, except where mu = 0.
    monkeypatch.setenv("UKB_CACHE_DIR", os.environ.get("UKB_TEST_MODEL_CACHE", str(tmp_path / "cache")))
    path = os.path.join(source_dir, "examples", "models", "spring_block.hpp")
    mu = np.array([0.0, 0.05, 0.2])
    q0, qd0 = ukb.initial_state(path, x=1.0, v=0.5, N=mu.size)
    law = ukb.energy_balance(path, q0, qd0, params={"mu": mu}, dt=1e-3, t_end=15.0, event_tol=1e-12,
                             power=lambda q, qd, t, p: -p["mu"] * p["m"] * p["g"] * abs(qd[0]))
    assert law.passed, law.message
    assert list(law.status_name) == ["finished", "at_rest", "at_rest"]
    assert np.all(law.relative < 1e-7), law.relative
    free = ukb.energy_balance(path, q0, qd0, params={"mu": mu}, dt=1e-3, t_end=15.0, event_tol=1e-12)
    assert not free.passed
    assert free.relative[0] < 1e-9 and np.all(free.relative[1:] > 0.5), free.relative


def test_a_model_file_on_cuda_loads_its_cuda_backend_or_says_there_is_no_device(tmp_path, source_dir, monkeypatch):
    # backend="cuda" with a model file's path: the file is loaded with its
    # cuda backend (as `ukb accel --backend cuda` does) once a device is
    # found; where there is none, BackendUnavailable says so before anything
    # is compiled. A ukb.Model loaded without it names the fix.
    monkeypatch.setenv("UKB_CACHE_DIR", os.environ.get("UKB_TEST_MODEL_CACHE", str(tmp_path / "cache")))
    path = os.path.join(source_dir, "examples", "models", "spring_block.hpp")
    count, _ = ukb._core.cuda_devices()
    if count == 0:
        for call in (lambda: ukb.accel(path, [0.4, 0.0], [0.3, 0.0], backend="cuda"),
                     lambda: ukb.simulate(path, [[0.4, 0.0]], [[0.3, 0.0]], dt=1e-3, steps=2, backend="cuda")):
            try:
                call()
            except ukb.BackendUnavailable as e:
                assert "backend 'cuda'" in str(e) and "backend='cpu'" in str(e), str(e)
            else:
                raise AssertionError("no device, yet the cuda backend ran")
        return
    a = ukb.accel(path, [0.4, 0.0], [0.3, 0.0], mu=0.25, backend="cuda")
    np.testing.assert_allclose(a.qdd[0], -10 * 0.4 - 0.25 * 9.81, rtol=1e-14)
    M = ukb.model(path)  # the cpu plugin alone, unless the cuda one was loaded first
    try:
        b = ukb.accel(M, [0.4, 0.0], [0.3, 0.0], mu=0.25, backend="cuda")
    except ukb.BackendUnavailable as e:
        assert "cuda=True" in str(e), str(e)
    else:
        np.testing.assert_allclose(b.qdd[0], -10 * 0.4 - 0.25 * 9.81, rtol=1e-14)
