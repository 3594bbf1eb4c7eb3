"""`doctor run --spares K`: over-allocate, vet, launch on the rest. The gate checks every node
given; up to K nodes are left out when every finding that stops the launch names only nodes
left out, and the job launches on the others, its node list, counts and rendezvous computed for
them (narrow.py).

Nothing is left out, and nothing launches, when a finding that stops the launch names no node
(a cause the nodes share: a setting, the network), names a node that is not the job's, when a
check crashed (nothing is known), or when more than K nodes would have to go.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from doctor.core.files import write_whole
from doctor.core.nodeset import compact
from doctor.core.printable import say
from doctor.job.argv import LaunchLine
from doctor.job.gate import Verdict
from doctor.job.narrow import narrow
from doctor.judge.report import Report
from doctor.nodes.inventory import Node


def leave_out(verdict: Verdict, spares: int, names: Sequence[str]) -> tuple[Verdict, str]:
    """The verdict on the nodes left after up to ``spares`` are left out (``left_out``: each
    with the codes that left it out), and why none could be when the launch stays stopped."""
    if verdict.passed:
        return verdict, ""
    if verdict.crashed:
        return verdict, f"a check crashed ({', '.join(verdict.crashed)}): nothing is known"
    shared = [f.code for f in verdict.blocking if not f.nodes]
    if shared:
        return verdict, f"{', '.join(dict.fromkeys(shared))} names no node: a cause they share"
    named: dict[str, list[str]] = {}
    for finding in verdict.blocking:
        for node in finding.nodes:
            named.setdefault(node, []).append(finding.code)
    foreign = [n for n in named if n not in names]
    if foreign:
        return verdict, f"{compact(foreign)} is not one of the job's nodes"
    if len(named) > spares:
        return verdict, f"{len(named)} nodes fail ({compact(named)}), more than {spares}"
    if len(named) >= len(set(names)):
        return verdict, "every node fails"
    left = {node: tuple(dict.fromkeys(codes)) for node, codes in named.items()}
    return replace(
        verdict,
        env={n: env for n, env in verdict.env.items() if n not in left},
        blocking=[],
        spared=list(verdict.blocking),
        left_out=left,
    ), ""


def spare(
    report: Report, verdict: Verdict, nodes: list[Node], spares: int
) -> tuple[Verdict, list[Node]]:
    """Leave out what can be, say so in one line and in the report's ``run`` section; the
    verdict and the nodes the job launches on."""
    verdict, why = leave_out(verdict, spares, [n.name for n in nodes])
    section = report.sections["run"]
    section["spares"] = spares
    section["left_out"] = {
        node: [f.summary for f in verdict.spared if node in f.nodes] for node in verdict.left_out
    }
    if why:
        section["not_left_out"] = why
        say(f"--spares {spares}: nothing left out: {why}")
    if not verdict.left_out:
        return verdict, nodes
    kept = [n for n in nodes if n.name not in verdict.left_out]
    reasons = "; ".join(f"{n}: {', '.join(codes)}" for n, codes in verdict.left_out.items())
    say(
        f"left out {compact(verdict.left_out)} (--spares {spares}): {reasons}; "
        f"launching on {len(kept)} of {len(nodes)} nodes"
    )
    return verdict, kept


def narrowed(line: LaunchLine, nodes: list[Node], verdict: Verdict, folder: Path) -> LaunchLine:
    """The launch line for the nodes kept (its hostfile written), its changes said in a line."""
    done = narrow(line, nodes, set(verdict.left_out), folder)
    for path, text in done.files.items():
        write_whole(path, text)
    if done.changes:
        say(f"for the nodes kept: {'; '.join(done.changes)}")
    return done.line
