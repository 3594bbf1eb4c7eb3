"""RDMA readiness: HCA ports up, verbs reachable from here, GPUDirect RDMA, locked memory."""

from __future__ import annotations

import re
from collections.abc import Iterator

from doctor.core.model import Finding, Fix, Missing, Severity
from doctor.core.shell import command, commands
from doctor.core.units import human_bytes
from doctor.facts.network.rdma import RdmaFacts
from doctor.facts.node import NodeFacts
from doctor.nic.config import nccl_settings
from doctor.nic.nccl import ib_choice
from doctor.plugin import Skip, need, node_check


def _rdma(facts: NodeFacts) -> RdmaFacts:
    rdma = need(facts.rdma, "RDMA")
    if not rdma.present:
        raise Skip("no RDMA devices in /sys/class/infiniband")
    return rdma


@node_check(
    "rdma.state",
    "RDMA devices are usable by NCCL's IB transport",
    needs=("rdma",),
    codes={
        "rdma.no_active_port": "an HCA has no ACTIVE port: NCCL cannot use it",
        "rdma.no_uverbs": "HCAs exist but /dev/infiniband is not visible: NCCL uses sockets",
        "rdma.no_verbs": "libibverbs.so.1 cannot be loaded: NCCL falls back to sockets",
        "rdma.roce_no_v2": "a RoCE port has no RoCE v2 GID: traffic cannot be routed",
        "rdma.no_gdr": "NVIDIA GPUs but no peer-memory module and no DMA-BUF: no GPUDirect RDMA",
    },
)
def rdma_state(facts: NodeFacts) -> Iterator[Finding]:
    rdma = _rdma(facts)
    for hca in rdma.hcas:
        if hca.ports and all(p.state is None for p in hca.ports):
            continue  # no port's state was shown (a pasted `ibdev2netdev`): not judged
        if not any(p.active for p in hca.ports):
            yield Finding(
                "rdma.no_active_port",
                Severity.WARN,
                f"{hca.name}: no ACTIVE port ("
                + ", ".join(f"port {p.number} {p.state_text}/{p.phys_state}" for p in hca.ports)
                + ")",
                evidence=tuple(
                    f"/sys/class/infiniband/{hca.name}/ports/{p.number}/state: {p.state_text}"
                    for p in hca.ports
                ),
                fix=Fix(
                    "Check the cable/switch port and the subnet manager (IB) or the netdev link "
                    "(RoCE); exclude the HCA from NCCL meanwhile.",
                    (command("export NCCL_IB_HCA=^={}", hca.name),),
                ),
            )
        for p in hca.ports:
            if p.active and p.link_layer == "Ethernet" and p.gids_shown and not p.routable:
                yield Finding(
                    "rdma.roce_no_v2",
                    Severity.WARN,
                    f"{hca.name} port {p.number} (RoCE over {', '.join(p.netdevs) or '?'}) has "
                    "no RoCE v2 GID with an IP address",
                    evidence=tuple(f"gid {g.index}: {g.gid} {g.type}" for g in p.gids),
                    fix=Fix(
                        "Give the RoCE netdev an IPv4/IPv6 address so the kernel adds RoCE v2 GIDs."
                    ),
                )
    # Never looked at (pasted RDMA output shows neither /dev/infiniband nor libibverbs): unknown.
    uverbs_unseen = isinstance(rdma.uverbs, Missing) and rdma.uverbs.kind == "unsupported"
    if not uverbs_unseen and (isinstance(rdma.uverbs, Missing) or not rdma.uverbs):
        yield Finding(
            "rdma.no_uverbs",
            Severity.FAIL,
            "RDMA devices exist but /dev/infiniband is not visible here; NCCL silently uses "
            "sockets",
            evidence=(rdma.uverbs.reason if isinstance(rdma.uverbs, Missing) else "empty",),
            fix=Fix(
                "Pass the verbs devices into the container.",
                commands(
                    "docker run --device=/dev/infiniband --cap-add=IPC_LOCK --ulimit memlock=-1 ..."
                ),
            ),
        )
    unseen = isinstance(rdma.verbs_loadable, Missing) and rdma.verbs_loadable.kind == "unsupported"
    if rdma.verbs_loadable is not True and not unseen:
        why = rdma.verbs_loadable.reason if isinstance(rdma.verbs_loadable, Missing) else "?"
        yield Finding(
            "rdma.no_verbs",
            Severity.WARN,
            "libibverbs.so.1 cannot be loaded; NCCL falls back to NET/Socket",
            evidence=(why,),
            fix=Fix(
                "Install rdma-core's verbs library.",
                commands("apt-get install ibverbs-providers libibverbs1"),
            ),
        )
    gpus = facts.pci if isinstance(facts.pci, list) else []
    if rdma.gdr_module is None and any(d.is_nvidia_gpu for d in gpus) and not _dmabuf(facts):
        yield Finding(
            "rdma.no_gdr",
            Severity.WARN,
            "NVIDIA GPUs and RDMA devices but no nvidia_peermem, and no DMA-BUF path (it needs "
            "the open kernel module and Linux 5.12+): no GPUDirect RDMA",
            evidence=("no /sys/module/nvidia_peermem, /sys/module/nv_peer_mem or nv_mem",),
            fix=Fix("Load the peer-memory module.", commands("sudo modprobe nvidia-peermem")),
        )


