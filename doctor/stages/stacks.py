"""The stacks stage: the stacks agent (stacks_agent.py) on every node at once, under a deadline.

A node that has py-spy (on its PATH, or beside the Python the doctor runs there) uses its own.
One that has none says so at once, and gets the controller's py-spy (the ``py-spy`` package, a
dependency of the doctor) in a second call: shipped compressed after the agent's source, run
from memory there, never written to its disk. A node of another architecture than this machine
gets none: it answers that py-spy is missing, in one line.
"""

from __future__ import annotations

import functools
import platform
import shutil
import sysconfig
import zlib
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from importlib.resources import files
from pathlib import Path
from typing import Any

from doctor.core.jsonable import loads
from doctor.core.model import NodeFailure
from doctor.facts.hang.stacks import NodeStacks, StacksFacts, parse_node
from doctor.nodes.inventory import Node
from doctor.nodes.transport import BatchTransport, ExecResult, Transport
from doctor.nodes.transport.launch import boot_args
from doctor.stages.collect import python_argv

TRANSPORT_GRACE = 3.0  # the agent answers by its deadline; the transport waits this much more
RAS_NODES = 2  # RAS answers for the whole job: asking on two nodes is enough


@dataclass(frozen=True)
class Look:
    """Which processes to look at on each node, and how."""

    pids: tuple[int, ...] = ()
    match: str = ""
    job: str = ""  # the doctor's job mark (doctor run sets CLUSTER_DOCTOR_JOB in the job)
    native: bool = False
    window: float = 0.0  # seconds between the first and the last look at /proc
    twice: bool = False  # a stack at the start of the window too (has it moved?)
    deadline: float = 10.0
    drop_dumps: bool = False  # the Flight Recorder dumps are the doctor's own: remove them

    def spec(self, python: str | None) -> dict[str, Any]:
        near = [str(Path(python).parent / "py-spy")] if python and "/" in python else []
        return {
            "pids": list(self.pids),
            "match": self.match,
            "job": self.job,
            "native": self.native,
            "window": self.window,
            "twice": self.twice,
            "deadline": self.deadline,
            "drop_dumps": self.drop_dumps,
            "pyspy": near,
        }


def agent_source() -> bytes:
    """The agent as one file: the Flight Recorder dump reader it shares with `doctor explain`
    (doctor/facts/hang/flight_dump.py) and the credential rules it shares with the probe
    (doctor/core/secrets.py) first, then the agent, which finds them defined."""
    parts = (
        files("doctor.facts.hang").joinpath("flight_dump.py"),
        files("doctor.core").joinpath("secrets.py"),
        files("doctor.stages").joinpath("stacks_agent.py"),
    )
    return b"\n".join(part.read_bytes() for part in parts)


@functools.cache
def packed_pyspy() -> bytes | None:
    """This machine's py-spy, compressed for the wire (level 1: 2.9 of its 8 MB, in 0.1 s)."""
    found = shutil.which("py-spy") or str(Path(sysconfig.get_path("scripts")) / "py-spy")
    try:
        return zlib.compress(Path(found).read_bytes(), 1)
    except OSError:
        return None


def look(
    nodes: list[Node],
    transport: Transport | BatchTransport,
    how: Look,
    python: str | None,
    workers: int = 32,
) -> StacksFacts:
    """Every node's ranks as its agent saw them; a node that did not answer is a failure."""
    base = how.spec(python)
    specs = {n.name: dict(base, ras=i < RAS_NODES, need_tool=True) for i, n in enumerate(nodes)}
    answers = _ask(nodes, transport, specs, python, None, workers)
    packed = packed_pyspy()
    bare = [
        n
        for n in nodes
        if _tool(answers[n.name]) == "missing"
        and answers[n.name].get("machine") == platform.machine()  # type: ignore[union-attr]
    ]
    if bare and packed:
        answers.update(_ask(bare, transport, specs, python, packed, workers))
    # Still no py-spy (another architecture): look without stacks (/proc, Flight Recorder, RAS).
    blind = [n for n in nodes if _tool(answers[n.name]) == "missing"]
    for node in blind:
        specs[node.name]["need_tool"] = False
    if blind:
        answers.update(_ask(blind, transport, specs, python, None, workers))
    parsed: dict[str, NodeStacks] = {}
    failures: dict[str, NodeFailure] = {}
    for node in nodes:
        answer = answers[node.name]
        if isinstance(answer, NodeFailure):
            failures[node.name] = answer
        else:
            parsed[node.name] = parse_node(node.name, answer)
    return StacksFacts(parsed, failures, how.window)


def _ask(
    nodes: list[Node],
    transport: Transport | BatchTransport,
    specs: dict[str, dict[str, Any]],
    python: str | None,
    packed: bytes | None,
    workers: int,
) -> dict[str, dict[str, Any] | NodeFailure]:
    source = agent_source()
    stdin = source + (packed or b"")
    timeout = max(s["deadline"] for s in specs.values()) + TRANSPORT_GRACE

    def argv(name: str) -> list[str]:
        spec = dict(specs[name], tool_bytes=len(packed) if packed else 0)
        # -S: the agent needs only the standard library; site's .pth files cost a start 30 ms
        return python_argv(python, ["-S", *boot_args("doctor-stacks", source, spec)])

    if isinstance(transport, BatchTransport):
        # One srun step for every node: the spec of the first (only ``ras`` differs: all ask).
        done = transport.execute_all(nodes, argv(nodes[0].name), stdin, timeout)
        return {n.name: _answer(n.name, done[n.name]) for n in nodes}
    with ThreadPoolExecutor(max_workers=max(1, min(workers, len(nodes)))) as pool:
        results = pool.map(lambda n: transport.execute(n, argv(n.name), stdin, timeout), nodes)
        return {n.name: _answer(n.name, r) for n, r in zip(nodes, results, strict=True)}


def _tool(answer: dict[str, Any] | NodeFailure) -> str:
    return "" if isinstance(answer, NodeFailure) else str((answer.get("tool") or {}).get("how"))


def _answer(node: str, result: ExecResult | NodeFailure) -> dict[str, Any] | NodeFailure:
    if isinstance(result, NodeFailure):
        return result
    text = result.stdout.decode("utf-8", "replace").strip()
    try:
        answer = loads(text.splitlines()[-1]) if text else None
    except ValueError:
        answer = None
    if not isinstance(answer, dict):
        err = result.stderr.decode("utf-8", "replace").strip().splitlines()
        why = err[-1] if err else f"exit status {result.rc}"
        return NodeFailure(node, "hang.agent_failed", f"the stacks agent failed on {node}: {why}")
    return answer
