#!/usr/bin/env bash
# What a pip user does, checked from a fresh virtual environment:
#
#   scripts/pip_check.sh [--quick-compile] [--against RESULTS_CSV] WORKDIR
#
#  1. `pip wheel .` of this repository (pyproject.toml: scikit-build-core and
#     pybind11 from PyPI in pip's isolated build environment);
#  2. a fresh venv (python3 -m venv --system-site-packages: numpy from the
#     system where it has it) and `pip install` of that wheel;
#  3. from another directory: the `ukb` command and `python -m ukb` print the
#     version of CMakeLists.txt and every built-in model of UKB_BUILTIN_MODELS; `import ukb`
#     is the installed package; the model file
#     examples/models/rotating_hoop.hpp compiled against the installed
#     headers and library (the wheel's toolchain record) and run (the first
#     40 samples of its config) by the installed `ukb run` and by `ukb.run`,
#     with the same results.csv; with --against, that results.csv agrees
#     with the first 40 rows of RESULTS_CSV (another build's run of the
#     example's config) to 1e-9 relative (above 1) in every number;
#  4. `python -m ukb.plot` draws that run's pictures (where matplotlib is);
#  5. SALib from PyPI into the venv, and tests/python/test_run.py's test of
#     ukb's sensitivity indices against SALib's on the same samples
#     (docs/python.md's example; the suite's own Python has no SALib).
#
# --quick-compile builds the wheel at -O0 without CUDA (what scripts/test.sh
# checks is the packaging, not the optimised code, which the suite's builds
# test): about half the compile time. Where PyPI cannot be reached, says so
# and exits 0 without checking (SKIPPED); any other failure exits non-zero.
set -euo pipefail
cd "$(dirname "$0")/.."
quick=0 against=""
while [ $# -gt 1 ]; do
  case "$1" in
    --quick-compile) quick=1; shift ;;
    --against) against=$(realpath "$2"); shift 2 ;;
    *) break ;;
  esac
