"""scripts/generate_report.py as a user runs it: from any directory, exit codes, messages."""

from __future__ import annotations

import os
import subprocess
import sys

from conftest import ROOT, make_run, write_run

SCRIPT = ROOT / "scripts" / "generate_report.py"


def _run(*args, cwd, env=None):
    return subprocess.run([sys.executable, str(SCRIPT), *map(str, args)], cwd=cwd,
                          capture_output=True, text=True, timeout=60, env=env)


def test_missing_directory(tmp_path):
    p = _run(tmp_path / "nope", cwd=tmp_path)
    assert p.returncode == 2
    assert "results directory not found" in p.stderr and "nope" in p.stderr
    assert p.stdout == ""


def test_empty_directory(tmp_path):
    (tmp_path / "empty").mkdir()
    p = _run(tmp_path / "empty", cwd=tmp_path)
    assert p.returncode == 2
    assert "no run files" in p.stderr
    assert not (tmp_path / "empty" / "report.html").exists()


def test_only_unreadable_files(tmp_path):
    (tmp_path / "bad_run1.json").write_text("{", encoding="utf-8")
    (tmp_path / "gateway-bench.json").write_text("{}", encoding="utf-8")
    p = _run(tmp_path, cwd=tmp_path)
    assert p.returncode == 2
    assert "none of the 1 run files" in p.stderr and "bad_run1.json: invalid JSON" in p.stderr
    assert "gateway-bench.json" not in p.stderr  # not a run file: not named as unreadable


def test_only_other_json_files_is_no_run_files(tmp_path):
    # What results/<stamp>/ held before the harness wrote run files: another tool's output.
    (tmp_path / "gateway-bench.json").write_text('{"tool": "gateway-bench"}', encoding="utf-8")
    (tmp_path / "adaptive.json").write_text("{", encoding="utf-8")
    p = _run(tmp_path, cwd=tmp_path)
    assert p.returncode == 2
    assert "no run files (*_run<N>.json)" in p.stderr
    assert "2 other .json files ignored" in p.stderr and "unreadable" not in p.stderr
    assert not (tmp_path / "report.html").exists()


def test_writes_both_files_from_another_cwd(results_dir, tmp_path):
    out = tmp_path / "out"
    p = _run(results_dir, "--out", out, cwd="/")
    assert p.returncode == 0, p.stderr
    assert p.stdout.split() == [str(out / "report.html"), str(out / "summary.csv")]
    assert (out / "report.html").stat().st_size > 1_000_000  # plotly.js is inside
    assert (out / "summary.csv").read_text().startswith("implementation,client,mode,")
    # The unreadable file and the failed runs are reported on stderr, not fatal.
    assert "iovalkey_standalone_heavy_50c_10s_run4.json" in p.stderr
    assert "4 failed run(s)" in p.stderr
    # Not run files: passed over in silence.
    assert "gateway-bench.json" not in p.stderr and "notes.json" not in p.stderr


def test_default_output_is_the_results_directory(tmp_path):
    write_run(tmp_path, make_run())
    p = _run(tmp_path, cwd=ROOT)
    assert p.returncode == 0, p.stderr
    assert (tmp_path / "report.html").exists() and (tmp_path / "summary.csv").exists()


def test_default_results_dir_is_results_latest_under_the_project(tmp_path):
    # argparse wraps help to the terminal width (80 in a pipe), breaking a long path or one
    # with hyphens (a clone in /tmp/sluice-fresh-clone/) across lines: give it room.
    p = _run("--help", cwd=tmp_path, env={**os.environ, "COLUMNS": "1000"})
    assert p.returncode == 0
    assert str(ROOT / "results" / "latest") in p.stdout
