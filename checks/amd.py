"""AMD GPUs: XGMI, the host settings RCCL warns about, GPUDirect RDMA for AMD, ROCm drift.

What a GPU of any vendor shares (count, PCIe link, ECC, pending bad pages, processes) is judged
by checks/gpu_health.py and checks/gpu_count.py on the shared GPU facts; this module judges what
only AMD nodes have. The host settings are the ones RCCL itself checks at init (src/init.cc:
numa_balancing, iommu=pt, HSA_FORCE_FINE_GRAIN_PCIE) and its GPUDirect RDMA probe
(src/transport/net_ib.cc: amdkfd peer memory, or DMA-BUF).
"""

from __future__ import annotations

from collections.abc import Hashable, Iterator

from checks.versions import Rule, rules_check
from doctor.core.model import Finding, Fix, Missing, Severity
from doctor.core.shell import Command, commands
from doctor.facts.amd.model import AmdFacts
from doctor.facts.node import NodeFacts
from doctor.plugin import Skip, need, node_check

TOPOLOGY = commands("rocm-smi --showtopo", "amd-smi topology")


def _amd(facts: NodeFacts) -> AmdFacts:
    amd = need(facts.amd, "AMD GPUs")
    if not amd.gpus:
        raise Skip("no AMD GPU")
    return amd


def _gpu_name(amd: AmdFacts, bus: str) -> str:
    index = next((i for i, g in enumerate(amd.gpus) if g.bus_id == bus), None)
    return f"GPU{index} ({bus})" if index is not None else bus


@node_check(
    "amd.driver",
    "The amdgpu driver is bound to every AMD GPU on the PCI bus",
    needs=("pci",),
    codes={"amd.driver.missing": "AMD GPUs are on the PCI bus but amdgpu is not bound to them"},
)
def driver(facts: NodeFacts) -> Iterator[Finding]:
    gpus = [d for d in need(facts.pci, "PCI devices") if d.is_amd_gpu]
    if not gpus:
        raise Skip("no AMD GPU on the PCI bus")
    unbound = [d for d in gpus if d.driver != "amdgpu"]
    if unbound:
        yield Finding(
            "amd.driver.missing",
            Severity.FAIL,
            f"{len(unbound)} of {len(gpus)} AMD GPU(s) have no amdgpu driver: ROCm and RCCL "
            "do not see them",
            evidence=tuple(f"{d.address}: driver {d.driver or 'none'}" for d in unbound),
            fix=Fix(
                "Install the amdgpu-dkms driver matching the ROCm release and load it (dmesg "
                "says why it did not load); in a container, pass /dev/kfd and /dev/dri in.",
                commands(
                    "sudo modprobe amdgpu && sudo dmesg | grep -i amdgpu | tail",
                    "docker run --device=/dev/kfd --device=/dev/dri --group-add video ...",
                ),
            ),
        )


@node_check(
    "amd.xgmi",
    "Every pair of AMD GPUs in an XGMI hive is joined by XGMI",
    needs=("amd",),
    codes={"amd.xgmi.missing": "two GPUs of an XGMI system have no XGMI link between them"},
)
def xgmi(facts: NodeFacts) -> Iterator[Finding]:
    amd = _amd(facts)
    if len(amd.gpus) < 2:
        raise Skip("fewer than two AMD GPUs")
    if not amd.links:
        raise Skip("the KFD topology lists no links (no /sys/class/kfd)")
    pairs = amd.pair_links()
    if not any(link.type == "XGMI" for link in pairs.values()):
        raise Skip("no XGMI link at all: a PCIe-only system")
    buses = [g.bus_id for g in amd.gpus]
    broken = []
    for i, a in enumerate(buses):
        for b in buses[i + 1 :]:
            link = pairs.get(frozenset((a, b)))
            if link is None or link.type != "XGMI":
                how = "no link in the KFD topology" if link is None else f"{link.type} only"
                broken.append(f"{_gpu_name(amd, a)} ↔ {_gpu_name(amd, b)}: {how}")
    hives = {g.xgmi_hive for g in amd.gpus if g.xgmi_hive}
    if broken and len(hives) > 1:
        broken += [f"{_gpu_name(amd, g.bus_id)}: XGMI hive {g.xgmi_hive}" for g in amd.gpus]
    if broken:
        yield Finding(
            "amd.xgmi.missing",
            Severity.FAIL,
            f"{len(broken)} GPU pair(s) of this XGMI system are not joined by XGMI: RCCL routes "
            "their traffic over PCIe or through another GPU, and the node's allreduce runs at a "
            "fraction of its bandwidth",
            evidence=tuple(broken[:20]),
            fix=Fix(
                "An XGMI link is down or a GPU left the hive: check the links, cold-reboot the "
                "node (power off, not a warm reboot), and have the baseboard serviced if a link "
                "stays down.",
                (*TOPOLOGY, *commands("amd-smi xgmi", "sudo dmesg | grep -i xgmi")),
            ),
            data={"pairs": len(broken)},
        )


