"""What `doctor run` prints around the job: the gate's verdict (the whole report only when it
stops the launch), one summary line for a job that succeeds, the cause/node/fix for one that
fails. The report's files (--json, --html, ...; -f json on stdout) carry the same under ``run``.
"""

from __future__ import annotations

from typing import Any

from doctor.core.model import Finding
from doctor.core.nodeset import compact
from doctor.core.printable import say
from doctor.job.gate import Verdict
from doctor.job.spread import JobResult
from doctor.judge.report import Report
from doctor.render.output import OutputOptions, emit


def _codes(findings: list[Finding]) -> str:
    return ", ".join(dict.fromkeys(f.code for f in findings))


def blocking(verdict: Verdict) -> str:
    """What stops the launch, with the nodes."""
    found = [f"{f.code} ({compact(f.nodes)})" if f.nodes else f.code for f in verdict.blocking]
    return ", ".join(found + [f"crashed check {c}" for c in verdict.crashed])


def show_gate(report: Report, verdict: Verdict) -> None:
    """One line for a gate that lets the job go."""
    nodes = len([n for n in report.cluster.nodes if n not in verdict.left_out])
    bits = [f"gate passed on {nodes} node(s)"]
    if verdict.fixed:
        bits.append(
            f"{len(verdict.fixed)} finding(s) fixed by the environment ({_codes(verdict.fixed)})"
        )
    judged = (*verdict.fixed, *verdict.blocking, *verdict.spared)
    below = [f for f in report.findings if f not in judged]
    if below:
        bits.append(
            f"{len(below)} below --fail-on ({_codes(below)}; 'doctor preflight' shows them)"
        )
    say("; ".join(bits))


def show_failure(section: dict[str, Any]) -> None:
    explained = section.get("explanation") or {}
    for failed in explained.get("failed", []):
        error = f": {failed['error']}" if failed.get("error") else ""
        say(f"job failed on {failed['node']} (exit {failed['exit_code']}){error}")
    for finding in explained.get("findings", []):
        on = f" on {compact(finding['nodes'])}" if finding["nodes"] else ""
        say(f"cause: {finding['code']}{on}: {finding['summary']}")
        fix = finding.get("fix") or {}
        if fix.get("text"):
            say(f"  fix: {fix['text']}")
        for command in fix.get("commands", []):
            say(f"    $ {command}")


def show_job(
    report: Report,
    verdict: Verdict,
    result: JobResult | None,
    output: OutputOptions,
) -> int:
    """Print what the run came to; the exit code: the report's when not launched, else the
    job's."""
    if result is None:
        code = emit(report, output)
        say(
            f"not launched: the gate stops at {blocking(verdict)} "
            "(the environment does not fix it; --force launches anyway)"
        )
        return code or 1
    section = report.sections["run"]
    folder = section["logs"]
    code = result.exit_code()
    if result.interrupted:
        say(f"interrupted: ended the job on every node ({section['seconds']:g}s); logs in {folder}")
    elif code == 0:
        where = f" on {len(result.runs)} node(s)" if len(result.runs) > 1 else ""
        say(f"job finished{where} in {result.seconds:.1f}s, exit 0; logs in {folder}")
    else:
        if result.timed_out:
            say("time limit reached: ended the job on every node")
        if result.hung:
            say("hung (--on-hang stop): ended the job on every node")
        show_failure(section)
        say(f"logs in {folder}")
    emit(report, output, text=False)  # --json and the other files, redacted as asked
    return code
