"""Pasted AMD outputs (rocm-smi, amd-smi, rocminfo) → the capture slots
doctor/facts/amd/text_output.py reads. Nothing is parsed here: each output goes whole into its
slot."""

from __future__ import annotations

from typing import Any

from doctor.facts.amd.json_output import gpu_dicts, rocm_smi_cards
from doctor.facts.amd.text_output import (
    AMD_SMI,
    AMD_SMI_JSON,
    AMD_SMI_TOPOLOGY,
    AMD_SMI_TREE,
    ROCM_SMI,
    ROCM_SMI_JSON,
    ROCMINFO,
)
from doctor.paste.kind import Kind, command, matcher


def _slot(slot: str, argv: list[str]) -> Any:
    return lambda text: {"commands": {slot: command(argv, text, "pasted")}}


def _json(text: str) -> dict[str, Any]:
    if gpu_dicts(text):
        return _slot(AMD_SMI_JSON, ["amd-smi", "--json"])(text)
    if rocm_smi_cards(text) is not None:
        return _slot(ROCM_SMI_JSON, ["rocm-smi", "--json"])(text)
    return {}


AMD_KINDS = [
    Kind(
        "rocm-smi",
        matcher(
            r"\s*=+\s*ROCm System Management Interface\s*=+\s*$",
            r"\s*=+\s*(?:Weight|Hops|Link Type) between two GPUs\s*=+\s*$",
            # --showtopo's column heads: GPU names only (nvidia-smi topo -m adds CPU Affinity)
            r"(?:\s*GPU\d+)+\s*$",
        ),
        _slot(ROCM_SMI, ["rocm-smi"]),
    ),
    Kind(
        "amd-smi",
        matcher(
            r"\s*\|?\s*AMD-SMI\s+\d",
            r"\s*AMD System Management Interface \| Version",
            r"\s*AMDSMI Tool:",  # `amd-smi version`
        ),
        _slot(AMD_SMI, ["amd-smi"]),
    ),
    Kind("amd-smi list/static", matcher(r"GPU: \d+\s*$"), _slot(AMD_SMI_TREE, ["amd-smi"])),
    Kind(
        "amd-smi/rocm-smi --json",
        # json.dumps(indent=4) opens with "[" or "{" alone on its line; rocm-smi's is one line.
        # A segment that is neither tool's JSON is not taken.
        matcher(r"\s*[\[{]\s*$", r'\s*\[?\s*\{\s*"(?:gpu|card\d+|system)"'),
        _json,
    ),
    Kind(
        "amd-smi topology",
        matcher(r"\s*(?:ACCESS|WEIGHT|HOPS|LINK TYPE|NUMA BW) TABLE:\s*$"),
        _slot(AMD_SMI_TOPOLOGY, ["amd-smi", "topology"]),
    ),
    Kind(
        "rocminfo",
        matcher(r"\s*ROCk module\b", r"\s*=*\s*HSA System Attributes\s*=*\s*$"),
        _slot(ROCMINFO, ["rocminfo"]),
    ),
]
DESCRIPTIONS = {
    "rocm-smi": "rocm-smi's concise table, --showtopo matrices and GPU[N] lines: AMD GPUs, XGMI",
    "amd-smi": "amd-smi's default table or `amd-smi version`: GPUs by bus id, amdgpu and ROCm",
    "amd-smi list/static": "amd-smi list, static, metric (human format): bus ids, names, NUMA, ECC",
    "amd-smi/rocm-smi --json": "amd-smi (list, static, metric, topology) or rocm-smi --json",
    "amd-smi topology": "amd-smi topology tables: link type, hops and weight between AMD GPUs",
    "rocminfo": "rocminfo's agents: AMD GPUs, their bus ids and names, the amdgpu version",
}
