#!/usr/bin/env bash
# Distributed runs measured (docs/cluster.md; bench/README.md):
# strong scaling from 1 to 2 ranks of one thread each, the load balance with
# dynamic blocks (the default) and with a fixed split (UKB_MPI_BLOCKS=static),
# and the cost of combining the ranks' rows per 10^6 samples. Rounds
# alternate the variants; run.json of each run gives the figures.
#   bench/mpi_scaling.sh BUILD_DIR [ROUNDS]
set -euo pipefail
build=$1 rounds=${2:-3}
ukb=$(realpath "$build/bin/ukb")
src=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1  # this machine runs as root

cp "$src/examples/ring_friction.toml" ring.toml
cat >chain.toml <<'TOML'
model = "planar_chain_6"
samples = 4000
seed = 5
[integrator]
dt = 0.005
t_end = 2.0
chunk = 250
[params]
c = { dist = "uniform", min = 0.0, max = 0.2 }
[initial]
theta1 = { dist = "uniform", min = -1.0, max = 1.0 }
theta2 = 0.5
TOML
# Combining: 10^6 samples of two steps each, so that the rows dominate.
cat >rows.toml <<'TOML'
model = "incline_block"
samples = 1000000
seed = 3
[integrator]
dt = 0.01
t_end = 0.02
chunk = 20000
[params]
mu = { dist = "uniform", min = 0.1, max = 0.9 }
[initial]
v = { dist = "uniform", min = 0.5, max = 2.0 }
TOML

field() { python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(d.get(sys.argv[2]))" "$1" "$2"; }
run() {  # run NAME CONFIG RANKS [ENV...]
  local name=$1 cfg=$2 p=$3; shift 3
  rm -rf "out_$name"
  if [ "$p" = 1 ]; then env "$@" "$ukb" run "$cfg" --out "out_$name" --threads 1 --quiet >/dev/null
  else env "$@" mpiexec --oversubscribe -n "$p" "$ukb" run "$cfg" --out "out_$name" --threads 1 --quiet >/dev/null; fi
  echo "$name wall $(field "out_$name/run.json" wall_seconds) busy $(field "out_$name/run.json" rank_busy_seconds)" \
       "blocks $(field "out_$name/run.json" rank_blocks) merge $(field "out_$name/run.json" rank0_merge_seconds)" \
       "final_wait $(field "out_$name/run.json" rank0_final_wait_seconds)"
  [ "$p" = 1 ] || cmp "out_$name/results.csv" "out_${name%%_*}_1/results.csv"  # the same results
}
for r in $(seq 1 "$rounds"); do
  echo "== round $r"
  for w in ring chain; do
    run "${w}_1" $w.toml 1
    run "${w}_2dyn" $w.toml 2
    run "${w}_2static" $w.toml 2 UKB_MPI_BLOCKS=static
  done
  run rows_1 rows.toml 1
  run rows_2 rows.toml 2
done
