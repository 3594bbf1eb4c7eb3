"""`doctor run [node options] -- COMMAND`: the preflight of the command's nodes, then the command
with the recommended environment, then, when it fails, why.

The nodes come from the command when the doctor's own options name none (argv.py). The gate is
the preflight's pipeline on the connected nodes (pipeline.run_connected); the job goes through
the same transport: once, here, for a launcher that starts every node itself (forward.py says
how it passes the environment on), or on every node for torchrun and accelerate launch
(spread.py).
"""

from __future__ import annotations

import shlex
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from doctor.core.errors import UsageError
from doctor.core.files import write_whole
from doctor.core.model import Missing, Severity
from doctor.core.printable import say
from doctor.facts.cluster import ClusterFacts
from doctor.facts.hang.outcome import FailedNode, JobOutcome
from doctor.job.argv import PER_NODE, LaunchLine, collective_timeout
from doctor.job.explain import job_explanation
from doctor.job.forward import forward
from doctor.job.gate import Verdict, judge
from doctor.job.settings import HangSettings
from doctor.job.show import blocking, show_gate
from doctor.job.spares import narrowed, spare
from doctor.job.spread import JobResult, Launch, run_job
from doctor.job.watch import Watch, armed_env, armed_files, new_mark
from doctor.judge.registry import load_checks
from doctor.judge.report import Report, merge_findings
from doctor.judge.runner import run_checks
from doctor.nic.choice import NicPlan
from doctor.nic.plan import subnets
from doctor.nodes.connect import connect
from doctor.nodes.inventory import Node, local_node
from doctor.nodes.targets import Targets
from doctor.nodes.transport import BatchTransport, Transport
from doctor.nodes.transport.launch import Launcher, LocalLauncher
from doctor.nodes.transport.launchers import launcher_for
from doctor.nodes.transport.local import LocalTransport
from doctor.pipeline.request import Profile, Request, RunSettings, StageSettings
from doctor.pipeline.steps import Watcher, run_connected
from doctor.render.hostlists import HostLists
from doctor.stages.pairs import Sampling

HOLES = ("{node}", "{node_rank}", "{nnodes}", "{master_addr}", "{master_port}")
QUICK_SIZES = "64K"  # one size: proves the sum and the fix, no sweep
MPI_VARS = ("OMPI_MCA_btl_tcp_if_include", "OMPI_MCA_oob_tcp_if_include")


def targets_for(targets: Targets, line: LaunchLine) -> Targets:
    """The doctor's own node options when it has any; else the nodes the command names."""
    own = (targets.hosts, targets.hostfile, targets.slurm, targets.slurm_nodes, targets.partition)
    if any(own) or targets.local or targets.exec:
        return targets
    if line.hosts or line.hostfile:
        return replace(targets, hosts=line.hosts, hostfile=None if line.hosts else line.hostfile)
    if line.nodelist:
        return replace(targets, slurm_nodes=line.nodelist)
    return targets


def stages_for(stages: StageSettings, profile: Profile, line: LaunchLine) -> StageSettings:
    master = stages.master or line.master_addr
    # torchrun and accelerate go through the doctor's transport, srun through SLURM: no node
    # logs in to another by SSH, so the mesh is not what decides their launch.
    if profile is Profile.quick and line.tool in PER_NODE | {"srun"}:
        return replace(stages, master=master, mesh=Sampling.off)
    return replace(stages, master=master)


def fill(argv: list[str], values: dict[str, str]) -> list[str]:
    """{node}, {node_rank}, ... replaced in every word; other braces are left as they are."""
    out = []
    for word in argv:
        for hole in HOLES:
            word = word.replace(hole, values[hole[1:-1]])
        out.append(word)
    return out


def env_line(verdict: Verdict, how: str) -> str:
    """One line: what was set, where, and why."""
    sets: dict[str, list[str]] = {}
    for node, env in verdict.env.items():
        if env:
            pairs = " ".join(f"{k}={v}" for k, v in env.items())
            sets.setdefault(pairs, []).append(node)
    if not sets:
        return "set nothing: no interface to recommend"
    where = "; ".join(
        f"{pairs} on {'every node' if len(sets) == 1 else ','.join(nodes)}"
        for pairs, nodes in sets.items()
    )
    why = "the interface every peer reached" if verdict.proven else "each node's NIC plan"
    if verdict.fixed:
        codes = ", ".join(dict.fromkeys(f.code for f in verdict.fixed))
        why += f"; fixes {codes}"
    return f"set {where} ({how}): {why}"


