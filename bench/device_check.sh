#!/bin/bash
# One call of a lent GPU machine (the `device` tool: at most 600 s a call,
# 15 minutes of device time a session), in the order of what it is worth:
# the GPU tests, bench/gpu.sh, Nsight Compute on the RK4 kernels of W2 and
# W3, cross-checks of `ukb run --backend cuda` against cpu and reference,
# an A/B of ukb_bench_workloads' variants where there are any, the whole
# ctest. On the H100
# of 2026-11-26 the GPU tests took 5 s, the cross-checks 63 s (57 of them
# nvcc compiling a model file), the ctest 82 s; gpu.sh was then cut short
# at 460 s (since shortened; not timed since). Run from the project root, with
# .deps/ made by ../shared/gpu/prepare.sh carried along:
#
#   . .deps/env.sh && bash bench/device_check.sh
#
# Two ways to get the binaries:
# - built on the GPU machine (the default): .deps/build.sh into /tmp/b, about
#   3 minutes of the call on 16 cores, more with the 48-link chain's units;
# - built here, on a machine without a GPU, and carried (UKB_PREBUILT=DIR,
#   DIR inside the tree and ignored by git): no minute of the device goes to
#   compiling. Build DIR for the device and for any x86-64 CPU, without
#   MPI or Python (their libraries may be missing there), e.g.
#     cmake -G Ninja -S . -B .gpub -DCMAKE_BUILD_TYPE=Release -DUKB_NATIVE=OFF \
#       -DCMAKE_CXX_FLAGS=-march=x86-64-v3 -DUKB_ENABLE_CUDA=ON -DUKB_CUDA_ARCHITECTURES=90 \
#       -DUKB_BENCH_GPU_STUDY=ON -DUKB_BUILD_BASELINE=OFF -DUKB_PYTHON=OFF -DUKB_ENABLE_MPI=OFF
#     cmake --build .gpub -j2
#   then copy it without its objects (bench/device_check.sh --stage .gpub
#   .gpur: about 110 MB with UKB_BENCH_GPU_STUDY, most of it the binaries'
#   sm_90 code), pack it under the device tool's 64 MiB (xz: 31 MB, 41 MB
#   with two variants below; .deps is 14 MB, the tree 3 MB) and
#   carry the pack and .deps:
#     mkdir -p .gpup && tar -cJf .gpup/gpur.txz .gpur    (.gpup ignored by git too)
#     tar -xJf .gpup/gpur.txz && . .deps/env.sh && UKB_PREBUILT=.gpur bash bench/device_check.sh
#   Variants of ukb_bench_workloads for an A/B (other flags) go into
#   .gpur/bin as ukb_bench_workloads.NAME before packing (stage below).
#   The build's absolute paths (ctest's files, the toolchain record of the
#   model-file plugins) are made to hold there by links: its source
#   directory to this tree, the build directory to DIR, and Eigen's headers
#   from .deps where the machine has none.
#
# Everything lands in /tmp/o, packed into $OUT/o.tgz after every stage (the
# device tool brings back at most 8 files): machine.txt, gpu_tests.log,
# gpu/ (bench/gpu.sh: table.md, workloads*.json, team_probe.*, the demo's
# run.json files), ab/ (the A/B), xc/ (cross-checks), ctest.log, ncu_*.txt,
# console.txt.
# UKB_CHECK_BUDGET (default 560) is the seconds the whole call may take; a
# step that would not fit is skipped and says so.
set -u
if [ "${1:-}" = --stage ]; then
  # --stage BUILD DIR: BUILD without what only a rebuild needs.
  [ -f "$2/CMakeCache.txt" ] || { echo "device_check.sh --stage: $2 is no build directory" >&2; exit 2; }
  rm -rf "$3" && mkdir -p "$3"
  dst=$(cd "$3" && pwd)
  (cd "$2" && find . \( -name '*.o' -o -name '*.a' -o -name '.ninja_*' -o -name '*.ptx' -o -name '*.fatbin*' -o -name '*.cubin' \) -prune \
     -o -type f -print0 | xargs -0 cp --parents -t "$dst")
  cp "$2/libukb.a" "$3/" 2>/dev/null   # model-file plugins link it
  src=$(sed -n 's/^CMAKE_HOME_DIRECTORY:INTERNAL=//p' "$2/CMakeCache.txt")
  git -C "$src" log -1 --format='staged at %H %s' > "$3/commit.txt" 2>/dev/null
  git -C "$src" diff --quiet HEAD 2>/dev/null || echo "(with uncommitted changes in the tree)" >> "$3/commit.txt"
  find "$3/bin" -type f -perm -u+x -exec strip --strip-unneeded {} + 2>/dev/null
  du -sh "$3"
  exit 0
