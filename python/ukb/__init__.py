"""ukb: batched Udwadia-Kalaba ensembles with non-ideal constraints, from numpy.

    import numpy as np, ukb
    mu = np.linspace(0.05, 0.5, 10)
    q0, qd0 = ukb.initial_state("bead_on_ring", theta=0.0, omega=0.0, N=mu.size)
    r = ukb.simulate("bead_on_ring", q0, qd0, params={"mu": mu}, dt=0.01, t_end=60.0)
    r.final["theta"], r.status, r.t_stop

Functions: models, model, accel, initial_state, simulate, run. Every error
of the C++ side arrives as a Python exception with its message: bad
arguments as ValueError or TypeError (ConfigError and ModelFileError are
ValueErrors), an output that cannot be written as WriteError (an OSError),
a backend that cannot run here as BackendUnavailable (a RuntimeError), an
exception thrown by a model's own code as ModelError (a RuntimeError).
docs/python.md has the details and examples.
"""

import json
import math
import numbers
import os
import shutil
import sys
import tempfile
import warnings

import numpy as np


def _find_toolchain():
    # Model files are compiled with the compilers ukb was built with, from
    # its toolchain record: in a pip installation in the package itself
    # (site-packages/ukb/share/ukb/), in the build tree build/share/ukb/ (this
    # package is build/python/ukb), in a CMake installation PREFIX/share/ukb/
    # (this package is PREFIX/lib/pythonX.Y/{site,dist}-packages/ukb).
    if os.environ.get("UKB_TOOLCHAIN"):
        return
    here = os.path.dirname(os.path.abspath(__file__))
    for up in (0, 2, 4):
        d = here
        for _ in range(up):
            d = os.path.dirname(d)
        f = os.path.join(d, "share", "ukb", "toolchain.json")
        if os.path.isfile(f):
            os.environ["UKB_TOOLCHAIN"] = f
            return


_find_toolchain()

from . import _core  # noqa: E402
from ._core import BackendUnavailable, ConfigError, Model, ModelError, ModelFileError, WriteError  # noqa: E402,F401

__version__ = _core.version
__all__ = ["models", "model", "accel", "initial_state", "simulate", "run_options", "sobol_points", "energy_balance", "run", "compare", "Result", "Table",
           "Model", "ConfigError", "ModelFileError", "WriteError", "BackendUnavailable", "ModelError"]

_BACKENDS = ("reference", "cpu", "cuda")
STATUSES = tuple(_core.status_names())  # status names by code


class Result(dict):
    """A dict whose keys are also attributes (r.q is r["q"])."""

    def __getattr__(self, key):
        try:
            return self[key]
        except KeyError:
            raise AttributeError(key) from None

    def __dir__(self):
        return list(self.keys()) + list(super().__dir__())


# ---------------------------------------------------------------- models


def models():
    """Every built-in model (ukb.Model: name, summary, n, m, coords, params
    with defaults and ranges, initial quantities, hooks), in a fixed order."""
    return list(_core.models())


def model(name_or_path, *, cuda=False):
    """One model: a built-in model's name, or a model file "path.hpp" or
    "path.hpp:Name" (compiled into a plugin on first use and cached;
    docs/adding-a-model.md). `cuda=True` also compiles the file for the cuda
    backend. A ukb.Model is returned as it is."""
    if isinstance(name_or_path, Model):
        return name_or_path
    if isinstance(name_or_path, os.PathLike):
        name_or_path = os.fspath(name_or_path)
    if not isinstance(name_or_path, str):
        raise TypeError(f"model: expected a model name, a model file path or a ukb.Model, "
                        f"got {type(name_or_path).__name__}")
    if "/" in name_or_path or "." in name_or_path:
        return _core.load_model_file(name_or_path, bool(cuda))
    found = _core.find_model(name_or_path)
    if found is None:
        names = [m.name for m in _core.models()]
        hint = _core.closest_match(name_or_path, names)
        raise ValueError(f"model: unknown model '{name_or_path}'"
                         + (f"; did you mean '{hint}'?" if hint else "")
                         + f" (built-in models: {', '.join(names)}; a model file is a path)")
    return found


def _backend(backend):
    if backend not in _BACKENDS:
        raise ValueError(f"backend: expected one of {', '.join(_BACKENDS)}, got {backend!r}")


def _model_on(model_, backend):
    """The model a call on `backend` evaluates: on cuda, once a device is
    found (a model file's cuda backend takes half a minute to compile), a
    model file with its cuda backend, as `ukb run` and `ukb accel` load it."""
    _backend(backend)
    if backend != "cuda":
        return model(model_)
    count, why = _core.cuda_devices()
    if count == 0:
        raise BackendUnavailable(f"backend 'cuda': {why}; use backend='cpu' or 'reference'")
    return model(model_, cuda=True)


