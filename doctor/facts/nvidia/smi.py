"""Which `nvidia-smi` report a capture holds, read: -q -x, -q, the default table.

The probe runs `nvidia-smi -q -x` where NVML gave no GPUs; a paste of any of the three lands in
its own command slot (doctor/paste/nvidia.py). The fullest report wins.
"""

from __future__ import annotations

from doctor.core.capture import Capture, CommandResult
from doctor.facts.nvidia.smi_table import SmiTable, parse_table
from doctor.facts.nvidia.smi_tree import Entry, parse_query_text, parse_query_xml

XML = "nvidia-smi:xml"  # nvidia-smi -q -x
QUERY = "nvidia-smi:query"  # nvidia-smi -q
TABLE = "nvidia-smi:table"  # nvidia-smi
CSV = "nvidia-smi"  # nvidia-smi --query-gpu=... --format=csv (the probe's name since version 1)
XML_ARGV = ("nvidia-smi", "-q", "-x")
READERS = ((XML, parse_query_xml), (QUERY, parse_query_text))


def smi_report(cap: Capture) -> tuple[str, Entry | SmiTable] | None:
    """The first report that ran and names GPUs: (command slot, tree or table)."""
    for name, read in READERS:
        result = cap.command(name)
        if isinstance(result, CommandResult) and result.rc == 0:
            tree = read(result.stdout)
            if tree.all("gpu"):
                return name, tree
    result = cap.command(TABLE)
    if isinstance(result, CommandResult) and result.rc == 0:
        table = parse_table(result.stdout)
        if table.gpus:
            return TABLE, table
    return None


def smi_versions(cap: Capture) -> tuple[str | None, str | None]:
    """(driver version, CUDA driver API version) as nvidia-smi printed them, else Nones."""
    found = smi_report(cap)
    if found is None:
        return None, None
    _, report = found
    if isinstance(report, SmiTable):
        return report.driver, report.cuda
    cuda = report.text("cuda_version")
    return report.text("driver_version"), cuda if cuda and cuda[:1].isdigit() else None
