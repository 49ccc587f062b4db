#!/usr/bin/env python3
"""A particle in a rough bowl: ukb's stop detection on a curved surface
against SciPy.

    scipy_bowl.py UKB_CLI WORK_DIR [MODEL_CACHE]

The model file tests/data/model_files/rough_bowl.hpp holds a point on the
sphere |q| = R in Cartesian coordinates, with Coulomb friction against its
2-D sliding velocity and ukb's friction stop event and handler
(include/ukb/friction.hpp), which finish the last stretch of each stop in
closed form with the forces of its start held constant: on a curved surface
they are not, and this check bounds what that costs. SciPy integrates the
same physics written here independently in the sphere's angles (theta from
the bottom, the azimuth phi; Newton's law along e_theta and e_phi, the
normal force m (s^2 / R + g cos theta) from the radial balance), to a
sliding speed of 1e-9 m/s, where the stop is less than 1e-8 s away; near
the stop in Sundman's time (dt = speed dtau), in which the heading's turning
is not stiff.

Twelve launches, each stopping for good on its first stop (mu is above
tan theta wherever the particle can reach). ukb runs them twice with dopri5:
to 0.03 s, before any stop (the final states against SciPy's at that time:
the issue asks 1e-9), and to the end (the stop times against SciPy's: 1e-6
s; the resting places to 1e-8 m); and once with RK4 at dt = 1e-3 (stops
within 1e-6 s). Measured (2026-11-29, Debian 12's SciPy 1.10): states
before the stops within 4.2e-14, dopri5's stop times within 4.9e-8 s (the
finish's constant forces on the curved surface, look-ahead 1e-3 s) and
resting places within 2.0e-10 m, RK4's stop times within 1.0e-7 s.

Exit codes: 0 passed, 1 failed, 77 skipped (no SciPy; ctest reports it).
"""
import math
import os
import subprocess
import sys

try:
    import numpy as np
    from scipy.integrate import solve_ivp
except ImportError as e:
    print(f"skipped: {e} (scripts/install_deps.sh installs python3-scipy)")
    sys.exit(77)

R, G = 1.0, 9.81
MU = 1.3  # above tan(theta) wherever the particles reach (theta < 0.86)
# Three sweep axes, theta varying fastest (docs/config.md): 12 launches.
THETAS, SPEEDS, HEADINGS = [0.4, 0.55, 0.7], [0.6, 1.2], [1.3, 1.8]
LAUNCHES = [(th, v, h) for h in HEADINGS for v in SPEEDS for th in THETAS]
T_BEFORE, T_END, STOP_SPEED = 0.03, 2.0, 1e-9


def bowl_rhs(_t, y, mu):
    th, ph, thd, phd = y
    s, c = math.sin(th), math.cos(th)
    vt, vp = R * thd, R * s * phd  # along e_theta (up the bowl) and e_phi
    v = math.hypot(vt, vp)
    n = v * v / R + G * c  # normal force per unit mass
    ft, fp = (-mu * n * vt / v, -mu * n * vp / v) if v > 0 else (0.0, 0.0)
    thdd = s * c * phd * phd + (-G * s + ft) / R
    phdd = (fp / R - 2 * c * thd * phd) / s
    return [thd, phd, thdd, phdd]


def speed(y):
    return R * math.hypot(y[2], math.sin(y[0]) * y[3])


def bowl_rhs_in_tau(_tau, y, mu):
    # Near a stop the heading turns at a rate growing as 1 / speed (stiff in
    # t); in the time tau with dt = speed dtau (Sundman's transformation)
    # every rate is multiplied by the speed, the heading turns at a bounded
    # rate and the speed decays exponentially: t is the fifth variable.
    s = speed(y)
    return [s * d for d in bowl_rhs(0.0, y[:4], mu)] + [s]


def stopped(_tau, y, _mu):
    return speed(y) - STOP_SPEED


stopped.terminal = True
stopped.direction = -1


def scipy_launch(i):
    (th, v, h), mu = LAUNCHES[i], MU
    # ukb's initial_state: velocity v (-cos h e_theta + sin h e_phi) at phi = 0.
    y0 = [th, 0.0, -v * math.cos(h) / R, v * math.sin(h) / (R * math.sin(th))]
    before = solve_ivp(bowl_rhs, (0, T_BEFORE), y0, method="DOP853", rtol=1e-13, atol=1e-15, args=(mu,))
    full = solve_ivp(bowl_rhs_in_tau, (0, 1e3), y0 + [0.0], method="DOP853", rtol=1e-13, atol=1e-15,
                     args=(mu,), events=stopped)
    if len(full.t_events[0]) != 1:
        raise SystemExit(f"launch {i}: SciPy found no stop")
    y_stop = full.y_events[0][0]
    return before.y[:, -1], y_stop[4], y_stop


