"""Small builders of facts for check tests (from a real capture of this machine, then varied)."""

from __future__ import annotations

import dataclasses
from functools import cache
from typing import Any

from doctor.capture import Capture
from doctor.facts.cluster import ClusterFacts
from doctor.facts.node import NodeFacts, parse_node
from tests.conftest import run_probe


@cache
def _raw() -> dict[str, Any]:
    return run_probe()


def node(name: str, **areas: Any) -> NodeFacts:
    """This machine's real facts under another name, with some areas replaced."""
    return dataclasses.replace(parse_node(name, Capture(_raw())), **areas)


def cluster(*nodes: NodeFacts, **kw: Any) -> ClusterFacts:
    return ClusterFacts(nodes={n.node: n for n in nodes}, **kw)