def _float_array(name, value, ndim_ok, shape_text):
    """value as float64, converted where that is exact for its kind (bool,
    integers, floats); TypeError for anything else."""
    try:
        a = np.asarray(value)
    except Exception as e:  # ragged lists and the like
        raise ValueError(f"{name}: expected {shape_text} of numbers, got {type(value).__name__} ({e})") from None
    if a.dtype.kind not in "biuf":
        raise TypeError(f"{name}: expected {shape_text} of real numbers, got dtype {a.dtype}")
    if a.dtype.kind == "f" and a.dtype.itemsize > 8:
        raise TypeError(f"{name}: {a.dtype} would be rounded to float64; convert it yourself if that is meant")
    if a.ndim not in ndim_ok:
        raise ValueError(f"{name}: expected {shape_text}, got an array of shape {a.shape}")
    if a.dtype.kind in "iu" and a.dtype.itemsize > 4 and a.size and np.abs(a).max() > 2 ** 53:
        raise ValueError(f"{name}: {a.flat[np.argmax(np.abs(a))]} has no exact float64 value")
    return np.asarray(a, dtype=np.float64, order="C")


def _admissible(p, v):
    """Which values of the array v a parameter (or initial quantity) p
    admits (ParamInfo::admits): finite, not subnormal, and one of its
    choices or within its range."""
    # Subnormal numbers are never admitted (ParamInfo::admits).
    ok = np.isfinite(v) & ((v == 0) | (np.abs(v) >= np.finfo(np.float64).tiny))
    if p["choices"]:
        return ok & np.isin(v, p["choices"])
    return ok & ((v >= p["lower"]) if p["lower_inclusive"] else (v > p["lower"]))


def _first_bad(p, v, what, model):
    bad = np.flatnonzero(~_admissible(p, v))
    if bad.size:
        i = int(bad[0])
        raise ValueError(f"{what} '{p['name']}' of '{model}': system {i}: {v[i]!r} is not admissible "
                         f"(expected {p['range']}" + (f": {p['description']})" if p["description"] else ")"))


def _integer(name, v, lo, hi, expect):
    """v as an int in [lo, hi] (bool refused: True is not a count)."""
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, numbers.Integral) or not lo <= v <= hi:
        raise ValueError(f"{name}: expected {expect}, got {v!r}")
    return int(v)


def _real(name, v, ok, expect):
    """v as a float where ok(v) (bool refused)."""
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, numbers.Real) or not ok(float(v)):
        raise ValueError(f"{name}: expected {expect}, got {v!r}")
    return float(v)


_INT_MAX = 2 ** 31 - 1
_LONG_MAX = 2 ** 63 - 1


def _param_values(M, params, N, where):
    """The (N, np) parameter values: defaults, overridden by `params`
    (name -> scalar or array of shape (N,))."""
    names = [p["name"] for p in M.params]
    out = np.empty((N, len(names)))
    out[:] = [p["default"] for p in M.params]
    if params is None:
        params = {}
    if not isinstance(params, dict):
        raise TypeError(f"{where}: expected a dict of parameter name -> value, got {type(params).__name__}")
    for key, value in params.items():
        if key not in names:
            hint = _core.closest_match(str(key), names)
            raise ValueError(f"{where}: '{M.name}' has no parameter '{key}'"
                             + (f"; did you mean '{hint}'?" if hint else "")
                             + f" (parameters: {', '.join(names) or 'none'})")
        k = names.index(key)
        a = _float_array(f"parameter '{key}'", value, (0, 1), f"a number or an array of shape ({N},)")
        if a.ndim == 1 and a.shape[0] != N:
            raise ValueError(f"parameter '{key}': expected a number or an array of shape ({N},), "
                             f"got shape {a.shape}")
        out[:, k] = a
    for k, p in enumerate(M.params):
        _first_bad(p, out[:, k], "parameter", M.name)
    return out


# ---------------------------------------------------------------- accel


def accel(model, q, qd, t=0.0, backend="cpu", *, rank_rtol=None, params=None, **kwparams):
    """One system evaluated: the outputs of `ukb accel` as a Result with
    qdd, Qc_ideal, Qc_nonideal, lambda (numpy arrays), rank, status,
    constraint_residual and inconsistent. Parameters by name (**kwparams,
    or a dict params= for names such as t or q); the others keep their
    defaults."""
    M = _model_on(model, backend)
    params = _merge(params, kwparams, "params")
    qv = _float_array("q", q, (1,), f"an array of shape ({M.n},)")
    qdv = _float_array("qd", qd, (1,), f"an array of shape ({M.n},)")
    for name, v in (("q", qv), ("qd", qdv)):
        if v.shape != (M.n,):
            raise ValueError(f"{name}: expected an array of shape ({M.n},) for '{M.name}' "
                             f"({', '.join(M.coords)}), got shape {v.shape}")
    t = _real("t", t, math.isfinite, "a finite number")
    rank_rtol = -1.0 if rank_rtol is None else _real("rank_rtol", rank_rtol, lambda x: 0 <= x < 1, "a number in [0, 1)")
    values = _param_values(M, params, 1, "accel")[0]
    if rank_rtol < 0:
        rank_rtol = _core.default_rank_rtol()
    return Result(_core.evaluate(M, backend, list(values), list(qv), list(qdv), t, rank_rtol))


