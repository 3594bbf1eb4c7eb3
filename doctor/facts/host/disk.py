"""Space, inodes and answers of the filesystems a job writes to.

A probed node's come from statvfs and access(W_OK) in a child the probe abandons when a path hangs
(doctor/stages/probe.py ``ask_paths``); a pasted `df` (-h, -k, -P, -T, -H, -m; and -i for inodes)
gives the same per mount point. df's columns (coreutils src/df.c): Filesystem, [Type], then
Size/1K-blocks/1024-blocks/1M-blocks, Used, Avail/Available, Use%/Capacity, Mounted on; with -i
Inodes, IUsed, IFree, IUse%. A long device name pushes the numbers onto the next line.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any

from doctor.facts.host.mounts import Mount, mount_of

MAX_ROWS = 4096


@dataclass(frozen=True)
class Space:
    path: str  # as asked ("/tmp"), or df's "Mounted on"
    asked: str  # "default" (/, /tmp, /dev/shm, $HOME), "path", "mount", "network", "df"
    mount: Mount | None = None  # the mount it lives on, where the mount table is known
    size: int | None = None  # bytes
    avail: int | None = None  # bytes an unprivileged user may still write
    files: int | None = None  # inodes; None or 0: the filesystem has no fixed count
    ffree: int | None = None
    writable: bool | None = None  # access(W_OK); None where not asked (df)
    error: str | None = None  # statvfs failed: "No such file or directory"
    hung: bool = False  # no answer within the deadline

    @property
    def free_pct(self) -> float | None:
        if not self.size or self.avail is None:
            return None
        return 100.0 * self.avail / self.size

    @property
    def inodes_free_pct(self) -> float | None:
        if not self.files or self.ffree is None:
            return None
        return 100.0 * self.ffree / self.files


def from_probe(
    value: dict[str, Any], spec: dict[str, Any], mounts: tuple[Mount, ...]
) -> list[Space]:
    """The probe's ``host:paths`` answer as Spaces; a path asked and not answered hung."""
    kinds = {p: "mount" for p in spec.get("mounts") or []}
    kinds.update({p: "path" for p in spec.get("paths") or [] if p not in kinds})
    answers = {a.get("path"): a for a in value.get("answers", []) if isinstance(a, dict)}
    out = []
    for path in value.get("asked", []):
        kind = kinds.get(path, "network" if path in value.get("network", []) else "default")
        a = answers.get(path)
        if a is None:
            out.append(Space(path, kind, mount_of(path, mounts), hung=bool(value.get("hung"))))
            continue
        real = str(a.get("real") or path)
        space = Space(path, kind, mount_of(real, mounts))
        if "error" in a:
            err = a["error"]
            out.append(replace(space, error=str(err[1] if isinstance(err, list) else err)))
            continue
        frsize = int(a.get("frsize") or 0)
        out.append(
            replace(
                space,
                size=frsize * int(a.get("blocks") or 0),
                avail=frsize * int(a.get("bavail") or 0),
                files=int(a.get("files") or 0),
                ffree=int(a.get("ffree") or 0),
                writable=bool(a.get("writable")),
            )
        )
    return out


_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40, "P": 1 << 50, "E": 1 << 60}
_NUMBER = re.compile(r"^(\d+(?:[.,]\d+)?)([KMGTPE]?)i?B?$", re.I)
_HEADER = re.compile(r"^Filesystem\s", re.I)


def _block_size(header: list[str]) -> int:
    """Bytes per unit of the size columns: "1K-blocks" 1024, "1M-blocks"; 1 under "Size" (-h
    gives the unit in each cell)."""
    for cell in header:
        m = re.match(r"^(\d+)([KMG]?)-blocks$", cell, re.I)
        if m:
            return int(m.group(1)) * _UNITS[m.group(2).upper()]
    return 1


def _amount(cell: str, unit: int) -> int | None:
    """One size cell: "1.8T", "512M", "0" (-h: binary units in the cell; -H's decimal ones
    read the same, which changes no share of a filesystem), or a count of ``unit``s."""
    if cell in ("-", ""):
        return None
    m = _NUMBER.match(cell)
    if not m:
        raise ValueError(cell)
    number = float(m.group(1).replace(",", "."))
    return int(number * (_UNITS[m.group(2).upper()] if m.group(2) else unit))


def parse_df(text: str) -> list[Space]:
    """Every row of one or more `df` outputs, by mount point (the -h and the -i of one mount
    merge into one Space)."""
    rows: dict[str, Space] = {}
    header: list[str] = []
    pending: list[str] = []
    for line in text.splitlines()[:MAX_ROWS]:
        if _HEADER.match(line.strip()):
            header = line.replace("Mounted on", "Mounted_on").split()
            pending = []
            continue
        if not header:
            continue
        cells = pending + line.split()
        if len(cells) < len(header):  # a long device name alone: the rest on the next line
            pending = cells if len(cells) == 1 else []
            continue
        pending = []
        row = dict(
            zip(
                header,
                [*cells[: len(header) - 1], " ".join(cells[len(header) - 1 :])],
                strict=False,
            )
        )
        point = row.get("Mounted_on", "")
        if not point.startswith("/"):
            continue
        try:
            space = _row(header, row, point)
        except (ValueError, KeyError):
            continue
        old = rows.get(point)
        rows[point] = space if old is None else _merge(old, space)
    return list(rows.values())


def _row(header: list[str], row: dict[str, str], point: str) -> Space:
    fstype = row.get("Type")
    source = row.get("Filesystem", "")
    mount = Mount(point, fstype, source, ()) if fstype else None
    if "Inodes" in row:
        files = _amount(row["Inodes"], 1)
        return Space(point, "df", mount, files=files, ffree=_amount(row["IFree"], 1))
    unit = _block_size(header)
    size_cell = row.get("Size") or next(v for k, v in row.items() if k.lower().endswith("blocks"))
    avail_cell = row.get("Avail") or row["Available"]
    return Space(point, "df", mount, size=_amount(size_cell, unit), avail=_amount(avail_cell, unit))


def _merge(old: Space, new: Space) -> Space:
    return replace(
        old,
        mount=old.mount or new.mount,
        size=old.size if old.size is not None else new.size,
        avail=old.avail if old.avail is not None else new.avail,
        files=old.files if old.files is not None else new.files,
        ffree=old.ffree if old.ffree is not None else new.ffree,
    )
