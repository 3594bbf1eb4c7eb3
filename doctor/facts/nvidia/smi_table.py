"""The default `nvidia-smi` table, in every layout it has had.

The layout (nvidia-smi(1) and what it prints): a title box "NVIDIA-SMI <v>  Driver Version: <v>"
(plus "CUDA Version: <v>" since R410), a header of one to three rows split into cells by "|",
a "|===...|" rule, then one block per GPU with the same rows and cells, GPUs parted by "+---+"
rules. The classic layout is 80 columns, the one of R530+ is wider; R450+ adds a "MIG M." row;
MIG devices and processes follow in tables of their own. The reader locates cells by the
header's words, not by column positions, so widths, indentation, a quoting "> " and a trailing
annotation do not matter. What a cell does not say is None.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from doctor.facts.gpu import GpuProcess
from doctor.facts.nvidia.gpu_health import compute_mode, flag, integer, size

_TITLE = re.compile(r"NVIDIA-SMI\s+(\d[\w.-]*)")
_DRIVER = re.compile(r"Driver Version:\s*(\d[\w.-]*)")
_CUDA = re.compile(r"CUDA Version:\s*(\d+\.\d+)")
_LEAD = re.compile(r"^[\s>]*")  # indentation and e-mail/markdown quoting before the table
_RULE = re.compile(r"^[|+][=+|]*=[=+|]*$")  # |=====+=====|
_BORDER = re.compile(r"^[+|][-+]*-[-+|]*$")  # +-----+-----+ and |-----+-----|
_MEMORY = re.compile(r"(\d+)\s*MiB\s*/\s*(\d+)\s*MiB", re.IGNORECASE)
_BUS = re.compile(r"[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7]")
_UTIL = re.compile(r"^\s*(?:\d+\s*%|N/A)\s*")
# "|    0   N/A  N/A     12345      C   python      1234MiB |" and the older "GPU PID Type" form.
_PROC = re.compile(
    r"^\s*(?P<gpu>\d+)\s+(?:(?:N/A|\d+)\s+(?:N/A|\d+)\s+)?(?P<pid>\d+)\s+(?P<type>C\+G|C|G|M\S*)"
    r"\s+(?P<name>.*?)\s+(?P<mem>\d+\s*MiB|N/A)\s*$"
)
MAX_LINES = 20000
MAX_LINE = 1024


@dataclass
class TableGpu:
    index: int
    name: str = "?"
    bus_id: str | None = None
    persistence_mode: bool | None = None
    memory_total: int | None = None  # bytes
    ecc_uncorrected_volatile: int | None = None
    compute_mode: str | None = None
    mig: bool | None = None
    processes: list[GpuProcess] | None = None


@dataclass
class SmiTable:
    driver: str | None = None
    cuda: str | None = None
    gpus: list[TableGpu] = field(default_factory=list)


def _clean(line: str) -> str:
    # The widest real table is under 200 columns; a longer line is cut before any regex runs.
    return _LEAD.sub("", line[:MAX_LINE].replace("\r", "").expandtabs(8)).rstrip()


def _cells(line: str) -> list[str]:
    """A row's cells; text after the last "|" (an annotation someone added) is dropped."""
    inner = line.strip().removeprefix("|")
    if "|" in inner:
        inner = inner.rsplit("|", 1)[0]
    return [c.strip() for c in inner.split("|")]


def _kind(header: str) -> str | None:
    for word, kind in (
        ("Name", "name"),
        ("Bus", "bus"),
        ("Uncorr", "ecc"),
        ("Memory-Usage", "memory"),
        ("Compute", "compute"),
        ("MIG M", "mig"),
    ):
        if word in header:
            return kind
    return None


