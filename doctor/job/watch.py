"""`doctor run`'s hang watch: when the job has printed nothing for ``--hang-after`` seconds, look
at every rank (doctor/job/stacks.py) over a short window and judge.

Silence alone proves nothing (a long evaluation, a checkpoint), and neither does CPU time (a
rank waiting on NCCL spins at full speed): the look decides. A rank whose stack moved, or that
read or wrote data, is progress, and the job goes on watched. Otherwise the verdict is printed,
saved in the logs folder (hang-N.txt, hang-N.json) and kept in the report's ``run`` section;
the job is left running (``--on-hang report``) or ended (``--on-hang stop``).

The job carries a mark in its environment (CLUSTER_DOCTOR_JOB) so the look finds its ranks and
no other job's, and Flight Recorder is armed through the environment (a buffer, and the dump
pipe torch polls for NCCL), its dumps going to files the look removes once read.
"""

from __future__ import annotations

import io
import json
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from doctor.core.files import write_whole
from doctor.core.model import CheckOutcome, Severity
from doctor.core.printable import say
from doctor.job.settings import HangSettings, StacksSettings
from doctor.job.stacks import look_at_job
from doctor.nodes.inventory import Node
from doctor.nodes.transport import BatchTransport, Transport
from doctor.plugin import CheckSpec
from doctor.render.output import safe_console
from doctor.render.terminal import render_text

WINDOW = 3.0  # seconds each rank is watched for progress once the job went quiet
# Seconds, beyond the window, a node gets to answer: torch takes seconds to write a Flight
# Recorder dump (5 to 9 on the H200); a silent node costs this much.
DUMPS = 8.0
MARK = "CLUSTER_DOCTOR_JOB"
FR_ENTRIES = "2000"
# torch renamed Flight Recorder's buffer and dump variables (TORCH_NCCL_* -> TORCH_FR_*): 2.11
# reads the new names and warns on the old; before the rename only the old ones work, so a torch
# older than the one seen gets both. Its dump pipe kept its old name (2.11 on the H200 made no
# pipe for TORCH_FR_DEBUG_INFO_PIPE_FILE alone): both are set.
FR_RENAMED = (2, 11)
FR_NEW = ("TORCH_FR_BUFFER_SIZE", "TORCH_FR_DUMP_TEMP_FILE")
FR_OLD = ("TORCH_NCCL_TRACE_BUFFER_SIZE", "TORCH_NCCL_DEBUG_INFO_TEMP_FILE")
FR_PIPES = ("TORCH_NCCL_DEBUG_INFO_PIPE_FILE", "TORCH_FR_DEBUG_INFO_PIPE_FILE")


def new_mark() -> str:
    return uuid.uuid4().hex[:12]


def armed_env(mark: str, torch_versions: list[str]) -> dict[str, str]:
    """What the job's environment gets: the mark, and Flight Recorder armed (under the names
    every node's torch reads)."""
    values = (FR_ENTRIES, f"{_files(mark)}fr-")
    env = {MARK: mark}
    renamed = [_at_least(v, FR_RENAMED) for v in torch_versions]
    for names in [FR_NEW] + [FR_OLD] * (not renamed or not all(renamed)):
        env.update(zip(names, values, strict=True))
    env.update(dict.fromkeys(FR_PIPES, f"{_files(mark)}pipe-"))
    return env


def _files(mark: str) -> str:
    return f"/tmp/cluster-doctor-{mark}-"


def armed_files(mark: str) -> tuple[str, ...]:
    """What arming Flight Recorder has the job make on a node: its pipes, and its dumps."""
    return (f"{_files(mark)}*",)


def _at_least(version: str, floor: tuple[int, int]) -> bool:
    parts = version.split("+")[0].split(".")
    try:
        return (int(parts[0]), int(parts[1])) >= floor
    except (IndexError, ValueError):
        return False


@dataclass
class Watch:
    nodes: list[Node]
    transport: Transport | BatchTransport
    python: str | None
    mark: str
    folder: Path
    settings: HangSettings
    checks: tuple[CheckSpec, ...]
    verdicts: list[dict[str, Any]] = field(default_factory=list)
    looks: int = 0
    judged: list[CheckOutcome] = field(default_factory=list)  # the hang check's, when hung

    def __call__(self, quiet: float, why: str = "") -> str:
        """Look at the job that printed nothing for ``quiet`` seconds, or whose rank printed a
        timeout (``why``): moving, report or stop."""
        began = time.monotonic()
        if why:
            say(f"{why}\ndoctor: looking at every rank now, before the watchdog ends them")
        else:
            say(f"no output for {quiet:.0f}s: looking at every rank for {WINDOW:g}s")
        report = look_at_job(
            self.nodes,
            self.transport,
            StacksSettings(window=WINDOW, deadline=WINDOW + DUMPS),
            self.checks,
            self.python,
            job=self.mark,
            command="run",
        )
        self.looks += 1
        hung = [
            f
            for f in report.findings
            if f.check == "hang" and f.code != "hang.progressing" and f.severity >= Severity.WARN
        ]
        seconds = round(time.monotonic() - began, 2)
        if not hung:
            moved = next((f for f in report.findings if f.code == "hang.progressing"), None)
            say(f"not hung: {moved.summary if moved else 'no rank of the job waits'}")
            return "moving"
        self.judged = [o for o in report.outcomes if o.check == "hang"]  # the last look's
        text = io.StringIO()
        render_text(report, safe_console(text, width=160, no_color=True))
        base = self.folder / f"hang-{len(self.verdicts) + 1}"
        write_whole(base.with_suffix(".txt"), text.getvalue())
        write_whole(base.with_suffix(".json"), json.dumps(report.to_json(), indent=1) + "\n")
        for finding in hung:
            say(f"hang: {finding.code}: {finding.summary}")
            for line in finding.evidence[:4]:
                say(f"  seen: {line}")
        say(f"verdict {seconds}s after the look began; whole look in {base.with_suffix('.txt')}")
        self.verdicts.append(
            {
                "after_quiet_s": round(quiet, 1),
                "seconds": seconds,
                "findings": [
                    {"code": f.code, "summary": f.summary, "nodes": list(f.nodes)} for f in hung
                ],
                "saved": str(base.with_suffix(".json")),
            }
        )
        return self.settings.on_hang.value