def _merge(d, kw, name):
    if d is None:
        return dict(kw)
    if not isinstance(d, dict):
        raise TypeError(f"{name}: expected a dict of name -> value, got {type(d).__name__}")
    both = set(d) & set(kw)
    if both:
        raise ValueError(f"{name}: {', '.join(sorted(both))} given twice (in {name}= and as a keyword)")
    return {**d, **kw}


# ---------------------------------------------------------------- initial states


def initial_state(model, *, N=None, params=None, quantities=None, **kwquantities):
    """q0, qd0 (arrays of shape (N, n)) from the model's natural initial
    quantities (e.g. bead_on_ring: theta, omega), each a number or an array
    of shape (N,), by keyword or in a dict quantities=; those not given take
    their defaults (model.initial: 0, or the first choice where 0 is not
    one), as in a config's [initial] table. N: the number of systems (default: the
    length of the arrays given, else 1). ValueError where a quantity is not
    admissible or no consistent state exists."""
    M = globals()["model"](model)
    if not M.initial:
        raise ValueError(f"'{M.name}' has no natural initial quantities: give q0 and qd0 directly")
    quantities = _merge(quantities, kwquantities, "quantities")
    if params is not None and not isinstance(params, dict):
        raise TypeError(f"params: expected a dict of parameter name -> value, got {type(params).__name__}")
    names = [p["name"] for p in M.initial]
    sizes = [np.size(v) for v in quantities.values() if np.ndim(v) > 0]
    sizes += [np.size(v) for v in (params or {}).values() if np.ndim(v) > 0]
    N = _integer("N", max(sizes) if sizes else 1, 1, _INT_MAX, "an integer >= 1") if N is None else \
        _integer("N", N, 1, _INT_MAX, "an integer in [1, 2^31 - 1]")
    ic = np.empty((N, len(names)))
    ic[:] = [p["default"] for p in M.initial]
    for key, value in quantities.items():
        if key not in names:
            hint = _core.closest_match(key, names)
            raise ValueError(f"initial_state: '{M.name}' has no initial quantity '{key}'"
                             + (f"; did you mean '{hint}'?" if hint else "")
                             + f" (quantities: {', '.join(names)})")
        a = _float_array(key, value, (0, 1), f"a number or an array of shape ({N},)")
        if a.ndim == 1 and a.shape[0] != N:
            raise ValueError(f"{key}: expected a number or an array of shape ({N},), got shape {a.shape}")
        ic[:, names.index(key)] = a
    for k, p in enumerate(M.initial):
        _first_bad(p, ic[:, k], "initial quantity", M.name)
    P = _param_values(M, params, N, "initial_state")
    q, qd, ok = _core.initial_states(M, P, ic)
    if not ok.all():
        i = int(np.flatnonzero(~ok)[0])
        raise ValueError(f"initial_state: system {i}: no state of '{M.name}' satisfies the constraints for "
                         + ", ".join(f"{n} = {ic[i, k]!r}" for k, n in enumerate(names))
                         + f" (what each quantity means and admits: ukb.model('{M.name}').initial)")
    return q, qd


# ---------------------------------------------------------------- simulate


