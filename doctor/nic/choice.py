"""What one node's NIC plan holds: each library's choice of interface here, and what to set.

Its own module, apart from the code that derives it (plan.py reads NodeFacts), so that NodeFacts
can hold a plan without the facts and the planner importing each other.
"""

from __future__ import annotations

from dataclasses import dataclass

from doctor.facts.network.net import Interface, NetFacts
from doctor.nic.config import Setting
from doctor.nic.frameworks import MpiChoice, SocketChoice
from doctor.nic.nccl import IbChoice, LibraryBootstrap, Selection, Version


@dataclass(frozen=True)
class NicPlan:
    node: str
    net: NetFacts
    nccl_settings: dict[str, Setting]
    nccl_version: Version | None
    bootstrap: Selection
    socket: Selection
    ib: IbChoice | None
    library: LibraryBootstrap | None  # what the real libnccl chose on the node, when it ran
    library_path: str | None
    gloo: SocketChoice
    tp: SocketChoice
    mpi_btl: MpiChoice
    mpi_oob: MpiChoice
    recommended: Interface | None
    proven: frozenset[str] | None  # interfaces peers reached over TCP; None: not tested
    # What one mpirun gives Open MPI for every node (agreed across nodes: with_plans); None: this
    # node's own interface name.
    mpi_include: str | None = None

    def predicted(self) -> tuple[str | None, str]:
        """What NCCL will use, as the replay predicts: (bootstrap interface, IB or Socket)."""
        first = self.bootstrap.first
        network = "IB" if self.ib is not None and self.ib.usable else "Socket"
        return (first.name if first else None, network)

    def recommendation(self) -> dict[str, str]:
        """Environment that pins every library to the recommended interface."""
        if self.recommended is None:
            return {}
        return env_for(self.recommended.name, self.mpi_include)


def env_for(name: str, mpi: str | None = None) -> dict[str, str]:
    return {
        "NCCL_SOCKET_IFNAME": f"={name}",
        "GLOO_SOCKET_IFNAME": name,
        "TP_SOCKET_IFNAME": name,
        "OMPI_MCA_btl_tcp_if_include": mpi or name,
        "OMPI_MCA_oob_tcp_if_include": mpi or name,
    }
