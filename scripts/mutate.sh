#!/usr/bin/env bash
# Mutation testing of the test suite, on demand (not in CI: each mutant is a
# rebuild). Applies the curated one-line mutants of tests/mutants.toml one
# at a time, rebuilds, runs the tests that should kill each (or the whole
# suite with --all) and reports which survive, with the kill rate. Every
# source file is restored afterwards, also on Ctrl-C.
#
#   scripts/mutate.sh [--build DIR] [--all] [ID...]
#
#   --build DIR  the build tree to use (default build-mutate/: configured
#                here, CPU only, without benchmarks and examples)
#   --all        run the whole ctest suite for each mutant
#   ID...        only these mutants (default: all of tests/mutants.toml)
#
# The report: stdout and DIR/mutants.md. A mutant is "killed" when a test
# fails, "survived" when every test passes, "did not compile" otherwise
# (left out of the rate). docs/testing.md ("Mutation testing") says how to read
# and extend it.
set -euo pipefail
cd "$(dirname "$0")/.."
build=build-mutate
all=0
ids=()
while [ $# -gt 0 ]; do
  case "$1" in
    --build) build="$2"; shift 2 ;;
    --all) all=1; shift ;;
    -h|--help) sed -n '2,19p' "$0"; exit 0 ;;
    -*) echo "mutate.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
    *) ids+=("$1"); shift ;;
  esac
done
if [ ! -f "$build/CMakeCache.txt" ]; then
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DUKB_ENABLE_CUDA=OFF \
        -DUKB_BUILD_BENCH=OFF -DUKB_BUILD_EXAMPLES=OFF >/dev/null
fi
exec python3 - "$build" "$all" "${ids[@]}" <<'PY'
import os, subprocess, sys, time, tomllib

build, run_all, wanted = sys.argv[1], sys.argv[2] == "1", sys.argv[3:]
mutants = tomllib.load(open("tests/mutants.toml", "rb"))["mutant"]
known = {m["id"] for m in mutants}
for w in wanted:
    if w not in known:
        sys.exit(f"mutate.sh: no mutant '{w}' in tests/mutants.toml (ids: {', '.join(sorted(known))})")
if wanted:
    mutants = [m for m in mutants if m["id"] in wanted]
for m in mutants:
    text = open(m["file"]).read()
    if text.count(m["from"]) != 1:
        sys.exit(f"mutate.sh: mutant '{m['id']}': its 'from' occurs {text.count(m['from'])} times in {m['file']}, "
                 "expected once (tests/mutants.toml is out of date)")
dirty = subprocess.run(["git", "diff", "--quiet", "--"] + sorted({m["file"] for m in mutants})).returncode
if dirty:
    sys.exit("mutate.sh: a file to mutate has uncommitted changes; commit or stash them first")

def quiet(cmd):
    return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)

rows = []
for m in mutants:
    original = open(m["file"]).read()
    start = time.time()
    try:
        open(m["file"], "w").write(original.replace(m["from"], m["to"]))
        if quiet(["cmake", "--build", build, "-j2"]).returncode != 0:
            result, detail = "did not compile", ""
        else:
            cmd = ["ctest", "--test-dir", build, "-j2", "--timeout", "600"]
            if not run_all:
                cmd += ["-R", m["tests"]]
            r = quiet(cmd)
            failed_log = os.path.join(build, "Testing", "Temporary", "LastTestsFailed.log")
            failed = [l.split(":", 1)[1].strip() for l in open(failed_log)] if r.returncode and os.path.exists(failed_log) else []
            result = "killed" if r.returncode else "survived"
            detail = ", ".join(failed[:3]) + (f" and {len(failed) - 3} more" if len(failed) > 3 else "")
    finally:
        open(m["file"], "w").write(original)
    rows.append((m["id"], m["why"], result, detail, time.time() - start))
    print(f"{m['id']}: {result} {detail} ({rows[-1][4]:.0f} s)", flush=True)

judged = [r for r in rows if r[2] != "did not compile"]
killed = sum(r[2] == "killed" for r in judged)
rate = 100.0 * killed / len(judged) if judged else 0.0
lines = ["| mutant | the bug | result | killed by |", "|---|---|---|---|"]
lines += [f"| `{i}` | {why} | {res} | {det} |" for i, why, res, det, _ in rows]
lines.append("")
lines.append(f"Kill rate: {killed} of {len(judged)} ({rate:.0f} %)" + (" with the whole suite" if run_all else
             " with each mutant's tests (tests/mutants.toml)"))
report = "\n".join(lines) + "\n"
open(os.path.join(build, "mutants.md"), "w").write(report)
print("\n" + report + f"(also in {build}/mutants.md)")
PY
