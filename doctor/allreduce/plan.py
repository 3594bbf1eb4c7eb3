"""What one allreduce run does: ranks on nodes, backend, rendezvous, deadlines, sizes."""

from __future__ import annotations

from dataclasses import dataclass, field

from doctor.inventory import Node

PHASES = (
    "launch",
    "rendezvous",
    "init",
    "first_allreduce",
    "verify",
    "sweep",
    "teardown",
    "done",
)
# Environment variables every rank reports at launch, so "as configured" is seen, not assumed.
REPORTED_ENV = (
    "GLOO_SOCKET_IFNAME",
    "NCCL_SOCKET_IFNAME",
    "NCCL_IB_HCA",
    "NCCL_NET",
    "NCCL_SOCKET_FAMILY",
    "NCCL_DEBUG",
    "NCCL_HOSTID",
    "MASTER_ADDR",
    "MASTER_PORT",
)
NCCL_DEBUG_ENV = {"NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "INIT,BOOTSTRAP,ENV,NET"}


def default_sizes(low: int = 1 << 10, high: int = 64 << 20) -> tuple[int, ...]:
    """Powers of two from ``low`` to ``high`` bytes."""
    if low < 4 or high < low:
        raise ValueError(f"bad sweep range {low}..{high} bytes")
    sizes = []
    size = low
    while size <= high:
        sizes.append(size)
        size *= 2
    return tuple(sizes)


@dataclass(frozen=True)
class Deadlines:
    """Seconds a rank may spend in each phase before the run is declared stuck."""

    launch: float = 30.0  # process start plus ``import torch``
    rendezvous: float = 15.0
    init: float = 20.0
    first_allreduce: float = 10.0
    verify: float = 10.0
    sweep: float = 60.0
    teardown: float = 10.0
    # After the first rank fails, the others get this long to report their own view.
    settle: float = 2.0

    def of(self, phase: str) -> float:
        return float(getattr(self, phase, self.teardown))


@dataclass(frozen=True)
class Rank:
    rank: int
    node: Node
    local_rank: int = 0


@dataclass(frozen=True)
class Plan:
    ranks: tuple[Rank, ...]
    backend: str = "gloo"
    port: int = 29500
    master_addr: str = "127.0.0.1"
    env: dict[str, str | None] = field(default_factory=dict)
    deadlines: Deadlines = field(default_factory=Deadlines)
    sizes: tuple[int, ...] = field(default_factory=default_sizes)
    verify_elems: int = 1 << 16
    link_bytes: int = 4 << 20
    python: str = "python3"

    @property
    def world_size(self) -> int:
        return len(self.ranks)

    @property
    def master(self) -> Node:
        return self.ranks[0].node

    def worker_spec(self, rank: Rank) -> dict[str, object]:
        env = dict(self.env)
        if self.backend == "nccl":
            env.update(NCCL_DEBUG_ENV)
        return {
            "mode": "rank",
            "rank": rank.rank,
            "local_rank": rank.local_rank,
            "world_size": self.world_size,
            "backend": self.backend,
            "master_addr": self.master_addr,
            "master_port": self.port,
            "env": env,
            "report_env": list(REPORTED_ENV),
            "rendezvous_timeout_s": self.deadlines.rendezvous,
            "collective_timeout_s": self.deadlines.init,
            "sweep_budget_s": self.deadlines.sweep * 0.8,
            "verify_elems": self.verify_elems,
            "sizes": list(self.sizes),
            "link_bytes": min(self.link_bytes, max(self.sizes, default=self.link_bytes)),
        }