@node_check(
    "amd.bad_pages",
    "No AMD GPU has VRAM pages it could not retire",
    needs=("amd",),
    codes={"amd.bad_pages.failed": "bad VRAM pages could not be retired: the GPU needs service"},
)
def bad_pages(facts: NodeFacts) -> Iterator[Finding]:
    amd = _amd(facts)
    known = [g for g in amd.gpus if g.bad_pages_failed is not None]
    if not known:
        raise Skip("no RAS bad-page list (RAS off, or no gpu_vram_bad_pages)")
    failed = [g for g in known if g.bad_pages_failed]
    if failed:
        yield Finding(
            "amd.bad_pages.failed",
            Severity.FAIL,
            f"{len(failed)} GPU(s) have VRAM pages that could not be retired: memory errors "
            "recur on them and kill jobs",
            evidence=tuple(
                f"{_gpu_name(amd, g.bus_id)}: {g.bad_pages_failed} page(s) could not be retired"
                + (f" (of {g.bad_pages} bad pages)" if g.bad_pages is not None else "")
                for g in failed
            ),
            fix=Fix(
                "Take the GPU out of service and have it replaced (RMA).",
                commands("amd-smi bad-pages"),
            ),
        )


def _pcie_p2p(amd: AmdFacts) -> bool:
    """Whether some pair of GPUs talks over PCIe (no XGMI between them)."""
    pairs = amd.pair_links()
    buses = [g.bus_id for g in amd.gpus]
    return any(
        (link := pairs.get(frozenset((a, b)))) is None or link.type != "XGMI"
        for i, a in enumerate(buses)
        for b in buses[i + 1 :]
    )


@node_check(
    "amd.host",
    "The host settings RCCL warns about at init are right",
    needs=("amd", "env"),
    codes={
        "amd.numa_balancing": "automatic NUMA balancing is on: RCCL's performance varies",
        "amd.iommu": "the kernel command line lacks iommu=pt: RCCL warns of instability or hangs",
        "amd.fine_grain_pcie": "GPUs talk over PCIe without HSA_FORCE_FINE_GRAIN_PCIE=1",
    },
)
def host(facts: NodeFacts) -> Iterator[Finding]:
    amd = _amd(facts)
    if amd.numa_balancing:
        yield Finding(
            "amd.numa_balancing",
            Severity.WARN,
            "automatic NUMA balancing is on: the kernel migrates RCCL's buffers between NUMA "
            "nodes and collective bandwidth varies run to run (RCCL warns of this at init)",
            evidence=("/proc/sys/kernel/numa_balancing: 1",),
            fix=Fix(
                "Turn it off (and persist it in /etc/sysctl.d).",
                commands("sudo sysctl kernel.numa_balancing=0"),
            ),
        )
    if amd.cmdline is not None and not amd.hyperv and "iommu=pt" not in amd.cmdline.split():
        yield Finding(
            "amd.iommu",
            Severity.WARN,
            "the kernel runs without iommu=pt: every GPU and NIC DMA is translated by the IOMMU, "
            "and RCCL warns this 'can lead to system instability or hang'",
            evidence=(f"/proc/cmdline: {amd.cmdline[:200]}",),
            fix=Fix(
                "Add iommu=pt to the kernel command line and reboot.",
                commands(
                    "sudo sed -i 's/^GRUB_CMDLINE_LINUX=\"/&iommu=pt /' /etc/default/grub",
                    "sudo update-grub && sudo reboot",
                ),
            ),
        )
    env = need(facts.env, "environment")
    value = env.get("HSA_FORCE_FINE_GRAIN_PCIE")
    if len(amd.gpus) > 1 and value != "1" and not amd.hyperv and _pcie_p2p(amd):
        yield Finding(
            "amd.fine_grain_pcie",
            Severity.WARN,
            "GPUs exchange data over PCIe and HSA_FORCE_FINE_GRAIN_PCIE is not 1: RCCL warns of "
            "low performance, instability or hangs",
            evidence=(
                f"HSA_FORCE_FINE_GRAIN_PCIE={value}" if value is not None else "not set",
                "seen in the probe's environment; the job's launcher may set it",
            ),
            fix=Fix(
                "Set it for every rank (the launcher's environment, or the job script).",
                commands("export HSA_FORCE_FINE_GRAIN_PCIE=1"),
            ),
        )


