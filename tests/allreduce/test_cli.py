"""`doctor allreduce` and the preflight stage through the real CLI entry point."""

from __future__ import annotations

import json
import socket

import pytest

from doctor.cli.main import main


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_allreduce_json_section(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["allreduce", "--ranks", "2", "--sizes", "1K..4K", "--port", str(free_port())]
    assert main([*argv, "-f", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    section = doc["allreduce"]
    assert (section["backend"], section["world_size"], section["status"]) == ("gloo", 2, "passed")
    assert section["verified"] is True
    # A second run "as recommended" follows when the NIC recommendation differs from the env.
    run = section["runs"][0]
    assert run["label"] == "as configured"
    assert [r["phase"] for r in run["ranks"]] == ["done", "done"]
    assert [row["bytes"] for row in run["sweep"]] == [1024, 2048, 4096]
    assert set(run["sweep"][0]) >= {"bytes", "time_s", "algbw_gbps", "busbw_gbps"}
    # The run against the floor set for the fabric, when one is (allreduce.floor).
    assert [o["check"] for o in doc["outcomes"]] == ["allreduce", "allreduce.floor"]


def test_allreduce_text_shows_the_runs_and_the_sweep(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["allreduce", "--ranks", "2", "--sizes", "4K", "--port", str(free_port())]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "Allreduce (gloo, 2 ranks" in out
    assert "exactly" in out
    assert "4 KiB" in out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--sizes", "lots"], "--sizes"),
        (["--recommend", "eth0"], "--recommend"),
        (["--backend", "mpi"], "--backend"),
        (["--port", "70000"], "--port"),
    ],
)
def test_bad_options_are_one_line_usage_errors(
    args: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["allreduce", *args]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_preflight_ends_with_the_stage_unless_told_not_to(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["preflight", "-f", "json", "--port", str(free_port())]) in (0, 1)
    section = json.loads(capsys.readouterr().out)["allreduce"]
    assert section["status"] == "skipped"  # one CPU node: one rank, nothing to reduce across
    assert main(["preflight", "-f", "json", "--no-allreduce"]) in (0, 1)
    assert "allreduce" not in json.loads(capsys.readouterr().out)
