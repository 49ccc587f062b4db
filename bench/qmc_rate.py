#!/usr/bin/env python3
"""QMC measured, not assumed (issue 51): the RMSE of a Monte Carlo mean over
20 independent scrambles (seeds 1..20) against the number of samples N, for
sampling = "sobol" (one replicate: the whole run is one scrambled design) and
"random", with the fitted convergence rate of each (RMSE ~ N^-rate).

  PYTHONPATH=build/python python3 bench/qmc_rate.py [OUT_DIR]

Two outputs:
- smooth: incline_block's stopping distance v^2 / (2 g (mu cos(alpha) -
  sin(alpha))) with mu ~ U[0.3, 0.6] and v ~ U[1.5, 2.5]: its mean in closed
  form;
- the demo's resting angle (examples/ring_friction.toml, mu ~ U[0.05, 0.5]):
  a function of mu alone, against a reference mean from one sobol run
  of 2^18 samples (its own error is far below the smallest RMSE here).
Writes OUT_DIR/qmc_rate.json and prints a table."""
import json
import math
import os
import sys
import time
import tomllib

import numpy as np
import ukb

out = sys.argv[1] if len(sys.argv) > 1 else "bench/results/qmc"
os.makedirs(out, exist_ok=True)
SEEDS = range(1, 21)
NS = [2 ** k for k in (6, 8, 10, 12)]

incline = {"model": "incline_block", "integrator": {"dt": 0.01, "t_end": 3.0},
           "params": {"alpha": 0.1, "g": 9.81, "mu": {"dist": "uniform", "min": 0.3, "max": 0.6}},
           "initial": {"v": {"dist": "uniform", "min": 1.5, "max": 2.5}},
           "output": {"formats": ["npy"], "histogram_bins": 1}}
c, s = math.cos(0.1), math.sin(0.1)
Ev2 = (2.5 ** 3 - 1.5 ** 3) / (3 * 1.0)
incline_exact = Ev2 / (2 * 9.81) * math.log((0.6 * c - s) / (0.3 * c - s)) / (0.3 * c)

with open(os.path.join(os.path.dirname(__file__), "..", "examples", "ring_friction.toml"), "rb") as f:
    ring = tomllib.load(f)
ring.pop("output", None)
ring["output"] = {"formats": ["npy"], "histogram_bins": 1}


def mean_of(config, column, n, seed, design):
    cfg = dict(config, samples=n, seed=seed, sampling=design)
    if design != "random":
        cfg["replicates"] = 1
    table, summary = ukb.run(cfg, progress=False)
    return summary["observables"][column]["successful"]["mean"]


t0 = time.time()
ring_exact = mean_of(ring, "theta_final", 2 ** 18, 12345, "sobol")
results = {"incline_exact": incline_exact, "ring_reference": ring_exact, "rows": []}
for name, config, column, exact in (("incline stopping distance (smooth)", incline, "s_final", incline_exact),
                                    ("ring resting angle (the demo, mu alone)", ring, "theta_final", ring_exact)):
    for design in ("random", "sobol"):
        rmse = []
        for n in NS:
            errs = [mean_of(config, column, n, seed, design) - exact for seed in SEEDS]
            rmse.append(math.sqrt(sum(e * e for e in errs) / len(errs)))
        rate = -np.polyfit(np.log(NS), np.log(rmse), 1)[0]
        results["rows"].append({"output": name, "sampling": design, "N": NS, "rmse": rmse, "rate": rate})
results["seconds"] = time.time() - t0
with open(os.path.join(out, "qmc_rate.json"), "w") as f:
    json.dump(results, f, indent=1)
print("| output | sampling | " + " | ".join(f"RMSE N={n}" for n in NS) + " | fitted rate |")
print("|---|---|" + "---|" * len(NS) + "---|")
for r in results["rows"]:
    print(f"| {r['output']} | {r['sampling']} | " + " | ".join(f"{x:.2e}" for x in r["rmse"]) + f" | {r['rate']:.2f} |")
print(f"\n({results['seconds']:.0f} s; 20 seeds each; ring reference {ring_exact!r} from 2^18 sobol samples)")
