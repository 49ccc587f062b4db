#!/usr/bin/env bash
# Installs what is missing, builds ukb in build/, and shows it at work on the
# bead on a rough ring (Udwadia 2000): one acceleration, and a trajectory.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install_deps.sh

jobs="${UKB_JOBS:-2}"
echo "== Building ukb in build/ (the first build takes a few minutes)..."
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$jobs" --target ukb_cli ukb_example_ring_energy >/dev/null
out=build/demo
mkdir -p "$out"

echo
echo "== The models ukb knows (build/bin/ukb models):"
build/bin/ukb models | grep -E '^[a-z]'
echo
echo "== One acceleration: a bead on a vertical ring of radius 1.25 m, friction mu = 0.25,"
echo "   at (x, y) = (1.194170, 0.369400) moving with (x', y') = (-0.738801, 2.388340):"
echo "   build/bin/ukb accel --model bead_on_ring --param R=1.25 --param mu=0.25 \\"
echo "       --q 1.194170,0.369400 --qd -0.738801,2.388340"
build/bin/ukb accel --model bead_on_ring --param R=1.25 --param mu=0.25 \
  --q 1.194170,0.369400 --qd -0.738801,2.388340 | tee "$out/ring_accel.json"
echo "   (qdd: acceleration; Qc_ideal: normal force; Qc_nonideal: friction; lambda: multiplier)"
echo
echo "== A trajectory: the bead released at rest level with the centre (x = 1, y = 0), mu = 0.2,"
echo "   RK4 with dt = 1e-3 for 1 s on the reference backend; energy drained by friction:"
build/bin/ukb_example_ring_energy 0.2 1.0 | tee "$out/ring_energy.txt"
build/bin/ukb trajectory --model bead_on_ring --param mu=0.2 --q 1,0 --qd 0,0 \
  --dt 1e-3 --steps 1000 --every 10 --out "$out/ring_trajectory.csv"
echo
echo "== Results are in $out/:"
echo "   ring_accel.json       the acceleration above"
echo "   ring_energy.txt       angle, angular speed and energy every 0.1 s"
echo "   ring_trajectory.csv   t, x, y, x_dot, y_dot every 10 steps"
echo "Next: build/bin/ukb --help, and scripts/test.sh to run the test suite."
