#!/usr/bin/env python3
"""A peer of ukb: the same ensembles written in JAX (issue 56).

What a JAX user would write instead of ukb: one system's Udwadia–Kalaba
acceleration in jax.numpy (Cholesky factor of M, B = A L^-T, its
pseudo-inverse with the relative rank tolerance 1e-10, the non-ideal force
after the ideal part), classical RK4, jax.vmap over systems and
jax.lax.scan over steps, jit-compiled, in chunks of 1000 systems, double
precision. The models are written again from include/ukb/models/ (the
states of bench/baseline_numpy.py: the same physics as ukb's workloads).

    python3 bench/peer_jax.py --check DIR    # DIR from ukb_bench_baseline_eigen --export
    python3 bench/peer_jax.py --bench OUT.json [--sizes 1000|100000] [--max-seconds S]

--check integrates the exported systems and compares with the reference
backend's result (exit 1 where the relative difference exceeds 1e-9).
--bench writes Google-Benchmark-shaped JSON (name W<k>/<model>/double/jax/
threads:1/N:<N>, items_per_second = RK4 system-steps per second, the
median of 3 timings, compilation excluded). One thread: run it under
`taskset -c 0` (bench/compare.sh does); XLA's own thread pool then has one
core. Needs `pip install jax` (bench/compare.sh installs it into a virtual
environment of its build directory; the build never does).
"""
import argparse
import json
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import baseline_numpy as base  # noqa: E402  (the workloads' random states and the export's format)

import jax  # noqa: E402

jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp  # noqa: E402
from jax.scipy.linalg import solve_triangular  # noqa: E402

CHUNK = 1000


def ring_terms(P, q, qd):
    m, g = P[0], P[2]
    M = m * jnp.eye(2)
    Q = jnp.array([0.0, -m * g])
    return M, Q, q[None, :], jnp.array([-(qd @ qd)])


def ring_nonideal(P, q, qd, Qc, lam):
    m, g, mu = P[0], P[2], P[3]
    v = jnp.sqrt(qd @ qd)
    normal = jnp.sqrt(Qc @ Qc)
    sliding = -mu * normal / jnp.where(v > 0, v, 1.0) * qd
    Q = jnp.array([0.0, -m * g])
    Qt = Q - (q @ Q) / (q @ q) * q
    qt, limit = jnp.sqrt(Qt @ Qt), mu * normal
    k = jnp.where(qt <= limit, -1.0, -limit / jnp.where(qt > 0, qt, 1.0))
    return jnp.where(v > 0, sliding, k * Qt)


def chain_terms(K):
    def terms(P, q, qd):
        m, g = P[0], P[2]
        n = 2 * K
        M = m * jnp.eye(n)
        Q = jnp.zeros(n).at[1::2].set(-m * g)
        p, u = q.reshape(K, 2), qd.reshape(K, 2)
        d = p - jnp.concatenate([jnp.zeros((1, 2)), p[:-1]])
        du = u - jnp.concatenate([jnp.zeros((1, 2)), u[:-1]])
        k = jnp.arange(K)
        A = jnp.zeros((K, n)).at[k, 2 * k].set(d[:, 0]).at[k, 2 * k + 1].set(d[:, 1])
        A = A.at[k[1:], 2 * k[1:] - 2].set(-d[1:, 0]).at[k[1:], 2 * k[1:] - 1].set(-d[1:, 1])
        return M, Q, A, -(du * du).sum(1)
    return terms


def pendulum_terms(P, q, qd):
    m, g = P[0], P[2]
    M = m * jnp.eye(2)
    Q = jnp.array([0.0, -m * g])
    v2, r, rr = qd @ qd, jnp.sqrt(q @ q), q @ qd
    A = jnp.stack([q, q / r])
    return M, Q, A, jnp.array([-v2, -v2 / r + rr * rr / r**3])


def damping(P, q, qd, Qc, lam):
    return -P[3] * qd


MODELS = {"W1": (ring_terms, ring_nonideal), "W2": (chain_terms(6), damping), "W3": (chain_terms(12), damping),
          "W4": (pendulum_terms, damping)}


def make_accel(terms, nonideal):
    def accel(P, q, qd):
        M, Q, A, b = terms(P, q, qd)
        L = jnp.linalg.cholesky(M)
        a = solve_triangular(L, solve_triangular(L, Q, lower=True), lower=True, trans="T")
        r = b - A @ a
        B = solve_triangular(L, A.T, lower=True).T  # A L^-T
        Bp = jnp.linalg.pinv(B, base.RCOND)
        z = Bp @ r
        Qc = L @ z
        lam = Bp.T @ z  # (B B^T)^+ r
        c = solve_triangular(L, nonideal(P, q, qd, Qc, lam), lower=True)
        u = c + Bp @ (r - B @ c)
        return a + solve_triangular(L, u, lower=True, trans="T")
    return accel


