"""Probe a real network namespace and plan its NICs: prediction plus the real libnccl's answer."""

from __future__ import annotations

import os
from typing import Any

from doctor.core.capture import Capture
from doctor.facts.node import NodeFacts, parse_node
from doctor.nic.choice import NicPlan
from doctor.nic.plan import with_plan
from tests.cluster.netns import Netns
from tests.conftest import run_probe

# Variables that would steer the libraries; the host's own values must not leak into a scenario.
STEERING = ("NCCL_", "GLOO_", "TP_SOCKET", "OMPI_")


def no_dad(ns: Netns) -> None:
    """Addresses usable at once: a tentative IPv6 address cannot be bound by NCCL's listener."""
    ns.run(
        ["sysctl", "-qw", "net.ipv6.conf.all.accept_dad=0", "net.ipv6.conf.default.accept_dad=0"],
        check=True,
    )


def scenario_env(**variables: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(STEERING)}
    env.update(variables)
    return env


def probe_in(ns: Netns, **variables: str) -> dict[str, Any]:
    """The real probe inside the namespace (NCCL's own unique-id call included)."""
    return run_probe(prefix=ns.exec_argv([]), env=scenario_env(**variables))


def facts_in(ns: Netns, name: str = "node1", **variables: str) -> NodeFacts:
    """The node's facts as the pipeline derives them (its NIC plan; reachability not tested)."""
    return with_plan(parse_node(name, Capture(probe_in(ns, **variables))))


def plan_in(ns: Netns, **variables: str) -> NicPlan:
    plan = facts_in(ns, **variables).nic
    assert isinstance(plan, NicPlan), plan
    return plan


def predicted(plan: NicPlan) -> str | None:
    first = plan.bootstrap.first
    return first.name if first else None


def library_choice(plan: NicPlan) -> str | None:
    """The interface the real libnccl logged for its bootstrap (None: it found none)."""
    assert plan.library is not None, "the probe found no libnccl (nvidia-nccl-cu12 installed?)"
    return plan.library.logged.interface
