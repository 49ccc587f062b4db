#!/bin/bash
# Registers / stack / spill stores of the CUDA integration kernels of
# BeadOnRing (W1), RedundantPendulum (W4) and InclineBlock alone, double and
# float, with bench/kernel_registers.sh's flags (nvcc 13, sm_90, -O3): the
# quick check of a change to the run loop (about 35 s on two cores).
set -eu
cd "$(dirname "$0")/../../.."
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
for s in double float; do
  cat > "$d/$s.cu" <<X
#include "ukb/cuda/backend.cuh"
#include "ukb/models/all.hpp"
UKB_INSTANTIATE_CUDA(::ukb::models::BeadOnRing<$s>)
UKB_INSTANTIATE_CUDA(::ukb::models::RedundantPendulum<$s>)
UKB_INSTANTIATE_CUDA(::ukb::models::InclineBlock<$s>)
X
  nvcc -DUKB_HAVE_CUDA=1 -Iinclude -Ikernels -Isrc -isystem=/usr/include/eigen3 -O3 -DNDEBUG -Xptxas -v \
    --generate-code=arch=compute_90,code=[sm_90] --expt-relaxed-constexpr -std=c++20 -x cu -c "$d/$s.cu" \
    -o "$d/$s.o" > "$d/$s.ptxas" 2>&1 &
done
wait
cat "$d/double.ptxas" "$d/float.ptxas" | python3 -c '
import re, subprocess, sys
e = None
for l in sys.stdin:
    m = re.search(r"Compiling entry function .(\S+).", l)
    if m:
        e, st = m.group(1).rstrip("\x27"), None
        continue
    if e and "bytes stack frame" in l:
        st = re.findall(r"(\d+) bytes", l)
    m = re.search(r"Used (\d+) registers", l)
    if e and m:
        if "IntegrateBody" in e:
            n = subprocess.run(["c++filt"], input=e, capture_output=True, text=True).stdout
            mm = re.search(r"models::(\w+)<(double|float)", n)
            print(mm.group(1), mm.group(2), "DP" if "AdaptiveRun" in n else "RK4", m.group(1), st[0], st[1])
        e = None'