def simulate(model, q0, qd0, *, params=None, dt, t_end=None, steps=None, t0=0.0, backend="cpu",
             method="rk4", rtol=None, atol=None, dt_min=None, dt_max=None, event_tol=None,
             stabilization=None, events=True, record_every=None, threads=None, chunk=None, simd=True,
             initial_tol=1e-9, **integrator):
    """Integrates a batch of N systems from numpy arrays.

    q0, qd0: shape (N, n) (or (n,) for one system); params: name -> number
    or array of shape (N,). Integrates until t_end, or `steps` accepted
    steps (status max_steps), or until each system stops (at_rest, a
    failure). The statuses are those of `ukb run`'s results: finished
    (t_end reached, or `steps` taken without a t_end), max_steps (`steps`
    taken before t_end), at_rest, failed_*. Returns a Result of numpy
    arrays viewing the solver's memory (no copy): q, qd (N, n), t, status
    (int codes: ukb.STATUSES[code] is the name), status_name (N strings),
    t_stop, counters (steps, events, rank_*, ...), final (the model's
    natural quantities at the end, e.g. theta), observables (a model
    file's own observable_names at the end), energy_start/energy_end
    (where the model has a potential) and, with record_every = k, traj_q,
    traj_qd (N, T, n) and traj_t (N, T): a row every k steps (dopri5: steps
    begun, rejected ones too), NaN once a system has stopped.
    Every other integrator option of docs/config.md by its name
    (ukb.run_options() lists them with their meaning): rank_rtol,
    residual_limit, expected_rank, monitor, baumgarte_alpha/beta/gamma,
    projection_tol, projection_iters. An option of another method (rtol
    with rk4, baumgarte_alpha without stabilization="baumgarte") is
    refused: it would be ignored.
    """
    M = _model_on(model, backend)
    q = _float_array("q0", q0, (1, 2), f"an array of shape (N, {M.n})")
    qd = _float_array("qd0", qd0, (1, 2), f"an array of shape (N, {M.n})")
    if q.ndim == 1:
        q = q[None, :]
    if qd.ndim == 1:
        qd = qd[None, :]
    N = q.shape[0]
    if q.shape[1:] != (M.n,) or N < 1:
        raise ValueError(f"q0: expected an array of shape (N, {M.n}) for '{M.name}' ({', '.join(M.coords)}), "
                         f"got shape {np.shape(q0)}")
    if qd.shape != q.shape:
        raise ValueError(f"qd0: expected the shape of q0, {q.shape}, got shape {np.shape(qd0)}")
    for name, a in (("q0", q), ("qd0", qd)):
        bad = np.argwhere(~np.isfinite(a))
        if bad.size:
            raise ValueError(f"{name}: system {bad[0][0]}: coordinate {M.coords[bad[0][1]]} is {a[tuple(bad[0])]!r}; "
                             "expected finite numbers")
    P = _param_values(M, params, N, "params")
    if t_end is None and steps is None:
        raise ValueError("simulate: give t_end or steps (or both): otherwise only the model's events could end it")
    if not isinstance(method, str):
        raise TypeError(f"method: expected 'rk4' or 'dopri5', got {type(method).__name__}")
    o = {"method": method, "events": bool(events)}
    t0 = _real("t0", t0, math.isfinite, "a finite number")
    o["dt"] = _real("dt", dt, lambda x: math.isfinite(x) and x >= 0, "a finite number > 0 (dopri5: >= 0, 0: automatic)")
    if t_end is not None:
        o["t_end"] = _real("t_end", t_end, lambda x: x > t0, f"a number > t0 = {t0!r}")
    if steps is not None:
        o["max_steps"] = _integer("steps", steps, 1, _LONG_MAX, "an integer >= 1")
    for key, v in (("rtol", rtol), ("dt_min", dt_min), ("dt_max", dt_max), ("event_tol", event_tol)):
        if v is not None:
            o[key] = _real(key, v, lambda x: not math.isnan(x), "a number")
    if atol is not None:
        o["atol"] = [float(x) for x in np.atleast_1d(_float_array("atol", atol, (0, 1), "a number or a list"))]
    if stabilization is not None:
        o["stabilization"] = stabilization
    for key, v in integrator.items():
        if key in _INTEGRATOR_OPTIONS and key not in o:
            kind = _INTEGRATOR_OPTIONS[key]
            if kind == "bool":
                if not isinstance(v, (bool, np.bool_)):
                    raise ValueError(f"{key}: expected True or False, got {v!r}")
                v = bool(v)
            elif kind == "int":
                v = _integer(key, v, -_INT_MAX, _INT_MAX, "an integer")
            elif kind == "long":
                v = _integer(key, v, -_LONG_MAX, _LONG_MAX, "an integer")
            elif kind == "real":
                v = _real(key, v, lambda x: not math.isnan(x), "a number")
        o[key] = v  # the C++ side refuses unknown options by name
    record_every = 0 if record_every is None else _integer("record_every", record_every, 1, _LONG_MAX, "an integer >= 1")
    threads = 0 if threads is None else _integer("threads", threads, 0, _INT_MAX, "an integer >= 0 (0: all cores)")
    chunk = 64 if chunk is None else _integer("chunk", chunk, 1, _INT_MAX, "an integer >= 1")
    if initial_tol is not None:
        initial_tol = _real("initial_tol", initial_tol, lambda x: x >= 0, "a number >= 0, or None (no check)")
        if M.hooks["residual"]:
            _check_initial(M, P, q, qd, t0, initial_tol)
    d = _core.simulate(M, backend, P, q, qd, t0, o, threads, chunk, bool(simd), record_every)
    d["status_name"] = np.array(STATUSES, dtype=object)[d["status"]].astype(str)
    return Result(d)


def sobol_points(n, d, *, seed=None, replicate=0):
    """The first n points of ukb's Sobol sequence in d dimensions, an (n, d)
    array in [0, 1) (docs/config.md, "Sampling designs").

    seed=None: the unscrambled sequence (Joe and Kuo's direction numbers,
    scipy.stats.qmc.Sobol(d, scramble=False)'s points, to the bit). With a
    seed: the points that `sampling = "sobol"` places in the unit cube for
    replicate `replicate` of a run with that seed (Owen's nested scramble),
    before each input's inverse distribution function; the run's sample i
    of replicate r takes point i // replicates (without sweep axes)."""
    n = _integer("n", n, 0, 1 << 32, "an integer in [0, 2^32]")
    d = _integer("d", d, 1, _core.sobol_dimensions(), f"an integer in [1, {_core.sobol_dimensions()}]")
    replicate = _integer("replicate", replicate, 0, (1 << 63) - 1, "an integer >= 0")
    if seed is not None:
        seed = _integer("seed", seed, 0, (1 << 63) - 1, "an integer in [0, 2^63 - 1], or None (unscrambled)")
    return _core.sobol_points(n, d, seed, replicate)


