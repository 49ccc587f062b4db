#!/usr/bin/env bash
# Distributed runs (`mpirun -n P ukb run`, docs/cluster.md)
# against one process: the same files, byte for byte. Run by ctest
# (tests/CMakeLists.txt) as:
#   mpi_runs.sh CASE UKB MPIEXEC SOURCE_DIR WORK_DIR
# CASE: same_files (the ring demo with events and recorded trajectories, and
# a sweep config, on P = 1, 2 and 3), resume (a P = 3 run stopped by SIGTERM
# resumed with P = 2), bad_config (refused by every rank, said once, exit 2).
set -euo pipefail
case_=$1 ukb=$2 mpiexec=$3 src=$4 work=$5
rm -rf "$work" && mkdir -p "$work" && cd "$work"

# OpenMPI refuses to start as root unless told it may (this machine and CI
# run the suite as root); several ranks per core on a 2-core machine need
# --oversubscribe.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mpi() { local p=$1; shift; "$mpiexec" --oversubscribe -n "$p" "$@"; }

same() {  # same DIR_A DIR_B FILE...
  local a=$1 b=$2; shift 2
  for f in "$@"; do
    cmp "$a/$f" "$b/$f" || { echo "FAIL: $a/$f and $b/$f differ"; exit 1; }
  done
  echo "same: $a and $b ($*)"
}

# The ring demo, smaller: events, trajectories of samples 0-3, several
# blocks (chunk 200) per rank.
sed -e 's/^samples = 100000/samples = 3000/' -e 's/^\[integrator\]$/[integrator]\nchunk = 200/' \
    "$src/examples/ring_friction.toml" >ring.toml
grep -q '^samples = 3000' ring.toml && grep -q '^chunk = 200$' ring.toml

case $case_ in
same_files)
  "$ukb" run ring.toml --out ring1 --quiet >/dev/null
  for p in 2 3; do
    mpi $p "$ukb" run ring.toml --out ring$p --quiet >/dev/null
    same ring1 ring$p results.csv results.npy summary.json trajectories.csv
    grep -q "\"ranks\": $p" ring$p/run.json
  done
  # A sweep: grid and values axes, no events.
  sed -e 's/^samples = .*/samples = 600/' -e 's/^t_end = 5.0/t_end = 5.0\nchunk = 50/' \
      "$src/examples/incline_sweep.toml" >sweep.toml
  grep -q '^chunk = 50' sweep.toml
  "$ukb" run sweep.toml --out sweep1 --quiet >/dev/null
  for p in 2 3; do
    mpi $p "$ukb" run sweep.toml --out sweep$p --quiet >/dev/null
    same sweep1 sweep$p results.csv results.npy summary.json trajectories.csv
  done
  # Sobol samples ended by [stop] (docs/config.md, "Stopping at a
  # precision"): the same check ends the run whatever the ranks.
  cat >stop.toml <<'EOF'
model = "incline_block"
samples = 100000
seed = 4
sampling = "sobol"
replicates = 8
[integrator]
dt = 0.01
t_end = 3.0
chunk = 300
[params]
alpha = 0.1
mu = { dist = "uniform", min = 0.3, max = 0.6 }
[initial]
v = { dist = "uniform", min = 1.5, max = 2.5 }
[stop]
statistic = "mean(t_stop)"
halfwidth = 2e-5
[output]
formats = ["csv", "npy"]
EOF
  "$ukb" run stop.toml --out stop1 --quiet >/dev/null
  grep -q '"met": true' stop1/summary.json || { echo "FAIL: stop1: the target was not met"; exit 1; }
  mpi 3 "$ukb" run stop.toml --out stop3 --quiet >/dev/null
  same stop1 stop3 results.csv results.npy summary.json
  # Without integrator.chunk: blocks of at most samples / (4 ranks), here
  # 600 / 12 = 50, and the same files.
  sed -e 's/^samples = .*/samples = 600/' "$src/examples/incline_sweep.toml" >sweep_default.toml
  if grep -q '^chunk' sweep_default.toml; then echo "FAIL: sweep_default.toml has a chunk"; exit 1; fi
  mpi 3 "$ukb" run sweep_default.toml --out sweepd --quiet >/dev/null
  same sweep1 sweepd results.csv results.npy summary.json trajectories.csv
  grep -q '"chunk": 50,\?$' sweepd/run.json || { echo "FAIL: sweepd/run.json: chunk not 50"; grep chunk sweepd/run.json; exit 1; }
  ;;
