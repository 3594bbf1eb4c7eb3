"""The allreduce section's runs, read into plain rows for the HTML tables (runs side by side,
every rank's phase in each run, and each run's sweep)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from doctor.core.units import human_bytes
from doctor.render.figures import as_dict, as_list, as_number, as_text


@dataclass(frozen=True)
class RankRow:
    rank: str
    node: str
    cells: tuple[tuple[str, str], ...]  # per run: (phase or "done", error)
    done: bool  # finished in every run


@dataclass(frozen=True)
class Run:
    label: str
    status: str
    verified: bool
    seconds: float
    headline: str
    env: tuple[str, ...]  # "NAME=value"
    sweep: tuple[tuple[str, str, str, str, str], ...]  # size, time, algbw, busbw, slowest


@dataclass(frozen=True)
class Allreduce:
    status: str
    heading: str  # "gloo, 3 ranks, rendezvous node1:29500 (198.18.0.1)"
    skipped: str
    runs: tuple[Run, ...]
    ranks: tuple[RankRow, ...]


def _sweep(run: dict[str, Any]) -> tuple[tuple[str, str, str, str, str], ...]:
    rows = []
    for row in as_list(run.get("sweep")):
        r = as_dict(row)
        size, time_s = as_number(r.get("bytes")), as_number(r.get("time_s"))
        algbw, busbw = as_number(r.get("algbw_gbps")), as_number(r.get("busbw_gbps"))
        if None in (size, time_s, algbw, busbw):
            continue
        slowest = f"rank {r.get('slowest_rank')} ({as_text(r.get('slowest_node')) or '?'})"
        rows.append(
            (
                human_bytes(size or 0),
                f"{(time_s or 0) * 1e6:.0f} µs",
                f"{algbw:.4f}",
                f"{busbw:.4f}",
                slowest,
            )
        )
    return tuple(rows)


def build_allreduce(section: Any) -> Allreduce | None:
    """The report's ``allreduce`` section as table rows; None when there is none."""
    doc = as_dict(section)
    if not doc:
        return None
    runs = [as_dict(r) for r in as_list(doc.get("runs"))]
    heading = ", ".join(
        part
        for part in (
            as_text(doc.get("backend")),
            f"{doc['world_size']} ranks" if isinstance(doc.get("world_size"), int) else "",
            f"rendezvous {as_text(doc.get('rendezvous'))}"
            if as_text(doc.get("rendezvous"))
            else "",
        )
        if part
    )
    views = tuple(
        Run(
            as_text(r.get("label")) or f"run {i + 1}",
            as_text(r.get("status")) or "unknown",
            r.get("verified") is True,
            as_number(r.get("seconds")) or 0.0,
            as_text(r.get("headline")),
            tuple(f"{k}={as_text(v)}" for k, v in sorted(as_dict(r.get("env")).items())),
            _sweep(r),
        )
        for i, r in enumerate(runs)
    )
    ranks: list[RankRow] = []
    for i, rank in enumerate(as_list(runs[0].get("ranks")) if runs else []):
        cells = []
        for run in runs:
            listed = as_list(run.get("ranks"))
            entry = as_dict(listed[i]) if i < len(listed) else {}
            if entry.get("completed") is True:
                cells.append(("done", ""))
            else:
                cells.append((as_text(entry.get("phase")) or "?", as_text(entry.get("error"))))
        ranks.append(
            RankRow(
                str(as_dict(rank).get("rank", i)),
                as_text(as_dict(rank).get("node")),
                tuple(cells),
                all(phase == "done" for phase, _ in cells),
            )
        )
    return Allreduce(
        as_text(doc.get("status")) or "unknown",
        heading,
        as_text(doc.get("skipped")),
        views,
        tuple(ranks),
    )