def run_options():
    """The integrator options of simulate and of a config's [integrator] and
    [stabilization] tables (docs/config.md): name -> meaning."""
    return {k: doc for k, (_, doc) in _core.run_options().items()}


# The options simulate takes by keyword beyond its named ones: the table of
# run options (ukb/options.hpp), name -> kind.
_INTEGRATOR_OPTIONS = {k: kind for k, (kind, _) in _core.run_options().items()}


def _check_initial(M, P, q, qd, t0, tol):
    pos, vel = _core.residuals(M, P, q, qd, t0)
    bad = np.flatnonzero(~((pos <= tol) & (vel <= tol)))
    if bad.size:
        i = int(bad[0])
        raise ValueError(f"q0/qd0: system {i}: the initial state violates the constraints of '{M.name}': "
                         f"position residual {pos[i]!r}, velocity residual {vel[i]!r} (expected at most "
                         f"initial_tol = {tol!r}; ukb.initial_state gives consistent states, "
                         "initial_tol=None skips this check)")


# ---------------------------------------------------------------- energy balance


def energy_balance(model, q0, qd0, *, power=None, params=None, dt, t_end, rtol=1e-6, backend="cpu", **options):
    """Checks a model against physics written independently of it: the
    work-energy balance dE/dt = P along each system's motion.

    The systems are integrated with RK4 at the fixed step dt until t_end
    (ukb.simulate with record_every=1; events, stabilization and the other
    integrator options as there, except method). E = 1/2 q'^T M q' + V(q, t)
    is the model's own energy (its `mass` and `potential`); P is the power
    of every force that is not the potential's (damping, friction, driving
    forces, the non-ideal constraint force, the ideal constraint force of a
    moving constraint), as the caller derives it from the physics:
    `power(q, qd, t, p)` or `power(q, qd, t, p, a)`, with q, qd numpy arrays
    (n,), t a number, p a dict of the system's parameters by name, and `a`
    the evaluation at that state (ukb.accel's Result on the reference
    backend: lambda, Qc_ideal, ... for a normal force); None: P = 0 (a
    conservative model, or one with its damping and friction set to zero).
    Note that `a.Qc_nonideal @ qd` is the solver's own non-ideal power,
    which cannot disagree with it: write the friction's power from its law
    (for example -mu |N| |v|, N from `a`).

    The work W(t) is integrated from P at the recorded steps by the
    fourth-order rule on each run of equal steps (events and the last step
    begin new runs), so that RK4's and the rule's errors are both O(dt^4).
    An event handler that changes the state (an impact) adds energy that P
    does not: check up to the first such event. Where M or V depends on t
    explicitly, dE/dt also has dV/dt + 1/2 q'^T (dM/dt) q': add them to P.

    Returns a Result: t, energy_change (E - E(t0)), work (W), each (N, T)
    and NaN after a system's last row; mismatch (N: the largest
    |energy_change - work|), scale (N: the largest of |T - T(t0)|, of the
    integral of |P| and of |energy_change|), relative (mismatch / scale),
    status_name (the systems' statuses), worst (the system of the largest
    relative mismatch), passed (relative <= rtol for every system, and no
    system failed: a failed one is checked only up to its failure) and
    message (one line: passed or not, the worst system, its mismatch, and
    when it was largest). A sign error in a force, a potential that does
    not match the force, or a wrong factor in a damping term shows as a
    relative mismatch of order 1; halve dt to see which part is the
    integration's (where the forces are smooth it falls about 16-fold).
    """
    M = _model_on(model, backend)
    if not M.hooks["potential"]:
        raise ValueError(f"energy_balance: '{M.name}' has no `potential` hook: the balance needs its energy "
                         "E = T + V (docs/adding-a-model.md)")
    if power is not None and not callable(power):
        raise TypeError(f"power: expected a function power(q, qd, t, p[, a]) or None, got {type(power).__name__}")
    if "method" in options:
        raise ValueError("energy_balance: integrates with RK4 at fixed steps (its quadrature of the power needs "
                         "them): leave out method")
    if "record_every" in options:
        raise ValueError("energy_balance: records every step itself: leave out record_every")
    rtol = _real("rtol", rtol, lambda x: x > 0, "a number > 0")
    with_a = False
    if power is not None:
        try:
            import inspect
            positional = [x for x in inspect.signature(power).parameters.values()
                          if x.kind in (x.POSITIONAL_ONLY, x.POSITIONAL_OR_KEYWORD)]
            with_a = len(positional) >= 5
        except (TypeError, ValueError):
            with_a = False
    r = simulate(M, q0, qd0, params=params, dt=dt, t_end=t_end, backend=backend, record_every=1, **options)
    N = r.q.shape[0]
    P = _param_values(M, params, N, "params")
    names = [x["name"] for x in M.params]
    rank_rtol = options.get("rank_rtol", _core.default_rank_rtol())
    rows = [np.flatnonzero(np.isfinite(r.traj_t[i])) for i in range(N)]
    T = max(len(k) for k in rows)
    t_all = np.full((N, T), np.nan)
    change = np.full((N, T), np.nan)
    work = np.full((N, T), np.nan)
    mismatch, scale, where = np.zeros(N), np.zeros(N), np.zeros(N)
    for i in range(N):
        t, q, qd = r.traj_t[i, rows[i]], r.traj_q[i, rows[i]], r.traj_qd[i, rows[i]]  # every step, the last too
        k = t.size
        E, K = _core.energies(M, np.repeat(P[i:i + 1], k, axis=0), np.ascontiguousarray(q),
                              np.ascontiguousarray(qd), np.ascontiguousarray(t))
        p = dict(zip(names, (float(x) for x in P[i])))
        if power is None:
            f = np.zeros(k)
        else:
            f = np.empty(k)
            for j in range(k):
                args = (q[j].copy(), qd[j].copy(), float(t[j]), dict(p))
                if with_a:
                    args += (Result(_core.evaluate(M, "reference", list(P[i]), list(q[j]), list(qd[j]),
                                                   float(t[j]), rank_rtol)),)
                value = power(*args)
                try:
                    f[j] = float(value)
                except (TypeError, ValueError):
                    raise TypeError(f"power: expected a number, got {type(value).__name__} (system {i}, t = {t[j]!r})")
                if not math.isfinite(f[j]):
                    raise ValueError(f"power: returned {f[j]!r} at system {i}, t = {t[j]!r} ({M.name}: "
                                     f"q = {list(q[j])}, qd = {list(qd[j])})")
        W = _cumulative_integral(t, f)
        absW = _cumulative_integral(t, np.abs(f))
        dE = E - E[0]
        gap = np.abs(dE - W)
        t_all[i, :k], change[i, :k], work[i, :k] = t, dE, W
        j = int(np.argmax(gap))
        mismatch[i], where[i] = gap[j], t[j]
        scale[i] = max(float(np.max(np.abs(K - K[0]))), float(absW[-1]), float(np.max(np.abs(dE))))
    with np.errstate(divide="ignore", invalid="ignore"):
        relative = np.where(mismatch == 0, 0.0, mismatch / scale)
    worst = int(np.argmax(relative))
    # A system that failed was checked only up to its failure.
    failed = [i for i in range(N) if str(r.status_name[i]).startswith("failed")]
    passed = bool(np.all(relative <= rtol)) and not failed
    message = (f"energy balance of '{M.name}' {'holds' if passed else 'FAILS'} to rtol = {rtol:g} in {N} "
               f"system{'s' if N > 1 else ''}: worst system {worst}, |E - E0 - W| = {mismatch[worst]:.3g} at "
               f"t = {where[worst]:.6g}, {relative[worst]:.3g} of its scale {scale[worst]:.3g}"
               + (f"; system {failed[0]} failed ({r.status_name[failed[0]]}) at t = {r.t[failed[0]]:.6g}"
                  if failed else ""))
    return Result({"t": t_all, "energy_change": change, "work": work, "mismatch": mismatch, "scale": scale,
                   "relative": relative, "status_name": r.status_name, "worst": worst, "passed": passed,
                   "message": message})


