"""Reach nodes through SLURM: one srun step, one task per node, the probe shipped on stdin.

At hundreds of nodes the scheduler is the way in: one ``srun --nodes=N --ntasks-per-node=1``
instead of N SSH sessions. Every task runs ``srun_task.py`` (sent as ``python3 -c``), which runs the
command with the probe source that srun broadcasts to every task (``--input=all``, explicit
rather than left to defaults) and answers in framed lines that survive srun's interleaving.

A node with no complete answer is a NodeFailure naming what srun said about it; on timeout or
Ctrl-C the step is cancelled with ``scancel`` and srun is killed, so nothing is left running.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import hashlib
import os
import re
import shutil
import signal
import subprocess
import time
import uuid
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from importlib.resources import files

from doctor.errors import UsageError
from doctor.inventory import Node
from doctor.model import NodeFailure
from doctor.transport import ExecResult
from doctor.transport.local import spawn
from doctor.transport.srun_task import TAG

# Seconds srun gets on top of the command's own deadline: step creation and launch on all nodes.
LAUNCH_GRACE = 10.0
# Seconds to wait for srun to go after scancel, before it is killed.
CANCEL_GRACE = 5.0
# Node states in which a new allocation can get the node now (sinfo's %t, flags stripped);
# --immediate would fail the whole step on any other, so those are reported, not probed.
USABLE_STATES = {"idle", "mix"}


def task_source() -> str:
    return files("doctor.transport").joinpath("srun_task.py").read_text()


def in_allocation(env: Mapping[str, str]) -> bool:
    """True in a salloc shell or sbatch script (not inside a step, where srun would nest)."""
    return bool(env.get("SLURM_JOB_ID") and env.get("SLURM_JOB_NODELIST")) and not env.get(
        "SLURM_STEP_ID"
    )


@dataclass
class Framed:
    """One node's frames as they arrive: rc line, chunks, end digest."""

    rc: int | None = None
    seconds: float = 0.0
    out: list[str] = field(default_factory=list)
    err: list[str] = field(default_factory=list)
    digest: str | None = None


def split_frames(stream: bytes) -> dict[str, ExecResult | str]:
    """Reassemble each node's result from srun's merged stdout; a broken one is an error string."""
    framed: dict[str, Framed] = {}
    for raw in stream.split(b"\n"):
        parts = raw.decode("ascii", "replace").strip().split(" ")
        if len(parts) < 4 or parts[0] != TAG:
            continue  # anything else a node printed is not ours to read
        node, kind, rest = parts[1], parts[2], parts[3:]
        f = framed.setdefault(node, Framed())
        if kind == "rc" and len(rest) == 2:
            try:
                f.rc, f.seconds = int(rest[0]), float(rest[1])
            except ValueError:
                continue
        elif kind == "out":
            f.out.append(rest[0])
        elif kind == "err":
            f.err.append(rest[0])
        elif kind == "end":
            f.digest = rest[0]
    return {node: _assemble(f) for node, f in framed.items()}


def _assemble(f: Framed) -> ExecResult | str:
    if f.rc is None or f.digest is None:
        return "its answer was cut off"
    try:
        packed_out = base64.b64decode("".join(f.out), validate=True)
        packed_err = base64.b64decode("".join(f.err), validate=True)
    except (binascii.Error, ValueError):
        return "its answer arrived garbled"
    if hashlib.sha256(packed_out + packed_err).hexdigest() != f.digest:
        return "its answer arrived garbled (digest mismatch)"
    try:
        return ExecResult(f.rc, zlib.decompress(packed_out), zlib.decompress(packed_err), f.seconds)
    except zlib.error:
        return "its answer arrived garbled"


def srun_said(stderr: str, node: str) -> str:
    """srun's last error line that names this node (e.g. a failed task launch), or ''."""
    pattern = re.compile(rf"(?<![\w-]){re.escape(node)}(?![\w-])")
    lines = [ln.strip() for ln in stderr.splitlines() if pattern.search(ln)]
    return lines[-1] if lines else ""


_LAUNCH_FAILED = re.compile(r"Task launch for \S+ failed on node (\S+?):")


def launch_failures(stderr: str) -> set[str]:
    """Nodes on which srun says it could not launch a task (slurmd dead or unreachable)."""
    return set(_LAUNCH_FAILED.findall(stderr))


