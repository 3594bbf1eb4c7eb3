"""GPU topology: sockets, GPUDirect RDMA reach, NVLink health, P2P, and sameness across nodes."""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Iterable, Iterator

from doctor.core.model import Finding, Fix, Missing, Severity
from doctor.core.shell import command, commands
from doctor.facts.cluster import ClusterFacts
from doctor.facts.node import NodeFacts
from doctor.facts.pci import CLASS_NETWORK, Acs
from doctor.facts.topo.matrix import NVLINK, Topology
from doctor.facts.topo.nvml import NvmlGpu
from doctor.facts.topo.topology import TopoFacts
from doctor.facts.topo.view import GDR_DEFAULT_LEVEL, gdr_allowed
from doctor.judge.drift import drift_findings, need_drift
from doctor.judge.thresholds import need_limit
from doctor.plugin import Skip, cluster_check, need, node_check

SHOW_TOPO = command("nvidia-smi topo -m")


def _gpu_facts(facts: NodeFacts) -> TopoFacts:
    topo = need(facts.topo, "topology")
    if topo.source == "nvlink":
        raise Skip("only `nvidia-smi nvlink` was pasted: no topology matrix")
    if not topo.topology.gpus:
        raise Skip("no NVIDIA GPU on this node")
    return topo


def _gpu_links_known(facts: NodeFacts) -> TopoFacts:
    """GPU facts whose GPU-GPU labels include NVLink (NVML or nvidia-smi answered)."""
    topo = _gpu_facts(facts)
    if topo.source == "sysfs":
        raise Skip("NVLink unknown: neither NVML nor nvidia-smi answered on this node")
    return topo


def _islands(topo: Topology) -> list[list[str]]:
    """GPUs grouped so that no pair inside a group is SYS (one group per socket, usually)."""
    groups: list[list[str]] = []
    for gpu in topo.gpus:
        home = next((g for g in groups if all(topo.label(gpu, o) != "SYS" for o in g)), None)
        if home is None:
            groups.append([gpu])
        else:
            home.append(gpu)
    return groups


@node_check(
    "topo.sockets",
    "The node's GPUs are not split across CPU sockets with only SYS paths between them",
    needs=("topo",),
    codes={
        "topo.gpu.cross_socket": "some GPU pairs have only SYS (cross-socket PCIe) between them",
    },
)
def gpu_sockets(facts: NodeFacts) -> Iterator[Finding]:
    topo = _gpu_links_known(facts).topology
    groups = _islands(topo)
    if len(groups) < 2:
        return
    shown = "; ".join(",".join(g) for g in groups)
    gpus = topo.gpus
    pairs = [
        f"{a}-{b}" for i, a in enumerate(gpus) for b in gpus[i + 1 :] if topo.label(a, b) == "SYS"
    ]
    yield Finding(
        "topo.gpu.cross_socket",
        Severity.WARN,
        f"GPUs are split across sockets with only SYS between the groups: {shown}",
        evidence=(f"SYS pairs: {', '.join(pairs)}",),
        fix=Fix(
            "Traffic between these groups crosses the CPU interconnect (no P2P, host-memory "
            "staging). Keep a job's GPUs within one group, or use a node with NVLink.",
            (
                SHOW_TOPO,
                # nvidia-smi numbers GPUs in PCI bus order; CUDA does too only when told so.
                command(
                    "export CUDA_DEVICE_ORDER=PCI_BUS_ID CUDA_VISIBLE_DEVICES={}",
                    ",".join(g[3:] for g in groups[0]),
                ),
            ),
        ),
        data={"groups": groups},
    )


