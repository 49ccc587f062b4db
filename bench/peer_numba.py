#!/usr/bin/env python3
"""A peer of ukb: the same ensembles as hand-written numba loops (issue 56).

What a numba user would write instead of ukb: one system's Udwadia–Kalaba
acceleration in scalar loops compiled by numba (@njit, fastmath off), RK4
over the steps of one system at a time, numba.prange over systems. Every
workload has M = m I, which the loops use (L = sqrt(m) I), and nothing is allocated per
evaluation (a scratch array per system); the algebra is written out per
model: the ring's one row (B^+ = B^T / |B|^2), the chains' sparsity (row k
of A touches the masses k - 1 and k, so the Gram matrix B B^T is
tridiagonal and B^+ y = B^T (B B^T)^{-1} y is a banded Cholesky solve:
"numba using the chain's sparsity" in issue 56), the redundant pendulum's
two parallel rows (rank 1: B^+ = B^T / |B|_F^2). The models are written
again from include/ukb/models/ (the states of bench/baseline_numpy.py),
with one simplification ukb does not make: the ring's friction opposes q'
itself, not q' less its part along the row (ukb/friction.hpp); on the
constraint the two differ by the drift, about 1e-11 relative here.

    python3 bench/peer_numba.py --check DIR    # DIR from ukb_bench_baseline_eigen --export
    python3 bench/peer_numba.py --bench OUT.json [--sizes 1000|100000] [--max-seconds S]

As bench/peer_jax.py: --check compares with the reference backend (1e-9),
--bench writes W<k>/<model>/double/numba/threads:1/N:<N> (run it with
NUMBA_NUM_THREADS=1; bench/compare.sh does). Needs `pip install numba scipy`.
"""
import math
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import baseline_numpy as base  # noqa: E402

import numba  # noqa: E402
from numba import njit, prange  # noqa: E402

RCOND = base.RCOND


@njit(cache=False)
def ring_accel(P, q, qd, out, w):
    m, g, mu = P[0], P[2], P[3]
    sm = math.sqrt(m)
    a0, a1 = 0.0, -g  # M^-1 Q
    b = -(qd[0] * qd[0] + qd[1] * qd[1])
    r = b - (q[0] * a0 + q[1] * a1)
    B0, B1 = q[0] / sm, q[1] / sm  # A L^-T
    G = B0 * B0 + B1 * B1
    inv = 1.0 / G if G > 0 else 0.0  # one singular value sqrt(G): rank 1 unless B = 0
    z0, z1 = B0 * inv * r, B1 * inv * r  # B^+ r
    Qc0, Qc1 = sm * z0, sm * z1
    normal = math.sqrt(Qc0 * Qc0 + Qc1 * Qc1)
    v = math.sqrt(qd[0] * qd[0] + qd[1] * qd[1])
    if v > 0:
        C0, C1 = -mu * normal / v * qd[0], -mu * normal / v * qd[1]
    else:  # at rest: static friction against the tangential part of Q
        Q0, Q1 = 0.0, -m * g
        k = (q[0] * Q0 + q[1] * Q1) / (q[0] * q[0] + q[1] * q[1])
        t0, t1 = Q0 - k * q[0], Q1 - k * q[1]
        qt, limit = math.sqrt(t0 * t0 + t1 * t1), mu * normal
        f = -1.0 if qt <= limit else -limit / qt
        C0, C1 = f * t0, f * t1
    c0, c1 = C0 / sm, C1 / sm
    s = (r - (B0 * c0 + B1 * c1)) * inv
    out[0] = a0 + (c0 + B0 * s) / sm
    out[1] = a1 + (c1 + B1 * s) / sm


@njit(cache=False)
def chain_accel(P, q, qd, out, w):
    n = q.shape[0]
    K = n // 2
    m, g, damp = P[0], P[2], P[3]
    sm = math.sqrt(m)
    # The work arrays, slices of the caller's scratch w (3 n + 4 K values): no
    # allocation per evaluation.
    d, du, c = w[0:n], w[n:2 * n], w[2 * n:3 * n]
    r, ld, le, y = w[3 * n:3 * n + K], w[3 * n + K:3 * n + 2 * K], w[3 * n + 2 * K:3 * n + 3 * K], w[3 * n + 3 * K:3 * n + 4 * K]
    for k in range(K):
        px, py = (q[2 * k - 2], q[2 * k - 1]) if k > 0 else (0.0, 0.0)
        ux, uy = (qd[2 * k - 2], qd[2 * k - 1]) if k > 0 else (0.0, 0.0)
        d[2 * k], d[2 * k + 1] = q[2 * k] - px, q[2 * k + 1] - py
        du[2 * k], du[2 * k + 1] = qd[2 * k] - ux, qd[2 * k + 1] - uy
    # r = b - A a with a = (0, -g) at every mass: only the first row sees a.
    for k in range(K):
        r[k] = -(du[2 * k] ** 2 + du[2 * k + 1] ** 2)
    r[0] -= d[1] * (-g)
    # The Gram matrix G = B B^T = A A^T / m, tridiagonal; its Cholesky factor.
    for k in range(K):
        dd = (d[2 * k] ** 2 + d[2 * k + 1] ** 2) / m * (2.0 if k > 0 else 1.0)
        if k > 0:
            e = -(d[2 * k] * d[2 * k - 2] + d[2 * k + 1] * d[2 * k - 1]) / m
            le[k] = e / ld[k - 1]
            dd -= le[k] * le[k]
        ld[k] = math.sqrt(dd)
    for i in range(n):
        c[i] = -damp * qd[i] / sm  # L^-1 C
    # w = G^-1 (r - B c), B c: row k = d_k . (c_k - c_{k-1}) / sm
    for k in range(K):
        cx, cy = (c[2 * k - 2], c[2 * k - 1]) if k > 0 else (0.0, 0.0)
        y[k] = r[k] - (d[2 * k] * (c[2 * k] - cx) + d[2 * k + 1] * (c[2 * k + 1] - cy)) / sm
    for k in range(K):
        if k > 0:
            y[k] -= le[k] * y[k - 1]
        y[k] /= ld[k]
    for k in range(K - 1, -1, -1):
        if k < K - 1:
            y[k] -= le[k + 1] * y[k + 1]
        y[k] /= ld[k]
    # u = c + B^T w; q'' = a + u / sm
    for i in range(n):
        out[i] = c[i]
    for k in range(K):
        out[2 * k] += d[2 * k] * y[k] / sm
        out[2 * k + 1] += d[2 * k + 1] * y[k] / sm
        if k > 0:
            out[2 * k - 2] -= d[2 * k] * y[k] / sm
            out[2 * k - 1] -= d[2 * k + 1] * y[k] / sm
    for i in range(n):
        out[i] = out[i] / sm + (-g if i % 2 == 1 else 0.0)


