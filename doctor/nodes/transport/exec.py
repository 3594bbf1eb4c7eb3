"""Reach nodes through a command prefix: `kubectl exec`, `docker exec`, `podman exec`, ...

``--exec 'kubectl exec -i {node} -c trainer --'``: the prefix, with ``{node}`` replaced by the
node's name, runs the program on the node with its stdin joined to ours (hence ``-i``). Nodes need
no sshd. Every program the doctor ships there (the probe, the stage agents, the allreduce ranks)
ends when its stdin closes or its own deadline passes, so ending the local exec client, which
closes that stdin, leaves nothing behind even where the tool cannot signal the remote process.
"""

from __future__ import annotations

import shlex
import shutil
from dataclasses import dataclass

from doctor.core.errors import UsageError
from doctor.core.model import NodeFailure
from doctor.nodes.inventory import Node
from doctor.nodes.transport import ExecResult
from doctor.nodes.transport.launch import LocalLauncher, Process
from doctor.nodes.transport.local import LocalTransport

HOLE = "{node}"


@dataclass(frozen=True)
class ExecPrefix:
    words: tuple[str, ...]

    @classmethod
    def parse(cls, text: str) -> ExecPrefix:
        """``kubectl exec -i {node} --`` as words; a prefix without {node} is a usage error."""
        try:
            words = tuple(shlex.split(text))
        except ValueError as exc:
            raise UsageError(f"--exec {text!r}: {exc}") from None
        if not words or not any(HOLE in w for w in words):
            raise UsageError(
                f"--exec {text!r}: name the node with {HOLE}, e.g. 'docker exec -i {HOLE}'"
            )
        if shutil.which(words[0]) is None:
            raise UsageError(f"--exec: {words[0]} is not on PATH here")
        return cls(words)

    def argv(self, node: Node, argv: list[str]) -> list[str]:
        """The node's name goes in as one word: no shell reads it (a name is never code)."""
        return [w.replace(HOLE, node.name) for w in self.words] + argv


class ExecTransport:
    """Each command is one exec client run here, its output the node program's output."""

    def __init__(self, prefix: ExecPrefix) -> None:
        self.prefix = prefix
        self.local = LocalTransport()

    def execute(
        self, node: Node, argv: list[str], stdin: bytes, timeout: float
    ) -> ExecResult | NodeFailure:
        return self.local.execute(node, self.prefix.argv(node, argv), stdin, timeout)


class ExecLauncher(LocalLauncher):
    """Long-running programs (stage agents, allreduce ranks) through the same prefix."""

    def __init__(self, prefix: ExecPrefix) -> None:
        self.prefix = prefix

    def start(self, node: Node, argv: list[str], stdin: bytes) -> Process | str:
        return super().start(node, self.prefix.argv(node, argv), stdin)