@node_check(
    "topo.gdr",
    "Each GPU has an RDMA NIC close enough for GPUDirect RDMA at NCCL's default level",
    needs=("topo",),
    codes={
        "topo.gdr.cross_socket": "a GPU's closest RDMA NIC is on the other socket (SYS): no GDR",
        "topo.gdr.via_cpu": "a GPU's closest RDMA NIC is through the CPU (PHB/NODE): no GDR",
    },
)
def gdr_reach(facts: NodeFacts) -> Iterator[Finding]:
    topo_facts = _gpu_facts(facts)
    topo = topo_facts.topology
    rdma = tuple(n for n in topo.nics if n in topo_facts.rdma)
    if not rdma:
        raise Skip("no RDMA NIC on this node")
    far: dict[str, list[str]] = {}
    for gpu in topo.gpus:
        label, nics = topo.closest_nics(gpu, rdma)
        if not gdr_allowed(label):
            far.setdefault(label, []).append(f"{gpu}→{','.join(nics)} ({label})")
    for label, rows in sorted(far.items()):
        cross = label == "SYS"
        yield Finding(
            "topo.gdr.cross_socket" if cross else "topo.gdr.via_cpu",
            Severity.WARN if cross else Severity.INFO,
            f"{len(rows)} GPU(s) have no RDMA NIC closer than {label}: NCCL turns GPUDirect "
            f"RDMA off for them (NCCL_NET_GDR_LEVEL defaults to {GDR_DEFAULT_LEVEL})",
            evidence=tuple(rows),
            fix=Fix(
                "Put a NIC on each GPU's PCIe switch or socket, or pin each rank to the GPU and "
                "NIC that share a socket. Raising NCCL_NET_GDR_LEVEL past PXB makes NCCL use "
                "GDR over that path, which is often slower than staging through host memory.",
                (
                    SHOW_TOPO,
                    command("NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=NET ... | grep 'GPU Direct RDMA'"),
                ),
            ),
            data={"label": label, "gpus": rows},
        )


@node_check(
    "topo.nvlink",
    "NVLink: every GPU has as many active links as its peers",
    needs=("topo",),
    codes={
        "topo.nvlink.degraded": "a GPU has fewer NVLinks to its peers than the other GPUs have",
        "topo.nvlink.down": "NVML reports NVLinks that are not active on a GPU with NVLink peers",
        "topo.nvlink.recovery": "NVLinks retrained after errors since the driver loaded",
        "topo.nvlink.errors": "a GPU's NVLinks counted replay and CRC errors past the threshold",
    },
)
def nvlink_health(facts: NodeFacts) -> Iterator[Finding]:
    topo_facts = need(facts.topo, "topology")
    if topo_facts.source == "nvlink":
        # A pasted `nvidia-smi nvlink`: each GPU's active links, wherever they go (-s), and
        # the error counters (-e), without a matrix. A GPU that lists fewer links than the
        # others was cut off by the paste, not degraded: it is not compared.
        listed = max((g.links_up + g.links_down for g in topo_facts.nvml), default=0)
        totals = {
            g.name: g.links_up for g in topo_facts.nvml if g.links_up + g.links_down == listed
        }
        counted = "active NVLinks"
    else:
        totals = _gpu_links_known(facts).topology.nvlink_totals()
        counted = "NVLinks to peers summed"
    best = max(totals.values(), default=0)
    if best == 0 and not any(g.link_errors for g in topo_facts.nvml):
        raise Skip("no NVLink between the GPUs")
    short = {g: n for g, n in totals.items() if n < best}
    if short:
        yield Finding(
            "topo.nvlink.degraded",
            Severity.FAIL,
            f"{', '.join(short)} ha{'s' if len(short) == 1 else 've'} fewer NVLinks to "
            f"peers than the other GPUs ({best})",
            evidence=tuple(f"{g}: {counted}: {n}" for g, n in totals.items()),
            fix=Fix(
                "A link is down or the GPU is out of the NVLink/NVSwitch fabric: check "
                "the link state and fabric manager, then reset the GPU or service the node.",
                (
                    *commands(
                        "nvidia-smi nvlink --status", "systemctl status nvidia-fabricmanager"
                    ),
                    SHOW_TOPO,
                ),
            ),
            data={"totals": totals},
        )
    down = {g.name: g.links_down for g in topo_facts.nvml if g.links_down}
    if down:
        yield Finding(
            "topo.nvlink.down",
            Severity.WARN,
            f"NVML reports inactive NVLinks on {', '.join(down)}",
            evidence=tuple(f"{g}: {n} link(s) not active" for g, n in down.items()),
            fix=Fix(
                "Check each link's state and error counters.",
                commands("nvidia-smi nvlink --status"),
            ),
            data={"down": down},
        )
    yield from _nvlink_errors(facts, topo_facts.nvml)
    # A recovery is a link that failed and was retrained: DCGM's health watch counts a single one
    # as an NVLink error.
    recovered = {g.name: g.link_errors for g in topo_facts.nvml if g.link_errors.get("recovery")}
    if recovered:
        yield Finding(
            "topo.nvlink.recovery",
            Severity.WARN,
            f"NVLinks on {', '.join(recovered)} failed and were retrained since the driver "
            "loaded: a link that keeps doing so stalls NCCL's NVLink traffic or drops out "
            "(Xid 74)",
            evidence=tuple(
                f"{g}: " + ", ".join(f"{k} {v}" for k, v in counts.items())
                for g, counts in recovered.items()
            ),
            fix=Fix(
                "Watch whether the count grows during a run; if it does, drain the node and "
                "reseat or service the link (run DCGM's diagnostics).",
                commands("nvidia-smi nvlink -e", "dcgmi diag -r 2"),
            ),
            data={"errors": recovered},
        )