def _launches(
    line: LaunchLine, nodes: list[Node], verdict: Verdict, master: str, port: int
) -> list[Launch]:
    out = []
    for rank, node in enumerate(nodes):
        values = {
            "node": node.name,
            "node_rank": str(rank),
            "nnodes": str(len(nodes)),
            "master_addr": master,
            "master_port": str(port),
        }
        out.append(Launch(node, fill(list(line.argv), values), verdict.env.get(node.name, {})))
    return out


def _shared(verdict: Verdict, report: Report) -> dict[str, str]:
    """What one launcher run here can pass to every node: the settings every node shares, with
    Open MPI's given as subnets (this machine, where mpirun runs, may not be a node)."""
    envs = [e for e in verdict.env.values() if e]
    if not envs:
        return {}
    shared = {k: v for k, v in envs[0].items() if all(e.get(k) == v for e in envs)}
    plans = [f.nic for f in report.cluster.nodes.values() if isinstance(f.nic, NicPlan)]
    cidr = subnets(plans)
    if cidr:
        shared.update(dict.fromkeys(MPI_VARS, cidr))
    return shared


def _torch_versions(report: Report) -> list[str]:
    found = []
    for facts in report.cluster.nodes.values():
        torch = None if isinstance(facts.frameworks, Missing) else facts.frameworks.torch
        if torch is not None and isinstance(torch.package.version, str):
            found.append(torch.package.version)
    return found


def launch(
    line: LaunchLine,
    nodes: list[Node],
    transport: Transport | BatchTransport,
    verdict: Verdict,
    report: Report,
    settings: RunSettings,
    hang: HangSettings,
    python: str | None,
    folder: Path,
) -> JobResult:
    mark = new_mark()
    armed = armed_env(mark, _torch_versions(report)) if hang.hang_after else {}
    watch = None
    if armed:
        checks = tuple(s for s in load_checks(("hang", "cluster")) if s.id in ("hang", "reach.tcp"))
        watch = Watch(nodes, transport, python, mark, folder, hang, checks)
        say(
            f"hang watch: after {hang.hang_after:g}s without output, every rank is looked at "
            f"(--on-hang {hang.on_hang.value}); Flight Recorder armed"
        )
    report.sections["run"]["hang_after"] = hang.hang_after or None
    if line.spreads:
        env = _shared(verdict, report)
        done = forward(line, env | armed, folder)
        left = sorted({k for e in verdict.env.values() for k in e} - set(env))
        say(env_line(replace(verdict, env={n: env for n in verdict.env}), done.how))
        if left:
            say(f"not set (the interface differs between nodes): {', '.join(left)}")
        for path, text in done.files.items():
            write_whole(path, text)
        say(f"running: {shlex.join(done.argv)}")
        report.sections["run"].update(ran=done.argv, passed=env, passed_by=done.how)
        # The launcher runs on this machine: the Flight Recorder files it can remove are here.
        launches = [Launch(local_node(), done.argv, done.env, armed_files(mark) if armed else ())]
        launcher: Launcher = LocalLauncher()
        runs_with = sys.executable
    else:
        master = report.cluster.master_addr or nodes[0].name
        if master in verdict.left_out:  # --spares left the rendezvous node out: the first kept
            master = nodes[0].name
        port = line.master_port or 29500
        say(env_line(verdict, "in each node's environment"))
        say(f"running on {len(nodes)} node(s): {shlex.join(line.argv)}")
        remote = not isinstance(transport, LocalTransport)
        leaves = armed_files(mark) if armed else ()
        launches = [
            replace(one, env=one.env | armed, remove=leaves)
            for one in _launches(line, nodes, verdict, master, port)
        ]
        launcher = launcher_for(transport)
        runs_with = python or ("python3" if remote else sys.executable)
    result = run_job(
        launches,
        launcher,
        runs_with,
        folder,
        grace=settings.grace,
        timeout=settings.time_limit,
        watch=watch,
        hang_after=_look_after(line, hang.hang_after),
    )
    result.hangs = watch.verdicts if watch else []
    result.judged = watch.judged if watch else []
    return result