def make_run(w, h):
    """steps -> a jitted function (P, q, qd) -> (q, qd) after that many RK4 steps of every system."""
    accel = jax.vmap(make_accel(*MODELS[w]))

    def step(state, _):
        P, q, qd = state
        k1 = accel(P, q, qd)
        q2, v2 = q + 0.5 * h * qd, qd + 0.5 * h * k1
        k2 = accel(P, q2, v2)
        q3, v3 = q + 0.5 * h * v2, qd + 0.5 * h * k2
        k3 = accel(P, q3, v3)
        q4, v4 = q + h * v3, qd + h * k3
        k4 = accel(P, q4, v4)
        return (P, q + h / 6 * (qd + 2 * v2 + 2 * v3 + v4), qd + h / 6 * (k1 + 2 * k2 + 2 * k3 + k4)), None

    def run(P, q, qd, steps):
        (_, q, qd), _ = jax.lax.scan(step, (P, q, qd), None, length=steps)
        return q, qd

    return jax.jit(run, static_argnums=3)


def integrate(run, P, q, qd, steps):
    """Every system, in chunks of CHUNK (the last one padded with copies of its first system)."""
    N = len(q)
    out_q, out_qd = np.empty_like(q), np.empty_like(qd)
    for s in range(0, N, CHUNK):
        e = min(N, s + CHUNK)
        idx = np.concatenate([np.arange(s, e), np.full(CHUNK - (e - s), s)])
        rq, rqd = run(jnp.asarray(P[idx]), jnp.asarray(q[idx]), jnp.asarray(qd[idx]), steps)
        out_q[s:e], out_qd[s:e] = np.asarray(rq)[: e - s], np.asarray(rqd)[: e - s]
    return out_q, out_qd


def check(directory):
    ok = True
    for model in base.MODELS:
        with open(f"{directory}/{model.id}.txt") as f:
            n, m, npar, steps, dt = f.readline().split()
            data = np.loadtxt(f, ndmin=2)
        n, npar, steps = int(n), int(npar), int(steps)
        P, q0, qd0 = data[:, :npar], data[:, npar:npar + n], data[:, npar + n:npar + 2 * n]
        ref = data[:, npar + 2 * n:]
        q, qd = integrate(make_run(model.id, float(dt)), P, q0, qd0, steps)
        got = np.concatenate([q, qd], 1)
        diff = np.sqrt(((got - ref) ** 2).sum(1) / (ref**2).sum(1)).max()
        good = diff < 1e-9
        ok &= good
        print(f"{model.id} {model.name:20s} jax vs reference after {steps} steps, {len(q)} systems: "
              f"max rel. diff {diff:.2e} ({'ok' if good else 'TOO LARGE'})")
    return ok


def bench(out, max_seconds, sizes):
    rng = np.random.default_rng(1)
    results = []
    for model in base.MODELS:
        for N in sizes:
            P, q, qd = model.random(rng, N)
            steps = 20
            run = make_run(model.id, base.DT)
            integrate(run, P[:CHUNK], q[:CHUNK], qd[:CHUNK], steps)  # compilation
            t0 = time.perf_counter()
            integrate(run, P, q, qd, steps)
            once = time.perf_counter() - t0
            if once * 3 > max_seconds:  # fewer systems, the rate per system-step is what counts
                N = max(CHUNK, int(N * max_seconds / (3 * once)) // CHUNK * CHUNK)
                P, q, qd = P[:N], q[:N], qd[:N]
            times = []
            for _ in range(3):
                t0 = time.perf_counter()
                integrate(run, P, q, qd, steps)
                times.append(time.perf_counter() - t0)
            t = float(np.median(times))
            name = f"{model.id}/{model.name}/double/jax/threads:1/N:{len(q)}"
            results.append({"name": name, "run_type": "aggregate", "aggregate_name": "median",
                            "real_time": t * 1e3, "time_unit": "ms", "items_per_second": len(q) * steps / t,
                            "N": len(q), "threads": 1, "steps_per_call": steps})
            print(f"{name:55s} {len(q) * steps / t:12.4g} system-steps/s", flush=True)
    with open(out, "w") as f:
        json.dump({"context": {"jax": jax.__version__}, "benchmarks": results}, f, indent=1)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check", metavar="DIR")
    ap.add_argument("--bench", metavar="OUT_JSON")
    ap.add_argument("--max-seconds", type=float, default=20.0, help="time limit per configuration")
    ap.add_argument("--sizes", default="1000|100000", help="batch sizes N, separated by |")
    a = ap.parse_args()
    if a.check:
        return 0 if check(a.check) else 1
    if a.bench:
        bench(a.bench, a.max_seconds, [int(x) for x in a.sizes.split("|")])
        return 0
    ap.print_help()
    return 2


if __name__ == "__main__":
    sys.exit(main())
