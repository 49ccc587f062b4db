"""docs/python.md pasted into python3 works, the example
script draws its figure, and the progress bar shows in a terminal."""
import contextlib
import io
import json
import os
import re
import subprocess
import sys

import numpy as np

import ukb


def python_page_blocks(source_dir):
    with open(os.path.join(source_dir, "docs", "python.md")) as f:
        # (the blocks whose marker names this test; others are left to theirs)
        return ["\n".join(body) + "\n" for _, kind, body, marker in snippets(f.read())
                if kind == "python" and "test_the_python_pages_examples_run_and_say_what_they_claim" in (marker or "")]


def test_the_python_pages_examples_run_and_say_what_they_claim(source_dir, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    blocks = python_page_blocks(source_dir)
    assert len(blocks) == 3
    ns = {}
    for block in blocks:
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            exec(compile(block, "docs/python.md", "exec"), ns)
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


# The user's documentation as a whole (README.md, docs/, bench/README.md):
# links resolve, and every shell and Python snippet is run here, run by a
# named test, or marked as not runnable with the reason, in an HTML comment
# on the line before it: <!-- doc-test: run -->, <!-- doc-test: run by
# TEST -->, <!-- doc-test: not run: REASON -->.

COMMAND = re.compile(r"^(\$ )?(ukb|build[\w-]*/bin/|scripts/|bench/|cmake|ctest|mpirun|mpiexec|PYTHONPATH|"
                     r"python|/usr/bin/python|pip|UKB_\w+=|CI=|cd |git |sudo|apt)")
MARKER = re.compile(r"^<!-- doc-test: (run(?:; \S.*)?|run by \S.*|not run: \S.*) -->$")


def doc_pages(source_dir):
    pages = ["README.md"] + sorted(os.path.join("docs", f) for f in os.listdir(os.path.join(source_dir, "docs"))
                                   if f.endswith(".md"))
    return pages


def snippets(text):
    """(line number, kind, body lines, marker or None) of each shell or Python
    block: a fenced block tagged python/sh/bash/console, or an indented one
    whose first line is a command."""
    lines = text.split("\n")
    found, i = [], 0
    while i < len(lines):
        line, start = lines[i], i
        if line.startswith("```"):
            lang, j = line[3:].strip(), i + 1
            while not lines[j].startswith("```"):
                j += 1
            body, kind = lines[i + 1:j], {"python": "python", "sh": "shell", "bash": "shell",
                                          "console": "shell"}.get(lang)
            i = j + 1
        elif line.startswith("    ") and line.strip() and (i == 0 or not lines[i - 1].strip()):
            j = i
            while j < len(lines) and (lines[j].startswith("    ") or
                                      (not lines[j].strip() and j + 1 < len(lines) and lines[j + 1].startswith("    "))):
                j += 1
            body = [x[4:] for x in lines[i:j]]
            kind = "shell" if COMMAND.match(body[0].strip()) else None
            i = j
        else:
            i += 1
            continue
        if kind:
            before = [x for x in lines[:start] if x.strip()]
            m = MARKER.match(before[-1].strip()) if before else None
            found.append((start + 1, kind, body, m.group(1) if m else None))
    return found


def slug(heading):
    s = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return s.replace(" ", "-")


def anchors(text):
    out, fence = set(), False
    for line in text.split("\n"):
        if line.startswith("```"):
            fence = not fence
        elif not fence and re.match(r"^#{1,6} ", line):
            out.add(slug(line.lstrip("#")))
    return out


def test_every_relative_link_and_anchor_resolves(source_dir):
    bad, checked = [], 0
    for page in doc_pages(source_dir) + [os.path.join("bench", "README.md")]:
        path = os.path.join(source_dir, page)
        text = open(path).read()
        prose = re.sub(r"```.*?```", "", text, flags=re.S)
        for target in re.findall(r"\]\(([^)\s]+)\)", prose):
            if re.match(r"^[a-z]+:", target):
                continue
            checked += 1
            file_part, _, anchor = target.partition("#")
            dest = os.path.normpath(os.path.join(os.path.dirname(path), file_part)) if file_part else path
            if not os.path.exists(dest):
                bad.append(f"{page}: {target}: no such file")
            elif anchor and dest.endswith(".md") and anchor not in anchors(open(dest).read()):
                bad.append(f"{page}: {target}: no heading '{anchor}' in {os.path.relpath(dest, source_dir)}")
    assert checked > 50
    assert not bad, "\n".join(bad)


def test_the_readme_starts_with_the_two_commands_and_stays_short(source_dir):
    text = open(os.path.join(source_dir, "README.md")).read()
    lines = text.split("\n")
    assert lines[0] == "# ukb" and lines[1] == ""
    assert [x.split()[0] for x in lines[2:4]] == ["scripts/demo.sh", "scripts/test.sh"] and lines[4] == ""
    for script in ("demo.sh", "test.sh"):
        assert os.access(os.path.join(source_dir, "scripts", script), os.X_OK)
    assert len(lines) <= 401, f"README.md has {len(lines)} lines; the rest belongs in docs/"


def test_every_shell_and_python_snippet_is_run_or_marked(source_dir):
    unmarked, total = [], 0
    for page in doc_pages(source_dir):
        for line, kind, body, marker in snippets(open(os.path.join(source_dir, page)).read()):
            if page == "README.md" and body[0].startswith("scripts/demo.sh"):
                continue  # the two commands: CI runs scripts/test.sh itself (.ci/run)
            total += 1
            if marker is None:
                unmarked.append(f"{page}:{line}: {kind}: {body[0]}")
    assert total >= 10
    assert not unmarked, "snippets neither run nor marked 'not run: REASON':\n" + "\n".join(unmarked)


def same_output(expected, got):
    """Equal text, or equal JSON with numbers within 1e-12 max(1, |x|)."""
    try:
        a, b = json.loads(expected), json.loads(got)
    except ValueError:
        return expected.strip() == got.strip()

    def eq(x, y):
        if isinstance(x, dict):
            return isinstance(y, dict) and x.keys() == y.keys() and all(eq(x[k], y[k]) for k in x)
        if isinstance(x, list):
            return isinstance(y, list) and len(x) == len(y) and all(eq(p, q) for p, q in zip(x, y))
        if isinstance(x, float) or isinstance(y, float):
            return abs(x - y) <= 1e-12 * max(abs(x), abs(y), 1.0)
        return x == y
    return eq(a, b)


def run_shell(body, cwd, cli):
    """Runs each command of a shell snippet with this build's `ukb`. Where
    the commands start with `$ `, the lines up to the next one are the
    command's expected output."""
    prompted = any(x.startswith("$ ") for x in body)
    commands = []
    for line in body:
        if commands and commands[-1][0].endswith("\\"):
            commands[-1][0] = commands[-1][0][:-1] + " " + line.strip()
        elif line.strip() and (line.startswith("$ ") or not prompted):
            commands.append([line.strip().removeprefix("$ "), []])
        elif commands:
            commands[-1][1].append(line)
    assert commands
    for command, expected in commands:
        command = re.sub(r"^(build[\w-]*/bin/)?ukb ", lambda m: f'"{cli}" ', command)
        p = subprocess.run(["bash", "-c", command], cwd=cwd, capture_output=True, text=True)
        assert p.returncode == 0, (command, p.returncode, p.stderr)
        if expected:
            assert same_output("".join(expected), p.stdout), (command, expected, p.stdout)


def test_the_snippets_marked_run_run_and_say_what_they_claim(source_dir, tmp_path, monkeypatch):
    # In a directory of their own, with the repository's examples/ beside
    # them (the snippets name paths from the repository's root).
    os.symlink(os.path.join(source_dir, "examples"), tmp_path / "examples")
    cli = os.path.abspath(os.environ["UKB_CLI"])
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("UKB_CACHE_DIR", os.environ.get("UKB_TEST_MODEL_CACHE", str(tmp_path / "cache")))
    ran = 0
    for page in doc_pages(source_dir):
        ns = {}
        for line, kind, body, marker in snippets(open(os.path.join(source_dir, page)).read()):
            if marker != "run" and not (marker or "").startswith("run;"):
                continue
            ran += 1
            if kind == "shell":
                run_shell(body, tmp_path, cli)
                continue
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                exec(compile("\n".join(body), f"{page}:{line}", "exec"), ns)
            printed = out.getvalue().splitlines()
            claims = [body[k + 1][2:] for k, x in enumerate(body[:-1])
                      if x.startswith("print(") and body[k + 1].startswith("# ")]
            for claim in claims:
                assert claim in printed, (page, line, claim, printed)
    assert ran >= 4
    # What the README's commands wrote is what it says they write.
    for d in ("ring", "ring2", "sleigh"):
        for f in ("results.npy", "summary.json", "run.json"):
            assert (tmp_path / d / f).is_file(), (d, f)
    assert json.loads((tmp_path / "ring2" / "run.json").read_text())["crosscheck"]["pass"] is True
    assert json.loads((tmp_path / "ring" / "summary.json").read_text())["status_counts"] == {"at_rest": 100000}


def test_the_readme_config_is_the_core_of_the_example(source_dir):
    readme = open(os.path.join(source_dir, "README.md")).read()
    block = re.search(r"```toml\n(.*?)```", readme, re.S).group(1)
    example = [x.split("#")[0].strip() for x in open(os.path.join(source_dir, "examples", "ring_friction.toml"))]
    for line in block.splitlines():
        if line.strip():
            assert line.split("#")[0].strip() in example, line