def cartesian(th, ph):
    return np.array([R * math.sin(th) * math.cos(ph), R * math.sin(th) * math.sin(ph), -R * math.cos(th)])


def ukb_run(ukb, work, name, integrator):
    cfg = os.path.join(work, f"{name}.toml")
    model = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "model_files", "rough_bowl.hpp")
    with open(cfg, "w") as f:
        f.write(f"""model = "{model}"
samples = {len(LAUNCHES)}
[integrator]
{integrator}
[params]
R = {R}
g = {G}
mu = {MU}
[initial]
theta = {THETAS}
speed = {SPEEDS}
heading = {HEADINGS}
""")
    out = os.path.join(work, name)
    subprocess.run([ukb, "run", cfg, "--out", out, "--quiet"], check=True)
    return np.load(os.path.join(out, "results.npy"))


def main():
    ukb, work = sys.argv[1], sys.argv[2]
    if len(sys.argv) > 3:
        os.environ["UKB_CACHE_DIR"] = sys.argv[3]
    os.makedirs(work, exist_ok=True)
    # (max_steps far above the stops' needs: a stop that is never found ends
    # the run at a step limit, which the checks below fail, instead of an
    # adaptive crawl towards it.)
    dp = 'method = "dopri5"\nrtol = 1e-12\natol = 1e-14\nevent_tol = 1e-12\nmax_steps = 200000'
    before = ukb_run(ukb, work, "before", f"{dp}\nt_end = {T_BEFORE}")
    full = ukb_run(ukb, work, "full", f"{dp}\nt_end = {T_END}")
    rk4 = ukb_run(ukb, work, "rk4", f'method = "rk4"\ndt = 1e-3\nt_end = {T_END}')
    failed = False
    worst_state = worst_t = worst_place = worst_rk4 = 0.0
    for i in range(len(LAUNCHES)):
        y_before, t_stop, y_stop = scipy_launch(i)
        mine = np.array([before[f"q_{c}_final"][i] for c in "xyz"] + [before[f"qd_{c}_final"][i] for c in "xyz"])
        th, ph, thd, phd = y_before
        e_th = np.array([math.cos(th) * math.cos(ph), math.cos(th) * math.sin(ph), math.sin(th)])
        e_ph = np.array([-math.sin(ph), math.cos(ph), 0.0])
        theirs = np.concatenate([cartesian(th, ph), R * thd * e_th + R * math.sin(th) * phd * e_ph])
        d_state = float(np.max(np.abs(mine - theirs)))
        d_t = abs(float(full["t_stop"][i]) - t_stop)
        d_place = float(np.linalg.norm([full[f"q_{c}_final"][i] for c in "xyz"] - cartesian(y_stop[0], y_stop[1])))
        d_rk4 = abs(float(rk4["t_stop"][i]) - t_stop)
        print(f"launch {i}: state at {T_BEFORE} s {d_state:.3g}; stop at {t_stop:.6f} s, dopri5 {d_t:.3g} s and "
              f"{d_place:.3g} m off, rk4 {d_rk4:.3g} s off")
        for r, what in ((before, "before"), (full, "dopri5"), (rk4, "rk4")):
            want = b"finished" if r is before else b"at_rest"
            if r["status"][i] != want:
                print(f"launch {i}: {what} run ended {r['status'][i]}, expected {want}")
                failed = True
        worst_state, worst_t = max(worst_state, d_state), max(worst_t, d_t)
        worst_place, worst_rk4 = max(worst_place, d_place), max(worst_rk4, d_rk4)
    print(f"worst: state before the stops {worst_state:.3g} (tolerance 1e-9), stop times {worst_t:.3g} s "
          f"(1e-6), resting places {worst_place:.3g} m (1e-8), rk4 stop times {worst_rk4:.3g} s (1e-6)")
    failed = failed or not (worst_state < 1e-9 and worst_t < 1e-6 and worst_place < 1e-8 and worst_rk4 < 1e-6)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