fi
R=$(pwd)
T0=$(date +%s)
budget=${UKB_CHECK_BUDGET:-560}
O=/tmp/o
rm -rf "$O" && mkdir -p "$O"
el() { echo $(($(date +%s) - T0)); }
left() { echo $((budget - $(el))); }
cap() {  # cap SECONDS: SECONDS, or what the budget leaves (less a 10 s margin), at least 1
  local t=$1 l=$(($(left) - 10))
  [ "$l" -lt "$t" ] && t=$l
  [ "$t" -lt 1 ] && t=1
  echo "$t"
}
log() { echo "== [$(el) s] $*" | tee -a "$O/console.txt"; }
pack() { [ -n "${OUT:-}" ] && find "$O" -type f -size +2M -delete && tar -C /tmp -czf "$OUT/o.tgz" o; }  # big files (a 10^6-row table or checkpoint) would stop all coming back
export CMAKE_PREFIX_PATH=$R/.deps/prefix/usr
{ nvidia-smi; nproc; cat "$R/${UKB_PREBUILT:-.}/commit.txt" 2>/dev/null; lscpu | grep -E "Model name|Flags" | cut -c1-400; uname -r; git -C "$R" rev-parse HEAD 2>/dev/null
  command -v nvcc g++ c++ cmake ninja mpirun mpiexec ncu
  # What MPI the machine has, for a distributed run there (mpirun -n 2 ukb run --backend cuda).
  ls /usr/lib/x86_64-linux-gnu 2>/dev/null | grep -iE "libmpi|openmpi|mpich" | head -n 5
  python3 -c "import mpi4py; print('mpi4py', mpi4py.__version__, mpi4py.get_config())" 2>&1 | tail -n 1; } > "$O/machine.txt" 2>&1
head -n 12 "$O/machine.txt"

if [ -n "${UKB_PREBUILT:-}" ]; then
  B=$R/$UKB_PREBUILT
  cache_src=$(sed -n 's/^CMAKE_HOME_DIRECTORY:INTERNAL=//p' "$B/CMakeCache.txt")
  cache_bin=$(sed -n 's/^CMAKE_CACHEFILE_DIR:INTERNAL=//p' "$B/CMakeCache.txt")
  if [ "$(cd "$cache_src" 2>/dev/null && pwd -P)" != "$(pwd -P)" ]; then
    if [ -e "$cache_src" ]; then
      mount --bind "$R" "$cache_src" || log "cannot put this tree at $cache_src: the tests that read it will fail"
    else
      mkdir -p "$(dirname "$cache_src")" && ln -s "$R" "$cache_src"
    fi
  fi
  [ -e "$cache_bin" ] || ln -s "$B" "$cache_bin"
  [ -e /usr/include/eigen3 ] || ln -s "$R/.deps/prefix/usr/include/eigen3" /usr/include/eigen3
  # The CUDA runtime's directory as the building machine had it (lib there,
  # lib64 only on the GPU machines of 2026-11-26).
  cudalib=$(grep -o '"-L[^"]*"' "$B/share/ukb/toolchain.json" 2>/dev/null | head -n 1 | sed 's/^"-L//; s/"$//')
  if [ -n "$cudalib" ] && [ ! -e "$cudalib" ] && [ -d "${cudalib}64" ]; then ln -s "${cudalib}64" "$cudalib"; fi
  [ -x "$B/bin/ukb" ] || { log "UKB_PREBUILT: no $B/bin/ukb"; pack; exit 1; }
  export LD_LIBRARY_PATH=${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}/usr/local/cuda/lib64  # the probe's cuBLAS, cuSOLVER
  log "prebuilt binaries in $B (built in $cache_bin from $cache_src)"
  build() { return 0; }
