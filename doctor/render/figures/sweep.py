"""The allreduce sweep as the geometry of an SVG plot: bus bandwidth against message size.

Both axes are logarithmic (sizes double; a 10 Mb/s link and a 100 Gb/s one differ by four
decades). One line per run (as configured, as recommended). Horizontal lines give the scale: the
link speed the interfaces report (none for virtual ones), the best point-to-point link measured
between the other nodes, and the slow node's best link, drawn in red with its name; sizes whose
slowest rank was on the slow node are marked on the curves.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from doctor.core.nodeset import compact
from doctor.core.units import human_bytes
from doctor.render.figures import as_dict, as_list, as_number, as_text, dig

WIDTH, HEIGHT = 640, 300
LEFT, RIGHT, TOP, BOTTOM = 70, 16, 14, 40  # margins around the plotting box, px
MAX_XTICKS = 9
IFACE_VARS = ("NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME")


@dataclass(frozen=True)
class Point:
    x: float
    y: float
    title: str
    slow: bool  # the slowest rank at this size ran on the slow node


@dataclass(frozen=True)
class Series:
    label: str
    index: int  # picks its colour
    path: str  # SVG path data through the points
    points: tuple[Point, ...]


@dataclass(frozen=True)
class Line:
    y: float
    kind: str  # speed | typical | slow
    label: str


@dataclass(frozen=True)
class Tick:
    at: float
    text: str


@dataclass(frozen=True)
class Plot:
    width: int
    height: int
    box: tuple[float, float, float, float]  # left, top, right, bottom of the plotting area
    xticks: tuple[Tick, ...]
    yticks: tuple[Tick, ...]
    series: tuple[Series, ...]
    lines: tuple[Line, ...]
    slow_node: str
    notes: tuple[str, ...]


def _rows(run: dict[str, Any]) -> list[tuple[float, float, str]]:
    """(bytes, busbw GB/s, slowest node) for each size the whole run finished."""
    out = []
    for row in as_list(run.get("sweep")):
        size, bw = as_number(dig(row, "bytes")), as_number(dig(row, "busbw_gbps"))
        if size is not None and bw is not None and size > 0 and bw > 0:
            out.append((size, bw, as_text(dig(row, "slowest_node"))))
    return sorted(out)


def _measured(runs: list[dict[str, Any]]) -> tuple[str, float | None, float | None]:
    """The slow node, its best link and the other nodes' best link (GB/s), from the run that
    named a slow node (else the last run that measured links)."""
    measured = [r for r in runs if as_list(r.get("links"))]
    if not measured:
        return "", None, None
    run = next((r for r in measured if as_text(r.get("slow_node"))), measured[-1])
    slow = as_text(run.get("slow_node"))
    touching: list[float] = []
    others: list[float] = []
    for link in as_list(run.get("links")):
        speed = as_number(dig(link, "gbps"))
        if speed is None or speed <= 0:
            continue
        ends = {as_text(dig(link, "src")), as_text(dig(link, "dst"))}
        (touching if slow and slow in ends else others).append(speed)
    return slow, max(touching, default=None), max(others, default=None)


def link_speed(allreduce: dict[str, Any], nics: Any) -> tuple[float, str] | None:
    """The slowest speed (GB/s) the nodes' interfaces report for the interface the allreduce
    uses (the recommended one, else the one Gloo or NCCL picks), with its label."""
    env = as_dict(allreduce.get("recommendation"))
    wanted = next((as_text(env.get(v)) for v in IFACE_VARS if as_text(env.get(v))), "")
    wanted = wanted.lstrip("=").split(",")[0]
    speeds: dict[str, tuple[str, float]] = {}
    for node, plan in as_dict(dig(nics, "nodes")).items():
        picked = as_text(dig(plan, "gloo", "interface"))
        if allreduce.get("backend") == "nccl":
            picked = as_text(dig(plan, "nccl", "bootstrap", "interface"))
        iface = wanted or picked
        for entry in as_list(dig(plan, "interfaces")):
            mbps = as_number(dig(entry, "speed_mbps"))
            if dig(entry, "name") == iface and mbps is not None and mbps > 0:
                speeds[node] = (iface, mbps)
    if not speeds:
        return None
    slowest = min(mbps for _, mbps in speeds.values())
    at = sorted(n for n, (_, mbps) in speeds.items() if mbps == slowest)
    iface = speeds[at[0]][0]
    rate = f"{slowest / 1000:g} Gb/s" if slowest >= 1000 else f"{slowest:g} Mb/s"
    return slowest / 8000, f"link speed {rate} ({iface} on {compact(at)})"


def _decades(values: list[float]) -> tuple[int, int]:
    low = math.floor(math.log10(min(values)))
    high = math.ceil(math.log10(max(values)))
    return (low, high) if high > low else (low, low + 1)


def build_plot(allreduce: Any, nics: Any) -> Plot | None:
    """The sweep plot of the report's ``allreduce`` section; None when no run has a sweep."""
    section = as_dict(allreduce)
    runs = [as_dict(r) for r in as_list(section.get("runs"))]
    rows = {i: _rows(r) for i, r in enumerate(runs)}
    if not any(rows.values()):
        return None
    slow, slow_best, others_best = _measured(runs)
    speed = link_speed(section, nics)
    lines: list[tuple[float, str, str]] = []
    if speed is not None:
        lines.append((speed[0], "speed", speed[1]))
    if others_best is not None:
        among = "between the other nodes" if slow else "measured"
        label = f"best point-to-point link {among}: {others_best:.3g} GB/s"
        lines.append((others_best, "typical", label))
    if slow and slow_best is not None:
        lines.append((slow_best, "slow", f"slow node {slow}: best link {slow_best:.3g} GB/s"))

    sizes = [size for rs in rows.values() for size, _, _ in rs]
    ys = [bw for rs in rows.values() for _, bw, _ in rs] + [v for v, _, _ in lines]
    x_lo, x_hi = math.log2(min(sizes)), math.log2(max(sizes))
    if x_hi == x_lo:
        x_lo, x_hi = x_lo - 1, x_hi + 1
    y_lo, y_hi = _decades(ys)
    left, top, right, bottom = LEFT, TOP, WIDTH - RIGHT, HEIGHT - BOTTOM

    def px(size: float) -> float:
        return round(left + (math.log2(size) - x_lo) / (x_hi - x_lo) * (right - left), 1)

    def py(bw: float) -> float:
        return round(bottom - (math.log10(bw) - y_lo) / (y_hi - y_lo) * (bottom - top), 1)

    series = []
    for i, run in enumerate(runs):
        if not rows[i]:
            continue
        label = as_text(run.get("label")) or f"run {i + 1}"
        points = tuple(
            Point(
                px(size),
                py(bw),
                f"{label}: {human_bytes(size)}, busbw {bw:.4g} GB/s, slowest {node or '?'}",
                bool(slow) and node == slow,
            )
            for size, bw, node in rows[i]
        )
        path = "M" + " L".join(f"{p.x} {p.y}" for p in points)
        series.append(Series(label, i, path, points))

    step = max(1, math.ceil((x_hi - x_lo) / (MAX_XTICKS - 1)))
    xticks = tuple(
        Tick(px(2.0**e), human_bytes(2**e))
        for e in range(math.ceil(x_lo), math.floor(x_hi) + 1, step)
    )
    yticks = tuple(Tick(py(10.0**e), f"{10.0**e:g}") for e in range(y_lo, y_hi + 1))
    notes = []
    if speed is None:
        notes.append("link speed unknown: the interfaces report none (virtual links do not)")
    return Plot(
        WIDTH,
        HEIGHT,
        (left, top, right, bottom),
        xticks,
        yticks,
        tuple(series),
        tuple(Line(py(v), kind, label) for v, kind, label in lines),
        slow,
        tuple(notes),
    )
