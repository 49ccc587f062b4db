# The figures of ukb.energy_balance in the closing note of 2026-11-28 (evening), from the repository root:
#   PYTHONPATH=build-quick/python python3 bench/results/2026-11-28/energy_balance_figures.py
# (output below the script, in energy_balance_figures.txt)
import sys, numpy as np, ukb
sys.path.insert(0, "tests/python")
from test_api import ring_friction_power
mu = np.array([0.0, 0.1, 0.3, 0.5])
q0, qd0 = ukb.initial_state("bead_on_ring", params={"R": 0.7}, theta=-1.3, omega=3.0, N=4)
c = dict(params={"mu": mu, "R": 0.7}, t_end=0.6)
print("ring dt=1e-3 relative", ukb.energy_balance("bead_on_ring", q0, qd0, power=ring_friction_power, dt=1e-3, **c).relative)
m = [ukb.energy_balance("bead_on_ring", q0, qd0, power=ring_friction_power, dt=h, **c).mismatch for h in (2e-2, 1e-2)]
print("ring ratio 0.02/0.01", m[0] / m[1])
print("ring wrong sign", ukb.energy_balance("bead_on_ring", q0, qd0, power=lambda *a: -ring_friction_power(*a), dt=1e-3, **c).relative)
q1, qd1 = ukb.initial_state("bead_on_ring", params={"R": 0.7}, theta=0.3, omega=4.0, N=4)
print("ring, N through zero", ukb.energy_balance("bead_on_ring", q1, qd1, power=ring_friction_power, dt=1e-3, **c).relative)
p = "examples/models/spring_block.hpp"
q0, qd0 = ukb.initial_state(p, x=1.0, v=0.5, N=3)
k = dict(params={"mu": [0.0, 0.05, 0.2]}, dt=1e-3, t_end=15.0)
print("spring_block law", ukb.energy_balance(p, q0, qd0, power=lambda q, qd, t, p: -p["mu"] * p["m"] * p["g"] * abs(qd[0]), **k).relative)
print("spring_block none", ukb.energy_balance(p, q0, qd0, **k).relative)
