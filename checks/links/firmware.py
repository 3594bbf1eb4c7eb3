"""Firmware and driver drift: GPU VBIOS and GSP firmware, HCA firmware, and the RDMA driver
(MLNX_OFED's mlx5_core version) the same on every node, and HCAs of one model alike on each.

Across nodes the judgement is relative (the majority, or the --baseline node); NVIDIA and the
HCA vendors publish no "right" version, and a mixed fleet is what breaks NCCL's expectations
(a different firmware renegotiates differently, a different OFED speaks another verbs ABI).
"""

from __future__ import annotations

from collections.abc import Iterator

from checks.versions import Rule, rules_check
from doctor.core.model import Finding, Fix, Missing, Severity
from doctor.core.shell import command, commands
from doctor.facts.node import NodeFacts
from doctor.plugin import Skip, need, node_check

NONE = "none"
Value = str | Missing


def _joined(items: set[str]) -> str:
    return ", ".join(sorted(items)) if items else NONE


def vbios(f: NodeFacts) -> Value:
    if isinstance(f.gpus, Missing):
        return f.gpus
    shown = {f"{g.name} {g.health.vbios}" for g in f.gpus.gpus if g.health.vbios}
    if not shown:
        return Missing("no GPU reports its VBIOS", "absent")
    return _joined(shown)


def gsp(f: NodeFacts) -> Value:
    if isinstance(f.gpus, Missing):
        return f.gpus
    shown = {g.health.firmware for g in f.gpus.gpus if g.health.firmware}
    return _joined(shown) if shown else Missing("no GPU reports its GSP firmware", "absent")


def hca_firmware(f: NodeFacts) -> Value:
    if isinstance(f.rdma, Missing):
        return f.rdma
    shown = {f"{h.hca_type or h.name} {h.fw_ver}" for h in f.rdma.hcas if h.fw_ver}
    return _joined(shown) if shown else Missing("no HCA shows its firmware", "absent")


def rdma_driver(f: NodeFacts) -> Value:
    if isinstance(f.rdma, Missing) or isinstance(f.rdma.modules, Missing):
        return Missing("/sys/module was not read", "unsupported")
    if not f.rdma.present:
        return Missing("no RDMA device", "absent")
    loaded = {f"{m} {v or 'inbox'}" for m, v in f.rdma.modules.items() if m in ("mlx5_core", "efa")}
    return _joined(loaded)


DRIFT = (
    Rule(
        "drift.gpu_vbios",
        "the GPUs' VBIOS versions differ between nodes",
        "GPU VBIOS",
        vbios,
        Severity.WARN,
        lambda ref: Fix(
            f"Flash the same VBIOS on every node (expected: {ref}), from the vendor's bundle.",
            commands("nvidia-smi --query-gpu=index,name,vbios_version --format=csv"),
        ),
    ),
    Rule(
        "drift.gsp_firmware",
        "the GPUs' GSP firmware differs between nodes",
        "GPU GSP firmware",
        gsp,
        Severity.WARN,
        lambda ref: Fix(
            f"Install the driver whose GSP firmware is {ref} on every node (the GSP firmware "
            "ships with the driver).",
            commands("nvidia-smi -q | grep -i 'GSP Firmware'"),
        ),
    ),
    Rule(
        "drift.hca_firmware",
        "the HCAs' firmware differs between nodes",
        "HCA firmware",
        hca_firmware,
        Severity.WARN,
        lambda ref: Fix(
            f"Flash the same HCA firmware on every node (expected: {ref}).",
            commands('ibstat | grep -E "^CA|Firmware"', "mlxfwmanager --query"),
        ),
    ),
    Rule(
        "drift.rdma_driver",
        "the RDMA driver (MLNX_OFED or inbox mlx5_core, efa) differs between nodes",
        "RDMA driver",
        rdma_driver,
        Severity.WARN,
        lambda ref: Fix(
            f"Install the same RDMA driver on every node (expected: {ref}).",
            commands("ofed_info -s", "cat /sys/module/mlx5_core/version"),
        ),
    ),
)
drift = rules_check(
    "versions.firmware",
    "Every node runs the same GPU VBIOS and GSP firmware, HCA firmware and RDMA driver",
    "a GPU VBIOS, GSP firmware, HCA firmware or RDMA driver",
    DRIFT,
)


@node_check(
    "rdma.firmware",
    "The HCAs of one model on a node run one firmware",
    needs=("rdma",),
    codes={"rdma.firmware.mixed": "HCAs of one model run different firmware on one node"},
)
def mixed_hca_firmware(facts: NodeFacts) -> Iterator[Finding]:
    rdma = need(facts.rdma, "RDMA")
    by_model: dict[str, dict[str, list[str]]] = {}
    for hca in rdma.hcas:
        if hca.fw_ver and hca.hca_type:
            by_model.setdefault(hca.hca_type, {}).setdefault(hca.fw_ver, []).append(hca.name)
    if not by_model:
        raise Skip("no HCA shows both its model and its firmware")
    for model, versions in by_model.items():
        if len(versions) < 2:
            continue
        odd = min(versions.values(), key=len)
        yield Finding(
            "rdma.firmware.mixed",
            Severity.WARN,
            f"{model}: {len(versions)} firmware versions on one node",
            evidence=tuple(f"{v}: {', '.join(names)}" for v, names in versions.items()),
            fix=Fix(
                "Flash every HCA of the model to the same firmware.",
                (command("mlxfwmanager --query -d {}", odd[0]),),
            ),
            data={"threshold": "relative", "versions": sorted(versions)},
        )


CHECKS = [drift, mixed_hca_firmware]