def _cumulative_integral(t, f):
    """The integral of f from t[0] to each t[j], fourth order on each run
    of equal steps (the cubic through four neighbours of the run; a run of
    three points: the parabola; of two: the trapezoid), so that a kink at
    a run's end (an event) stays at a node."""
    W = np.zeros(t.size)
    h = np.diff(t)
    k, n = 0, h.size
    while k < n:
        e = k + 1
        # Equal up to the rounding of t (steps of dt far from t = 0 differ
        # in their last bits).
        same = 1e-6 * abs(h[k]) + 8 * np.finfo(float).eps * max(abs(t[0]), abs(t[-1]))
        while e < n and abs(h[e] - h[k]) <= same:
            e += 1
        a, points = k, e - k + 1  # the run's points a .. e
        x = (t[e] - t[a]) / (e - a)  # its step
        for j in range(k, e):
            if points == 2:
                s = x * (f[j] + f[j + 1]) / 2
            elif points == 3:
                s = x * ((5 * f[j] + 8 * f[j + 1] - f[j + 2]) if j == a else (-f[j - 1] + 8 * f[j] + 5 * f[j + 1])) / 12
            elif j == a:
                s = x * (9 * f[j] + 19 * f[j + 1] - 5 * f[j + 2] + f[j + 3]) / 24
            elif j == e - 1:
                s = x * (f[j - 2] - 5 * f[j - 1] + 19 * f[j] + 9 * f[j + 1]) / 24
            else:
                s = x * (-f[j - 1] + 13 * f[j] + 13 * f[j + 1] - f[j + 2]) / 24
            W[j + 1] = W[j] + s
        k = e
    return W


# ---------------------------------------------------------------- run


