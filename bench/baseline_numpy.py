#!/usr/bin/env python3
"""The Python baseline: what a numpy user would write instead of ukb.

The ensemble is vectorised over systems: stacked arrays of shape (N, n, n),
batched np.linalg.cholesky, np.linalg.solve and np.linalg.pinv (rcond = the
rank tolerance 1e-10, the same relative rule), classical RK4 in a Python
loop over steps. The models are written again in numpy from their
definitions in include/ukb/models/.

    python3 bench/baseline_numpy.py --check DIR    # DIR from ukb_bench_baseline_eigen --export
    python3 bench/baseline_numpy.py --bench OUT.json [--max-seconds S] [--sizes 1000|100000]

--check integrates the exported systems and compares with the reference
backend's result (exit 1 if the relative difference exceeds 1e-9). --bench
writes Google-Benchmark-shaped JSON (name W<k>/<model>/double/numpy/
threads:1/N:<N>, items_per_second = RK4 system-steps per second, the median
of 3 timings). Run it with OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 for one
thread (bench/compare.sh does).
"""
import argparse
import json
import sys
import time

import numpy as np

RCOND = 1e-10
DT = 1e-3


def col(x):
    return x[..., None]


def point_mass(P, q):
    """M = m I and Q = (0, -m g) of a point mass in the plane (params m, _, g)."""
    M = P[:, 0, None, None] * np.eye(2)
    Q = np.zeros((len(q), 2))
    Q[:, 1] = -P[:, 0] * P[:, 2]
    return M, Q


class Ring:
    """bead_on_ring; params (m, R, g, mu)."""
    id, name, n, m = "W1", "bead_on_ring", 2, 1

    @staticmethod
    def random(rng, N):
        P = np.tile([1.0, 1.0, 9.81, 0.0], (N, 1))
        P[:, 3] = rng.uniform(0.05, 0.5, N)
        th, om = rng.uniform(-np.pi, np.pi, N), rng.uniform(-3, 3, N)
        q = np.stack([np.cos(th), np.sin(th)], 1)
        qd = np.stack([-om * np.sin(th), om * np.cos(th)], 1)
        return P, q, qd

    @staticmethod
    def terms(P, q, qd):
        M, Q = point_mass(P, q)
        A = q[:, None, :].copy()
        b = -(qd * qd).sum(1, keepdims=True)
        return M, Q, A, b

    @staticmethod
    def nonideal(P, q, qd, Qc, lam):
        mu = P[:, 3]
        v = np.sqrt((qd * qd).sum(1))
        normal = np.sqrt((Qc * Qc).sum(1))
        with np.errstate(divide="ignore", invalid="ignore"):
            sliding = np.where(col(v > 0), -col(mu * normal / v) * qd, 0.0)
            # at rest: static friction against the tangential part of Q
            Q = np.zeros_like(q)
            Q[:, 1] = -P[:, 0] * P[:, 2]
            aQ, aa = (q * Q).sum(1), (q * q).sum(1)
            Qt = Q - col(aQ / aa) * q
            qt, limit = np.sqrt((Qt * Qt).sum(1)), mu * normal
            k = np.where(qt <= limit, -1.0, -limit / qt)
        return np.where(col(v > 0), sliding, col(k) * Qt)


class Chain:
    """planar_chain_K; params (m, l, g, c)."""
    def __init__(self, K):
        self.K, self.n, self.m = K, 2 * K, K
        self.id = "W2" if K == 6 else "W3"
        self.name = f"planar_chain_{K}"

    def random(self, rng, N):
        K = self.K
        P = np.tile([1.0, 1.0, 9.81, 0.1], (N, 1))
        th, om = rng.uniform(-1, 1, (N, K)), rng.uniform(-1, 1, (N, K))
        dx, dy = np.sin(th), -np.cos(th)
        q = np.stack([np.cumsum(dx, 1), np.cumsum(dy, 1)], 2).reshape(N, -1)
        qd = np.stack([np.cumsum(om * np.cos(th), 1), np.cumsum(om * np.sin(th), 1)], 2).reshape(N, -1)
        return P, q, qd

    def links(self, x):
        p = x.reshape(len(x), self.K, 2)
        prev = np.concatenate([np.zeros_like(p[:, :1]), p[:, :-1]], 1)
        return p - prev  # (N, K, 2)

    def terms(self, P, q, qd):
        N, K, n = len(q), self.K, self.n
        M = P[:, 0, None, None] * np.eye(n)
        Q = np.zeros((N, n))
        Q[:, 1::2] = -col(P[:, 0] * P[:, 2])
        d, u = self.links(q), self.links(qd)
        A = np.zeros((N, K, n))
        k = np.arange(K)
        A[:, k, 2 * k] = d[:, :, 0]
        A[:, k, 2 * k + 1] = d[:, :, 1]
        A[:, k[1:], 2 * k[1:] - 2] = -d[:, 1:, 0]
        A[:, k[1:], 2 * k[1:] - 1] = -d[:, 1:, 1]
        b = -(u * u).sum(2)
        return M, Q, A, b

    @staticmethod
    def nonideal(P, q, qd, Qc, lam):
        return -col(P[:, 3]) * qd


