"""The `nvidia-smi topo -m` text format: a liberal reader and the exporter it reads back.

nvidia-smi is closed source; the layout is the documented one (technical-notes §5.2): a header
row naming the devices then the affinity columns, one row per device, then ``Legend:`` and, on
newer drivers, ``NIC Legend:`` mapping NIC0… to RDMA device names. Real outputs differ in tabs
versus spaces, ANSI underline codes around the header, ``SOC`` (older drivers) for ``SYS``, NICs
named directly (older drivers) or through the legend, and which affinity columns exist.
"""

from __future__ import annotations

import re

from doctor.facts.topo.matrix import GPU_NAME, KNOWN_COLUMNS, Topology, is_label, legend

ANSI = re.compile(r"\x1b?\[[0-9;]*m")
NIC_ALIAS = re.compile(r"NIC\d+")
# What a header may name: GPUs, NIC aliases, and (older drivers) RDMA devices by name.
DEVICE = re.compile(r"GPU\d+|NIC\d+|mlx\d*_\d+|[a-z][\w-]*\d")
LEGEND_ENTRY = re.compile(r"\s*(NIC\d+)\s*:\s*(\S+)\s*$")
# Older drivers called the cross-socket level SOC; it is the same thing as SYS.
OLD_LABELS = {"SOC": "SYS"}
COLUMN_WORDS = {word for column in KNOWN_COLUMNS for word in column.split()}


class TopoParseError(ValueError):
    """The text is not an `nvidia-smi topo -m` matrix; the message says why, in one line."""


def _tokens(line: str) -> list[str]:
    return ANSI.sub("", line).split()


def _is_header(tokens: list[str]) -> bool:
    # The header starts with GPU0; a device row starts the same way but always holds its "X".
    return bool(tokens) and GPU_NAME.fullmatch(tokens[0]) is not None and "X" not in tokens


def is_matrix_header(line: str) -> bool:
    """Whether a line opens a `nvidia-smi topo -m` matrix: GPU0, then a device or a column."""
    tokens = _tokens(line)
    return (
        _is_header(tokens)
        and len(tokens) > 1
        and (DEVICE.fullmatch(tokens[1]) is not None or tokens[1] in COLUMN_WORDS)
    )


def _split_header(tokens: list[str]) -> tuple[list[str], tuple[str, ...]]:
    devices: list[str] = []
    rest = list(tokens)
    while rest and rest[0] not in COLUMN_WORDS:
        devices.append(rest.pop(0))
    columns: list[str] = []
    words = " ".join(rest)
    while words:
        column = next((c for c in KNOWN_COLUMNS if words.startswith(c)), None)
        if column is None:  # a column newer than this reader: named up to the next known one
            ends = [words.find(c) for c in KNOWN_COLUMNS if words.find(c) > 0]
            column = words[: min(ends)].strip() if ends else words
        columns.append(column)
        words = words[len(column) :].strip()
    if len(set(devices)) != len(devices):
        raise TopoParseError(f"a device is named twice in the header: {' '.join(devices)}")
    return devices, tuple(columns)


def _legend(lines: list[str]) -> dict[str, str]:
    legend: dict[str, str] = {}
    inside = False
    for line in lines:
        clean = ANSI.sub("", line)
        if clean.strip().startswith("NIC Legend"):
            inside = True
            continue
        match = LEGEND_ENTRY.match(clean) if inside else None
        if match:
            legend[match.group(1)] = match.group(2)
    return legend


def parse_topo_text(text: str) -> Topology:
    """Parse `nvidia-smi topo -m` output; raise TopoParseError with one line saying why not."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if _is_header(_tokens(line))), None)
    if start is None:
        raise TopoParseError("no topology matrix found (expected a header row starting with GPU0)")
    header = _tokens(lines[start])
    body = lines[start + 1 :]
    # A terminal narrower than the matrix wraps the header: lines of names and no label go on it.
    while body and _tokens(body[0]) and not any(is_label(t) for t in _tokens(body[0])):
        if _tokens(body[0])[0].rstrip(":") in ("Legend", "NIC"):
            break
        header += _tokens(body.pop(0))
    devices, columns = _split_header(header)
    rows: dict[str, list[str]] = {}
    last: str | None = None
    for line in body:
        tokens = _tokens(line)
        if not tokens:
            if rows:
                break
            continue
        if tokens[0].rstrip(":") == "Legend":
            break
        if tokens[0] not in devices:
            if last is not None and len(rows[last]) < len(devices):
                rows[last] += tokens  # the wrapped rest of the row before
                continue
            raise TopoParseError(f"row {tokens[0]!r} names no device of the header")
        if tokens[0] in rows:
            raise TopoParseError(f"two rows for {tokens[0]}")
        rows[tokens[0]] = tokens[1:]
        last = tokens[0]
    missing = [d for d in devices if d not in rows]
    if missing:
        raise TopoParseError(f"no row for {', '.join(missing)}")
    cells: list[tuple[str, ...]] = []
    affinity: list[tuple[str, ...]] = []
    n = len(devices)
    for i, name in enumerate(devices):
        row = rows[name]
        if len(row) < n:
            raise TopoParseError(f"row {name} has {len(row)} cells for {n} devices")
        labels = tuple(OLD_LABELS.get(cell, cell) for cell in row[:n])
        for j, label in enumerate(labels):
            if not is_label(label):
                raise TopoParseError(f"row {name}: {label!r} is not a topology label")
            if (label == "X") != (i == j):
                raise TopoParseError(f"row {name}: {label!r} towards {devices[j]}")
        if len(row) - n > len(columns):
            raise TopoParseError(f"row {name} has more values than the header has columns")
        cells.append(labels)
        affinity.append(tuple(row[n:]))
    legend = _legend(lines[start:])
    uses_legend = any(NIC_ALIAS.fullmatch(d) and d in legend for d in devices)
    names = tuple(legend.get(d, d) if uses_legend else d for d in devices)
    if len(set(names)) != len(names):
        raise TopoParseError(f"the NIC legend names a device twice: {' '.join(names)}")
    if not any(GPU_NAME.fullmatch(d) for d in names):
        raise TopoParseError("the matrix names no GPU")
    return Topology(
        devices=names,
        cells=tuple(cells),
        columns=columns,
        affinity=tuple(affinity),
        nic_legend=uses_legend,
    )


def export_topo_text(topo: Topology) -> str:
    """Write a topology as `nvidia-smi topo -m` does (tab-separated); the parser reads it back."""
    nic_names = {nic: f"NIC{i}" for i, nic in enumerate(topo.nics)} if topo.nic_legend else {}
    shown = [nic_names.get(d, d) for d in topo.devices]
    lines = ["\t" + "\t".join([*shown, *topo.columns])]
    for i, name in enumerate(shown):
        lines.append("\t".join([name, *topo.cells[i], *topo.affinity[i]]))
    lines += ["", "Legend:", ""]
    lines += [f"  {label:<4} = {meaning}" for label, meaning in legend(topo.cells)]
    if nic_names:
        lines += ["", "NIC Legend:", ""]
        lines += [f"  {alias}: {nic}" for nic, alias in nic_names.items()]
    return "\n".join(lines) + "\n"