def _toml_value(v, where):
    if isinstance(v, (bool, np.bool_)):
        return "true" if v else "false"
    if isinstance(v, numbers.Integral):
        return str(int(v))
    if isinstance(v, numbers.Real):
        x = float(v)
        if math.isnan(x):
            return "nan"
        if math.isinf(x):
            return "inf" if x > 0 else "-inf"
        return repr(x)
    if isinstance(v, (str, os.PathLike)):
        return json.dumps(os.fspath(v), ensure_ascii=False)  # a TOML basic string
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{_toml_key(k, where)} = {_toml_value(x, f'{where}.{k}')}"
                                for k, x in v.items()) + " }"
    if isinstance(v, (list, tuple, np.ndarray)):
        return "[" + ", ".join(_toml_value(x, where) for x in (v.tolist() if isinstance(v, np.ndarray) else v)) + "]"
    raise TypeError(f"config: key '{where}': expected a number, string, bool, list or dict, "
                    f"got {type(v).__name__}")


def _toml_key(k, where):
    if not isinstance(k, str):
        raise TypeError(f"config: keys are strings; got {k!r} in '{where}'")
    return json.dumps(k, ensure_ascii=False)


def _toml(config):
    """A config dict (the config file's schema) as TOML text."""
    top, tables = [], []
    for k, v in config.items():
        if isinstance(v, dict):
            tables.append(f"\n[{_toml_key(k, k)}]")
            tables += [f"{_toml_key(kk, k)} = {_toml_value(vv, f'{k}.{kk}')}" for kk, vv in v.items()]
        else:
            top.append(f"{_toml_key(k, k)} = {_toml_value(v, k)}")
    return "\n".join(top + tables) + "\n"


def _config_source(config, allow_none=False):
    """(text, path, directory, from_file) of a config given as a dict, a
    path, or None (allow_none: the checkpoint's)."""
    if config is None:
        if not allow_none:
            raise ValueError("config: expected a dict or a path (None only with resume=True and out)")
        return "", "", "", False
    if isinstance(config, dict):
        return _toml(config), "config (dict)", os.getcwd(), False
    if isinstance(config, (str, os.PathLike)):
        return "", os.fspath(config), "", True
    raise TypeError(f"config: expected a dict or a path, got {type(config).__name__}")


def _table_columns(name, t):
    if not isinstance(t, np.ndarray) or t.dtype.names is None or "status" not in t.dtype.names \
            or "sample" not in t.dtype.names:
        raise TypeError(f"{name}: expected a table of ukb.run (a structured array with sample and status), "
                        f"got {type(t).__name__}")
    names = [n for n in t.dtype.names if n != "status"]
    return names, [np.asarray(t[n], dtype=np.float64).tolist() for n in names], [str(s) for s in t["status"]]


def compare(config, a, b, *, names=("a", "b")):
    """Compares two results tables of the same samples of a run of `config`
    (a dict or a path, as for ukb.run): the tables of ukb.run on two
    backends, say, or of two versions. The rules of `ukb run --crosscheck`
    (docs/crosscheck.md: statuses and counters exactly, or within 2 + 1 %
    with dopri5, the work counters rejected and rhs_evals reported only,
    event times to event_tol, states and energies to a tolerance
    derived from the integrator), rows matched by `sample` (every sample of
    b must be in a). Returns the report as a dict (crosscheck.json's
    layout): "pass", "verdict", and per column max_abs, max_rel,
    worst_over_tolerance, failures and the worst samples with their
    inputs."""
    text, path, cdir, from_file = _config_source(config)
    na, va, sa = _table_columns("a", a)
    nb, vb, sb = _table_columns("b", b)
    if not (isinstance(names, (tuple, list)) and len(names) == 2 and all(isinstance(x, str) for x in names)):
        raise ValueError(f"names: expected two labels, got {names!r}")
    return json.loads(_core.compare(text, path, cdir, from_file, na, va, sa, nb, vb, sb, names[0], names[1]))


class Table(np.ndarray):
    """The per-sample results of ukb.run: a numpy structured array with a
    column per field of results.csv ("status" as text), and to_pandas()."""

    def __getitem__(self, key):
        r = super().__getitem__(key)
        # A column, or a reduction of one, is a plain ndarray (or scalar).
        return r.view(np.ndarray) if isinstance(key, str) and isinstance(r, np.ndarray) else r

    def to_pandas(self):
        import pandas as pd  # optional dependency

        return pd.DataFrame({name: self[name] for name in self.dtype.names})


def _progress_bar(total, enabled):
    if not enabled:
        return None
    in_notebook = "ipykernel" in sys.modules
    if not (in_notebook or (hasattr(sys.stderr, "isatty") and sys.stderr.isatty())):
        return None
    try:
        from tqdm.auto import tqdm

        return tqdm(total=total, unit="sample", desc="ukb run")
    except ImportError:

        class Line:
            def __init__(self):
                self.n = 0

            def update(self, k):
                self.n += k
                sys.stderr.write(f"\rukb run: {self.n} of {total} samples")
                sys.stderr.flush()

            def close(self):
                sys.stderr.write("\n")

        return Line()