@njit(cache=False)
def pendulum_accel(P, q, qd, out, w):
    """redundant_pendulum written out: its two rows q and q / |q| are
    parallel, so B = A / sqrt(m) has rank 1 (the second singular value is
    rounding, far below the rank tolerance) and B^+ = B^T / |B|_F^2."""
    m, g, damp = P[0], P[2], P[3]
    sm = math.sqrt(m)
    v2 = qd[0] * qd[0] + qd[1] * qd[1]
    rr = math.sqrt(q[0] * q[0] + q[1] * q[1])
    qq = q[0] * qd[0] + q[1] * qd[1]
    b00, b01, b10, b11 = q[0] / sm, q[1] / sm, q[0] / rr / sm, q[1] / rr / sm
    F = b00 * b00 + b01 * b01 + b10 * b10 + b11 * b11
    r0 = -v2 + g * q[1]  # b - A M^-1 Q
    r1 = -v2 / rr + qq * qq / rr**3 + g * q[1] / rr
    c0, c1 = -damp * qd[0] / sm, -damp * qd[1] / sm  # L^-1 C
    y0 = r0 - (b00 * c0 + b01 * c1)
    y1 = r1 - (b10 * c0 + b11 * c1)
    out[0] = (c0 + (b00 * y0 + b10 * y1) / F) / sm
    out[1] = (c1 + (b01 * y0 + b11 * y1) / F) / sm - g


def make_run(accel):
    @njit(parallel=True, cache=False)
    def run(P, q, qd, h, steps):
        N, n = q.shape
        for i in prange(N):
            x, v = q[i].copy(), qd[i].copy()
            k1, k2, k3, k4 = np.empty(n), np.empty(n), np.empty(n), np.empty(n)
            x2, v2, x3, v3, x4, v4 = np.empty(n), np.empty(n), np.empty(n), np.empty(n), np.empty(n), np.empty(n)
            w = np.empty(3 * n + 2 * n)  # the chains' scratch (3 n + 4 K = 5 n)
            for _ in range(steps):
                accel(P[i], x, v, k1, w)
                for j in range(n):
                    x2[j], v2[j] = x[j] + 0.5 * h * v[j], v[j] + 0.5 * h * k1[j]
                accel(P[i], x2, v2, k2, w)
                for j in range(n):
                    x3[j], v3[j] = x[j] + 0.5 * h * v2[j], v[j] + 0.5 * h * k2[j]
                accel(P[i], x3, v3, k3, w)
                for j in range(n):
                    x4[j], v4[j] = x[j] + h * v3[j], v[j] + h * k3[j]
                accel(P[i], x4, v4, k4, w)
                for j in range(n):
                    x[j] = x[j] + h / 6 * (v[j] + 2 * v2[j] + 2 * v3[j] + v4[j])
                    v[j] = v[j] + h / 6 * (k1[j] + 2 * k2[j] + 2 * k3[j] + k4[j])
            q[i], qd[i] = x, v
    return run


RUNS = {"W1": make_run(ring_accel), "W2": make_run(chain_accel), "W3": make_run(chain_accel),
        "W4": make_run(pendulum_accel)}


def check(directory):
    def integrate(model, P, q, qd, dt, steps):
        RUNS[model.id](P, q, qd, dt, steps)
        return q, qd
    return base.check(directory, integrate, "numba")


def bench(out, max_seconds, sizes):
    rng = np.random.default_rng(1)
    results = []
    for model in base.MODELS:
        run = RUNS[model.id]
        for N in sizes:
            P, q, qd = model.random(rng, N)
            run(P[:2], q[:2].copy(), qd[:2].copy(), base.DT, 1)  # compilation
            t0 = time.perf_counter()
            run(P, q.copy(), qd.copy(), base.DT, 20)
            steps = base.steps_per_timing(time.perf_counter() - t0, 20, max_seconds)
            times = []
            for _ in range(3):
                x, v = q.copy(), qd.copy()
                t0 = time.perf_counter()
                run(P, x, v, base.DT, steps)
                times.append(time.perf_counter() - t0)
            results.append(base.result(model, "numba", times, len(q), steps, numba.get_num_threads()))
    base.write(out, {"numba": numba.__version__}, results)


def main():
    return base.cli(__doc__, check, bench, "1000|100000")


if __name__ == "__main__":
    sys.exit(main())