def _nvlink_errors(facts: NodeFacts, gpus: Iterable[NvmlGpu]) -> Iterator[Finding]:
    """Replay and CRC errors summed over each GPU's links since the driver loaded, against
    imbue's threshold (a snapshot gives no rate: DCGM's 100 CRC errors a second needs two)."""
    threshold = need_limit(facts, "gpu.nvlink_errors")
    counted = {g.name: {k: v for k, v in g.link_errors.items() if k != "recovery"} for g in gpus}
    over = {g: c for g, c in counted.items() if sum(c.values()) >= threshold.value}
    if over:
        yield Finding(
            "topo.nvlink.errors",
            Severity.WARN,
            f"NVLinks on {', '.join(over)} counted {threshold.shown} or more replay/CRC "
            "errors since the driver loaded: a marginal link slows NCCL's NVLink traffic",
            evidence=(
                *(f"{g}: " + ", ".join(f"{k} {v}" for k, v in c.items()) for g, c in over.items()),
                str(threshold),
            ),
            fix=Fix(
                "Watch whether the counts grow during a run (nvidia-smi nvlink -e twice); if "
                "they do, drain the node and run DCGM's diagnostics.",
                commands("nvidia-smi nvlink -e", "dcgmi diag -r 2"),
            ),
            data={"threshold": "absolute", "limit": threshold.value, "errors": over},
        )


@node_check(
    "topo.p2p",
    "GPU peer-to-peer access works where NCCL would use it",
    needs=("topo",),
    codes={
        "topo.p2p.disabled": "NVML reports P2P not OK between GPUs NCCL would connect with P2P",
    },
)
def p2p_status(facts: NodeFacts) -> Iterator[Finding]:
    topo_facts = _gpu_facts(facts)
    if topo_facts.source != "nvml":
        raise Skip("P2P status needs NVML (pynvml and a GPU driver on the node)")
    topo = topo_facts.topology
    for pair, problems in sorted(topo_facts.p2p.items()):
        a, b = pair.split("-")
        label = topo.label(a, b)
        nvlink = NVLINK.fullmatch(label) is not None
        # NCCL only tries P2P up to PXB by default (NCCL_P2P_LEVEL); farther pairs use SHM anyway.
        if not nvlink and not gdr_allowed(label):
            continue
        shown = ", ".join(f"{cap} {status}" for cap, status in problems.items())
        yield Finding(
            "topo.p2p.disabled",
            Severity.FAIL if nvlink else Severity.WARN,
            f"P2P between {a} and {b} ({label}) is not available: {shown}",
            evidence=(f"nvmlDeviceGetP2PStatus({a}, {b}): {shown}",),
            fix=Fix(
                "NCCL fails on NVLink peers without P2P and falls back to host memory on "
                "PCIe. Check the driver's P2P settings (registry keys), IOMMU/ACS on bare "
                "metal, and the VM's P2P support.",
                commands("nvidia-smi topo -p2p r", "sudo lspci -vvv | grep ACSCtl"),
            ),
            data={"pair": pair, "label": label, "status": problems},
        )


@node_check(
    "topo.crosscheck",
    "The topology computed from NVML and sysfs agrees with nvidia-smi topo -m",
    needs=("topo",),
    codes={"topo.crosscheck.mismatch": "NVML/sysfs and nvidia-smi disagree on some link labels"},
)
def cross_check(facts: NodeFacts) -> Iterator[Finding]:
    topo_facts = _gpu_facts(facts)
    if topo_facts.mismatches:
        yield Finding(
            "topo.crosscheck.mismatch",
            Severity.INFO,
            f"{len(topo_facts.mismatches)} link label(s) differ from nvidia-smi topo -m",
            evidence=topo_facts.mismatches,
        )


