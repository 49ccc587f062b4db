"""Shared fixtures of the Python module's tests (run by ctest: see
tests/CMakeLists.txt; by hand: PYTHONPATH=build/python UKB_CLI=build/bin/ukb
UKB_SOURCE_DIR=. python3 -m pytest tests/python)."""
import json
import os
import subprocess

import pytest

SOURCE = os.environ.get("UKB_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
CLI = os.environ.get("UKB_CLI", os.path.join(SOURCE, "build", "bin", "ukb"))


def cli(*args, check=True):
    """Runs the `ukb` executable; returns (exit code, stdout, stderr)."""
    p = subprocess.run([CLI, *args], capture_output=True, text=True)
    if check and p.returncode != 0:
        raise AssertionError(f"ukb {' '.join(args)} exited {p.returncode}: {p.stderr}")
    return p.returncode, p.stdout, p.stderr


def cli_json(*args):
    return json.loads(cli(*args)[1])


@pytest.fixture
def source_dir():
    return SOURCE
