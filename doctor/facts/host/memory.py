"""Memory and swap: /proc/meminfo and /proc/swaps as the probe read them, or pasted `free`,
`swapon --show`, `cat /proc/swaps`.

`free` (procps src/free.c) prints a header "total used free shared buff/cache available" (older
procps: "shared buffers cached", and a "-/+ buffers/cache:" line), then "Mem:" and "Swap:" rows
in KiB (plain), MiB (-m), GiB (-g), bytes (-b), or human units (-h: "15Gi", "1.5G", "512Mi",
"0B"). `swapon --show` prints "NAME TYPE SIZE USED PRIO" (human units); /proc/swaps
"Filename Type Size Used Priority" in KiB.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

KIB = 1024
_HUMAN = re.compile(r"^(\d+(?:[.,]\d+)?)([BKMGTPE]?)i?B?$", re.I)
_POWER = {"": 0, "B": 0, "K": 1, "M": 2, "G": 3, "T": 4, "P": 5, "E": 6}


@dataclass(frozen=True)
class Memory:
    total: int  # bytes
    available: int | None  # MemAvailable (kernels before 3.14 and old `free` do not say)
    swap_total: int
    swap_used: int


def parse_meminfo(text: str) -> Memory | None:
    fields: dict[str, int] = {}
    for line in text.splitlines():
        key, _, value = line.partition(":")
        parts = value.split()
        if parts and parts[0].isdigit():
            fields[key.strip()] = int(parts[0]) * (KIB if parts[1:] == ["kB"] else 1)
    if "MemTotal" not in fields:
        return None
    swap = fields.get("SwapTotal", 0)
    return Memory(
        fields["MemTotal"], fields.get("MemAvailable"), swap, swap - fields.get("SwapFree", swap)
    )


def human(cell: str, unit: int = 1) -> int | None:
    """ "15Gi", "1.5G", "512M", "0B", "1024" (in ``unit``s) → bytes; None for anything else.
    free -h and swapon print binary units with or without the "i" (--si is not read)."""
    m = _HUMAN.match(cell.strip())
    if not m:
        return None
    number = float(m.group(1).replace(",", "."))
    letter = m.group(2).upper()
    return int(number * (1024 ** _POWER[letter] if letter else unit))


def _plain_unit(total: str) -> int:
    """The unit of `free`'s bare numbers, which its output does not name: KiB plain, MiB with -m,
    GiB with -g. A training node has 4 GiB of memory or more, so a total under 4 Mi (KiB) is
    MiB from 2048 up, GiB below."""
    try:
        value = float(total)
    except ValueError:
        return KIB
    if value >= 4 * KIB * KIB:
        return KIB
    return KIB**2 if value >= 2048 else KIB**3


def parse_free(text: str) -> Memory | None:
    """`free` in any of its units: the Mem: and Swap: rows under the header."""
    header: list[str] = []
    rows: dict[str, list[str]] = {}
    for line in text.splitlines():
        words = line.split()
        if words and words[0] == "total":
            header = words
        elif words and words[0] in ("Mem:", "Swap:") and header:
            rows[words[0]] = words[1:]
    if "Mem:" not in rows:
        return None
    unit = _plain_unit(rows["Mem:"][0])
    mem = dict(zip(header, (human(w, unit) for w in rows["Mem:"]), strict=False))
    swap = dict(zip(header, (human(w, unit) for w in rows.get("Swap:", [])), strict=False))
    total = mem.get("total")
    if total is None:
        return None
    available = mem.get("available")
    swap_total = swap.get("total") or 0
    return Memory(total, available, swap_total, swap.get("used") or 0)


@dataclass(frozen=True)
class SwapArea:
    name: str
    size: int  # bytes
    used: int


def parse_swaps(text: str) -> tuple[SwapArea, ...]:
    """/proc/swaps (KiB) or `swapon --show` (human units, or bytes with --bytes)."""
    out = []
    proc = False
    for line in text.splitlines():
        words = line.split()
        if not words:
            continue
        if words[0] in ("Filename", "NAME"):
            proc = words[0] == "Filename"
            continue
        if len(words) >= 4 and words[0].startswith("/"):
            size, used = human(words[2], KIB if proc else 1), human(words[3], KIB if proc else 1)
            if size is not None and used is not None:
                out.append(SwapArea(words[0], size, used))
    return tuple(out)
