#!/usr/bin/env python3
"""A peer of ukb: the same ensembles written in JAX (issue 56).

What a JAX user would write instead of ukb: one system's Udwadia–Kalaba
acceleration in jax.numpy, written out per model where M = m I makes that
easy (the ring's one row: B^+ = B^T / |B|^2; the chains' tridiagonal Gram
matrix solved banded; the redundant pendulum's two parallel rows, rank 1:
B^+ = B^T / |B|_F^2; the textbook route, jnp.linalg.pinv per system, ran
the ring 70 times slower), classical RK4, jax.vmap over systems and
jax.lax.scan over steps, jit-compiled, in chunks of 1000 systems, double
precision. The models are written again from include/ukb/models/ (the
states of bench/baseline_numpy.py), the ring's friction against q' itself
(ukb takes q' less its part along the row: about 1e-11 relative apart).

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
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import baseline_numpy as base  # noqa: E402  (the workloads' random states and the export's format)

import jax  # noqa: E402

jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp  # noqa: E402

CHUNK = 1000


def ring_accel(P, q, qd):
    """bead_on_ring written out: M = m I, one row A = q (B = A / sqrt(m), its
    pseudo-inverse B^T / |B|^2, rank 1 unless B = 0)."""
    m, g, mu = P[0], P[2], P[3]
    sm = jnp.sqrt(m)
    r = -(qd @ qd) + g * q[1]  # b - A M^-1 Q
    B = q / sm
    G = B @ B
    inv = jnp.where(G > 0, 1.0 / jnp.where(G > 0, G, 1.0), 0.0)
    Qc = sm * B * inv * r  # L B^+ r
    normal = jnp.sqrt(Qc @ Qc)
    v = jnp.sqrt(qd @ qd)
    sliding = -mu * normal / jnp.where(v > 0, v, 1.0) * qd
    Q = jnp.array([0.0, -m * g])
    Qt = Q - (q @ Q) / (q @ q) * q  # at rest: static friction against Q's tangential part
    qt, limit = jnp.sqrt(Qt @ Qt), mu * normal
    C = jnp.where(v > 0, sliding, jnp.where(qt <= limit, -1.0, -limit / jnp.where(qt > 0, qt, 1.0)) * Qt)
    c = C / sm
    w = (r - B @ c) * inv
    return jnp.array([0.0, -g]) + (c + B * w) / sm


def chain_accel(K):
    """planar_chain_K written out: M = m I; row k of A holds d_k at mass k and
    -d_k at mass k - 1, so G = A A^T / m is tridiagonal, and B^+ y =
    B^T G^-1 y is a banded Cholesky solve (a loop over K unrolled when
    traced)."""
    def accel(P, q, qd):
        m, g, damp = P[0], P[2], P[3]
        sm = jnp.sqrt(m)
        p, u = q.reshape(K, 2), qd.reshape(K, 2)
        d = p - jnp.concatenate([jnp.zeros((1, 2)), p[:-1]])
        du = u - jnp.concatenate([jnp.zeros((1, 2)), u[:-1]])
        r = -(du * du).sum(1)
        r = r.at[0].add(g * d[0, 1])  # b - A M^-1 Q: only the first row sees the uniform gravity
        dd = (d * d).sum(1) / m * jnp.where(jnp.arange(K) > 0, 2.0, 1.0)
        off = -(d[1:] * d[:-1]).sum(1) / m
        c = (-damp * qd / sm).reshape(K, 2)  # L^-1 C
        cprev = jnp.concatenate([jnp.zeros((1, 2)), c[:-1]])
        y = r - (d * (c - cprev)).sum(1) / sm  # r - B c
        ld, le = [None] * K, [None] * K
        for k in range(K):  # G = L L^T, L bidiagonal
            x = dd[k]
            if k > 0:
                le[k] = off[k - 1] / ld[k - 1]
                x = x - le[k] * le[k]
            ld[k] = jnp.sqrt(x)
        z = [None] * K
        for k in range(K):
            z[k] = (y[k] - (le[k] * z[k - 1] if k > 0 else 0.0)) / ld[k]
        for k in range(K - 1, -1, -1):
            z[k] = (z[k] - (le[k + 1] * z[k + 1] if k < K - 1 else 0.0)) / ld[k]
        wv = jnp.stack(z)[:, None] * d / sm  # B^T w, mass k's share
        bt = wv - jnp.concatenate([wv[1:], jnp.zeros((1, 2))])
        return ((c + bt) / sm).reshape(-1) + jnp.zeros(2 * K).at[1::2].set(-g)
    return accel


def pendulum_accel(P, q, qd):
    """redundant_pendulum written out: rows q and q / |q| are parallel, so
    B = A / sqrt(m) has rank 1 and B^+ = B^T / |B|_F^2."""
    m, g, damp = P[0], P[2], P[3]
    sm = jnp.sqrt(m)
    v2, rr, qq = qd @ qd, jnp.sqrt(q @ q), q @ qd
    B = jnp.stack([q, q / rr]) / sm
    r = jnp.array([-v2 + g * q[1], -v2 / rr + qq * qq / rr**3 + g * q[1] / rr])  # b - A M^-1 Q
    c = -damp * qd / sm
    u = c + B.T @ (r - B @ c) / jnp.sum(B * B)
    return u / sm + jnp.array([0.0, -g])


ACCELS = {"W1": ring_accel, "W2": chain_accel(6), "W3": chain_accel(12), "W4": pendulum_accel}


def make_run(w, h):
    """A jitted function (P, q, qd, steps) -> (q, qd) after `steps` RK4 steps of every system."""
    accel = jax.vmap(ACCELS[w])

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
    """Every system, in chunks of CHUNK systems (or N where fewer; the last
    chunk padded with copies of its first system)."""
    N = len(q)
    chunk = min(CHUNK, N)
    out_q, out_qd = np.empty_like(q), np.empty_like(qd)
    for s in range(0, N, chunk):
        e = min(N, s + chunk)
        idx = np.concatenate([np.arange(s, e), np.full(chunk - (e - s), s)])
        rq, rqd = run(jnp.asarray(P[idx]), jnp.asarray(q[idx]), jnp.asarray(qd[idx]), steps)
        out_q[s:e], out_qd[s:e] = np.asarray(rq)[: e - s], np.asarray(rqd)[: e - s]
    return out_q, out_qd


def check(directory):
    return base.check(directory, lambda model, P, q, qd, dt, steps: integrate(make_run(model.id, dt), P, q, qd, steps),
                      "jax")


def bench(out, max_seconds, sizes):
    rng = np.random.default_rng(1)
    results = []
    for model in base.MODELS:
        for N in sizes:
            P, q, qd = model.random(rng, N)
            run = make_run(model.id, base.DT)
            warm = min(CHUNK, N)
            integrate(run, P[:warm], q[:warm], qd[:warm], 20)  # compilation
            t0 = time.perf_counter()
            integrate(run, P, q, qd, 20)
            steps = base.steps_per_timing(time.perf_counter() - t0, 20, max_seconds)
            integrate(run, P[:warm], q[:warm], qd[:warm], steps)  # compilation for that scan length
            times = []
            for _ in range(3):
                t0 = time.perf_counter()
                integrate(run, P, q, qd, steps)
                times.append(time.perf_counter() - t0)
            results.append(base.result(model, "jax", times, len(q), steps))
    base.write(out, {"jax": jax.__version__}, results)


def main():
    return base.cli(__doc__, check, bench, "1000|100000")


if __name__ == "__main__":
    sys.exit(main())
