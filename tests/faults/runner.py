"""Run the doctor as a user does (its own process, in its own session) against the test bed, act
on a trigger while it runs, and measure what the reliability promises are about: seconds, exit
code, the nodes it reported, the healthy nodes it blamed, what it left running, and whether the
files it wrote are whole."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
import xml.etree.ElementTree as ET
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from doctor.render.json_report import validate
from tests.cluster.harness import Cluster
from tests.cluster.netns import sh

POLL = 0.02
SETTLE = 5.0  # seconds a node's sshd may take to end a session the doctor closed


@dataclass(frozen=True)
class Trigger:
    """When ``marker`` shows in the command line of a process on ``node``, wait ``delay`` and
    ``act`` (kill the node, or Ctrl-C the doctor: ``act`` gets the cluster and the doctor's pid)."""

    node: str
    marker: str
    act: Callable[[Cluster, int], None]
    delay: float = 0.0


@dataclass
class Figures:
    seconds: float
    exit_code: int
    reported: list[str]  # nodes whose facts the report holds
    blamed: list[str]  # healthy nodes a finding names
    failed: list[str]  # nodes a failure names
    leftovers: list[str]  # "node: pid cmdline" of what outlived the run
    files_whole: bool
    files: dict[str, str] = field(default_factory=dict)  # written file -> "whole" or the defect
    triggered: bool | None = None
    since_trigger: float | None = None  # seconds from the trigger's act to the exit
    stderr: str = ""


def node_processes(c: Cluster) -> dict[int, tuple[str, str]]:
    """pid -> (node, command line) for every process in the cluster's namespaces, each node's
    sshd listener excepted."""
    out: dict[int, tuple[str, str]] = {}
    for node in c.nodes:
        keep = node.sshd.pid if node.sshd is not None else None
        for pid in sh("ip", "netns", "pids", node.ns.name, check=False).stdout.split():
            if int(pid) == keep:
                continue
            with contextlib.suppress(OSError):
                raw = Path(f"/proc/{pid}/cmdline").read_bytes()
                out[int(pid)] = (node.name, raw.replace(b"\0", b" ").decode(errors="replace"))
    return out


def session_processes(sid: int) -> list[str]:
    """Processes on this machine still in the doctor's session (ssh clients it started)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError, IndexError, ValueError):
            stat = (entry / "stat").read_text()
            fields = stat[stat.rindex(")") + 2 :].split()
            if int(fields[3]) == sid and int(entry.name) != sid:
                found.append(f"controller: {entry.name} {(entry / 'comm').read_text().strip()}")
    return found


def leftovers(c: Cluster, sid: int, before: set[int]) -> list[str]:
    """What outlived the run, after the sshd sessions had SETTLE seconds to end."""
    deadline = time.monotonic() + SETTLE
    while True:
        left = [
            f"{node}: {pid} {cmd[:120]}"
            for pid, (node, cmd) in node_processes(c).items()
            if pid not in before
        ] + session_processes(sid)
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.1)


def check_files(paths: list[Path]) -> dict[str, str]:
    """Every report file (JSON, XML) in these folders must parse whole; none at all is fine."""
    verdicts: dict[str, str] = {}
    for path in paths:
        files = sorted(p for p in path.glob("*.*") if p.suffix in (".json", ".xml"))
        for f in files:
            if not f.exists():
                continue
            try:
                if f.suffix == ".xml":
                    ET.parse(f)
                else:
                    doc = json.loads(f.read_text())
                    if f.name == "report.json":
                        validate(doc)
                verdicts[f.name] = "whole"
            except Exception as exc:
                verdicts[f.name] = f"{type(exc).__name__}: {exc}"[:200]
    return verdicts


def named_nodes(report: dict, severities: tuple[str, ...]) -> set[str]:
    """Nodes the report's findings of these severities name."""
    return {
        n
        for f in report.get("findings", [])
        if f.get("severity") in severities
        for n in f.get("nodes", [])
    }


def blamed_nodes(report: dict, faulty: frozenset[str]) -> list[str]:
    """Nodes a warning or failure names that the scenario left healthy."""
    return sorted(named_nodes(report, ("warn", "fail")) - faulty)


def run_doctor(
    c: Cluster,
    argv: list[str],
    *,
    outputs: list[Path],
    faulty: frozenset[str],
    trigger: Trigger | None = None,
    timeout: float = 300,
    env: dict[str, str] | None = None,
) -> Figures:
    """One run of the doctor's command line ``argv`` (maybe under salloc); stdout must be the
    JSON report (``-f json``) when one is printed at all."""
    before = set(node_processes(c))
    env = {**(env or os.environ), "COLUMNS": "120"}
    env.pop("DOCTOR_DEBUG", None)
    started = time.monotonic()
    proc = subprocess.Popen(
        argv,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
        env=env,
    )
    triggered = None if trigger is None else False
    acted = 0.0
    if trigger is not None:
        while proc.poll() is None and time.monotonic() - started < timeout:
            if any(
                node == trigger.node and trigger.marker in cmd
                for node, cmd in node_processes(c).values()
            ):
                time.sleep(trigger.delay)
                trigger.act(c, proc.pid)
                acted = time.monotonic()
                triggered = True
                break
            time.sleep(POLL)
    try:
        out, err = proc.communicate(timeout=max(1.0, timeout - (time.monotonic() - started)))
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
    ended = time.monotonic()
    seconds = ended - started
    report: dict = {}
    with contextlib.suppress(ValueError):
        report = json.loads(out) if out.strip() else {}
    nodes = report.get("nodes", {}) if isinstance(report, dict) else {}
    files = check_files(outputs)
    return Figures(
        seconds=round(seconds, 2),
        exit_code=proc.returncode,
        reported=sorted(n for n, v in nodes.items() if v.get("status") == "ok"),
        blamed=blamed_nodes(report, faulty) if isinstance(report, dict) else [],
        failed=sorted(named_nodes(report, ("fail",))) if isinstance(report, dict) else [],
        leftovers=leftovers(c, proc.pid, before),
        files_whole=all(v == "whole" for v in files.values()),
        files=files,
        triggered=triggered,
        since_trigger=round(ended - acted, 2) if triggered else None,
        stderr=err.decode(errors="replace")[-2000:],
    )


def _doctor_pid(pid: int) -> int:
    """The doctor's own process: ``pid`` itself, or its child under salloc."""
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError, IndexError):
                stat = (entry / "stat").read_text()
                parent = int(stat[stat.rindex(")") + 2 :].split()[1])
                if parent == pid and b"doctor" in (entry / "cmdline").read_bytes():
                    return int(entry.name)
    return pid


def interrupt(c: Cluster, pid: int) -> None:
    """Ctrl-C: SIGINT to the doctor's process group, the one a terminal puts in the foreground
    (salloc gives its command a group of its own and hands it the terminal)."""
    os.killpg(os.getpgid(_doctor_pid(pid)), signal.SIGINT)
