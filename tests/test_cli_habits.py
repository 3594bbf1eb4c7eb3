"""Everyday CLI habits: --quiet, --verbose, NO_COLOR, --select/--exclude, completion, progress,
and every report format written from one run."""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from builders import MIB, raw_capture, run_cli, write_captures
from rich.console import Console

from doctor.core.capture import Capture
from doctor.core.model import NodeFailure
from doctor.render.progress import Progress

# Exit codes and output are asserted for these checks only: other checks (present or added
# later) judge facts these small captures do not have.
SHM = ("--select", "shm")

# An SGR sequence that sets a foreground colour (30-37, 90-97, 38;...): what NO_COLOR forbids.
COLOUR = re.compile(r"\x1b\[(?:[0-9]+;)*(?:3[0-8]|9[0-7])(?:;[0-9]+)*m")


@pytest.fixture
def captures(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    return write_captures(tmp_path / "captures", {"gpu01": 64 * MIB, "gpu02": 2048 * MIB})


def checks_run(out: str) -> list[str]:
    return sorted({o["check"] for o in json.loads(out)["outcomes"]})


def test_select_and_exclude(captures: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = run_cli(["analyze", str(captures), "-f", "json", "--select", "shm"], capsys)
    assert (rc, checks_run(out)) == (1, ["shm.size"])
    _, out, _ = run_cli(["analyze", str(captures), "-f", "json", "--exclude", "shm.size"], capsys)
    assert "node.reach" in checks_run(out) and "shm.size" not in checks_run(out)
    rc, _, err = run_cli(["analyze", str(captures), "--select", "sh"], capsys)
    assert (
        rc == 2 and err.strip() == "doctor: error: no check matches 'sh' (see 'doctor checks list')"
    )


def test_quiet_and_verbose(captures: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = run_cli(["-q", "analyze", str(captures), *SHM], capsys)
    assert rc == 1 and "Checks" not in out and "shm.too_small" in out
    rc, out, _ = run_cli(["-q", "analyze", str(captures), "--select", "node"], capsys)
    assert (rc, out) == (0, "")
    rc, out, _ = run_cli(["--verbose", "analyze", str(captures), *SHM], capsys)
    assert re.search(r"FAIL  shm.size +gpu01", out) and re.search(r"ok    shm.size +gpu02", out)
    rc, _, err = run_cli(["-q", "-v", "analyze", str(captures)], capsys)
    assert rc == 2 and "exclude each other" in err


def test_no_color(
    captures: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FORCE_COLOR", "1")
    _, out, _ = run_cli(["analyze", str(captures), *SHM], capsys)
    assert COLOUR.search(out)  # forced to a terminal, the report is coloured...
    monkeypatch.setenv("NO_COLOR", "1")
    _, out, _ = run_cli(["analyze", str(captures), *SHM], capsys)
    assert not COLOUR.search(out) and "FAIL" in out  # ...and NO_COLOR takes the colour out


def test_every_format_from_one_run(captures: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["analyze", str(captures), *SHM, "--junit", "r.xml", "--markdown", "r.md"]
    argv += ["--json", "r.json", "--html", "r.html"]
    rc, out, _ = run_cli(argv, capsys)
    assert rc == 1 and out.startswith("cluster-doctor analyze")
    assert 'failures="1"' in Path("r.xml").read_text()
    assert "### FAIL: /dev/shm is only 64 MiB" in Path("r.md").read_text()
    assert json.loads(Path("r.json").read_text())["summary"]["fail"] == 1
    page = Path("r.html").read_text()
    assert page.startswith("<!DOCTYPE html>") and "/dev/shm is only 64 MiB" in page
    rc, _, err = run_cli(["analyze", str(captures), "--junit", "no/such/dir/r.xml"], capsys)
    assert rc == 2 and err.startswith("doctor: error: --junit no/such/dir/r.xml:")


def complete(words: str) -> list[str]:
    env = {**os.environ, "_DOCTOR_COMPLETE": "complete_bash", "COMP_WORDS": words}
    env["COMP_CWORD"] = str(len(words.split()) - (0 if words.endswith(" ") else 1))
    code = "import sys; from doctor.cli.main import main; sys.exit(main())"
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60
    )
    return done.stdout.split()


def test_shell_completion() -> None:
    assert complete("doctor pre") == ["preflight"]
    assert "--junit" in complete("doctor analyze --ju")
    assert complete("doctor baseline ") == ["save"]


def progress_console(terminal: bool) -> tuple[Console, io.StringIO]:
    out = io.StringIO()
    return Console(file=out, force_terminal=terminal, color_system=None, width=100), out


def test_progress_line_names_the_nodes_still_awaited() -> None:
    console, out = progress_console(False)
    progress = Progress(console)
    progress.probing(["gpu01", "gpu02", "gpu03"])
    progress.probed("gpu02", NodeFailure("gpu02", "node.timeout", "gpu02 did not answer"))
    assert progress.line().plain == ("probing 3 nodes: 1 answered, 1 failed; waiting on gpu[01,03]")
    progress.probed("gpu01", Capture(raw_capture("gpu01")))
    progress.done()
    # Not a terminal: no redrawing, one line for the failure only (the success is quiet).
    assert re.fullmatch(r"gpu02: gpu02 did not answer \(\d+\.\ds\)\n", out.getvalue())


def test_progress_verbose_quiet_and_live() -> None:
    console, out = progress_console(False)
    progress = Progress(console, verbose=True)
    progress.probing(["gpu01"])
    progress.probed("gpu01", Capture(raw_capture("gpu01")))
    progress.done()
    assert out.getvalue().startswith("gpu01: probed (")
    console, out = progress_console(False)
    progress = Progress(console, quiet=True)
    progress.probing(["gpu01"])
    progress.probed("gpu01", NodeFailure("gpu01", "node.timeout", "gone"))
    progress.done()
    assert out.getvalue() == ""
    console, out = progress_console(True)
    progress = Progress(console)
    progress.probing(["gpu01", "gpu02"])
    progress.probed("gpu01", Capture(raw_capture("gpu01")))
    progress.done()
    assert "waiting on gpu02" in out.getvalue()  # the live line was drawn on the terminal


def test_preflight_reports_progress_on_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, err = run_cli(["--verbose", "preflight", "--deadline", "10", "-f", "json"], capsys)
    assert rc in (0, 1)
    json.loads(out)  # stdout holds only the report
    assert re.search(r": probed \(\d+\.\ds\)", err)


def test_stage_progress_counts_pairs_on_a_terminal_only() -> None:
    console, out = progress_console(True)
    progress = Progress(console)
    progress.testing("mesh")
    progress.tested("mesh", 3, 200)
    assert progress.line().plain == "mesh: 3 of 200 pairs tested"
    progress.done()
    assert "mesh: 3 of 200 pairs tested" in out.getvalue()
    for terminal, quiet in ((False, False), (True, True)):
        console, out = progress_console(terminal)
        progress = Progress(console, quiet=quiet)
        progress.testing("reach")
        progress.tested("reach", 5, 10)
        progress.done()
        assert out.getvalue() == ""


def doctor_cli(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "doctor", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "NO_COLOR": "1", **env},
    )


def test_what_users_type_is_printed_verbatim() -> None:
    # Rich reads ":b:" as an emoji code; users' text (hosts, patterns, variables) must not.
    proc = doctor_cli("preflight", "-H", "a:b:c")
    assert proc.returncode == 2 and "cannot read host 'a:b:c'" in proc.stderr
    proc = doctor_cli("preflight", "--select", ":b:")
    assert proc.returncode == 2 and "no check matches ':b:'" in proc.stderr
    # A real run of this node whose Gloo variable names an interface ":b:": the finding says so.
    proc = doctor_cli(
        "preflight", "--no-allreduce", "--select", "nics.gloo", GLOO_SOCKET_IFNAME=":b:"
    )
    assert "GLOO_SOCKET_IFNAME=:b:" in proc.stdout, proc.stdout
    assert "\N{NEGATIVE SQUARED LATIN CAPITAL LETTER B}" not in proc.stdout + proc.stderr