else
  B=/tmp/b
  export UKB_CMAKE_ARGS="-DUKB_ENABLE_CUDA=ON -DUKB_BENCH_GPU_STUDY=ON -DUKB_BUILD_EXAMPLES=OFF -DUKB_BUILD_BASELINE=OFF -DUKB_PYTHON=OFF -DUKB_ENABLE_MPI=OFF"
  build() {  # build TARGET...: .deps/build.sh into /tmp/b; false (and the log kept) on failure
    if ! bash .deps/build.sh "$@" >> "$O/console.txt" 2>&1; then
      log "build of $* failed"
      cp /tmp/b.log "$O/build.log" 2>/dev/null
      tail -n 30 "$O/console.txt"
      return 1
    fi
  }
  log "build (/tmp/b, CUDA, UKB_BENCH_GPU_STUDY): what gpu.sh and the GPU tests need"
  build ukb_cli ukb_bench_workloads ukb_flops ukb_team_probe ukb_tests ukb_engine_tests || { pack; exit 1; }
fi

log "GPU tests (Engine.Cuda*, the engine suite on cuda, Cuda.*)"
{
  timeout 150 "$B/bin/ukb_engine_tests" --gtest_filter='Engine.Cuda*:Backends/EngineOn.*/cuda'
  timeout 90 "$B/bin/ukb_tests" --gtest_filter='Cuda.*'
} > "$O/gpu_tests.log" 2>&1
grep -E "^\[  (PASSED|FAILED|SKIPPED) |GPU vs CPU" "$O/gpu_tests.log" | tee -a "$O/console.txt"
pack

# The variants of the A/B below (found here: gpu.sh leaves it its time).
variants=$(ls "$B"/bin/ukb_bench_workloads.* 2>/dev/null)
if [ "$(left)" -gt 300 ]; then
  log "bench/gpu.sh"
  nb=()
  [ -n "${UKB_PREBUILT:-}" ] && nb=(--no-build)
  # What comes after (H200, 2026-11-28): ncu (about 6 s a row), the
  # cross-checks (about 10 s, and 55 s for the model file's), the A/B
  # (about 45 s).
  after=100
  [ -n "$variants${UKB_AB_BLOCK:-}" ] && after=150
  # UKB_GPU_SH_SECONDS caps gpu.sh (its last step, W5 and W6, is the one cut).
  gs=$(($(left) - after))
  [ -n "${UKB_GPU_SH_SECONDS:-}" ] && [ "$UKB_GPU_SH_SECONDS" -lt "$gs" ] && gs=$UKB_GPU_SH_SECONDS
  # shellcheck disable=SC2086  # UKB_GPU_SH_ARGS: more options of gpu.sh (e.g. --no-studies)
  timeout "$gs" bench/gpu.sh --build "$B" --out "$O/gpu" "${nb[@]}" ${UKB_GPU_SH_ARGS:-} >> "$O/console.txt" 2>&1
  log "bench/gpu.sh: rc $?"
  if [ ! -s "$O/gpu/table.md" ] && [ -f "$O/gpu/flops.json" ]; then  # cut short: the table of what it got
    { python3 bench/gpu_table.py "$O/gpu"; echo; cat "$O/gpu/team_probe.md" 2>/dev/null; } > "$O/gpu/table.md" 2>&1
  fi
  find "$O/gpu" -name 'results.*' -size +1M -delete 2>/dev/null
  cat "$O/gpu/table.md" 2>/dev/null
else
  log "bench/gpu.sh skipped: $(left) s left"
fi
pack

