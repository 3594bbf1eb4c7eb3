"""Reach nodes through SLURM: one srun step, one task per node, the probe shipped on stdin.

At hundreds of nodes the scheduler is the way in: one ``srun --nodes=N --ntasks-per-node=1``
instead of N SSH sessions. Every task runs ``srun_task.py`` (sent as ``python3 -c``), which runs the
command with the probe source that srun broadcasts to every task (``--input=all``, explicit
rather than left to defaults) and answers in framed lines that survive srun's interleaving.

A node with no complete answer is a NodeFailure naming what srun said about it; on timeout or
Ctrl-C srun is told to end its step (SIGTERM), the step is cancelled with ``scancel`` too, and srun
is killed if it has not gone, so nothing is left running.
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

from doctor.core.errors import UsageError
from doctor.core.model import NodeFailure
from doctor.core.nodeset import check_host
from doctor.nodes.inventory import Node
from doctor.nodes.transport import ExecResult
from doctor.nodes.transport.local import spawn
from doctor.nodes.transport.srun_task import TAG

# Seconds srun gets on top of the command's own deadline: step creation and launch on all nodes.
LAUNCH_GRACE = 10.0
# Seconds to wait for srun to go after SIGTERM and scancel, before it is killed. Measured on the
# SLURM test bed (22.05, 2 loaded cores): srun ends its step and exits 0.03-0.5 s after SIGTERM,
# at any phase. srun itself may wait up to KillWait + 2 s (32 s at Slurm's default) for a
# slurmstepd that does not answer; by then the kill request has left, so killing srun at this
# point leaves nothing running, and Ctrl-C stays well inside its 5 s.
CANCEL_GRACE = 2.0
# Node states in which a new allocation can get the node now (sinfo's %t, flags stripped);
# --immediate would fail the whole step on any other, so those are reported, not probed.
USABLE_STATES = {"idle", "mix"}


def task_source() -> str:
    return files("doctor.nodes.transport").joinpath("srun_task.py").read_text()


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


_TASK_ENDED = re.compile(r"^srun: error: (\S+): task (\d+): ", re.MULTILINE)


def node_indices(stream: bytes, stderr: str = "") -> dict[int, str]:
    """Nodes by their index in the step, the number srun names a lost node by: from each task's
    first frame, and from srun's "<node>: task <i>: Killed" lines (one task per node, so task i
    runs on the step's node i); a task killed before its first frame got out is only in those."""
    found = re.findall(rb"^" + TAG.encode() + rb" (\S+) at (\d+)\s*$", stream, re.MULTILINE)
    indices = {int(index): node.decode("ascii", "replace") for node, index in found}
    for node, index in _TASK_ENDED.findall(stderr):
        indices.setdefault(int(index), node)
    return indices


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


# srun aborts the whole step when its I/O connection to one node's slurmstepd breaks (the node
# died, or everything on it was killed); it names that node only by its index in the step.
_LOST = re.compile(r"io error (?:with slurmstepd|and missing step) on node (\d+)", re.IGNORECASE)


def lost_indices(stderr: str) -> dict[int, str]:
    """Indices of the nodes whose step I/O srun lost mid-run (it then aborted the step), each
    with the line srun said it in."""
    lost: dict[int, str] = {}
    for line in stderr.splitlines():
        found = _LOST.search(line)
        if found:
            lost[int(found.group(1))] = line.strip()
    return lost


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
    if hostlist.startswith("-"):  # scontrol would read it as an option
        raise UsageError(f"SLURM node list {hostlist!r}: not a node list")
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
        # srun kills the whole step when a launch fails on one node (a dead slurmd) or when it
        # loses one node's I/O mid-run (the node died), --kill-on-bad-exit=0 or not; so the nodes
        # it took down with them get another step without the failed nodes, once per failure.
        for _attempt in range(3):
            if not pending:
                break
            out, stderr, timed_out = self._step(pending, argv, stdin, ends - time.monotonic())
            framed = split_frames(out)
            dead = self._culprits(pending, out, stderr)
            for name in pending:
                if isinstance(framed.get(name), ExecResult):
                    results[name] = framed[name]  # type: ignore[assignment]
                elif name in dead:
                    results[name] = dead[name]
            pending = [n for n in pending if n not in results]
            if timed_out or not dead:
                break
        for name in pending:
            said = srun_said(stderr, name)
            if timed_out:
                results[name] = NodeFailure(
                    name,
                    "node.timeout",
                    f"no answer from {name} through srun within {limit:g}s",
                    said,
                )
            elif name in framed:  # its task ran there, then its answer never came whole
                results[name] = NodeFailure(
                    name,
                    "node.probe_failed",
                    f"srun lost {name} while the probe ran there: {framed[name]}",
                    said or srun_error(stderr),
                )
            else:
                results[name] = NodeFailure(
                    name,
                    "node.launch_failed",
                    f"no answer from {name} through srun: srun ended without starting it",
                    said or srun_error(stderr),
                )
        return {n.name: results[n.name] for n in nodes}

    @staticmethod
    def _culprits(pending: list[str], out: bytes, stderr: str) -> dict[str, NodeFailure]:
        """The nodes srun says it could not launch on, or lost mid-run, as their failures."""
        dead = {
            name: NodeFailure(
                name,
                "node.launch_failed",
                f"srun could not start the probe on {name}",
                srun_said(stderr, name),
            )
            for name in launch_failures(stderr) & set(pending)
        }
        lost = lost_indices(stderr)
        indices = node_indices(out, stderr)
        unnamed = [i for i in lost if i not in indices]
        unknown = [n for n in pending if n not in indices.values()]
        if len(unnamed) == 1 and len(unknown) == 1:
            indices[unnamed[0]] = unknown[0]  # the one node no task line names is the lost one
        for index, said in lost.items():
            name = indices.get(index)
            if name in pending and name not in dead:
                dead[name] = NodeFailure(
                    name,
                    "node.probe_failed",
                    f"srun lost {name} while the probe ran there (its slurmstepd went away)",
                    said,
                )
        return dead

    def _step(
        self, names: list[str], argv: list[str], stdin: bytes, timeout: float
    ) -> tuple[bytes, str, bool]:
        """One srun step over ``names``: its stdout, srun's stderr, whether it timed out."""
        srun = self.argv(names, argv, timeout)
        name = next(a for a in srun if a.startswith("--job-name=")).split("=", 1)[1]
        # Its own session: a Ctrl-C in the terminal reaches us, not srun, and we cancel the step.
        proc = spawn(srun, env=self.env)
        timed_out = False
        try:
            out, err = proc.communicate(stdin, timeout=max(0.1, timeout))
        except subprocess.TimeoutExpired:
            timed_out = True
            end_step(name, proc, self.env)
            out, err = proc.communicate()
        except BaseException:
            end_step(name, proc, self.env)
            proc.communicate()
            raise
        return out, err.decode("utf-8", "replace"), timed_out


def end_step(name: str, proc: subprocess.Popen[bytes], env: Mapping[str, str]) -> None:
    """End srun ``proc`` and the step (or job) it runs under ``name``; srun runs in a session of
    its own. SIGTERM first: srun asks slurmctld to kill its own step, which it knows by id at
    any phase, while scancel finds a step by name only once squeue lists it (a Ctrl-C just
    after srun started found none, and srun ran on). scancel still follows, for an srun that does
    not answer, and srun is killed if it has not gone after CANCEL_GRACE."""
    with contextlib.suppress(ProcessLookupError):
        proc.terminate()
    cancel(name, env)
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
    return [Node(name=check_host(n, "SLURM"), address=n) for n in names], transport