def _dmabuf(facts: NodeFacts, amd: AmdFacts) -> bool:
    """RCCL's DMA-BUF path: asked for (NCCL_DMABUF_ENABLE=1) and the kernel built for it."""
    env = facts.env if isinstance(facts.env, dict) else {}
    config = amd.dmabuf_kernel
    built = not isinstance(config, Missing) and {
        "CONFIG_DMABUF_MOVE_NOTIFY",
        "CONFIG_PCI_P2PDMA",
    } <= set(config)
    return env.get("NCCL_DMABUF_ENABLE") == "1" and built


@node_check(
    "amd.gdr",
    "GPUDirect RDMA works between AMD GPUs and the HCAs",
    needs=("amd", "rdma"),
    codes={
        "amd.no_gdr": "AMD GPUs and HCAs, but neither amdkfd peer memory nor DMA-BUF: no GDR",
    },
)
def gdr(facts: NodeFacts) -> Iterator[Finding]:
    amd = _amd(facts)
    rdma = need(facts.rdma, "RDMA")
    if not rdma.hcas:
        raise Skip("no RDMA device")
    if need(amd.peer_memory, "amdkfd peer memory") is not None or _dmabuf(facts, amd):
        return
    config = amd.dmabuf_kernel
    yield Finding(
        "amd.no_gdr",
        Severity.WARN,
        "AMD GPUs and RDMA devices, but RCCL finds no amdkfd peer memory and no DMA-BUF path: "
        "inter-node traffic is staged through host memory, at a fraction of the NIC's bandwidth",
        evidence=(
            "no memory_peers/amdkfd/version under /sys/kernel/mm, /sys/kernel or /sys, and no "
            "ib_register_peer_memory_client in /proc/kallsyms",
            "kernel DMA-BUF options set: "
            + (config.reason if isinstance(config, Missing) else ", ".join(config) or "none"),
        ),
        fix=Fix(
            "Use an HCA driver with peer-memory support (MLNX_OFED/DOCA's ib_peer_mem with "
            "amdgpu-dkms), or use DMA-BUF: a kernel with CONFIG_DMABUF_MOVE_NOTIFY and "
            "CONFIG_PCI_P2PDMA, and NCCL_DMABUF_ENABLE=1.",
            commands("ls /sys/kernel/mm/memory_peers/", "export NCCL_DMABUF_ENABLE=1"),
        ),
    )


# -- drift across nodes ---------------------------------------------------------------------


def rocm_version(f: NodeFacts) -> Hashable | Missing:
    return f.amd if isinstance(f.amd, Missing) else f.amd.rocm_version


def amdgpu_version(f: NodeFacts) -> Hashable | Missing:
    return f.amd if isinstance(f.amd, Missing) else f.amd.amdgpu_version


def firmware(f: NodeFacts) -> Hashable | Missing:
    """Every GPU firmware block and version (amdgpu's fw_version files, else amdsmi's list)."""
    if isinstance(f.amd, Missing):
        return f.amd
    found = {f"{name} {version}" for g in f.amd.gpus for name, version in g.firmware}
    if not found and not isinstance(f.amd.smi, Missing):
        found = {f"{name} {version}" for g in f.amd.smi.gpus for name, version in g.firmware}
    return ", ".join(sorted(found)) if found else Missing("no firmware versions read", "absent")


def _fix(what: str, how: tuple[Command, ...]) -> Fix:
    return Fix(f"Install the same {what} on every node.", how)


DRIFT = (
    Rule(
        "drift.rocm",
        "the ROCm version differs between nodes",
        "ROCm version",
        rocm_version,
        Severity.FAIL,
        lambda ref: _fix(f"ROCm ({ref})", commands("cat /opt/rocm/.info/version")),
    ),
    Rule(
        "drift.amdgpu",
        "the amdgpu driver version differs between nodes",
        "amdgpu driver version",
        amdgpu_version,
        Severity.WARN,
        lambda ref: _fix(f"amdgpu-dkms ({ref})", commands("cat /sys/module/amdgpu/version")),
    ),
    Rule(
        "drift.amd_firmware",
        "the GPU firmware differs between nodes",
        "AMD GPU firmware",
        firmware,
        Severity.WARN,
        lambda ref: Fix(
            "Flash the same firmware bundle on every node (the vendor's PLDM bundle).",
            commands("amd-smi firmware"),
        ),
    ),
)
drift = rules_check(
    "versions.amd",
    "Every AMD node runs the same ROCm, amdgpu driver and GPU firmware",
    "an AMD GPU (ROCm, amdgpu or GPU firmware)",
    DRIFT,
)

CHECKS = [driver, xgmi, bad_pages, host, gdr, drift]
