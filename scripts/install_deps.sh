#!/usr/bin/env bash
# Installs the Debian packages ukb needs, if any is missing. Non-interactive;
# needs root (or sudo) only when something must be installed.
set -euo pipefail

packages=(cmake make ninja-build g++ libeigen3-dev libgtest-dev libbenchmark-dev
          libcli11-dev nlohmann-json3-dev libtomlplusplus-dev librandom123-dev
          python3 python3-numpy python3-matplotlib python3-scipy
          python3-dev pybind11-dev python3-pytest python3-pandas python3-tqdm
          libopenmpi-dev openmpi-bin
          clang libclang-rt-14-dev libomp-14-dev llvm-14)
# clang, libclang-rt-14-dev (libFuzzer, ASan and UBSan runtimes), libomp-14-dev
# (OpenMP for clang) and llvm-14 (llvm-symbolizer: stack traces in reports)
# are for scripts/fuzz.sh. python3-dev and pybind11-dev build the Python
# module; python3-pytest runs its tests; python3-pandas (Table.to_pandas) and
# python3-tqdm (the progress bar) are optional for users, tested here.
# libopenmpi-dev and openmpi-bin: distributed runs (mpirun -n P ukb run).

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

echo "ukb: installing missing Debian packages: ${missing[*]}"
sudo=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null; then
    sudo="sudo -n env DEBIAN_FRONTEND=noninteractive"
  else
    echo "ukb: not root and no sudo; please install: ${missing[*]}" >&2
    exit 1
  fi
fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "ukb: packages installed"
