"""RDMA from sysfs (no ibstat): HCAs, ports, GIDs, verbs device nodes, GPUDirect RDMA modules.

Formats follow the kernel (drivers/infiniband/core/sysfs.c, Documentation/ABI/stable/
sysfs-class-infiniband): state "4: ACTIVE", phys_state "5: LinkUp", rate "100 Gb/sec (4X EDR)",
link_layer "InfiniBand" | "Ethernet", gid_attrs/types "IB/RoCE v1" | "RoCE v2".
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from doctor.core.capture import Capture
from doctor.core.model import Missing

ROOT = "/sys/class/infiniband"
PORT_ACTIVE = 4
# NCCL's GPUDirect RDMA probe looks at these (src/transport/net_ib/gdr.cc).
GDR_PATHS = (
    "/sys/kernel/mm/memory_peers/nv_mem/version",
    "/sys/module/nvidia_peermem/version",
    "/sys/module/nv_peer_mem/version",
)
_RATE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*Gb/sec")


@dataclass(frozen=True)
class Gid:
    index: int
    gid: str
    type: str | None  # "IB/RoCE v1", "RoCE v2"
    netdev: str | None

    @property
    def routable_v2(self) -> bool:
        """A RoCE v2 GID with an IPv4-mapped or global IPv6 address (routable across subnets)."""
        return self.type == "RoCE v2" and not self.gid.lower().startswith("fe80:")


@dataclass(frozen=True)
class Port:
    number: int
    state: int | None  # 4 = ACTIVE
    state_text: str
    phys_state: str
    rate_gbps: float | None
    link_layer: str  # InfiniBand | Ethernet | Unknown
    gids: tuple[Gid, ...]

    @property
    def active(self) -> bool:
        return self.state == PORT_ACTIVE

    @property
    def transport(self) -> str:
        return {"InfiniBand": "IB", "Ethernet": "RoCE"}.get(self.link_layer, self.link_layer)

    @property
    def netdevs(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(g.netdev for g in self.gids if g.netdev))


@dataclass(frozen=True)
class Hca:
    name: str
    node_type: str | None
    fw_ver: str | None
    pci_address: str | None
    netdevs: tuple[str, ...]  # netdevs of the same PCI function (device/net)
    ports: tuple[Port, ...]


@dataclass(frozen=True)
class RdmaFacts:
    hcas: tuple[Hca, ...]
    uverbs: tuple[str, ...] | Missing  # /dev/infiniband entries
    verbs_loadable: bool | Missing
    gdr_module: str | None  # the peer-memory module NCCL would find, or None

    @property
    def present(self) -> bool:
        return bool(self.hcas)


def _text(value: str | Missing) -> str | None:
    return value.strip() if isinstance(value, str) and value.strip() else None


def parse_state(text: str | None) -> tuple[int | None, str]:
    """'4: ACTIVE' → (4, 'ACTIVE')."""
    if not text:
        return None, "?"
    num, _, name = text.partition(":")
    try:
        return int(num), name.strip()
    except ValueError:
        return None, text


def parse_rate(text: str | None) -> float | None:
    m = _RATE.match(text or "")
    return float(m.group(1)) if m else None


def _port(cap: Capture, base: str, number: int) -> Port:
    state, state_text = parse_state(_text(cap.file(f"{base}/state")))
    gids = []
    listing = cap.dir(f"{base}/gids")
    for idx in sorted(listing if isinstance(listing, list) else [], key=_num):
        gid = _text(cap.file(f"{base}/gids/{idx}"))
        if not gid or not gid.replace("0", "").replace(":", ""):
            continue  # an empty slot
        gids.append(
            Gid(
                _num(idx),
                gid,
                _text(cap.file(f"{base}/gid_attrs/types/{idx}")),
                _text(cap.file(f"{base}/gid_attrs/ndevs/{idx}")),
            )
        )
    return Port(
        number=number,
        state=state,
        state_text=state_text,
        phys_state=parse_state(_text(cap.file(f"{base}/phys_state")))[1],
        rate_gbps=parse_rate(_text(cap.file(f"{base}/rate"))),
        link_layer=_text(cap.file(f"{base}/link_layer")) or "Unknown",
        gids=tuple(gids),
    )


def _num(text: str) -> int:
    return int(text) if text.isdigit() else -1


def _gdr(cap: Capture) -> str | None:
    for path in GDR_PATHS:
        if isinstance(cap.file(path), str):
            return path.split("/")[-2]
    modules = cap.file("/proc/modules")
    if isinstance(modules, str):
        for line in modules.splitlines():
            name = line.split(" ", 1)[0]
            if name in ("nvidia_peermem", "nv_peer_mem"):
                return name
    return None


def parse_rdma(cap: Capture) -> RdmaFacts | Missing:
    listing = cap.dir(ROOT)
    if isinstance(listing, Missing) and listing.kind == "unsupported":
        return listing  # never looked at (a paste without RDMA output): unknown, not "none"
    hcas = []
    # No /sys/class/infiniband at all is the ordinary "no RDMA here", not a failure.
    for name in listing if isinstance(listing, list) else []:
        base = f"{ROOT}/{name}"
        ports = cap.dir(f"{base}/ports")
        device = cap.link(f"{base}/device")
        net = cap.dir(f"{base}/device/net")
        hcas.append(
            Hca(
                name=name,
                node_type=_text(cap.file(f"{base}/node_type")),
                fw_ver=_text(cap.file(f"{base}/fw_ver")),
                pci_address=device.rsplit("/", 1)[-1] if isinstance(device, str) else None,
                netdevs=tuple(net) if isinstance(net, list) else (),
                ports=tuple(
                    _port(cap, f"{base}/ports/{p}", _num(p))
                    for p in sorted(ports if isinstance(ports, list) else [], key=_num)
                ),
            )
        )
    uverbs = cap.dir("/dev/infiniband")
    verbs = cap.value("load:libibverbs.so.1")
    return RdmaFacts(
        hcas=tuple(hcas),
        uverbs=tuple(uverbs) if isinstance(uverbs, list) else uverbs,
        verbs_loadable=verbs if isinstance(verbs, Missing) else bool(verbs),
        gdr_module=_gdr(cap),
    )
