"""Pasted NVIDIA outputs → the capture slots the probe fills, so the facts parsers read them.

Each kind is a ``Kind(name, starts, parse)`` (doctor/paste/kind.py): ``starts(line)`` says a line
opens an output of that kind; ``parse(segment)`` returns a capture fragment (``files`` /
``commands`` sections of the probe's document, doctor/stages/probe.py) that the paste reader merges
per node. Nothing is parsed here: the text goes where the probe would have put it (``nvidia-smi -q
-x`` is the probe's own fallback command) and doctor/facts/ reads it like a probed node's.
"""

from __future__ import annotations

import re
import zlib
from typing import Any

from doctor.facts.nvidia.driver import NVCC, PROC_VERSION
from doctor.facts.nvidia.gpu_vitals import INFOROM_CORRUPT, WARNING_SLOT
from doctor.facts.nvidia.gpus import CSV_FIELDS
from doctor.facts.nvidia.smi import CSV, QUERY, TABLE, XML, XML_ARGV
from doctor.facts.nvidia.smi_tree import LOG_TITLE
from doctor.facts.topo.smi_nvlink import ERRORS_SLOT, GPU_HEADER, STATUS_SLOT, shows_nvlink
from doctor.facts.topo.smi_text import is_matrix_header
from doctor.paste.kind import Kind

_TABLE = re.compile(r"NVIDIA-SMI\s+\d")
_XML = re.compile(r"<nvidia_smi_log\b")  # the DOCTYPE line before it is left as junk
_NVRM = re.compile(r"NVRM version:")
_NVCC = re.compile(r"nvcc: NVIDIA \(R\) Cuda compiler", re.I)
_CSV_CELL = re.compile(r"^\s*([\w.]+)\s*(?:\[\w+\])?\s*$")


def _command(slot: str, argv: tuple[str, ...], text: str) -> dict[str, Any]:
    entry = {"argv": list(argv), "rc": 0, "stdout": text, "stderr": "", "seconds": 0.0}
    return {"commands": {slot: entry}}


def _csv_fields(line: str) -> list[str] | None:
    cells = [_CSV_CELL.match(c) for c in line.split(",")]
    if not cells or any(c is None for c in cells):
        return None
    names = [c.group(1).lower() for c in cells if c is not None]
    return names if any(n in CSV_FIELDS for n in names) else None


def _is_csv_header(line: str) -> bool:
    """A --format=csv header naming --query-gpu fields (rows without one cannot be told apart)."""
    return _csv_fields(line) is not None


def _csv(text: str) -> dict[str, Any]:
    fields = next((f for f in map(_csv_fields, text.splitlines()) if f), [])
    argv = ("nvidia-smi", "--query-gpu=" + ",".join(fields), "--format=csv")
    return _command(CSV, argv, text)


def _nvlink(text: str) -> dict[str, Any]:
    """`nvidia-smi nvlink -s` and/or `-e` (one segment may hold both): each into its slot."""
    status, errors = shows_nvlink(text)
    commands = {}
    for shown, slot, flag in ((status, STATUS_SLOT, "-s"), (errors, ERRORS_SLOT, "-e")):
        if shown:
            commands.update(_command(slot, ("nvidia-smi", "nvlink", flag), text)["commands"])
    return {"commands": commands} if commands else {}


NVIDIA_KINDS: list[Kind] = [
    Kind(
        "nvidia-smi warning",
        lambda line: INFOROM_CORRUPT.search(line) is not None,
        lambda text: _command(
            f"{WARNING_SLOT}:{zlib.crc32(text.encode()):08x}", ("nvidia-smi",), text
        ),
    ),
    Kind(
        "nvidia-smi",
        lambda line: _TABLE.search(line) is not None,
        lambda text: _command(TABLE, ("nvidia-smi",), text),
    ),
    Kind(
        "nvidia-smi -q",
        lambda line: LOG_TITLE in line,
        lambda text: _command(QUERY, ("nvidia-smi", "-q"), text),
    ),
    Kind(
        "nvidia-smi -q -x",
        lambda line: _XML.search(line) is not None,
        lambda text: _command(XML, XML_ARGV, text),
    ),
    Kind("nvidia-smi --query-gpu --format=csv", _is_csv_header, _csv),
    Kind(
        "/proc/driver/nvidia/version",
        lambda line: _NVRM.search(line) is not None,
        lambda text: {"files": {PROC_VERSION: {"text": text}}},
    ),
    Kind(
        "nvcc --version",
        lambda line: _NVCC.search(line) is not None,
        lambda text: _command(NVCC, ("nvcc", "--version"), text),
    ),
    Kind(
        "nvidia-smi topo -m",
        is_matrix_header,
        lambda text: _command("nvidia-smi:topo", ("nvidia-smi", "topo", "-m"), text),
    ),
    Kind("nvidia-smi nvlink", lambda line: GPU_HEADER.match(line) is not None, _nvlink),
]

DESCRIPTIONS = {
    "nvidia-smi warning": "the warning nvidia-smi prints before any output: a corrupted InfoROM",
    "nvidia-smi": "the default table (old, classic, wide, MIG layouts): GPUs, driver and CUDA",
    "nvidia-smi -q": "the full text report: GPUs and their health (ECC, PCIe, throttling, modes)",
    "nvidia-smi -q -x": "the full report as XML: GPUs and their health",
    "nvidia-smi --query-gpu --format=csv": "a --query-gpu CSV with its header line",
    "/proc/driver/nvidia/version": "the kernel module's version, proprietary or open",
    "nvcc --version": "the CUDA toolkit release",
    "nvidia-smi topo -m": "the GPU/NIC topology matrix",
    "nvidia-smi nvlink": "`nvidia-smi nvlink -s` / `-e`: each GPU's NVLinks, active or not, and "
    "their replay, recovery and CRC error counters",
}
