"""Training frameworks on the node: torch, horovod, deepspeed (read from files, never imported)."""

from __future__ import annotations

import ast


def parse_version_py(text: str) -> dict[str, str | None]:
    """The plain assignments of torch/version.py (``__version__``, ``cuda``, ``git_version``...)."""
    out: dict[str, str | None] = {}
    for node in ast.parse(text).body:
        target = None
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target, value = node.targets[0], node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            target, value = node.target, node.value
        if (
            isinstance(target, ast.Name)
            and isinstance(value, ast.Constant)
            and (value.value is None or isinstance(value.value, str))
        ):
            out[target.id] = value.value
    return out