# Nsight Compute on the RK4 kernels of W2 and W3 in double (the models
# furthest from their targets): occupancy, local-memory (spill) traffic, and
# the FP64 instructions executed, from which the achieved FLOP/s
# (dadd + dmul + 2 dfma over the kernel's duration); the clocks left as the
# driver sets them (--clock-control none), as in the benchmarks.
if [ "$(left)" -gt 70 ] && command -v ncu >/dev/null; then
  # UKB_NCU: the benchmark rows to profile (default W2 at 10^5 and W3 at 10^4).
  rows=${UKB_NCU:-"W2/planar_chain_6/double/cuda/threads:0/N:100000/ W3/planar_chain_12/double/cuda/threads:0/N:10000/"}
  log "ncu: the second RK4 integration kernel of $rows"
  for w in $rows; do
    f=$O/ncu_$(echo "$w" | cut -d/ -f1,3 | tr / _).txt
    timeout "$(cap 45)" ncu --clock-control none --kernel-name-base demangled -k regex:'body_kernel.*SystemRun' --launch-skip 1 -c 1 \
      --section LaunchStats --section Occupancy --section SpeedOfLight --section MemoryWorkloadAnalysis \
      --section ComputeWorkloadAnalysis --section WarpStateStats \
      --metrics sm__sass_thread_inst_executed_op_dadd_pred_on.sum,sm__sass_thread_inst_executed_op_dmul_pred_on.sum,sm__sass_thread_inst_executed_op_dfma_pred_on.sum,gpu__time_duration.sum,l1tex__t_bytes_pipe_lsu_mem_local_op_ld.sum,l1tex__t_bytes_pipe_lsu_mem_local_op_st.sum \
      "$B/bin/ukb_bench_workloads" --benchmark_filter="^$w" --benchmark_min_time=0.01 > "$f" 2>&1
    log "ncu $w: rc $?"
    python3 - "$f" <<'PY' | tee -a "$O/console.txt"
import re, sys
t = open(sys.argv[1]).read()
def val(name):
    m = re.search(re.escape(name) + r"\s+\S*\s+([\d,.]+)", t)
    return float(m.group(1).replace(",", "")) if m else None
add, mul, fma = (val("sm__sass_thread_inst_executed_op_d%s_pred_on.sum" % k) for k in ("add", "mul", "fma"))
dur = val("gpu__time_duration.sum")
unit = re.search(r"gpu__time_duration.sum\s+(\S+)", t)
scale = {"ns": 1e-9, "us": 1e-6, "usecond": 1e-6, "msecond": 1e-3, "ms": 1e-3, "nsecond": 1e-9, "second": 1.0}.get(unit.group(1) if unit else "", None)
occ = re.search(r"Achieved Occupancy\s+%\s+([\d.]+)", t)
regs = re.search(r"Registers Per Thread\s+\S+\s+(\d+)", t)
if None not in (add, mul, fma, dur) and scale:
    print(f"  {sys.argv[1].rsplit('/', 1)[-1]}: {(add + mul + 2 * fma) / (dur * scale) / 1e9:.0f} GFLOP/s FP64, "
          f"achieved occupancy {occ.group(1) if occ else '?'} %, {regs.group(1) if regs else '?'} registers")
else:
    print(f"  {sys.argv[1].rsplit('/', 1)[-1]}: counters not read (see the file)")
PY
  done
else
  log "ncu skipped: $(left) s left, or no ncu"
fi
pack

if [ "$(left)" -gt 80 ]; then
  log "cross-checks: ukb run --backend cuda --crosscheck"
  X=/tmp/xc
  mkdir -p "$X" "$O/xc"
  sed -e 's/^samples = .*/samples = 20000/' examples/ring_friction.toml > "$X/ring.toml"
  xc() {  # name config other samples: its verdict and warnings (else the last lines) on the console
    local t; t=$(date +%s%N)
    timeout "$(cap 100)" "$B/bin/ukb" run "$2" --backend cuda --crosscheck "$3" --crosscheck-samples "$4" --out "$X/$1" --quiet > "$X/$1.log" 2>&1
    local rc=$?
    echo "$1 (cuda vs $3, $4 samples): rc $rc, $((($(date +%s%N) - t) / 1000000)) ms: $({ grep -E '^ukb run: (crosscheck|warning)' "$X/$1.log" || tail -n 2 "$X/$1.log"; } | tr '\n' ' ')" | tee -a "$O/console.txt"
    cp "$X/$1/crosscheck.json" "$O/xc/$1.json" 2>/dev/null
    cp "$X/$1.log" "$O/xc/$1.log"
  }
  xc ring_cpu "$X/ring.toml" cpu 2000
  xc ring_ref "$X/ring.toml" reference 256
  xc adaptive examples/ring_adaptive.toml cpu 512
  xc incline examples/incline_sweep.toml cpu 512
  xc sleigh examples/sleigh_heading.toml cpu 512
  [ -f .deps/chain.toml ] && xc chain .deps/chain.toml cpu 512   # planar_chain_6 with projection
  # A model file compiled for cuda (nvcc, about 55 s) where the time allows.
  if [ "$(left)" -gt 150 ]; then
    xc hoop examples/models/rotating_hoop.toml cpu 256
  else
    log "cross-check of the model file skipped: $(left) s left"
  fi
