#!/bin/bash
# Registers and stack of the CUDA integration kernels of bead_on_ring,
# redundant_pendulum, planar_chain_6 and planar_chain_12 (W1, W4, W2, W3) in
# double, at any commit, without a GPU:
#
#   bench/kernel_registers.sh [COMMIT...]      (default HEAD)
#
# Archives each commit's tree into a temporary directory, compiles its
# engine.cu with nvcc -O3 -Xptxas -v for sm_90 (about 60-90 s on one core)
# and prints, per kernel, registers / stack frame / spill stores in bytes.
# Runs its commits two at a time. bench/README.md ("Where the small models'
# registers came from") has the table it gave along 751c43f..717abe9.
set -u
cd "$(dirname "$0")/.."
nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
one() {
  local c=$1 d
  d=$(mktemp -d)
  git archive "$c" | tar -x -C "$d"
  local cu
  cu=$(git ls-tree -r --name-only "$c" | grep "/engine\.cu$" | head -n 1)
  local inc=()
  for i in include kernels src; do [ -d "$d/$i" ] && inc+=("-I$d/$i"); done
  "$nvcc" -DUKB_HAVE_CUDA=1 "${inc[@]}" -isystem=/usr/include/eigen3 -O3 -DNDEBUG -Xptxas -v \
    --generate-code=arch=compute_90,code=[compute_90,sm_90] --expt-relaxed-constexpr -std=c++20 \
    -x cu -c "$d/$cu" -o "$d/e.o" > "$d/ptxas.txt" 2>&1 || { echo "== $c: nvcc failed"; tail -n 5 "$d/ptxas.txt"; rm -rf "$d"; return; }
  python3 - "$c $(git log -1 --format=%s "$c" | cut -c1-60)" "$d/ptxas.txt" <<'PY'
import re, sys
print("==", sys.argv[1])
entry = stack = None
for line in open(sys.argv[2]):
    m = re.search(r"Compiling entry function '(\S+)'", line)
    if m:
        entry, stack = m.group(1), None
        continue
    if entry and stack is None and "bytes stack frame" in line:
        stack = re.findall(r"(\d+) bytes", line)
    m = re.search(r"Used (\d+) registers", line)
    if entry and m:
        names = {"BeadOnRingIdE": "W1 bead_on_ring", "RedundantPendulumIdE": "W4 redundant_pendulum",
                 "PlanarChainIdLi6EE": "W2 planar_chain_6", "PlanarChainIdLi12EE": "W3 planar_chain_12"}
        model = next((v for k, v in names.items() if k in entry), None)
        if model and "IntegrateBody" in entry:
            method = "Dormand-Prince" if "Adaptive" in entry else "RK4" if "FixedStep" in entry else "the one integration kernel"
            print(f"  {model:22s} {method:24s} {m.group(1):>4} / {stack[0] if stack else '?':>5} / {stack[1] if stack else '?':>5}")
        entry = None
PY
  rm -rf "$d"
}
export -f one
export nvcc
[ $# -eq 0 ] && set -- HEAD
# Two at a time, each into its own file; printed in the order given.
tmp=$(mktemp -d)
k=0
for c in "$@"; do k=$((k + 1)); printf '%s %s\n' "$k" "$c"; done |
  xargs -P 2 -L 1 bash -c 'one "$2" > "'"$tmp"'/$1.txt"' _
for i in $(seq 1 $#); do cat "$tmp/$i.txt"; done
rm -rf "$tmp"
