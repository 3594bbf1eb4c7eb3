"""A pasted `env` / `printenv` / `export -p`: the NCCL, Gloo, Open MPI MCA and UCX settings only.

Everything else a user's environment holds (paths, tokens, home) is dropped on reading.
"""

from __future__ import annotations

import re
from typing import Any

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


def parse(text: str) -> dict[str, Any]:
    env: dict[str, str] = {}
    for line in text.splitlines():
        m = _ASSIGN.match(line) or _SETENV.match(line)
        if m and m["name"].startswith(PREFIXES):
            env[m["name"]] = _unquote(m["value"])
    return {"values": {"env": {"value": env}}}


def _starts(line: str) -> bool:
    """An assignment to an upper-case name (``n_gids_found=4`` ends other tools' output)."""
    m = _ASSIGN.match(line) or _SETENV.match(line)
    return m is not None and m["name"].isupper()


ENV_KINDS = [Kind("env", _starts, parse)]
DESCRIPTIONS = {
    "env": "`env` / `printenv` / `export -p`: the NCCL_*, GLOO_*, OMPI_MCA_* and UCX_* settings",
}
