"""Which interface NCCL, Gloo, TensorPipe and Open MPI use on each node, as rows of chips.

Nodes that choose alike share one row (128 healthy nodes are one row), every interface name has
its own colour across the table (NCCL on ``eth0`` and Gloo on ``lo`` stand out at a glance), and a
cell is flagged with the summaries of the findings about that library on those nodes. The
renderer judges nothing itself: flags come from the report's findings.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from typing import Any

from doctor.core.nodeset import compact
from doctor.core.shell import command
from doctor.render.figures import as_dict, as_list, as_text, dig

# (heading, finding-code prefixes that flag the column)
COLUMNS = (
    ("NCCL bootstrap", ("nccl.iface.", "nccl.env.", "nccl.library.")),
    ("NCCL data", ("nccl.socket.", "nccl.ib.")),
    ("Gloo", ("gloo.",)),
    ("TensorPipe", ("tp.",)),
    ("MPI btl_tcp", ("mpi.",)),
    ("MPI oob_tcp", ("mpi.",)),
    ("every peer reached", ("reach.",)),
)
PALETTE = 8  # interface colours (CSS classes if0..if7), reused beyond that


@dataclass(frozen=True)
class Chip:
    text: str
    colour: int  # -1: not an interface ("none", "not tested")


@dataclass(frozen=True)
class Cell:
    chips: tuple[Chip, ...]
    rule: str  # why the library picks it (the tooltip)
    flags: tuple[str, ...]  # summaries of the findings about it


@dataclass(frozen=True)
class Row:
    nodes: str
    count: int
    cells: tuple[Cell, ...]


@dataclass(frozen=True)
class Choice:
    headings: tuple[str, ...]
    rows: tuple[Row, ...]
    errors: tuple[tuple[str, str], ...]  # (nodes, why) where no plan could be made
    exports: tuple[str, ...]  # the cluster recommendation as shell lines


def _binding(value: Any) -> tuple[list[str], str]:
    """(interface, address if it is a loopback one) and the rule of a Gloo/TP/NCCL binding."""
    iface, address = as_text(dig(value, "interface")), as_text(dig(value, "address"))
    try:
        loopback = bool(address) and ipaddress.ip_address(address).is_loopback
    except ValueError:
        loopback = False
    text = f"{iface} {address}" if loopback else iface
    return ([text] if text else []), as_text(dig(value, "rule"))


def _cells(plan: dict[str, Any]) -> list[tuple[list[str], str]]:
    nccl = as_dict(plan.get("nccl"))
    if as_text(nccl.get("net")) == "IB":
        data = [p for p in as_list(dig(nccl, "ib", "ports")) if isinstance(p, str)]
        data_rule = "NCCL's IB transport: " + as_text(dig(nccl, "ib", "reason"))
    else:
        data = [as_text(dig(s, "interface")) for s in as_list(nccl.get("socket"))]
        data_rule = "NCCL's socket transport"
    mpi = as_dict(plan.get("mpi"))
    proven = plan.get("proven_reachable")
    return [
        _binding(nccl.get("bootstrap")),
        ([d for d in data if d], data_rule),
        _binding(plan.get("gloo")),
        _binding(plan.get("tp")),
        *(
            (
                [i for i in as_list(dig(mpi, key, "interfaces")) if isinstance(i, str)],
                as_text(dig(mpi, key, "rule")),
            )
            for key in ("btl_tcp", "oob_tcp")
        ),
        (
            [i for i in as_list(proven) if isinstance(i, str)] if proven is not None else [],
            "interfaces every tested peer reached over TCP"
            if proven is not None
            else "not tested: the reachability stage did not run for this node",
        ),
    ]


def build_choice(nics: Any, findings: Any) -> Choice | None:
    """The NIC choice table of the report's ``nics`` section; None when it names no node."""
    plans = as_dict(dig(nics, "nodes"))
    if not plans:
        return None
    flags_by_node: dict[str, list[tuple[str, str]]] = {}
    for f in as_list(findings):
        code, summary = as_text(dig(f, "code")), as_text(dig(f, "summary"))
        for node in as_list(dig(f, "nodes")):
            flags_by_node.setdefault(as_text(node), []).append((code, summary))
    colours: dict[str, int] = {}
    groups: dict[str, tuple[list[str], list[tuple[list[str], str, tuple[str, ...]]]]] = {}
    errors: dict[str, list[str]] = {}
    for node, plan in plans.items():
        if not isinstance(plan, dict) or "error" in plan:
            errors.setdefault(as_text(dig(plan, "error")) or "no NIC plan", []).append(node)
            continue
        cells = []
        for (_, prefixes), (ifaces, rule) in zip(COLUMNS, _cells(plan), strict=True):
            flags = tuple(
                summary
                for code, summary in flags_by_node.get(node, [])
                if code.startswith(prefixes)
            )
            cells.append((ifaces, rule, flags))
            for iface in ifaces:
                colours.setdefault(iface.split()[0], len(colours) % PALETTE)
        key = repr([(ifaces, flags) for ifaces, _, flags in cells])
        groups.setdefault(key, ([], cells))[0].append(node)
    rows = []
    for members, cells in sorted(groups.values(), key=lambda g: -len(g[0])):
        built = []
        for index, (ifaces, rule, flags) in enumerate(cells):
            if ifaces:
                chips = tuple(Chip(i, colours[i.split()[0]]) for i in ifaces)
            else:
                chips = (Chip("not tested" if index == len(COLUMNS) - 1 else "none", -1),)
            built.append(Cell(chips, rule, flags))
        rows.append(Row(compact(members), len(members), tuple(built)))
    recommendation = as_dict(dig(nics, "recommendation"))
    exports = tuple(command("export {}={}", k, as_text(v)) for k, v in recommendation.items())
    return Choice(
        tuple(h for h, _ in COLUMNS),
        tuple(rows),
        tuple((compact(ns), why) for why, ns in errors.items()),
        exports,
    )
