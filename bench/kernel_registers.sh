#!/bin/bash
# Registers, stack frame and spill stores of every CUDA integration kernel
# of the built-in models (RK4 and Dormand–Prince, double and float), at any
# commit, without a GPU:
#
#   bench/kernel_registers.sh [--team] [COMMIT...]   (default: the working tree)
#
# Archives each commit's tree (or copies the working tree) into a temporary
# directory, compiles its engine.cu and engine_float.cu with nvcc -O3
# -Xptxas -v for sm_90, the two at once (about 90 s each on one core), and
# prints one row per kernel: model, scalar, method, registers / stack frame
# / spill stores in bytes, and the route (thread: one thread per system;
# team S: the engine's team route, kernels/ukb/kernels/team_run.hpp, a team
# of S threads per system, which the cuda backend's RK4 takes for the chains).
# Issue 48's targets: every kernel of W1-W4 with 0 bytes of spill stores
# and at most 256 B of stack, W1 and W4 at most 168 registers; the rows of
# W1-W4 are marked with their workload. With --team, also the whole-step
# kernels of bench/team_probe.cu (W2 and W3: one thread, and a team per
# system with the step's workspace in shared memory; about 3 more minutes
# of compile), as rows of route "thread (probe)" and "team S (probe)".
set -u
team=0
[ "${1:-}" = --team ] && { team=1; shift; }
cd "$(dirname "$0")/.."
nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
filt=$(command -v cu++filt || command -v c++filt)
one() {  # one COMMIT|worktree: the table of that tree
  local c=$1 d
  d=$(mktemp -d)
  if [ "$c" = worktree ]; then
    cp -r include kernels src examples "$d"/
    mkdir -p "$d/bench" && cp bench/*.cu bench/*.hpp "$d/bench"/
  else
    git archive "$c" | tar -x -C "$d"
  fi
  local inc=()
  for i in include kernels src; do [ -d "$d/$i" ] && inc+=("-I$d/$i"); done
  local units=() src=()
  for u in engine engine_float; do
    [ -f "$d/kernels/ukb/cuda/$u.cu" ] && units+=("$u") && src+=("$d/kernels/ukb/cuda/$u.cu")
  done
  if [ "$team" = 1 ] && [ -f "$d/bench/team_probe.cu" ]; then
    units+=(team_probe) && src+=("$d/bench/team_probe.cu")
    inc+=("-I$d/bench" "-I$d/examples/models")
  fi
  local k
  for k in "${!units[@]}"; do
    "$nvcc" -DUKB_HAVE_CUDA=1 "${inc[@]}" -isystem=/usr/include/eigen3 -O3 -DNDEBUG -Xptxas -v \
      --generate-code=arch=compute_90,code=[sm_90] --expt-relaxed-constexpr -std=c++20 \
      -x cu -c "${src[$k]}" -o "$d/${units[$k]}.o" > "$d/${units[$k]}.ptxas" 2>&1 &
  done
  wait
  for u in "${units[@]}"; do
    [ -s "$d/$u.o" ] || { echo "== $c: nvcc failed on $u.cu"; tail -n 5 "$d/$u.ptxas"; rm -rf "$d"; return; }
  done
  local what=$c
  [ "$c" = worktree ] || what="$c $(git log -1 --format=%s "$c" | cut -c1-60)"
  cat "$d"/*.ptxas | python3 -c '
import re, subprocess, sys
filt, title = sys.argv[1], sys.argv[2]
lines = sys.stdin.read().splitlines()
rows, entry, stack = [], None, None
for line in lines:
    m = re.search(r"Compiling entry function .(\S+).", line)
    if m:
        entry, stack = m.group(1).rstrip("\x27"), None
        continue
    if entry and stack is None and "bytes stack frame" in line:
        stack = re.findall(r"(\d+) bytes", line)
    m = re.search(r"Used (\d+) registers", line)
    if entry and m:
        if "IntegrateBody" in entry or "team_steps" in entry or "thread_steps" in entry:
            rows.append((entry, int(m.group(1)), int(stack[0]) if stack else -1, int(stack[1]) if stack else -1))
        entry = None
names = subprocess.run([filt], input="\n".join(r[0] for r in rows), capture_output=True, text=True).stdout.splitlines()
work = {"BeadOnRing": "W1 ", "PlanarChain<*, 6>": "W2 ", "PlanarChain<*, 12>": "W3 ", "RedundantPendulum": "W4 "}
out = []
for (entry, regs, st, sp), name in zip(rows, names):
    m = re.search(r"models::(\w+)<(double|float)(?:, (\d+))?>", name)
    model, scalar, k = m.group(1), m.group(2), m.group(3)
    key = f"{model}<*, {k}>" if k else model
    label = work.get(key, "   ") + model + (f"<{k}>" if k else "")
    method = "Dormand-Prince" if "AdaptiveRun" in name else "RK4"
    t = re.search(r"team_steps<.*>, (\d+)>\(", name)
    route = f"team {t.group(1)} (probe)" if t else "thread (probe)" if "thread_steps" in name else "thread"
    if "TeamIntegrateBody" in name:  # kernels::team_size of the built-in chains (n = 2k)
        n = 2 * int(k) if k else 0
        route = "team " + str(1 if n < 8 else 8 if n < 24 else 16 if n < 48 else 32)
    out.append((label, scalar, method, regs, st, sp, route))
print("==", title)
print("| model | scalar | method | registers | stack (B) | spill stores (B) | route |")
print("|---|---|---|---|---|---|---|")
for r in sorted(out):
    print(f"| {r[0]} | {r[1]} | {r[2]} | {r[3]} | {r[4]} | {r[5]} | {r[6]} |")
' "$filt" "$what"
  rm -rf "$d"
}
[ $# -eq 0 ] && set -- worktree
for c in "$@"; do one "$c"; done