def run(config, *, out=None, backend=None, threads=None, progress=True, resume=False, on_chunk=None,
        crosscheck=None, crosscheck_samples=256):
    """The Monte Carlo driver of `ukb run`.

    config: a dict in the config file's schema (docs/config.md;
    tables as nested dicts, distributions as dicts) or the path of a config
    file; None with resume=True and out: the run whose checkpoint is in out.
    out: the output directory (files as `ukb run --out`); None: nothing is
    written (a temporary directory is used and removed). backend, threads:
    override the config's. progress: a progress bar when stderr is a
    terminal or in a notebook (tqdm when installed, else a line).
    on_chunk(done, samples): called after every chunk.
    crosscheck: another backend ("reference", "cpu", "cuda"): once the run
    is complete, crosscheck_samples of its samples are integrated again
    there and compared (`ukb run --crosscheck`; docs/crosscheck.md); the report (crosscheck.json) is
    summary["crosscheck"], with "pass" and "verdict", and a failure also
    gives a RuntimeWarning. Samples with inconsistent steps or projection
    failures (the columns inconsistent, projection_failures) give a
    RuntimeWarning each, as `ukb run` warns of them.

    Returns (table, summary): the per-sample table (ukb.Table, a structured
    array; table.to_pandas()) and summary.json as a dict.

    Ctrl-C stops the run after the current chunk and raises
    KeyboardInterrupt; with `out`, a checkpoint is left there and
    run(config, out=out, resume=True) continues it.
    """
    if backend is not None:
        _backend(backend)
    if crosscheck is not None:
        _backend(crosscheck)
    crosscheck_samples = _integer("crosscheck_samples", crosscheck_samples, 1, 1000000, "an integer in [1, 1000000]")
    if threads is not None:
        threads = _integer("threads", threads, 0, _INT_MAX, "an integer >= 0 (0: all cores)")
    if out is not None:
        out = os.fspath(out)
    if resume and out is None:
        raise ValueError("resume: needs out, the directory of the interrupted run")
    text, path, cdir, from_file = _config_source(config, allow_none=resume)
    tmp = None
    if out is None:
        tmp = tempfile.mkdtemp(prefix="ukb-run-")
        out_dir = os.path.join(tmp, "out")
    else:
        out_dir = out
    bar = None

    def chunk(done, samples):
        nonlocal bar
        if bar is None:
            bar = _progress_bar(samples, progress) or False
        if bar:
            bar.update(done - getattr(bar, "last", 0))
            bar.last = done
        if on_chunk is not None:
            on_chunk(done, samples)

    try:
        try:
            d = _core.run(text, path, cdir, from_file, out_dir, backend, threads, bool(resume), tmp is not None,
                          chunk, crosscheck, crosscheck_samples)
        finally:
            if bar:
                bar.close()
        raised = d.get("raised")
        if raised is not None and d["interrupted"]:
            if isinstance(raised, KeyboardInterrupt):
                where = (f"; its checkpoint is in {out_dir}: ukb.run(config, out={out_dir!r}, resume=True) "
                         "continues it") if tmp is None else " (out=None: nothing was kept)"
                raise KeyboardInterrupt(f"ukb.run stopped after {d['done']} of {d['samples']} samples{where}")
            raise raised
        if raised is not None and not isinstance(raised, KeyboardInterrupt):
            raise raised  # from on_chunk, during the last chunk: the run completed (with out=, its files are there)
        if raised is not None:
            warnings.warn("ukb.run: Ctrl-C came during the last chunk; the run completed", RuntimeWarning, stacklevel=2)
        table = _read_table(out_dir, d)
        with open(os.path.join(out_dir, "summary.json")) as f:
            summary = json.load(f)
        for w in d["warnings"]:
            warnings.warn("ukb.run: " + w, RuntimeWarning, stacklevel=2)
        if d["crosschecked"]:
            with open(os.path.join(out_dir, "crosscheck.json")) as f:
                summary["crosscheck"] = json.load(f)
            if not d["crosscheck_pass"]:
                warnings.warn("ukb.run: " + d["crosscheck_verdict"], RuntimeWarning, stacklevel=2)
        return table, summary
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)


def _read_table(out_dir, d):
    npy = os.path.join(out_dir, "results.npy")
    if d["write_npy"] and os.path.isfile(npy):
        raw = np.load(npy)
        # The status as text (str), not bytes.
        dtype = [(n, "U" + str(raw.dtype[n].itemsize) if raw.dtype[n].kind == "S" else raw.dtype[n])
                 for n in raw.dtype.names]
        t = np.empty(raw.shape, dtype=dtype)
        for n in raw.dtype.names:
            t[n] = raw[n].astype(str) if raw.dtype[n].kind == "S" else raw[n]
        return t.view(Table)
    csv = os.path.join(out_dir, "results.csv")
    r = _core.read_results(csv)
    with open(csv) as f:
        header = f.readline().rstrip("\n").split(",")
    columns = dict(zip(r["names"], r["columns"]))
    status = np.array(r["status"])
    integer = set(_core.integer_columns())
    dtype = [(n, status.dtype if n == "status" else "<i8" if n in integer else "<f8") for n in header]
    t = np.empty(len(status), dtype=dtype)
    for n in header:
        t[n] = status if n == "status" else columns[n]
    return t.view(Table)