def srun_error(stderr: str) -> str:
    """srun's last error line, for failures that concern the whole step."""
    lines = [ln.strip() for ln in stderr.splitlines() if "error" in ln.lower()]
    return lines[-1] if lines else ""


def slurm_tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        raise UsageError(f"--launcher srun needs SLURM's {name}, which is not on PATH")
    return path


def expand_hostlist(hostlist: str, env: Mapping[str, str]) -> list[str]:
    """``node[1-3],gpu7`` to names, with SLURM's own parser (scontrol show hostnames)."""
    proc = subprocess.run(
        [slurm_tool("scontrol"), "show", "hostnames", hostlist],
        env=dict(env),
        capture_output=True,
        text=True,
        timeout=30,
    )
    names = proc.stdout.split()
    if proc.returncode != 0 or not names:
        said = proc.stderr.strip().splitlines()
        raise UsageError(f"cannot expand SLURM node list {hostlist!r}: {said[-1] if said else ''}")
    return names


def partition_nodes(partition: str, env: Mapping[str, str]) -> dict[str, str]:
    """Every node of a partition with its state (sinfo's %t, flags like '*' or '~' stripped)."""
    proc = subprocess.run(
        [slurm_tool("sinfo"), "-h", "-N", "-p", partition, "-o", "%N %t"],
        env=dict(env),
        capture_output=True,
        text=True,
        timeout=30,
    )
    states: dict[str, str] = {}
    for line in proc.stdout.splitlines():
        name, _, state = line.strip().partition(" ")
        if name:
            states[name] = state.rstrip("*~#!%$@^-")
    if proc.returncode != 0 or not states:
        said = proc.stderr.strip().splitlines()
        raise UsageError(f"--partition {partition}: no nodes ({said[-1] if said else 'empty'})")
    return states


def job_name() -> str:
    """A name unique to one doctor run: what scancel finds its steps (or jobs) by."""
    return f"cluster-doctor-{uuid.uuid4().hex[:12]}"


def step_options(
    env: Mapping[str, str], name: str, timeout: float, partition: str | None = None
) -> list[str]:
    """srun options shared by every doctor step: named, never killed as a whole for one task."""
    options = ["--kill-on-bad-exit=0", f"--job-name={name}"]
    if in_allocation(env):
        # Share the allocation with a running training step instead of waiting behind it.
        options.append("--overlap")
    else:
        # A new allocation: give up if the nodes are not free now, never wait in the queue;
        # a few minutes is plenty for the doctor, and sites often require a time limit.
        options += [
            f"--immediate={max(1, int(timeout))}",
            f"--time={max(1, int(timeout) // 60 + 1)}",
        ]
    if partition:
        options.append(f"--partition={partition}")
    return options


