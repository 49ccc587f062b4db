# Coverage of the 95 % intervals of the mean and the median over 200 sobol runs
# (docs/outputs.md "Intervals"); run: PYTHONPATH=build-quick/python python3 bench/results/2026-11-29/coverage.py (8 s)
import math, ukb
v0, g, al, a, b = 2.0, 9.81, 0.1, 0.3, 0.6
c, s = math.cos(al), math.sin(al)
mean = v0*v0/(2*g)*math.log((b*c-s)/(a*c-s))/((b-a)*c)
med = v0*v0/(2*g*(((a+b)/2)*c - s))
for R, pts in ((8, 8), (8, 32), (16, 32)):
    hm = hq = 0
    for seed in range(1, 201):
        cfg = {"model": "incline_block", "samples": R*pts, "seed": seed, "sampling": "sobol", "replicates": R, "threads": 1,
               "integrator": {"dt": 0.01, "t_end": 3.0},
               "params": {"alpha": 0.1, "g": 9.81, "mu": {"dist": "uniform", "min": 0.3, "max": 0.6}},
               "initial": {"v": 2.0}, "output": {"formats": ["npy"], "histogram_bins": 1}}
        t, sm = ukb.run(cfg, progress=False)
        o = sm["observables"]["s_final"]["successful"]
        hm += o["mean_interval"][0] <= mean <= o["mean_interval"][1]
        hq += o["quantile_intervals"]["p50"][0] <= med <= o["quantile_intervals"]["p50"][1]
    print(f"sobol {R} replicates x {pts} points: mean covered {hm}/200, median {hq}/200")
