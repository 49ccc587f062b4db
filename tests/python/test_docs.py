"""The README's Python section pasted into python3 works, the example
script draws its figure, and the progress bar shows in a terminal."""
import contextlib
import io
import os
import re
import subprocess
import sys

import numpy as np

import ukb


def readme_blocks(source_dir):
    with open(os.path.join(source_dir, "README.md")) as f:
        text = f.read()
    section = text[text.index("\n## Python\n"):]
    section = section[:section.index("\n## ", 1)]
    return re.findall(r"```python\n(.*?)```", section, re.S)


def test_the_readmes_python_examples_run_and_say_what_they_claim(source_dir, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    blocks = readme_blocks(source_dir)
    assert len(blocks) == 3
    ns = {}
    for block in blocks:
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            exec(compile(block, "README.md", "exec"), ns)
        # A comment line "# ..." right after a print is its output.
        lines = block.splitlines()
        printed = out.getvalue().splitlines()
        claims = [lines[k + 1][2:] for k, line in enumerate(lines[:-1])
                  if line.startswith("print(") and lines[k + 1].startswith("# ")]
        for claim in claims:
            assert claim in printed, (claim, printed)
    # What the examples computed is physics, not just output: every bead
    # came to rest where static friction holds it, |cos th| <= mu |sin th|.
    r, mu = ns["r"], ns["mu"]
    assert (r.status_name == "at_rest").all()
    th = r.final["theta"]
    assert (np.abs(np.cos(th)) <= mu * np.abs(np.sin(th)) + 1e-9).all()
    assert ns["summary"]["status_counts"] == {"at_rest": 5000}
    assert len(ns["df"]) == 5000
    assert not os.listdir(tmp_path)  # ukb.run without out= wrote nothing


def test_the_friction_study_example_draws_its_figure(source_dir, tmp_path):
    script = os.path.join(source_dir, "examples", "python", "friction_study.py")
    png = tmp_path / "fs.png"
    env = dict(os.environ, MPLBACKEND="Agg")
    p = subprocess.run([sys.executable, script, "--n", "60", "--out", str(png)], capture_output=True, text=True,
                       env=env)
    assert p.returncode == 0, p.stderr
    assert "60 of 60 beads at rest" in p.stdout
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10000


class Terminal(io.StringIO):
    def isatty(self):
        return True


def ring(samples):
    return {"model": "bead_on_ring", "samples": samples, "seed": 2,
            "integrator": {"dt": 0.01, "t_end": 60.0, "chunk": 250},
            "params": {"mu": {"dist": "uniform", "min": 0.1, "max": 0.5}}}


def test_progress_is_a_plain_line_without_tqdm_and_a_bar_with_it(monkeypatch):
    term = Terminal()
    monkeypatch.setattr(sys, "stderr", term)
    monkeypatch.setitem(sys.modules, "tqdm", None)  # import tqdm fails
    monkeypatch.setitem(sys.modules, "tqdm.auto", None)
    ukb.run(ring(1000))
    assert "\rukb run: 1000 of 1000 samples" in term.getvalue()
    assert "\rukb run: 250 of 1000 samples" in term.getvalue()
    monkeypatch.delitem(sys.modules, "tqdm")
    monkeypatch.delitem(sys.modules, "tqdm.auto")
    term2 = Terminal()
    monkeypatch.setattr(sys, "stderr", term2)
    ukb.run(ring(1000))
    try:
        import tqdm  # noqa: F401
        assert "1000/1000" in term2.getvalue()
    except ImportError:  # the plain line
        assert "1000 of 1000" in term2.getvalue()
    # Not a terminal: nothing.
    plain = io.StringIO()
    monkeypatch.setattr(sys, "stderr", plain)
    ukb.run(ring(500))
    assert plain.getvalue() == ""