class SrunTransport:
    """Runs one command on many nodes at once as a single srun step."""

    def __init__(
        self,
        *,
        partition: str | None = None,
        env: Mapping[str, str] | None = None,
        launch_grace: float = LAUNCH_GRACE,
    ):
        self.partition = partition
        self.launch_grace = launch_grace
        self.env = dict(os.environ if env is None else env)
        self.down: dict[str, NodeFailure] = {}  # nodes known unusable before launch

    def argv(self, names: Sequence[str], command: Sequence[str], timeout: float) -> list[str]:
        return [
            slurm_tool("srun"),
            f"--nodes={len(names)}",
            f"--ntasks={len(names)}",
            "--ntasks-per-node=1",
            f"--nodelist={','.join(names)}",
            "--input=all",
            *step_options(self.env, job_name(), timeout, self.partition),
            "python3",
            "-c",
            task_source(),
            *command,
        ]

    def execute_all(
        self, nodes: Sequence[Node], argv: list[str], stdin: bytes, timeout: float
    ) -> dict[str, ExecResult | NodeFailure]:
        """Run ``argv`` on every node in one step; every node gets a result or a NodeFailure."""
        results: dict[str, ExecResult | NodeFailure] = {
            n.name: self.down[n.name] for n in nodes if n.name in self.down
        }
        pending = [n.name for n in nodes if n.name not in self.down]
        limit = timeout + self.launch_grace
        ends = time.monotonic() + limit
        framed: dict[str, ExecResult | str] = {}
        stderr, timed_out = "", False
        # srun kills the whole step when a launch fails on one node (a dead slurmd), --no-kill or
        # not; so the nodes it took down with it get one more step without the failed nodes.
        for _attempt in range(2):
            if not pending:
                break
            framed, stderr, timed_out = self._step(pending, argv, stdin, ends - time.monotonic())
            dead = launch_failures(stderr) & set(pending)
            for name in pending:
                if isinstance(framed.get(name), ExecResult):
                    results[name] = framed[name]  # type: ignore[assignment]
                elif name in dead:
                    results[name] = NodeFailure(
                        name,
                        "node.launch_failed",
                        f"srun could not start the probe on {name}",
                        srun_said(stderr, name),
                    )
            pending = [n for n in pending if n not in results]
            if timed_out or not dead:
                break
        for name in pending:
            said = srun_said(stderr, name)
            if timed_out and name not in framed:
                results[name] = NodeFailure(
                    name,
                    "node.timeout",
                    f"no answer from {name} through srun within {limit:g}s",
                    said,
                )
            else:
                why = framed.get(name) or "srun ended without its answer"
                results[name] = NodeFailure(
                    name,
                    "node.launch_failed",
                    f"no answer from {name} through srun: {why}",
                    said or srun_error(stderr),
                )
        return {n.name: results[n.name] for n in nodes}

    def _step(
        self, names: list[str], argv: list[str], stdin: bytes, timeout: float
    ) -> tuple[dict[str, ExecResult | str], str, bool]:
        """One srun step over ``names``: the framed answers, srun's stderr, whether it timed out."""
        srun = self.argv(names, argv, timeout)
        name = next(a for a in srun if a.startswith("--job-name=")).split("=", 1)[1]
        # Its own session: a Ctrl-C in the terminal reaches us, not srun, and we cancel the step.
        proc = spawn(srun, env=self.env)
        timed_out = False
        try:
            out, err = proc.communicate(stdin, timeout=max(0.1, timeout))
        except subprocess.TimeoutExpired:
            timed_out = True
            self._cancel(name, proc)
            out, err = proc.communicate()
        except BaseException:
            self._cancel(name, proc)
            proc.communicate()
            raise
        return split_frames(out), err.decode("utf-8", "replace"), timed_out

    def _cancel(self, name: str, proc: subprocess.Popen[bytes]) -> None:
        """scancel our step (inside an allocation) or our job (srun made it), then end srun."""
        cancel(name, self.env)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=CANCEL_GRACE)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)


def cancel(name: str, env: Mapping[str, str]) -> None:
    """scancel every step (inside an allocation) or job of ours, found by its name."""
    job = env.get("SLURM_JOB_ID") if in_allocation(env) else None
    ids = _step_ids(name, job, env)
    if ids:
        subprocess.run(
            [slurm_tool("scancel"), *ids], env=dict(env), capture_output=True, timeout=30
        )


def _step_ids(name: str, job: str | None, env: Mapping[str, str]) -> list[str]:
    """Ids to scancel: our step within the user's job, or the whole job srun created for us."""
    if job:
        argv = ["squeue", "-h", "-s", "-j", job, "-o", "%i %j"]
    else:
        argv = ["squeue", "-h", "-n", name, "-o", "%i %j"]
    proc = subprocess.run(
        [slurm_tool(argv[0]), *argv[1:]], env=dict(env), capture_output=True, text=True, timeout=30
    )
    ids = []
    for line in proc.stdout.splitlines():
        ident, _, step_name = line.strip().partition(" ")
        if step_name == name:
            ids.append(ident)
    return ids


def slurm_nodes(
    hostlist: str | None, partition: str | None, env: Mapping[str, str]
) -> tuple[list[Node], SrunTransport]:
    """The nodes to reach through srun: --slurm-nodes, else --partition, else this allocation."""
    transport = SrunTransport(partition=partition, env=env)
    if hostlist:
        names = expand_hostlist(hostlist, env)
    elif partition:
        states = partition_nodes(partition, env)
        names = list(states)
        for name, state in states.items():
            if state not in USABLE_STATES:
                transport.down[name] = NodeFailure(
                    name, "node.launch_failed", f"SLURM reports {name} {state}: not probed now"
                )
    elif env.get("SLURM_JOB_NODELIST"):
        names = expand_hostlist(env["SLURM_JOB_NODELIST"], env)
    else:
        raise UsageError(
            "--launcher srun: not inside a SLURM allocation; give --slurm-nodes or --partition, "
            "or run it under salloc/sbatch"
        )
    return [Node(name=n, address=n) for n in names], transport
