"""The SLURM node state of this node: `scontrol show node NAME` (one line with --oneliner).

slurm/src/common/slurm_protocol_defs.c node_state_string: a base state (IDLE, ALLOCATED, MIXED,
DOWN, FUTURE, UNKNOWN, ERROR) and flags joined with "+" (DRAIN, NOT_RESPONDING, FAIL, COMPLETING,
POWERED_DOWN, MAINTENANCE, REBOOT_REQUESTED, INVALID_REG, ...); "Reason=%s [%s@%s]" says why a node
is drained or down, who set it and when.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_FIELD = re.compile(
    r"\b(?P<key>NodeName|State|Reason)=(?P<value>.*?)(?=\s+[A-Z][A-Za-z]*=|\s*$)", re.M
)


@dataclass(frozen=True)
class SlurmNode:
    name: str
    state: str  # as scontrol prints it: "IDLE+DRAIN"
    reason: str  # "" where none

    @property
    def words(self) -> set[str]:
        return {w.strip("*~#!%$@^-") for w in self.state.upper().split("+")}


def parse_scontrol_node(text: str) -> SlurmNode | None:
    fields: dict[str, str] = {}
    for m in _FIELD.finditer(text):
        fields.setdefault(m.group("key"), m.group("value").strip())
    if "State" not in fields:
        return None
    reason = fields.get("Reason", "")
    return SlurmNode(
        fields.get("NodeName", "?"), fields["State"], "" if reason == "(null)" else reason
    )
