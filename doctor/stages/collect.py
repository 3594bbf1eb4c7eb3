"""Collection: ship the probe to every node at once; each answers with its capture or a failure."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from importlib.resources import files
from typing import Any

from doctor.core.capture import Capture, CaptureError
from doctor.core.jsonable import loads
from doctor.core.model import NodeFailure
from doctor.nodes.inventory import Node
from doctor.nodes.transport import BatchTransport, ExecResult, Transport

# The probe answers by its own deadline; the transport waits a little longer for the bytes.
TRANSPORT_GRACE = 5.0


def probe_source() -> bytes:
    """The probe as one file: the credential rules it shares with the controller
    (doctor/core/secrets.py) first, then the probe, which finds them defined."""
    shared = files("doctor.core").joinpath("secrets.py").read_bytes()
    return shared + b"\n" + files("doctor.stages").joinpath("probe.py").read_bytes()


# Interpreter discovery on a node (as Ansible does): the first of these that exists runs the probe.
FIND_PYTHON = (
    "for py in python3 /usr/bin/python3 /usr/local/bin/python3 /usr/libexec/platform-python; do "
    'command -v "$py" >/dev/null 2>&1 && exec "$py" "$@"; done; '
    'echo "no python3 on PATH, in /usr/bin or /usr/local/bin" >&2; exit 127'
)


# Reads the program from stdin in one go. Plain ``python -`` would too, but under
# PYTHONUNBUFFERED (set in many container images, and inherited by the local probe) it reads its
# program one byte per system call: 38,000 reads for the probe, 30 ms of CPU.
LOADER = "import sys; exec(compile(sys.stdin.buffer.read(), '<cluster-doctor>', 'exec'))"


def probe_argv(python: str | None, spec: dict[str, Any]) -> list[str]:
    """The probe's source goes to the node's Python on stdin, the spec as one argument."""
    return python_argv(
        python, ["-c", LOADER, json.dumps(spec, sort_keys=True, separators=(",", ":"))]
    )


def python_argv(python: str | None, args: list[str]) -> list[str]:
    """``python args``; with no interpreter named, a small sh loop finds one on the node."""
    if python is None:
        return ["sh", "-c", FIND_PYTHON, "sh", *args]
    return [python, *args]


def parse_capture_bytes(node: str, stdout: bytes) -> Capture | NodeFailure:
    try:
        return Capture(loads(stdout))
    except (ValueError, CaptureError) as exc:
        head = stdout[:120].decode("utf-8", "replace").strip()
        return NodeFailure(node, "node.bad_capture", f"probe output is not a capture: {exc}", head)


def probe_node(
    node: Node, transport: Transport, spec: dict[str, Any], python: str | None = None
) -> Capture | NodeFailure:
    interpreter = python or (sys.executable if node.local else None)
    result = transport.execute(
        node, probe_argv(interpreter, spec), probe_source(), spec["deadline"] + TRANSPORT_GRACE
    )
    return interpret(node, result)


def interpret(node: Node, result: ExecResult | NodeFailure) -> Capture | NodeFailure:
    """What the probe's run on a node amounts to: its capture, or why there is none."""
    if isinstance(result, NodeFailure):
        return result
    if result.rc != 0:
        err = result.stderr.decode("utf-8", "replace").strip().splitlines()
        last = err[-1] if err else f"exit status {result.rc}"
        # 127: no interpreter found; a SyntaxError: one too old for the probe (Python < 3.8).
        no_python = result.rc == 127 or "SyntaxError" in last
        code = "node.no_python" if no_python else "node.probe_failed"
        return NodeFailure(node.name, code, f"the probe failed on {node.name}: {last}")
    return parse_capture_bytes(node.name, result.stdout)


def asked(outcome: Capture | NodeFailure, sent: float, received: float) -> Capture | NodeFailure:
    if isinstance(outcome, Capture):
        outcome.mark_asked(sent, received)
    return outcome


def gather(
    nodes: list[Node],
    transport: Transport | BatchTransport,
    spec: dict[str, Any],
    *,
    python: str | None = None,
    workers: int = 32,
    on_done: Callable[[str, Capture | NodeFailure], None] | None = None,
) -> dict[str, Capture | NodeFailure]:
    """Probe every node in parallel (bounded pool); results in inventory order."""
    results: dict[str, Capture | NodeFailure] = {}
    if isinstance(transport, BatchTransport):
        # One launch reaches every node (srun); each finds its own Python as over SSH.
        sent = time.time()
        answers = transport.execute_all(
            nodes,
            probe_argv(python, spec),
            probe_source(),
            spec["deadline"] + TRANSPORT_GRACE,
        )
        received = time.time()
        for node in nodes:
            results[node.name] = asked(interpret(node, answers[node.name]), sent, received)
            if on_done:
                on_done(node.name, results[node.name])
        return results

    def one(node: Node) -> None:
        sent = time.time()
        outcome = asked(probe_node(node, transport, spec, python), sent, time.time())
        results[node.name] = outcome
        if on_done:
            on_done(node.name, outcome)

    with ThreadPoolExecutor(max_workers=max(1, min(workers, len(nodes)))) as pool:
        list(pool.map(one, nodes))
    return {n.name: results[n.name] for n in nodes}