class Pendulum:
    """redundant_pendulum; params (m, l, g, c)."""
    id, name, n, m = "W4", "redundant_pendulum", 2, 2

    @staticmethod
    def random(rng, N):
        P = np.tile([1.0, 1.0, 9.81, 0.1], (N, 1))
        th, om = rng.uniform(-2, 2, N), rng.uniform(-2, 2, N)
        q = np.stack([np.sin(th), -np.cos(th)], 1)
        qd = np.stack([om * np.cos(th), om * np.sin(th)], 1)
        return P, q, qd

    @staticmethod
    def terms(P, q, qd):
        M, Q = point_mass(P, q)
        v2 = (qd * qd).sum(1)
        r = np.sqrt((q * q).sum(1))
        rr = (q * qd).sum(1)
        A = np.stack([q, q / col(r)], 1)
        b = np.stack([-v2, -v2 / r + rr * rr / r**3], 1)
        return M, Q, A, b

    @staticmethod
    def nonideal(P, q, qd, Qc, lam):
        return -col(P[:, 3]) * qd


def accel(model, P, q, qd):
    """q'' of every system: the Udwadia–Kalaba equation, batched."""
    M, Q, A, b = model.terms(P, q, qd)
    L = np.linalg.cholesky(M)
    Lt = np.swapaxes(L, 1, 2)
    a = np.linalg.solve(Lt, np.linalg.solve(L, col(Q)))[..., 0]
    r = b - (A @ col(a))[..., 0]
    B = np.swapaxes(np.linalg.solve(L, np.swapaxes(A, 1, 2)), 1, 2)  # A L^{-T}
    Bp = np.linalg.pinv(B, rcond=RCOND)
    z = (Bp @ col(r))[..., 0]
    Qc = (L @ col(z))[..., 0]
    lam = (np.swapaxes(Bp, 1, 2) @ col(z))[..., 0]  # (B B^T)^+ r
    C = model.nonideal(P, q, qd, Qc, lam)
    c = np.linalg.solve(L, col(C))
    u = c + Bp @ (col(r) - B @ c)
    return a + np.linalg.solve(Lt, u)[..., 0]


def rk4(model, P, q, qd, h, steps):
    for _ in range(steps):
        k1 = accel(model, P, q, qd)
        q2, v2 = q + 0.5 * h * qd, qd + 0.5 * h * k1
        k2 = accel(model, P, q2, v2)
        q3, v3 = q + 0.5 * h * v2, qd + 0.5 * h * k2
        k3 = accel(model, P, q3, v3)
        q4, v4 = q + h * v3, qd + h * k3
        k4 = accel(model, P, q4, v4)
        q = q + h / 6 * (qd + 2 * v2 + 2 * v3 + v4)
        qd = qd + h / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
    return q, qd


MODELS = [Ring, Chain(6), Chain(12), Pendulum]


