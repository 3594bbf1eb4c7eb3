"""The PCIe links of the RDMA NICs and the GPUs: a NIC at half its width or speed halves what
GPUDirect RDMA and every rail through it can carry, whatever the IB rate says.

A narrower link than the device can do is judged against the device itself (absolute). A NIC
slower than the same NICs of the node is judged against them (relative); one as slow as all of
its siblings sits in a slower slot on purpose, and is a note. A GPU's speed is never judged
from here: an idle GPU drops its link to 2.5 GT/s to save power (gpu.pcie judges it under load).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator

from doctor.core.model import Finding, Fix, Missing, Severity
from doctor.core.shell import command
from doctor.facts.node import NodeFacts
from doctor.facts.pcie_link import PcieLink
from doctor.plugin import Skip, need, node_check

# The RDMA NICs an `lspci -vv` names (the probe knows them by their HCA's PCI address instead).
_RDMA_NAMES = re.compile(
    r"mellanox|connectx|bluefield|infiniband|elastic fabric adapter|\befa\b", re.IGNORECASE
)


def _show(link: PcieLink) -> str:
    def part(speed: float | None, width: int | None) -> str:
        return f"{speed:g} GT/s x{width}" if speed and width else f"x{width or '?'}"

    return (
        f"{link.address}: {part(link.speed, link.width)} of "
        f"{part(link.speed_max, link.width_max)} ({link.source})"
    )


def _fix(link: PcieLink) -> Fix:
    return Fix(
        "Reseat the card or its riser, check the slot's lane and speed settings (bifurcation, "
        "PCIe generation) in the BIOS, and the card's firmware.",
        (command("sudo lspci -vv -s {} | grep -E 'LnkCap|LnkSta'", link.address),),
    )


def _rdma_nics(facts: NodeFacts, links: dict[str, PcieLink]) -> list[PcieLink]:
    hcas = set()
    if not isinstance(facts.rdma, Missing):
        hcas = {h.pci_address for h in facts.rdma.hcas if h.pci_address}
    return [
        link
        for link in links.values()
        if link.kind == "nic" and (link.address in hcas or _RDMA_NAMES.search(link.name))
    ]


def _gpus_judged_elsewhere(facts: NodeFacts) -> set[str]:
    """GPUs whose own facts (NVML, nvidia-smi) report their link width: gpu.pcie judges those."""
    if isinstance(facts.gpus, Missing):
        return set()
    return {g.bus_id for g in facts.gpus.gpus if g.health.pcie_width_max is not None}


@node_check(
    "pcie.links",
    "The RDMA NICs' and GPUs' PCIe links run at the width and speed the devices can do",
    needs=("pcie_links",),
    codes={
        "pcie.nic.narrow": "an RDMA NIC's PCIe link is narrower than the NIC can do",
        "pcie.nic.slow": "an RDMA NIC's PCIe link is slower than the node's other NICs of its kind",
        "pcie.nic.below_max": "the RDMA NICs' PCIe links run below the speed the NICs can do",
        "pcie.gpu.narrow": "a GPU's PCIe link is narrower than the GPU can do",
    },
)
def links(facts: NodeFacts) -> Iterator[Finding]:
    found = need(facts.pcie_links, "PCIe links")
    nics = [link for link in _rdma_nics(facts, found) if link.width_max]
    elsewhere = _gpus_judged_elsewhere(facts)
    gpus = [
        link
        for link in found.values()
        if link.kind == "gpu" and link.width_max and link.address not in elsewhere
    ]
    if not nics and not gpus:
        raise Skip("no RDMA NIC's or GPU's PCIe link was read (or the GPUs' own facts hold it)")
    for code, what, narrow in (
        ("pcie.nic.narrow", "RDMA NIC", [n for n in nics if n.narrow]),
        ("pcie.gpu.narrow", "GPU", [g for g in gpus if g.narrow]),
    ):
        if narrow:
            yield Finding(
                code,
                Severity.WARN,
                f"{len(narrow)} {what}(s) run a narrower PCIe link than they can: what crosses "
                "it (GPUDirect RDMA, host copies) is cut by the same factor",
                evidence=(*map(_show, narrow), "absolute: the device's own link capability"),
                fix=_fix(narrow[0]),
                data={"threshold": "absolute", "devices": [n.address for n in narrow]},
            )
    yield from _nic_speed(nics)


def _nic_speed(nics: list[PcieLink]) -> Iterator[Finding]:
    slow, uniform = [], []
    groups: dict[tuple[str, float | None], list[PcieLink]] = {}
    for nic in nics:
        model = re.sub(r"^\S+\s+", "", nic.name) if nic.source != "sysfs" else nic.name
        groups.setdefault((model, nic.speed_max), []).append(nic)
    for members in groups.values():
        speeds = Counter(n.speed for n in members if n.speed)
        if not speeds:
            continue
        usual, count = speeds.most_common(1)[0]
        for nic in members:
            if nic.speed and count >= 2 and nic.speed < usual:
                slow.append((nic, usual))
            elif nic.slow:
                uniform.append(nic)
    if slow:
        yield Finding(
            "pcie.nic.slow",
            Severity.WARN,
            f"{len(slow)} RDMA NIC(s) trained their PCIe link slower than the node's other "
            "NICs of the same kind: the rail through each is capped below the others",
            evidence=(
                *(f"{_show(n)}; its siblings: {usual:g} GT/s" for n, usual in slow),
                "relative: the node's other NICs of the same kind",
            ),
            fix=_fix(slow[0][0]),
            data={"threshold": "relative", "devices": [n.address for n, _ in slow]},
        )
    if uniform:
        yield Finding(
            "pcie.nic.below_max",
            Severity.INFO,
            f"{len(uniform)} RDMA NIC(s) run their PCIe link below the speed they can do, as "
            "their siblings do: the slots (or the platform) are a generation older",
            evidence=(*map(_show, uniform), "absolute: the device's own link capability"),
            data={"threshold": "absolute", "devices": [n.address for n in uniform]},
        )


CHECKS = [links]
