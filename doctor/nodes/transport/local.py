"""Run on this machine, without SSH."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Mapping

from doctor.core.model import NodeFailure
from doctor.nodes.inventory import Node
from doctor.nodes.transport import ExecResult


def spawn(argv: list[str], env: Mapping[str, str] | None = None) -> subprocess.Popen[bytes]:
    """Start ``argv`` with pipes, in its own session, so one kill takes everything it started."""
    return subprocess.Popen(
        argv,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=None if env is None else dict(env),
        start_new_session=True,
    )


class LocalTransport:
    def execute(
        self, node: Node, argv: list[str], stdin: bytes, timeout: float
    ) -> ExecResult | NodeFailure:
        started = time.monotonic()
        try:
            proc = spawn(argv)
        except OSError as exc:
            return NodeFailure(node.name, "node.no_python", f"cannot run {argv[0]}: {exc.strerror}")
        try:
            out, err = proc.communicate(stdin, timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            return NodeFailure(
                node.name, "node.timeout", f"no answer from {argv[0]} within {timeout:g}s"
            )
        except BaseException:
            # Ctrl-C: leave nothing behind, then let the interrupt through.
            os.killpg(proc.pid, signal.SIGKILL)
            raise
        return ExecResult(proc.returncode, out, err, time.monotonic() - started)
