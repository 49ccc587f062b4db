"""Runs one file of the Python module's tests with pytest (ctest calls it:
tests/CMakeLists.txt); exits 77, ctest's "skipped", with the reason where
numpy or pytest is missing for this interpreter."""
import sys

for module, package in (("numpy", "python3-numpy"), ("pytest", "python3-pytest")):
    try:
        __import__(module)
    except ImportError:
        print(f"skipped: {sys.executable} has no {module} (Debian: {package}; scripts/install_deps.sh installs it)")
        sys.exit(77)

import pytest  # noqa: E402

sys.exit(pytest.main(["-q", "-p", "no:cacheprovider", "-o", "console_output_style=classic", *sys.argv[1:]]))
