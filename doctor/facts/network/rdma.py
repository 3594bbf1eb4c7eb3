"""RDMA from sysfs (no ibstat): HCAs, ports, GIDs, counters, verbs device nodes, the kernel
modules GPUDirect RDMA and the drivers need.

Formats follow the kernel (drivers/infiniband/core/sysfs.c, Documentation/ABI/stable/
sysfs-class-infiniband): state "4: ACTIVE", phys_state "5: LinkUp", rate "100 Gb/sec (4X EDR)"
(rate_show: "%d%s Gb/sec (%dX%s)", the width in lanes and the generation of each lane),
link_layer "InfiniBand" | "Ethernet", gid_attrs/types "IB/RoCE v1" | "RoCE v2", lid "0x5".
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from doctor.core.capture import Capture
from doctor.core.model import Missing
from doctor.facts.network.ib_counters import PortCounters, pasted_perfquery, sysfs_counters

ROOT = "/sys/class/infiniband"
PORT_ACTIVE = 4
# NCCL's GPUDirect RDMA probe looks at these (src/transport/net_ib/gdr.cc).
GDR_PATHS = (
    "/sys/kernel/mm/memory_peers/nv_mem/version",
    "/sys/module/nvidia_peermem/version",
    "/sys/module/nv_peer_mem/version",
)
_RATE = re.compile(
    r"^\s*(\d+(?:\.\d+)?)\s*Gb/sec(?:\s*\((?P<width>\d+)X\s*(?P<speed>[A-Z0-9]+)?\))?"
)
# Kernel modules looked for in /sys/module (present there once loaded; no lsmod): GPUDirect
# RDMA's peer-memory clients, GDRCopy, and the RDMA drivers whose version may drift.
MODULES = ("nvidia_peermem", "nv_peer_mem", "gdrdrv", "mlx5_core", "mlx5_ib", "ib_core", "efa")
FI_INFO = "fi_info:efa"  # `fi_info -p efa`, run by the probe where an EFA device exists


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
    width: int | None = None  # lanes the link trained at: "(4X NDR)" → 4
    speed: str | None = None  # the generation of each lane: "NDR"
    lid: int | None = None
    counters: PortCounters | None = None
    gids_shown: bool = True  # False: the GIDs were not looked at (a pasted ibstat shows none)

    @property
    def active(self) -> bool:
        return self.state == PORT_ACTIVE

    @property
    def transport(self) -> str:
        return {"InfiniBand": "IB", "Ethernet": "RoCE"}.get(self.link_layer, self.link_layer)

    @property
    def netdevs(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(g.netdev for g in self.gids if g.netdev))

    @property
    def routable(self) -> bool:
        return any(g.routable_v2 for g in self.gids)


@dataclass(frozen=True)
class Hca:
    name: str
    node_type: str | None
    fw_ver: str | None
    pci_address: str | None
    netdevs: tuple[str, ...]  # netdevs of the same PCI function (device/net)
    ports: tuple[Port, ...]
    hca_type: str | None = None  # "MT4129" (sysfs hca_type, ibstat's CA type)
    board_id: str | None = None
    driver: str | None = None  # the PCI function's driver: mlx5_core, efa, ...


@dataclass(frozen=True)
class RdmaFacts:
    hcas: tuple[Hca, ...]
    uverbs: tuple[str, ...] | Missing  # /dev/infiniband entries
    verbs_loadable: bool | Missing
    gdr_module: str | None  # the peer-memory module NCCL would find, or None
    # Loaded modules of MODULES → their version ("" where the module has none); Missing where
    # /sys/module was not looked at (a paste).
    modules: Mapping[str, str] | Missing = field(
        default_factory=lambda: Missing("/sys/module was not read", "unsupported")
    )
    efa_provider: bool | Missing = field(
        default_factory=lambda: Missing("fi_info was not run", "unsupported")
    )

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


def parse_width(text: str | None) -> tuple[int | None, str | None]:
    """'400 Gb/sec (4X NDR)' → (4, 'NDR'); a rate without its parenthesis → (None, None)."""
    m = _RATE.match(text or "")
    if m is None or m["width"] is None:
        return None, None
    return int(m["width"]), m["speed"]


def _lid(text: str | None) -> int | None:
    try:
        return int(text, 0) if text else None
    except ValueError:
        return None


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
    rate = _text(cap.file(f"{base}/rate"))
    width, speed = parse_width(rate)
    return Port(
        number=number,
        state=state,
        state_text=state_text,
        phys_state=parse_state(_text(cap.file(f"{base}/phys_state")))[1],
        rate_gbps=parse_rate(rate),
        link_layer=_text(cap.file(f"{base}/link_layer")) or "Unknown",
        gids=tuple(gids),
        width=width,
        speed=speed,
        lid=_lid(_text(cap.file(f"{base}/lid"))),
        counters=sysfs_counters(cap, base),
        gids_shown=not (isinstance(listing, Missing) and listing.kind == "unsupported"),
    )


def _num(text: str) -> int:
    return int(text) if text.isdigit() else -1


def _gdr(cap: Capture) -> str | None:
    for path in GDR_PATHS:
        if isinstance(cap.file(path), str):
            return path.split("/")[-2]
    for name in ("nvidia_peermem", "nv_peer_mem"):  # loaded, without a version file
        if cap.value(f"exists:/sys/module/{name}") is True:
            return name
    modules = cap.file("/proc/modules")
    if isinstance(modules, str):
        for line in modules.splitlines():
            name = line.split(" ", 1)[0]
            if name in ("nvidia_peermem", "nv_peer_mem"):
                return name
    return None


def _modules(cap: Capture) -> Mapping[str, str] | Missing:
    seen = {m: cap.value(f"exists:/sys/module/{m}") for m in MODULES}
    if all(isinstance(v, Missing) for v in seen.values()):
        return Missing("/sys/module was not read", "unsupported")
    out = {}
    for name, present in seen.items():
        if present is True:
            version = cap.file(f"/sys/module/{name}/version")
            out[name] = version.strip() if isinstance(version, str) else ""
    return out


def _efa_provider(cap: Capture) -> bool | Missing:
    """Whether `fi_info -p efa` lists the provider (it exits non-zero when it finds none)."""
    result = cap.command(FI_INFO)
    if isinstance(result, Missing):
        return result
    return result.rc == 0 and "efa" in result.stdout


def _with_perfquery(
    hcas: list[Hca], pasted: list[tuple[int | None, int, PortCounters]]
) -> list[Hca]:
    """Pasted perfquery counters on the port with the LID its header names; where no port has
    that LID (perfquery pasted alone, or a RoCE port's LID 0), on a port of its own, named by
    the LID, so that the counters are judged all the same."""
    for lid, number, counters in pasted:
        for i, hca in enumerate(hcas):
            ports = list(hca.ports)
            hit = [j for j, p in enumerate(ports) if lid and p.lid == lid and p.number == number]
            if hit:
                ports[hit[0]] = replace(ports[hit[0]], counters=counters)
                hcas[i] = replace(hca, ports=tuple(ports))
                break
        else:
            name = f"lid {lid}" if lid else "perfquery"
            port = Port(number, None, "?", "?", None, "Unknown", (), lid=lid, counters=counters)
            hcas.append(Hca(name, None, None, None, (), (port,)))
    return hcas


def parse_rdma(cap: Capture) -> RdmaFacts | Missing:
    listing = cap.dir(ROOT)
    pasted = pasted_perfquery(cap)
    if isinstance(listing, Missing) and listing.kind == "unsupported" and not pasted:
        return listing  # never looked at (a paste without RDMA output): unknown, not "none"
    hcas = []
    # No /sys/class/infiniband at all is the ordinary "no RDMA here", not a failure.
    for name in listing if isinstance(listing, list) else []:
        base = f"{ROOT}/{name}"
        ports = cap.dir(f"{base}/ports")
        device = cap.link(f"{base}/device")
        net = cap.dir(f"{base}/device/net")
        driver = cap.link(f"{base}/device/driver")
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
                hca_type=_text(cap.file(f"{base}/hca_type")),
                board_id=_text(cap.file(f"{base}/board_id")),
                driver=driver.rsplit("/", 1)[-1] if isinstance(driver, str) else None,
            )
        )
    hcas = _with_perfquery(hcas, pasted)
    uverbs = cap.dir("/dev/infiniband")
    verbs = cap.value("load:libibverbs.so.1")
    return RdmaFacts(
        hcas=tuple(hcas),
        uverbs=tuple(uverbs) if isinstance(uverbs, list) else uverbs,
        verbs_loadable=verbs if isinstance(verbs, Missing) else bool(verbs),
        gdr_module=_gdr(cap),
        modules=_modules(cap),
        efa_provider=_efa_provider(cap),
    )
