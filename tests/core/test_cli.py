"""The command line as users meet it: exit codes, one-line errors, the JSON contract."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from doctor.render.json_report import validate


def doctor(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "doctor", *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=cwd,
        check=False,
        env={**os.environ, "NO_COLOR": "1"},
    )


def one_line_error(proc: subprocess.CompletedProcess[str]) -> str:
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    return lines[0]


def test_preflight_on_a_cpu_only_machine_exits_0_or_1_and_validates(tmp_path: Path) -> None:
    out = tmp_path / "report.json"
    proc = doctor("preflight", "--format", "json", "--json", str(out))
    assert proc.returncode in (0, 1), proc.stderr
    document = json.loads(proc.stdout)
    validate(document)
    assert json.loads(out.read_text())["findings"] == document["findings"]
    assert len(document["nodes"]) == 1
    assert {o["check"] for o in document["outcomes"]} >= {"shm.size", "node.reach"}


def test_text_report_lists_checks_and_a_summary() -> None:
    proc = doctor("preflight")
    assert proc.returncode in (0, 1)
    assert "shm.size" in proc.stdout
    assert " pass" in proc.stdout.splitlines()[-1]


def test_unknown_flag_is_a_usage_error() -> None:
    proc = doctor("preflight", "--no-such-flag")
    assert proc.returncode == 2
    assert "--no-such-flag" in one_line_error(proc)


def test_bad_fail_on_is_a_usage_error() -> None:
    proc = doctor("preflight", "--fail-on", "sometimes")
    assert proc.returncode == 2
    assert "--fail-on" in one_line_error(proc)


def test_unreadable_capture_folder_is_a_usage_error(tmp_path: Path) -> None:
    for target in (tmp_path / "absent", tmp_path / "empty"):
        if target.name == "empty":
            target.mkdir()
        proc = doctor("analyze", str(target))
        assert proc.returncode == 2
        assert str(target) in one_line_error(proc)
    a_file = tmp_path / "file.json"
    a_file.write_text("{}")
    assert doctor("analyze", str(a_file)).returncode == 2


def test_corrupt_capture_is_a_usage_error(tmp_path: Path) -> None:
    (tmp_path / "node1.json").write_text('{"probe": {"version": 1}, "files": [')
    proc = doctor("analyze", str(tmp_path))
    assert proc.returncode == 2
    assert "node1.json: corrupt capture" in one_line_error(proc)
    (tmp_path / "node1.json").write_text('{"hello": "world"}')
    proc = doctor("analyze", str(tmp_path))
    assert proc.returncode == 2
    assert "not a cluster-doctor probe capture" in one_line_error(proc)


def test_collect_then_analyze_gives_the_same_outcomes(tmp_path: Path) -> None:
    bundle = tmp_path / "bundle"
    assert doctor("collect", "--save-raw", str(bundle)).returncode == 0
    [saved] = list(bundle.glob("*.json"))
    # analyze has no nodes to run the allreduce stage on: compare the checks alone.
    live = json.loads(doctor("preflight", "-f", "json", "--no-allreduce").stdout)
    offline = json.loads(doctor("analyze", str(bundle), "-f", "json").stdout)
    validate(offline)
    assert list(offline["nodes"]) == [saved.stem]

    def statuses(d: dict[str, object]) -> list[tuple[str, str]]:
        return [(o["check"], o["status"]) for o in d["outcomes"]]  # type: ignore[index,attr-defined]

    assert statuses(offline) == statuses(live)


def test_probe_prints_a_capture() -> None:
    proc = doctor("probe")
    assert proc.returncode == 0
    raw = json.loads(proc.stdout)
    assert raw["probe"]["version"] == 1 and "values" in raw


def test_fail_on_warn_turns_warnings_into_exit_1(tmp_path: Path) -> None:
    # A 64 MiB capture of /dev/shm, made by editing a real capture's statvfs value.
    bundle = tmp_path / "b"
    assert doctor("collect", "--save-raw", str(bundle)).returncode == 0
    [path] = list(bundle.glob("*.json"))
    raw = json.loads(path.read_text())
    raw["values"]["statvfs:/dev/shm"]["value"] = {"size": 512 << 20, "free": 500 << 20}
    path.write_text(json.dumps(raw))
    assert doctor("analyze", str(bundle), "--select", "shm").returncode == 0
    warn = doctor("analyze", str(bundle), "--select", "shm", "--fail-on", "warn")
    assert warn.returncode == 1
    assert "shm.small" in warn.stdout and "--shm-size=1g" in warn.stdout


def test_no_arguments_prints_help() -> None:
    proc = doctor()
    assert proc.returncode == 0 and "preflight" in proc.stdout


def test_version() -> None:
    proc = doctor("--version")
    assert proc.returncode == 0 and proc.stdout.startswith("cluster-doctor ")