done
[ $# -eq 1 ] || { echo "usage: scripts/pip_check.sh [--quick-compile] [--against RESULTS_CSV] WORKDIR" >&2; exit 2; }
work=$1
rm -rf "$work"
mkdir -p "$work"
work=$(realpath "$work")
src=$PWD
py=/usr/bin/python3
[ -x "$py" ] || py=$(command -v python3)

if ! "$py" -m pip download --no-deps -q -d "$work/probe" scikit-build-core pybind11 >"$work/probe.log" 2>&1; then
  echo "== ukb: pip check SKIPPED: the build backend could not be fetched from PyPI ($(tail -n 1 "$work/probe.log"))"
  exit 0
fi

settings=()
if [ "$quick" = 1 ]; then
  settings=(--config-settings=cmake.define.UKB_ENABLE_CUDA=OFF --config-settings=cmake.build-type=Debug
            --config-settings=cmake.define.CMAKE_CXX_FLAGS_DEBUG=-O0)
fi
"$py" -m venv --system-site-packages "$work/venv"
venv=$work/venv
"$venv/bin/python" -m pip wheel -q --no-deps -w "$work/dist" "${settings[@]}" "$src"
wheel=$(ls "$work"/dist/ukb-*.whl)
"$venv/bin/python" -m pip install -q "$wheel"
echo "== ukb: pip wheel . and pip install of $(basename "$wheel") into a fresh venv"

cd "$work"
version=$(sed -nE 's/^project\(ukb VERSION ([0-9.]+).*/\1/p' "$src/CMakeLists.txt")
# The built-in models as the source lists them (UKB_BUILTIN_MODELS).
models=$(sed -n '/^#define UKB_BUILTIN_MODELS/,/^$/p' "$src/include/ukb/models/all.hpp" | grep -o 'X(A, ' | wc -l)
for cmd in "$venv/bin/ukb" "$venv/bin/python -m ukb"; do
  out=$($cmd --version)
  [ "$out" = "ukb $version" ] || { echo "'$cmd --version' printed '$out', not 'ukb $version'" >&2; exit 1; }
  n=$($cmd models --json | "$venv/bin/python" -c 'import json, sys; print(len(json.load(sys.stdin)))')
  [ "$n" = "$models" ] || { echo "'$cmd models --json' listed $n models, not the $models of UKB_BUILTIN_MODELS" >&2; exit 1; }
done
echo "== ukb: the ukb command and python -m ukb: ukb $version, $models built-in models"

# The example's first 40 samples (sample i depends on the seed and i alone).
cp -r "$src/examples/models" "$work/models"
sed -E 's/^samples = [0-9]+/samples = 40/' models/rotating_hoop.toml > models/hoop40.toml
grep -q '^samples = 40$' models/hoop40.toml
UKB_CACHE_DIR="$work/cache" "$venv/bin/ukb" run models/hoop40.toml --out cli --quiet
UKB_CACHE_DIR="$work/cache" UKB_AGAINST="$against" "$venv/bin/python" - "$venv" <<'PY'
import csv, filecmp, math, os, sys
import ukb
venv = sys.argv[1]
assert os.path.realpath(ukb.__file__).startswith(os.path.realpath(venv)), ukb.__file__
ukb.run("models/hoop40.toml", out="py", progress=False)
assert filecmp.cmp("py/results.csv", "cli/results.csv", shallow=False), "ukb.run and ukb run differ"
print("== ukb: the model file through the installed ukb run and ukb.run: the same results.csv")
against = os.environ["UKB_AGAINST"]
if against:
    rows = [list(csv.reader(open(p))) for p in ("cli/results.csv", against)]
    assert rows[0][0] == rows[1][0] and len(rows[0]) <= len(rows[1]), "other columns or fewer rows in " + against
    worst = 0.0
    for a, b in zip(rows[0][1:], rows[1][1:]):
        for name, x, y in zip(rows[0][0], a, b):
            try:
                fx, fy = float(x), float(y)
            except ValueError:
                assert x == y, (name, x, y)
                continue
            if math.isnan(fx) or math.isnan(fy):
                assert math.isnan(fx) and math.isnan(fy), (name, x, y)
                continue
            d = abs(fx - fy) / max(abs(fx), abs(fy), 1.0)
            assert d <= 1e-9, (name, x, y)
            worst = max(worst, d)
    print(f"== ukb: and agrees with {against} (largest difference {worst:.1e}, relative above 1)")
PY

# The pictures of a run, installed with ukb (numpy and matplotlib: Debian's,
# seen through --system-site-packages).
if "$venv/bin/python" -c 'import matplotlib' 2>/dev/null; then
  "$venv/bin/python" -m ukb.plot cli > plot.log
  pngs=$(find cli/plots -name '*.png' -size +1k | wc -l)
  [ "$pngs" -ge 1 ] && grep -q "^ukb.plot: $pngs PNGs in cli/plots/" plot.log ||
    { echo "python -m ukb.plot: $pngs PNGs in cli/plots, and it said:" >&2; cat plot.log >&2; exit 1; }
  echo "== ukb: python -m ukb.plot: $(tail -n 1 plot.log)"
else
  echo "== ukb: python -m ukb.plot not run: no matplotlib here"
fi

# SALib on ukb's [sensitivity] samples.
if "$venv/bin/python" -m pip install -q SALib >"$work/salib.log" 2>&1; then
  "$venv/bin/python" -m pytest -q -p no:cacheprovider "$src/tests/python/test_run.py" -k salib >salib_test.log 2>&1 ||
    { cat salib_test.log >&2; exit 1; }
  grep -q "1 passed" salib_test.log || { echo "the SALib test did not run: $(tail -n 1 salib_test.log)" >&2; exit 1; }
  echo "== ukb: SALib $("$venv/bin/python" -m pip show SALib | sed -n 's/^Version: //p') on ukb's sensitivity samples: $(tail -n 1 salib_test.log)"
else
  echo "== ukb: SALib check SKIPPED: SALib could not be installed from PyPI ($(tail -n 1 "$work/salib.log"))"
fi