# Linux registers DMA-BUF memory for RDMA (ibv_reg_dmabuf_mr) from 5.12; with NVIDIA's open
# kernel module NCCL then does GPUDirect RDMA without a peer-memory module (it probes at start-up
# and logs "DMA-BUF is available on GPU device N").
DMABUF_KERNEL = (5, 12)


def _dmabuf(facts: NodeFacts) -> bool:
    """Whether this node can do GPUDirect RDMA through DMA-BUF instead of nvidia_peermem."""
    if isinstance(facts.driver, Missing) or facts.driver.kernel_module != "open":
        return False
    if isinstance(facts.system, Missing):
        return False
    release = re.match(r"(\d+)\.(\d+)", facts.system.kernel)
    return release is not None and (int(release[1]), int(release[2])) >= DMABUF_KERNEL


@node_check(
    "limits.memlock",
    "Locked memory is unlimited where RDMA devices exist",
    needs=("rdma", "limits"),
    codes={
        "limits.memlock": "RLIMIT_MEMLOCK is limited: ibv_reg_mr fails, 'Cannot allocate memory'",
    },
)
def memlock(facts: NodeFacts) -> Iterator[Finding]:
    _rdma(facts)
    limit = need(need(facts.limits).memlock, "RLIMIT_MEMLOCK")
    if limit.unlimited:
        return
    yield Finding(
        "limits.memlock",
        Severity.FAIL,
        f"locked memory is limited to {human_bytes(limit.soft)} with RDMA devices present: NCCL's "
        "IB transport fails registering buffers",
        evidence=(f"RLIMIT_MEMLOCK soft {limit.soft} hard {limit.hard} (bytes; -1 = unlimited)",),
        fix=Fix(
            "Raise the limit for the launcher and everything it starts.",
            commands(
                "echo '* soft memlock unlimited' >> /etc/security/limits.conf",
                "echo '* hard memlock unlimited' >> /etc/security/limits.conf",
                "docker run --ulimit memlock=-1 ...",
            ),
        ),
        data={"soft": limit.soft, "hard": limit.hard},
    )


