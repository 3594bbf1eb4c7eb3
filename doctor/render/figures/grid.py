"""A node×node matrix (the SSH mesh, TCP reachability) as the geometry of an SVG grid.

Rows are sources, columns targets. A cell is ok, failed (with the failure's status and the
terminal's one-letter mark), not tested (hatched: the stage sampled the pairs and this one was not
among them, as its ``coverage`` says, or the pair was left untested: a ``not_tested`` status, or
no status where every pair was to be tested), not run (the source could not run the stage at all)
or the diagonal. Cells shrink with the node count and labels thin out, so 128 nodes fit in the
width of a page; neighbouring cells of one kind in a row merge into one rectangle (a healthy
128-node mesh is a few hundred rectangles, not 16,256), while every failed cell keeps its own,
with a tooltip.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from itertools import groupby
from typing import Any

from doctor.render.figures import as_dict, as_list, as_text, short
from doctor.render.matrix import MARKS

SIDE = 560  # the grid's target width in px, whatever the node count
MAX_CELL, MIN_CELL = 32, 3
LABEL_GAP = 13  # px between two labels along an axis: below it, label every k-th node only
CHAR = 6.6  # px per character of the 11px label font, to size the margins
MAX_LABEL = 22  # characters of a node name shown on an axis (the tooltip has it whole)
MAX_NAMED_TARGETS = 3  # a merged cell's tooltip names its targets up to this many

NOT_SAMPLED, NOT_TESTED = "not sampled", "not tested"  # the two ways a cell is "untested"
NOT_RUN = "not run on the source"


@dataclass(frozen=True)
class Rect:
    """One rectangle: a cell, or cells of one kind merged along a row."""

    x: float
    y: float
    w: float
    h: float
    kind: str  # ok | fail | untested | notrun | self
    title: str
    source: str = ""
    target: str = ""  # set on a single cell (every failed one), empty on a merged run
    status: str = ""
    mark: str = ""  # the failure's letter, drawn inside when the cell is big enough


@dataclass(frozen=True)
class Label:
    x: float
    y: float
    text: str
    full: str
    flag: str  # "fail": the node has a failed cell in this row (column); "notrun": its row did
    # not run; "": neither


@dataclass(frozen=True)
class LegendEntry:
    kind: str
    mark: str
    text: str
    count: int


@dataclass(frozen=True)
class Grid:
    width: float
    height: float
    left: float
    top: float
    cell: float
    rects: tuple[Rect, ...]
    rows: tuple[Label, ...]
    columns: tuple[Label, ...]
    flags: tuple[Rect, ...]  # red ticks on the axes beside every row and column with a failure
    legend: tuple[LegendEntry, ...]
    pairs: int
    tested: int
    failures: tuple[dict[str, str], ...]  # source, target, status, message: the table under it
    seed: int | None  # the sample's seed when the stage sampled the pairs, else None

    @property
    def complete(self) -> bool:
        return self.tested == self.pairs


def _cell(status: str | None, row_ran: bool, sampled: bool) -> tuple[str, str]:
    """(kind, why): why a cell is untested or not run, else the kind's own text."""
    if not row_ran:
        return "notrun", NOT_RUN
    if status is None:
        return "untested", NOT_SAMPLED if sampled else NOT_TESTED
    if status == "not_tested":
        return "untested", NOT_TESTED
    return ("ok", "ok") if status == "ok" else ("fail", status)


def _merged_title(source: str, targets: list[str], kind: str, why: str) -> str:
    if kind == "notrun":
        return f"{source}: not run" + (f" ({why})" if why else "")
    named = ", ".join(targets) if len(targets) <= MAX_NAMED_TARGETS else f"{len(targets)} nodes"
    return f"{source} → {named}: {why}"


