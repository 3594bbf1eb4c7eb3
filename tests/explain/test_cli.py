"""`doctor explain` end to end: exit codes, JSON envelope, unknown input, stdin."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from doctor.cli.main import main
from doctor.render.json_report import schema
from tests.explain.fixtures import LOGS, body


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    rc = main(["explain", *argv])
    out, err = capsys.readouterr()
    return rc, out, err


def test_json_envelope_merges_ranks_in_time_order(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = tmp_path / "job.log.gz"
    log.write_bytes(gzip.compress(body(LOGS / "format/nccl-peer-closed.log")))
    rc, out, _ = run(["--format", "json", str(log)], capsys)
    doc = json.loads(out)
    assert rc == 0
    assert doc["command"] == "explain" and doc["schema_version"]
    codes = [f["code"] for f in doc["findings"]]
    assert codes[0] == "nccl.shm.full"
    first = doc["findings"][0]
    assert first["severity"] == "fail" and first["fix"]["commands"]
    assert first["nodes"] == ["gpu-b"]
    assert doc["context"]["first_error"]["rank"] == 1
    assert doc["context"]["ranks"] == [0, 1]


def test_nccl_context_in_json(capsys: pytest.CaptureFixture[str]) -> None:
    tmp = LOGS / "format/nccl-context-gpu.log"
    rc, out, _ = run(["-f", "json", str(tmp)], capsys)
    nccl = json.loads(out)["context"]["nccl"]
    assert rc == 0 and nccl["version"] == "2.32.3" and nccl["nnodes"] == 2
    assert nccl["transports"]["NET/IB/GDRDMA"] == 1


def test_unknown_input_says_so_and_exits_0(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = tmp_path / "other.log"
    log.write_text("epoch 1 loss 0.3\nepoch 2 loss 0.2\n")
    rc, out, _ = run([str(log)], capsys)
    assert rc == 0 and "no known signature" in out and "Read 2 lines" in out


def test_terminal_output_names_cause_and_fix(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = run([str(LOGS / "real/torch-gloo-loopback-hostname.log")], capsys)
    assert rc == 0
    assert "gloo.loopback_address" in out and "export GLOO_SOCKET_IFNAME=eth0" in out


def test_missing_file_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, err = run([str(tmp_path / "absent.log")], capsys)
    assert rc == 2 and out == ""
    assert err.count("\n") == 1 and "absent.log" in err and "Traceback" not in err


def test_stdin_and_binary_garbage() -> None:
    data = body(LOGS / "real/ssh-permission-denied.log") + bytes(range(256)) * 100
    proc = subprocess.run(
        [sys.executable, "-m", "doctor", "explain", "-", "--format", "json"],
        input=data,
        capture_output=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert [f["code"] for f in json.loads(proc.stdout)["findings"]] == ["ssh.permission_denied"]


@pytest.mark.parametrize(
    "name",
    [
        "format/nccl-context-gpu.log",
        "real/mpi-orted-not-found.log",
        "format/nccl-ib-peer-gone.log",  # a culprit, who reported it, what followed
    ],
)
def test_json_follows_the_shipped_schemas(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = run(["--format", "json", str(LOGS / name)], capsys)
    doc = json.loads(out)
    assert rc == 0
    jsonschema.validate(doc, schema("explain"))
    finding_schema = {"$defs": schema()["$defs"], "$ref": "#/$defs/finding"}
    for finding in doc["findings"]:
        jsonschema.validate(finding, finding_schema)


def test_no_logs_and_a_terminal_on_stdin_is_a_usage_error_not_a_hang() -> None:
    primary, secondary = os.openpty()
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "doctor", "explain"],
            stdin=secondary,
            capture_output=True,
            text=True,
            timeout=60,
        )
    finally:
        os.close(primary)
        os.close(secondary)
    assert proc.returncode == 2 and "pipe a log" in proc.stderr