def _look_after(line: LaunchLine, hang_after: float | None) -> float | None:
    """--hang-after, or less where the job's own collective timeout is shorter: the look must
    come before the job's watchdog ends the ranks."""
    known = collective_timeout(line.argv)
    if not hang_after or known is None or known[0] > hang_after:
        return hang_after
    seconds, said = known
    earlier = max(1.0, seconds * 0.75)
    say(
        f"the job's collective timeout is {seconds:g}s ({said}), under --hang-after "
        f"{hang_after:g}s: looking after {earlier:g}s of silence instead"
    )
    return earlier


def run_command(
    argv: list[str],
    line: LaunchLine,
    request: Request,
    settings: RunSettings,
    hang: HangSettings,
    threshold: Severity,
    watcher: Watcher,
    lists: HostLists | None = None,
) -> tuple[Report, Verdict, JobResult | None]:
    """Gate, then (if it passes, or with --force) the job. The report carries both; the host
    lists are the gate's, written before the job starts, and written again once it ends with
    the nodes its failure names as the culprit (job.failed), never those that only reported it."""
    if not argv:
        raise UsageError("run: give the launch command after --, e.g. doctor run -- torchrun ...")
    started = time.monotonic()
    with connect(request.targets) as (nodes, transport):
        report = run_connected(request, nodes, transport, watcher)
        verdict = judge(report, request.checks, threshold)
        if lists is not None:
            lists.write(report)
        report.sections["run"] = {"command": argv, "launcher": line.tool or None}
        report.sections["run"]["gate_seconds"] = round(time.monotonic() - started, 3)
        vetted = nodes
        if settings.spares:
            verdict, vetted = spare(report, verdict, nodes, settings.spares)
        if not verdict.passed and not settings.force:
            report.sections["run"]["launched"] = False
            return report, verdict, None
        if verdict.passed:
            show_gate(report, verdict)
        else:
            say(f"--force: launching past {blocking(verdict)}")
        folder = settings.logs or Path(tempfile.mkdtemp(prefix="doctor-run-"))
        if verdict.left_out:
            line, nodes = narrowed(line, nodes, verdict, folder), vetted
        result = launch(
            line, nodes, transport, verdict, report, settings, hang, request.targets.python, folder
        )
    report.sections["run"].update(job_section(result, verdict, folder, report.cluster))
    _judge_job(report, result)
    if lists is not None:
        lists.write(report)
    return report, verdict, result


def _judge_job(report: Report, result: JobResult) -> None:
    """What the run concludes about the job, as findings of the report, counted in its summary:
    the hang the watch found (the hang check's outcome of its last look), and how the job ended
    (checks/job.py)."""
    section = report.sections["run"]
    explained = section.get("explanation") or {}
    outcome = JobOutcome(
        exit_code=result.exit_code(),
        failed=tuple(
            FailedNode(f["node"], f.get("exit_code"), f.get("error"))
            for f in explained.get("failed", [])
        ),
        causes=tuple(explained.get("findings", [])),
        culprits=tuple(explained.get("culprits", [])),
        timed_out=result.timed_out,
        hung=result.hung,
        interrupted=result.interrupted,
        nodes=tuple(r.name for r in result.runs),
    )
    report.cluster = replace(report.cluster, job=outcome)
    specs = [s for s in load_checks(("hang",)) if s.id == "job"]
    report.outcomes.extend(result.judged + run_checks(specs, report.cluster))
    report.findings = merge_findings(report.outcomes)


def job_section(
    result: JobResult, verdict: Verdict, folder: Path, cluster: ClusterFacts
) -> dict[str, Any]:
    # A job the hang watch ended did not fail by itself: its verdict is in "hangs".
    explained = result.exit_code() and not (result.hung and not result.failed())
    explanation = job_explanation(result, cluster.address_owners) if explained else None
    return {
        "launched": True,
        "env": verdict.env,
        "fixed": sorted({f.code for f in verdict.fixed}),
        "logs": str(folder),
        "seconds": round(result.seconds, 3),
        "exit_code": result.exit_code(),
        "interrupted": result.interrupted,
        "timed_out": result.timed_out,
        "hung": result.hung,
        "hangs": result.hangs,
        "nodes": {r.name: {"exit_code": r.code, "error": r.error or None} for r in result.runs},
        "explanation": explanation,
    }
