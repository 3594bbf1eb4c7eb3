"""Figures the reliability tests record, one JSON line per row, under the artifacts folder
(``CLUSTER_DOCTOR_ARTIFACTS``, default ``test-artifacts/``, git-ignored); ``python -m
tests.faults.document`` turns them into docs/reliability.md.

Each file is started afresh by the first row a test session writes to it, so it always holds
one run's rows."""

from __future__ import annotations

import json
import os
import platform
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
_started: set[str] = set()


def artifacts() -> Path:
    path = Path(os.environ.get("CLUSTER_DOCTOR_ARTIFACTS", REPO / "test-artifacts"))
    path.mkdir(parents=True, exist_ok=True)
    return path


def results_file(kind: str) -> Path:
    return artifacts() / f"{kind}.jsonl"


def record(kind: str, row: dict[str, Any]) -> None:
    """Append ``row`` to ``<artifacts>/<kind>.jsonl``; the session's first row starts the file
    with a header line saying which run it is."""
    path = results_file(kind)
    if kind not in _started:
        _started.add(kind)
        header = {
            "run": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
            "host": f"{platform.system()} {platform.release()}, {os.cpu_count()} cores",
            "python": platform.python_version(),
        }
        path.write_text(json.dumps({"header": header}) + "\n")
    with path.open("a") as f:
        f.write(json.dumps(row, sort_keys=True) + "\n")


def read(kind: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The header and the rows of one results file."""
    lines = results_file(kind).read_text().splitlines()
    header = json.loads(lines[0])["header"]
    return header, [json.loads(line) for line in lines[1:]]
