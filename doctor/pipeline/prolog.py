"""Prolog mode: check only this node, fast, and answer the way SLURM's Prolog contract reads.

slurmd runs the Prolog before a job starts on the node; a non-zero exit drains the node (and
requeues a batch job), so the exit code is the verdict: 0 healthy, 1 drain. The reason is one
line on stderr, which is what ends up in slurmd's log. A doctor that cannot judge (it broke, or
its probe could not run) says so and exits 0: a bug in the doctor must never drain a cluster.
"""

from __future__ import annotations

import sys
from dataclasses import replace
from typing import TextIO

from doctor.core.model import Finding, Severity
from doctor.core.printable import printable
from doctor.nodes.inventory import local_node
from doctor.nodes.targets import Targets
from doctor.pipeline import steps
from doctor.pipeline.request import ProbeSettings, Request
from doctor.plugin import CheckSpec

# slurmd waits for the Prolog before the job starts; keep the probe's own deadline well inside
# the 2 s a prolog may reasonably add to every job start.
PROLOG_DEADLINE = 1.5
EXIT_HEALTHY = 0
EXIT_DRAIN = 1


def reason_line(node: str, bad: list[Finding]) -> str:
    """``cluster-doctor: node7: shm.too_small: /dev/shm is only 64 MiB ... (+1 more: x.y)``"""
    first = bad[0]
    line = f"cluster-doctor: {node}: {first.code}: {first.summary}"
    if len(bad) > 1:
        line += f" (+{len(bad) - 1} more: {', '.join(f.code for f in bad[1:])})"
    return " ".join(line.split())  # one line, whatever a summary holds


def run_prolog(
    specs: list[CheckSpec],
    threshold: Severity,
    err: TextIO | None = None,
    probe: ProbeSettings | None = None,
) -> int:
    """Probe and check this node; exit EXIT_DRAIN with one reason line on findings >= threshold.
    The probe's settings are the command line's (--since, --path, --mount), within the Prolog's
    own deadline."""
    err = err or sys.stderr
    node = local_node()
    request = Request(
        "prolog",
        targets=Targets(local=True),
        probe=replace(probe or ProbeSettings(), deadline=PROLOG_DEADLINE),
        checks=tuple(specs),
    )
    cannot = f"cluster-doctor: {node.name}: cannot judge this node: "
    try:
        report = steps.run(request)
        for failure in report.cluster.failures.values():
            _line(err, cannot + failure.summary)
            return EXIT_HEALTHY
    except Exception as exc:
        _line(err, cannot + str(exc))
        return EXIT_HEALTHY
    bad = sorted(
        (f for f in report.findings if f.severity >= threshold),
        key=lambda f: (-f.severity, f.code),
    )
    if not bad:
        return EXIT_HEALTHY
    _line(err, reason_line(node.name, bad))
    return EXIT_DRAIN


def _line(err: TextIO, text: str) -> None:
    """One line for slurmd's log, which keeps it: what it quotes shown safely."""
    err.write(printable(text) + "\n")
    err.flush()
