#!/usr/bin/python3
"""Pictures of a `ukb run` output directory, from the source tree:

    scripts/plot.py OUT_DIR [--max-points N]

The same as `python3 -m ukb.plot OUT_DIR` of an installed ukb: this runs
python/ukb/plot.py, which needs nothing of ukb's compiled part.
"""
import importlib.util
import os

_here = os.path.dirname(os.path.abspath(__file__))
_spec = importlib.util.spec_from_file_location("ukb_plot", os.path.join(_here, "..", "python", "ukb", "plot.py"))
_plot = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_plot)

if __name__ == "__main__":
    _plot.main()
