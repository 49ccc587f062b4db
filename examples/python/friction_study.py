#!/usr/bin/env python3
"""The ring study from Python: a bead released at rest level with the centre
of a vertical rough ring slides down and sticks. Where does it stop, as a
function of the friction coefficient mu?

    PYTHONPATH=build/python python3 examples/python/friction_study.py [--n 400] [--out friction_study.png]

One ukb.simulate call integrates the whole grid of mu values at once (the
cpu backend, every core); the figure shows the resting angle against mu
and the band of angles where static friction can hold a bead at rest:
below the centre, where the tangential part of gravity, g |cos theta|, is
at most mu times the normal part, mu g |sin theta|.
"""
import argparse

import numpy as np

import ukb


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=400, help="number of mu values (default 400)")
    ap.add_argument("--out", default="friction_study.png", help="the figure (default friction_study.png)")
    a = ap.parse_args()

    mu = np.linspace(0.05, 0.5, a.n)
    q0, qd0 = ukb.initial_state("bead_on_ring", theta=0.0, omega=0.0, N=mu.size)
    r = ukb.simulate("bead_on_ring", q0, qd0, params={"mu": mu, "R": 1.0, "g": 9.81},
                     dt=0.01, t_end=60.0, event_tol=1e-10)
    at_rest = r.status_name == "at_rest"
    theta = r.final["theta"]
    print(f"{at_rest.sum()} of {mu.size} beads at rest; resting angle from {theta.min():.4f} to "
          f"{theta.max():.4f} rad; median time to rest {np.median(r.t_stop):.3f} s")

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    ax.plot(mu[at_rest], np.degrees(theta[at_rest]), ".", ms=3, label="ukb.simulate: resting angle")
    # Static friction holds a bead at rest at theta (below the centre) where
    # |cos theta| <= mu |sin theta|: the band it must stop in.
    edge = -90 + np.degrees(np.arctan(mu))
    ax.fill_between(mu, edge, -90 - np.degrees(np.arctan(mu)), color="0.85", label="static friction holds")
    ax.set_xlabel("friction coefficient mu")
    ax.set_ylabel("resting angle theta [deg] (from +x, counter-clockwise)")
    ax.set_title("Bead on a rough vertical ring, released level with the centre")
    ax.legend(loc="lower left")
    fig.tight_layout()
    fig.savefig(a.out, dpi=120)
    print(f"figure: {a.out}")


if __name__ == "__main__":
    main()
