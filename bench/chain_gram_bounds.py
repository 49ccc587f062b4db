#!/usr/bin/env python3
"""The Gram route's two condition bounds on W3's chains (numpy).

    /usr/bin/python3 bench/chain_gram_bounds.py [--states 2000] [--links 12]

For random states of planar_chain_K as W3 draws them (link angles uniform in
[-1, 1], m = 1, so B = A), G = B B^T = L L^T: prints percentiles of cond(G),
of the first bound trace(G) ||L^-1||_F^2 and of the second
min(trace(G), ||L||_1 ||L||_inf) * min(||L^-1||_F^2, ||L^-1||_1 ||L^-1||_inf)
(kernels/ukb/kernels/linalg.hpp, PseudoInverse::certify), and the share of
states each certifies below float's limit of 200.
"""
import argparse

import numpy as np


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--states", type=int, default=2000)
    ap.add_argument("--links", type=int, default=12)
    a = ap.parse_args()
    rng = np.random.default_rng(1)
    K = a.links
    rows = []
    for _ in range(a.states):
        th = rng.uniform(-1, 1, K)
        d = np.stack([np.sin(th), -np.cos(th)], 1)
        A = np.zeros((K, 2 * K))
        for k in range(K):
            A[k, 2 * k:2 * k + 2] = d[k]
            if k > 0:
                A[k, 2 * k - 2:2 * k] = -d[k]
        G = A @ A.T
        ev = np.linalg.eigvalsh(G)
        L = np.linalg.cholesky(G)
        Li = np.linalg.inv(L)
        norm1 = lambda X: np.abs(X).sum(0).max()
        norminf = lambda X: np.abs(X).sum(1).max()
        tr, f2 = np.trace(G), (Li ** 2).sum()
        rows.append((ev[-1] / ev[0], tr * f2,
                     min(tr, norm1(L) * norminf(L)) * min(f2, norm1(Li) * norminf(Li))))
    r = np.array(rows)
    print(f"{a.states} states of a {K}-link chain: percentiles 0, 50, 90, 99, 100; share <= 200")
    for i, name in enumerate(["cond(G)", "first bound", "second bound"]):
        p = np.percentile(r[:, i], [0, 50, 90, 99, 100])
        print(f"{name:13s}", " ".join(f"{x:8.1f}" for x in p), f"  {100 * (r[:, i] <= 200).mean():.1f} %")


if __name__ == "__main__":
    main()