@node_check(
    "pci.acs",
    "No PCIe bridge above a GPU redirects peer-to-peer traffic (ACS)",
    needs=("pci",),
    codes={
        "pci.acs.redirect": "ACS on a bridge above a GPU sends P2P/GPUDirect traffic round the CPU",
    },
)
def acs_redirect(facts: NodeFacts) -> Iterator[Finding]:
    devices = need(facts.pci, "PCI devices")
    by_address = {d.address: d for d in devices}
    gpus = [d for d in devices if d.is_nvidia_gpu]
    peers = [d for d in devices if d.is_nvidia_gpu or d.base_class == CLASS_NETWORK]
    if not gpus or len(peers) < 2:
        raise Skip("no GPU with a peer (another GPU or a NIC) on this node")
    above = {a for d in peers for a in d.path[:-1] if a in by_address}
    bridges = [by_address[a] for a in sorted(above)]
    unknown = [b for b in bridges if isinstance(b.acs, Missing)]
    redirecting = [b for b in bridges if isinstance(b.acs, Acs) and b.acs.redirects]
    if unknown and not redirecting:
        first = unknown[0].acs
        raise Skip(first.reason if isinstance(first, Missing) else "ACS unknown")
    if redirecting:
        yield Finding(
            "pci.acs.redirect",
            Severity.WARN,
            f"{len(redirecting)} PCIe bridge(s) above the GPUs redirect peer-to-peer requests to "
            "the root complex (ACS): GPU-to-GPU P2P and GPUDirect RDMA slow down or hang on "
            "bare metal (inside a VM with passthrough, ACS is needed: leave it)",
            evidence=tuple(f"{b.address}: ACSCtl {b.acs}" for b in redirecting),
            fix=Fix(
                "Disable ACS on these bridges (BIOS: 'ACS' or 'PCIe ACS control'; or at boot), "
                "then check P2P.",
                (
                    *(
                        command("sudo setpci -s {} ECAP_ACS+0x6.w=0000", b.address)
                        for b in redirecting
                    ),
                    command("nvidia-smi topo -p2p r"),
                ),
            ),
            data={"bridges": [b.address for b in redirecting]},
        )


NO_TOPOLOGY = "no GPU and no RDMA NIC"


def topology_signature(facts: NodeFacts) -> str | Missing:
    """A readable summary plus a short digest of the GPU and RDMA NIC links, for comparing nodes.

    Only what nvidia-smi also shows (GPUs, RDMA NICs) counts, so that a node read through NVML
    and one read through nvidia-smi compare on the same terms.
    """
    topo_facts = facts.topo
    if isinstance(topo_facts, Missing):
        return topo_facts
    topo = topo_facts.topology
    gpus = topo.gpus
    shown = [*gpus, *(n for n in topo.nics if n in topo_facts.rdma)]
    if not shown:
        return NO_TOPOLOGY
    gpu_links = Counter(topo.label(a, b) for i, a in enumerate(gpus) for b in gpus[i + 1 :])
    nic_links = Counter(topo.label(g, n) for g in gpus for n in shown[len(gpus) :])
    pairs = [(a, b, topo.label(a, b)) for i, a in enumerate(shown) for b in shown[i + 1 :]]
    digest = hashlib.sha256(repr(pairs).encode()).hexdigest()[:8]

    def counts(c: Counter[str]) -> str:
        return ",".join(f"{k}×{n}" for k, n in sorted(c.items())) or "-"

    return (
        f"{len(topo.gpus)} GPU, {len(topo_facts.rdma)} RDMA NIC; GPU-GPU {counts(gpu_links)}; "
        f"GPU-NIC {counts(nic_links)} [{digest}]"
    )


@cluster_check(
    "topo.drift",
    "Nodes have the same GPU/NIC topology",
    codes={"topo.drift": "a node's GPU/NIC topology differs from the others'"},
)
def topo_drift(cluster: ClusterFacts) -> Iterator[Finding]:
    need_drift(cluster, "a GPU or an RDMA NIC", (topology_signature, NO_TOPOLOGY))
    yield from drift_findings(
        cluster,
        topology_signature,
        code="topo.drift",
        what="GPU/NIC topology",
        severity=Severity.WARN,
        fix=Fix(
            "Nodes that should be identical are cabled or populated differently (a GPU or NIC "
            "missing, NVLink down, a card in another slot): compare their matrices.",
            (command("doctor topo"), SHOW_TOPO),
        ),
    )


CHECKS = [
    gpu_sockets,
    gdr_reach,
    nvlink_health,
    p2p_status,
    acs_redirect,
    cross_check,
    topo_drift,
]