def check(directory, integrate=None, label="numpy"):
    """The exported systems of every workload integrated by `integrate(model,
    P, q0, qd0, dt, steps) -> (q, qd)` (default: this file's rk4) against the
    reference backend's result; True where each is within 1e-9 (relative)."""
    ok = True
    for model in MODELS:
        with open(f"{directory}/{model.id}.txt") as f:
            n, m, npar, steps, dt = f.readline().split()
            data = np.loadtxt(f, ndmin=2)
        n, npar, steps = int(n), int(npar), int(steps)
        P = np.ascontiguousarray(data[:, :npar])
        q0, qd0 = data[:, npar:npar + n].copy(), data[:, npar + n:npar + 2 * n].copy()
        ref = data[:, npar + 2 * n:]
        smooth = np.ones(len(q0), bool)
        if model.id == "W1":
            # Coulomb friction flips where a bead's velocity reverses, and any
            # rounding difference there grows (1e-6 after 100 steps): compared
            # are the beads that cannot reverse within the run. On the ring
            # (R = 1, mu <= 0.5) |omega'| <= g (1 + mu) + mu omega^2, so
            # omega takes at least the integral of d omega / (g (1 + mu) +
            # mu omega^2) from 0 to 2, 0.130 s, to fall from 2 to 0: beads
            # with |omega| >= 2 cannot reverse within 0.1 s.
            omega = (q0[:, 0] * qd0[:, 1] - q0[:, 1] * qd0[:, 0]) / (P[:, 1] ** 2)
            if steps * float(dt) <= 0.1 + 1e-12 and np.all(P[:, 1] == 1) and np.all(P[:, 3] <= 0.5):
                smooth = np.abs(omega) >= 2
        q, qd = (integrate or rk4)(model, P, q0, qd0, float(dt), steps)  # (a peer may write into q0, qd0)
        got = np.concatenate([q, qd], 1)
        diff = np.sqrt(((got - ref) ** 2).sum(1) / (ref**2).sum(1))[smooth].max()
        good = diff < 1e-9
        ok &= good
        print(f"{model.id} {model.name:20s} {label} vs reference after {steps} steps, {smooth.sum()} of {len(q)} "
              f"systems: max rel. diff {diff:.2e} ({'ok' if good else 'TOO LARGE'})")
    return ok


def cli(doc, check_fn, bench_fn, default_sizes="100|1000|10000|100000|1000000"):
    """The command line of the baseline and of the peers: --check DIR, --bench OUT."""
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check", metavar="DIR")
    ap.add_argument("--bench", metavar="OUT_JSON")
    ap.add_argument("--max-seconds", type=float, default=20.0, help="time limit per configuration")
    ap.add_argument("--sizes", default=default_sizes, help="batch sizes N, separated by |")
    a = ap.parse_args()
    if a.check:
        return 0 if check_fn(a.check) else 1
    if a.bench:
        bench_fn(a.bench, a.max_seconds, [int(x) for x in a.sizes.split("|")])
        return 0
    ap.print_help()
    return 2


def bench(out, max_seconds, sizes):
    rng = np.random.default_rng(1)
    results = []
    for model in MODELS:
        for N in sizes:
            if N * model.n * model.n > 3e7:  # keep the stacked (N, n, n) arrays small
                continue
            P, q, qd = model.random(rng, N)
            rk4(model, P, q, qd, DT, 1)  # warm-up
            t0 = time.perf_counter()
            rk4(model, P, q, qd, DT, 1)
            once = time.perf_counter() - t0
            steps = max(1, min(1000, int(0.3 / once)))
            if once * steps * 3 > max_seconds:
                steps = max(1, int(max_seconds / (3 * once)))
            times = []
            for _ in range(3):
                t0 = time.perf_counter()
                rk4(model, P, q, qd, DT, steps)
                times.append(time.perf_counter() - t0)
            results.append(result(model, "numpy", times, N, steps))
    write(out, {"numpy": np.__version__}, results)


def result(model, label, times, N, steps, threads=1):
    """One Google-Benchmark-shaped row (the median of `times`, each of N
    systems x `steps` RK4 steps), printed as it is made."""
    t = float(np.median(times))
    name = f"{model.id}/{model.name}/double/{label}/threads:{threads}/N:{N}"
    print(f"{name:55s} {N * steps / t:12.4g} system-steps/s", flush=True)
    return {"name": name, "run_type": "aggregate", "aggregate_name": "median", "real_time": t * 1e3,
            "time_unit": "ms", "items_per_second": N * steps / t, "N": N, "threads": threads, "steps_per_call": steps}


def steps_per_timing(seconds, steps, max_seconds):
    """Steps per timing: about 0.3 s a timing (so that dispatch and copies
    do not count at small N), at most 1000, and 3 timings within
    max_seconds; `seconds` is what `steps` steps took."""
    per_step = max(seconds, 1e-9) / steps
    return max(1, min(1000, int(0.3 / per_step), int(max_seconds / (3 * per_step))))


def write(out, context, results):
    with open(out, "w") as f:
        json.dump({"context": context, "benchmarks": results}, f, indent=1)


def main():
    return cli(__doc__, check, bench)


if __name__ == "__main__":
    sys.exit(main())
