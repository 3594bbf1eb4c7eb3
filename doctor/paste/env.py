"""A pasted `env` / `printenv` / `export -p`: the NCCL, Gloo, Open MPI MCA and UCX settings only.

Everything else a user's environment holds (paths, tokens, home) is dropped on reading.
"""

from __future__ import annotations

import re
from typing import Any

from doctor.core.secrets import hide_env
from doctor.paste.kind import Kind

PREFIXES = ("NCCL_", "GLOO_", "OMPI_MCA_", "UCX_")
# "NAME=value", "export NAME=value", "declare -x NAME="value"" (bash's export -p), "setenv NAME v".
_ASSIGN = re.compile(
    r"^\s*(?:export\s+|declare\s+-x\s+)?(?P<name>[A-Za-z_][A-Za-z0-9_]*)=(?P<value>.*)$"
)
_SETENV = re.compile(r"^\s*setenv\s+(?P<name>[A-Za-z_][A-Za-z0-9_]*)\s+(?P<value>.*)$")


def _unquote(value: str) -> str:
    value = value.strip()
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        return value[1:-1]
    return value


def _assignments(line: str) -> list[tuple[str, str]]:
    """The settings a line makes: one for `env` output; each ``NAME=value`` before the command
    of a command line (``NCCL_DEBUG=INFO NCCL_IB_DISABLE=1 torchrun ...``)."""
    m = _ASSIGN.match(line) or _SETENV.match(line)
    if m is None:
        return []
    value = m["value"].strip()
    if value[:1] in "\"'" or not re.search(r"\s\S", value):
        return [(m["name"], _unquote(value))]
    first, _, rest = value.partition(" ")
    out = [(m["name"], first)]
    for token in rest.split():
        more = _ASSIGN.match(token)
        if more is None:
            break
        out.append((more["name"], _unquote(more["value"])))
    return out


def parse(text: str) -> dict[str, Any]:
    env: dict[str, str] = {}
    for line in text.splitlines():
        for name, value in _assignments(line):
            if name.startswith(PREFIXES):
                env[name] = value
    return {"values": {"env": {"value": hide_env(env)}}}  # as the probe hides them


def _starts(line: str) -> bool:
    """An assignment to an upper-case name (``n_gids_found=4`` ends other tools' output)."""
    m = _ASSIGN.match(line) or _SETENV.match(line)
    return m is not None and m["name"].isupper()


ENV_KINDS = [Kind("env", _starts, parse)]
DESCRIPTIONS = {
    "env": "`env` / `printenv` / `export -p`: the NCCL_*, GLOO_*, OMPI_MCA_* and UCX_* settings",
}