@node_check(
    "rdma.gid_index",
    "The GID NCCL_IB_GID_INDEX names is a RoCE v2 GID on every RoCE port NCCL uses",
    needs=("rdma", "env"),
    codes={
        "rdma.gid_index": "NCCL_IB_GID_INDEX names no GID, or a RoCE v1 one, on a RoCE port",
    },
)
def gid_index(facts: NodeFacts) -> Iterator[Finding]:
    rdma = _rdma(facts)
    env = need(facts.env, "environment")
    settings = nccl_settings(env, facts.nccl if not isinstance(facts.nccl, Missing) else None)
    setting = settings.get("NCCL_IB_GID_INDEX")
    if setting is None:
        raise Skip("NCCL_IB_GID_INDEX is not set: NCCL (2.21+) and RCCL pick a RoCE v2 GID")
    try:
        wanted = int(setting.value.strip(), 0)
    except ValueError:
        wanted = None
    if wanted == -1:
        raise Skip("NCCL_IB_GID_INDEX=-1: NCCL picks the GID itself")
    used = {(p.hca, p.port) for p in ib_choice(rdma, settings).ports}  # NCCL_IB_HCA's pick
    bad = []
    for hca in rdma.hcas:
        for port in hca.ports:
            if not port.active or port.link_layer != "Ethernet":
                continue
            if (hca.name, port.number) not in used:
                continue  # NCCL_IB_HCA leaves it out
            gid = next((g for g in port.gids if g.index == wanted), None)
            if gid is None:
                bad.append(f"{hca.name} port {port.number}: no GID at index {setting.value}")
            elif gid.type != "RoCE v2":
                bad.append(
                    f"{hca.name} port {port.number}: gid {gid.index} is {gid.type or 'untyped'} "
                    f"({gid.gid})"
                )
    if not bad:
        return
    v2 = sorted({g.index for h in rdma.hcas for p in h.ports for g in p.gids if g.routable_v2})
    yield Finding(
        "rdma.gid_index",
        Severity.FAIL,
        f"NCCL_IB_GID_INDEX={setting.value} ({setting.source}) does not name a RoCE v2 GID on "
        f"{len(bad)} RoCE port(s): queue pairs fail to connect or traffic is not routed",
        evidence=(*bad[:10], f"RoCE v2 GIDs with an address sit at index {v2 or 'none'}"),
        fix=Fix(
            "Unset it (NCCL 2.21+ and RCCL pick a RoCE v2 GID), or set the index a RoCE v2 GID "
            "with an IP address has on every node.",
            (
                command("unset NCCL_IB_GID_INDEX"),
                *(command("export NCCL_IB_GID_INDEX={}", i) for i in v2[:1]),
                command("show_gids"),
            ),
        ),
        data={"index": setting.value},
    )


@node_check(
    "rdma.efa",
    "EFA devices have libfabric's efa provider, and GPU nodes GDRCopy",
    needs=("rdma",),
    codes={
        "rdma.efa.no_provider": "EFA devices, but libfabric lists no efa provider",
        "rdma.efa.no_gdrcopy": "EFA devices and NVIDIA GPUs, but no gdrdrv (GDRCopy) module",
    },
)
def efa(facts: NodeFacts) -> Iterator[Finding]:
    rdma = _rdma(facts)
    devices = [h.name for h in rdma.hcas if h.driver == "efa"]
    if not devices:
        raise Skip("no EFA device (no HCA bound to the efa driver)")
    if rdma.efa_provider is False:
        yield Finding(
            "rdma.efa.no_provider",
            Severity.WARN,
            f"{len(devices)} EFA device(s) but `fi_info -p efa` lists no efa provider: the "
            "aws-ofi-nccl plugin cannot open them and NCCL falls back to sockets",
            evidence=(f"EFA devices: {', '.join(devices)}", "fi_info -p efa: no provider"),
            fix=Fix(
                "Install the EFA software (libfabric with its efa provider) and the aws-ofi-nccl "
                "plugin.",
                commands("/opt/amazon/efa/bin/fi_info -p efa"),
            ),
        )
    gpus = facts.pci if isinstance(facts.pci, list) else []
    modules = rdma.modules
    if any(d.is_nvidia_gpu for d in gpus) and isinstance(modules, dict) and "gdrdrv" not in modules:
        yield Finding(
            "rdma.efa.no_gdrcopy",
            Severity.INFO,
            "EFA devices and NVIDIA GPUs but no gdrdrv module: libfabric and NCCL copy small "
            "messages through the host instead of GDRCopy",
            evidence=("/sys/module/gdrdrv is absent",),
            fix=Fix("Install and load GDRCopy.", commands("sudo modprobe gdrdrv")),
        )


CHECKS = [rdma_state, memlock, gid_index, efa]
