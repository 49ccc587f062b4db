#!/usr/bin/env python3
"""The stops of a puck_incline run against their closed forms.

    puck_check.py RUN_DIR   (a run of examples/models/puck_incline.toml or
                             puck_rk4.toml: alpha = 0.3, speed 2, heading pi/2)
"""
import math
import sys

import numpy as np

r = np.load(f"{sys.argv[1]}/results.npy")
al, g, v0 = 0.3, 9.81, 2.0
a = g * math.sin(al)
worst_t = worst_x = 0.0
for row in r:
    k = row["mu"] / math.tan(al)
    # heading pi/2: w0 = tan(pi/4) = 1, y'0 = 0 (tests/models/test_puck.cpp's closed forms)
    c = v0
    x = c * c / (2 * a) * (1 / (2 * k - 1) + 1 / (2 * k + 1))
    s = c * c / (4 * a) * (1 / (2 * k - 2) + 1 / k + 1 / (2 * k + 2))
    t = k * v0 / (a * (k * k - 1))
    y = (k * v0) ** 2 / (2 * a * (k * k - 1)) - k * s
    worst_t = max(worst_t, abs(row["t_stop"] - t))
    worst_x = max(worst_x, math.hypot(row["q_x_final"] - x, row["q_y_final"] - y))
print(f"{len(r)} samples, statuses {sorted(set(s.decode() for s in r['status']))}, mu in "
      f"[{r['mu'].min():.3f}, {r['mu'].max():.3f}]: stop times within {worst_t:.3g} s, places within {worst_x:.3g} m, "
      f"steps at most {r['steps'].max()}")