def _fill(gpu: TableGpu, kind: str, cell: str) -> None:
    tokens = cell.split()
    if kind == "name" and len(tokens) > 1:
        persistence = flag(tokens[-1]) if tokens[-1] in ("On", "Off") else None
        gpu.persistence_mode = persistence
        words = tokens[1:-1] if persistence is not None or tokens[-1] == "N/A" else tokens[1:]
        gpu.name = " ".join(words) or "?"
    elif kind == "bus":
        found = _BUS.search(cell)
        gpu.bus_id = found.group(0) if found else None
    elif kind == "ecc":
        gpu.ecc_uncorrected_volatile = integer(cell)
    elif kind == "memory":
        m = _MEMORY.search(cell)
        gpu.memory_total = size(m.group(2), "mib") if m else None
    elif kind == "compute":
        gpu.compute_mode = compute_mode(_UTIL.sub("", cell))
    elif kind == "mig":
        gpu.mig = flag(cell)


def _header(lines: list[str], start: int) -> tuple[list[list[str | None]], int] | None:
    """The header rows' cell kinds from the row naming "Bus-Id", and where the data begins."""
    rows: list[list[str | None]] = []
    for i in range(start, min(start + 6, len(lines))):
        line = lines[i]
        if _RULE.match(line):
            return (rows, i + 1) if rows else None
        if line.startswith("|") and not _BORDER.match(line):
            rows.append([_kind(c) for c in _cells(line)])
    return None


def _gpu_blocks(lines: list[str], header: list[list[str | None]], at: int) -> list[TableGpu]:
    gpus: list[TableGpu] = []
    row = 0
    current: TableGpu | None = None
    for line in lines[at:]:
        if _BORDER.match(line):
            row = 0
            continue
        if not line.startswith("|"):
            break  # the table ended (blank line, the next section, a prompt)
        cells = _cells(line)
        if row % len(header) == 0:
            first = cells[0].split()
            index = integer(first[0]) if first else None
            if index is None:
                break
            current = TableGpu(index)
            gpus.append(current)
        kinds = header[row % len(header)]
        if current is not None and len(cells) == len(kinds):
            for kind, cell in zip(kinds, cells, strict=True):
                if kind:
                    _fill(current, kind, cell)
        row += 1
    return gpus


def _processes(lines: list[str], start: int, gpus: dict[int, TableGpu]) -> None:
    """The "Processes:" table: every GPU gets a list (empty when none are running)."""
    found: dict[int, list[GpuProcess]] = {index: [] for index in gpus}
    ruled = False
    for line in lines[start + 1 :]:
        if _RULE.match(line):
            ruled = True
            continue
        if not ruled:
            continue
        if not line.startswith("|"):
            break
        m = _PROC.match(_cells(line)[0])
        if m and int(m.group("gpu")) in found:
            mem = m.group("mem")
            found[int(m.group("gpu"))].append(
                GpuProcess(int(m.group("pid")), m.group("name"), size(mem, "mib"))
            )
    if ruled:
        for index, procs in found.items():
            gpus[index].processes = procs


def _mig_devices(lines: list[str], start: int, gpus: dict[int, TableGpu]) -> None:
    """GPUs listed in the "MIG devices:" table run MIG, whatever the (older) header says."""
    ruled = False
    for line in lines[start + 1 :]:
        if _RULE.match(line):
            ruled = True
        elif ruled and not line.startswith(("|", "+")):
            break
        elif ruled and line.startswith("|"):
            first = _cells(line)[0].split()
            index = integer(first[0]) if len(first) == 4 else None
            if index is not None and index in gpus:
                gpus[index].mig = True


def parse_table(text: str) -> SmiTable:
    """Whatever the table says: versions from the title, GPUs from the blocks, processes."""
    lines = [_clean(line) for line in text.splitlines()[:MAX_LINES]]
    out = SmiTable()
    for line in lines:
        if _TITLE.search(line):
            driver, cuda = _DRIVER.search(line), _CUDA.search(line)
            out.driver = driver.group(1) if driver else None
            out.cuda = cuda.group(1) if cuda else None
            break
    start = next((i for i, line in enumerate(lines) if "Bus" in line and "|" in line), None)
    header = None if start is None else _header(lines, start)
    if header is None:
        return out
    rows, at = header
    out.gpus = _gpu_blocks(lines, rows, at)
    by_index = {g.index: g for g in out.gpus}
    for i, line in enumerate(lines):
        if "Processes:" in line:
            _processes(lines, i, by_index)
        elif "MIG devices:" in line:
            _mig_devices(lines, i, by_index)
    return out