resume)
  # Long enough to be stopped midway (30 000 beads, a checkpoint after
  # every merged block); SIGTERM to every rank, as a batch system's
  # cancellation sends it.
  sed -e 's/^samples = 3000/samples = 30000/' -e 's/^checkpoint_interval = .*/checkpoint_interval = 0.0/' \
      ring.toml >long.toml
  "$ukb" run long.toml --out whole --quiet >/dev/null
  set +e
  # exec: $! is mpiexec itself, and the ranks are its children.
  (exec "$mpiexec" --oversubscribe -n 3 "$ukb" run long.toml --out cut --quiet >cut.out 2>cut.err) &
  launcher=$!
  for _ in $(seq 1 500); do [ -f cut/checkpoint.ukb ] && break; sleep 0.01; done
  pkill -TERM -P "$launcher"
  wait "$launcher"
  rc=$?
  set -e
  cat cut.err
  [ -f cut/checkpoint.ukb ] || { echo "FAIL: no checkpoint after SIGTERM"; exit 1; }
  [ ! -f cut/results.csv ] || { echo "FAIL: the run completed before the signal: nothing was tested"; exit 1; }
  [ "$rc" -ne 0 ] || { echo "FAIL: an interrupted job exited 0"; exit 1; }
  grep -q "interrupted by SIGTERM" cut.err
  mpi 2 "$ukb" run --resume cut --quiet >/dev/null
  same whole cut results.csv results.npy summary.json trajectories.csv
  grep -q '"ranks": 2' cut/run.json
  ;;
bad_config)
  printf 'model = "bead_on_ring"\nsamples = 10\n[integrator]\ndt = -1.0\nt_end = 1.0\n' >bad.toml
  set +e
  mpi 3 "$ukb" run bad.toml --out bad >bad.out 2>bad.err
  rc=$?
  set -e
  cat bad.err
  [ "$rc" -eq 2 ] || { echo "FAIL: exit code $rc, expected 2"; exit 1; }
  n=$(grep -c "key 'integrator.dt'" bad.err)
  [ "$n" -eq 1 ] || { echo "FAIL: the message came $n times, expected once"; exit 1; }
  [ ! -e bad ] || { echo "FAIL: an output directory was left"; exit 1; }
  # Refused by rank 0 alone (its output directory holds another run's
  # checkpoint): the other ranks learn it, stop, and say nothing.
  mkdir held && echo x >held/checkpoint.ukb
  set +e
  mpi 3 "$ukb" run ring.toml --out held >held.out 2>held.err
  rc=$?
  set -e
  cat held.err
  [ "$rc" -eq 2 ] || { echo "FAIL: exit code $rc, expected 2"; exit 1; }
  [ "$(grep -c 'holds the checkpoint' held.err)" -eq 1 ]
  # An error of one rank only (its config file is missing: it is on a file
  # system the others see, say): rank 0 says it, naming the rank.
  set +e
  "$mpiexec" --oversubscribe -n 2 "$ukb" run ring.toml --out one : -n 1 "$ukb" run missing.toml --out one \
      >one.out 2>one.err
  rc=$?
  set -e
  cat one.err
  [ "$rc" -eq 2 ] || { echo "FAIL: exit code $rc, expected 2"; exit 1; }
  [ "$(grep -c '^ukb: rank 2: .*missing.toml' one.err)" -eq 1 ] || { echo "FAIL: not said once by rank 0"; exit 1; }
  [ ! -e one ] || { echo "FAIL: an output directory was left"; exit 1; }
  ;;
*) echo "unknown case $case_"; exit 2 ;;
esac
echo "PASS: $case_"
