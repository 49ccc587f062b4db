"""`python -m ukb ARGS` and the `ukb` command of a pip installation: run the
`ukb` executable (docs/cli.md) with ARGS. It is the one installed with this
package (site-packages/ukb/bin/ukb), or in a build tree build/bin/ukb
beside build/python/ukb."""
import os
import sys


def executable():
    here = os.path.dirname(os.path.abspath(__file__))
    for path in (os.path.join(here, "bin", "ukb"), os.path.join(here, "..", "..", "bin", "ukb")):
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return os.path.normpath(path)
    raise SystemExit(f"ukb: the ukb executable is not installed with this package (looked in {here}/bin "
                     f"and {os.path.normpath(os.path.join(here, '..', '..', 'bin'))})")


def main():
    exe = executable()
    os.execv(exe, [exe] + sys.argv[1:])


if __name__ == "__main__":
    main()