else
  log "cross-checks skipped: $(left) s left"
fi
pack

# Variants of the workload benchmark built with other flags (DIR/bin/
# ukb_bench_workloads.NAME, put there by hand before packing, e.g. a build
# with "-DCMAKE_CUDA_FLAGS=-maxrregcount=168"), and with UKB_AB_BLOCK=K the
# default binary with blocks of K threads (UKB_BENCH_CUDA_BLOCK, against
# each kernel's occupancy choice): W1 (double, float) and W4 (double) at
# N = 10^6 and W2 (double) at 10^5, alternating with the default binary,
# two rounds.
if [ -n "${UKB_AB_BLOCK:-}" ]; then variants="$variants block${UKB_AB_BLOCK}"; fi
if [ -n "$variants" ] && [ "$(left)" -gt 90 ]; then
  log "A/B: ukb_bench_workloads against $(echo "$variants" | xargs -n 1 basename | tr '\n' ' ')"
  mkdir -p "$O/ab"
  for round in 1 2; do
    for v in "$B/bin/ukb_bench_workloads" $variants; do
      bin=$v name=$(basename "$v") env=()
      case "$v" in block*) bin=$B/bin/ukb_bench_workloads name=ukb_bench_workloads.$v env=(UKB_BENCH_CUDA_BLOCK="${v#block}") ;; esac
      env "${env[@]}" timeout "$(cap 60)" "$bin" --benchmark_filter='^(W1/[a-z_]+/(double|float)/cuda/threads:0/N:1000000|W4/[a-z_]+/double/cuda/threads:0/N:1000000|W2/[a-z_0-9]+/double/cuda/threads:0/N:100000)/' \
        --benchmark_min_time=0.2 --benchmark_repetitions=3 --benchmark_report_aggregates_only=true --benchmark_format=json \
        > "$O/ab/$name.$round.json" 2> /dev/null
    done
  done
  python3 - "$O/ab" <<'PY' | tee "$O/ab/table.md" | tee -a "$O/console.txt"
import glob, os, sys
sys.path.insert(0, "bench")
from gpu_table import benchmarks  # also the whole rows of a file a timeout cut
rows = {}
for f in sorted(glob.glob(os.path.join(sys.argv[1], "*.json"))):
    binary, rnd = os.path.basename(f).rsplit(".", 2)[:2]
    for b in benchmarks(f):
        if b.get("aggregate_name") == "median":
            rows.setdefault(b["run_name"], {}).setdefault(binary, {})[rnd] = b["items_per_second"]
print("| row | binary | round 1 | round 2 |\n|---|---|---|---|")
for name, per in rows.items():
    for binary, r in sorted(per.items()):
        print(f"| {name} | {binary} | {r.get('1', 0):.4g} | {r.get('2', 0):.4g} |")
PY
fi
pack

if [ "$(left)" -gt 110 ] && build ukb_run_tests ukb_cuda_emulation_tests && [ "$(left)" -gt 60 ]; then
  log "ctest (no Mpi, no Python: not in this build)"
  (cd "$B" && timeout $(($(left) - 20)) ctest -j"$(nproc)" --output-on-failure -E "^(Mpi|Python)\." > "$O/ctest.log" 2>&1)
  log "ctest: rc $?"
  grep -E "tests passed|Failed|\*\*\*|Not Run|Timeout" "$O/ctest.log" | head -n 30 | tee -a "$O/console.txt"
else
  log "ctest skipped: $(left) s left, or its build failed"
fi
pack

log "done"
pack