def build_grid(section: Any, messages: dict[tuple[str, str], str]) -> Grid | None:
    """The grid of a matrix section (``nodes``, ``matrix``, ``not_run``, ``coverage``); None if
    it has no nodes.

    ``messages`` maps (source, target) to what explains a failed or untested cell (the client's
    last line).
    """
    doc = as_dict(section)
    nodes = [n for n in dict.fromkeys(as_list(doc.get("nodes"))) if isinstance(n, str)]
    if not nodes:
        return None
    matrix = as_dict(doc.get("matrix"))
    not_run = {k: as_text(v) for k, v in as_dict(doc.get("not_run")).items()}
    coverage = as_dict(doc.get("coverage"))
    sampled = coverage.get("mode") == "sampled"
    seed = coverage.get("seed") if sampled and isinstance(coverage.get("seed"), int) else None
    n = len(nodes)
    cell = float(max(MIN_CELL, min(MAX_CELL, SIDE // n)))
    step = math.ceil(LABEL_GAP / cell)
    margin = 10 + CHAR * max(len(short(name, MAX_LABEL)) for name in nodes)

    rects: list[Rect] = []
    counts: Counter[tuple[str, str]] = Counter()
    failures: list[dict[str, str]] = []
    bad_rows: set[int] = set()
    bad_cols: set[int] = set()
    idle_rows: set[int] = set()  # sources that did not run the stage
    for i, source in enumerate(nodes):
        row = matrix.get(source)
        row_ran = isinstance(row, dict) and source not in not_run
        if not row_ran:
            idle_rows.add(i)
        y = margin + i * cell
        cells = []  # (column, target, kind, why, status)
        for j, target in enumerate(nodes):
            status = row.get(target) if isinstance(row, dict) and i != j else None
            status = status if isinstance(status, str) else ""
            kind, why = ("self", "") if i == j else _cell(status or None, row_ran, sampled)
            cells.append((j, target, kind, why, status))
            if i != j:
                counts[(kind, why)] += 1
        # Neighbours of one kind (and reason) merge; a failed cell and the diagonal stand alone.
        for (kind, why, _), group in groupby(
            cells, key=lambda c: (c[2], c[3], c[0] if c[2] in ("fail", "self") else -1)
        ):
            run = list(group)
            x = margin + run[0][0] * cell
            if kind == "self":
                rects.append(Rect(x, y, cell, cell, "self", source, source))
            elif kind == "untested" and len(run) == 1 and messages.get((source, run[0][1])):
                target = run[0][1]
                title = f"{source} → {target}: {why} — {messages[(source, target)]}"
                rects.append(Rect(x, y, cell, cell, kind, title, source, target))
            elif kind == "fail":
                _, target, _, _, status = run[0]
                message = messages.get((source, target), "")
                title = f"{source} → {target}: {status}" + (f" — {message}" if message else "")
                mark = MARKS.get(status, MARKS["failed"])[0]
                rects.append(Rect(x, y, cell, cell, kind, title, source, target, status, mark))
                failures.append(
                    {"source": source, "target": target, "status": status, "message": message}
                )
                bad_rows.add(i)
                bad_cols.add(run[0][0])
            else:
                why = not_run.get(source, "") if kind == "notrun" else why
                title = _merged_title(source, [c[1] for c in run], kind, why)
                rects.append(Rect(x, y, len(run) * cell, cell, kind, title, source))

    def labels(axis: str) -> tuple[Label, ...]:
        # Every step-th node is named, and every node with a failure, whose name displaces the
        # regular ones that would overlap it.
        flags = dict.fromkeys(idle_rows if axis == "row" else (), "notrun")
        flags.update(dict.fromkeys(bad_rows if axis == "row" else bad_cols, "fail"))
        out = []
        for k, name in enumerate(nodes):
            flag = flags.get(k, "")
            if not flag and (k % step or any(0 < abs(k - b) < step for b in flags)):
                continue
            middle = margin + (k + 0.5) * cell
            text = short(name, MAX_LABEL)
            if axis == "row":
                out.append(Label(margin - 4, middle + 4, text, name, flag))
            else:
                out.append(Label(middle + 4, margin - 4, text, name, flag))
        return tuple(out)

    tick = 3.0
    flags = [
        Rect(margin - tick - 1, margin + i * cell, tick, cell, "flag", nodes[i]) for i in bad_rows
    ]
    flags += [
        Rect(margin + j * cell, margin - tick - 1, cell, tick, "flag", nodes[j]) for j in bad_cols
    ]
    legend = []
    for (kind, why), count in sorted(counts.items(), key=lambda kv: _legend_order(kv[0])):
        mark = MARKS.get(why, MARKS["failed"])[0] if kind == "fail" else ""
        legend.append(LegendEntry(kind, mark, why, count))
    side = margin + n * cell + 2
    pairs = n * (n - 1)
    untested = sum(c for (kind, _), c in counts.items() if kind in ("untested", "notrun"))
    return Grid(
        width=side,
        height=side,
        left=margin,
        top=margin,
        cell=cell,
        rects=tuple(rects),
        rows=labels("row"),
        columns=labels("column"),
        flags=tuple(sorted(flags, key=lambda r: (r.x, r.y))),
        legend=tuple(legend),
        pairs=pairs,
        tested=pairs - untested,
        failures=tuple(failures),
        seed=seed,
    )


def _legend_order(key: tuple[str, str]) -> tuple[int, str]:
    return (["ok", "fail", "untested", "notrun"].index(key[0]), key[1])


def mesh_messages(section: Any) -> dict[tuple[str, str], str]:
    """The SSH mesh's failed cells explained by the client's last line."""
    out = {}
    for failure in as_list(as_dict(section).get("failures")):
        f = as_dict(failure)
        out[(as_text(f.get("source")), as_text(f.get("target")))] = as_text(f.get("message"))
    return out


def reach_messages(section: Any) -> dict[tuple[str, str], str]:
    """Reachability's failed cells explained per interface: ``eth0 198.18.0.2: timeout (…)``."""
    lines: dict[tuple[str, str], list[str]] = {}
    for link in as_list(as_dict(section).get("links")):
        x = as_dict(link)
        status = as_text(x.get("status"))
        if status in ("ok", ""):
            continue
        text = f"{as_text(x.get('iface'))} {as_text(x.get('address'))}: {status}".strip()
        if as_text(x.get("message")):
            text += f" ({as_text(x.get('message'))})"
        lines.setdefault((as_text(x.get("source")), as_text(x.get("target"))), []).append(text)
    return {pair: "; ".join(texts) for pair, texts in lines.items()}
