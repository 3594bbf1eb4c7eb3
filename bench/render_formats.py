"""How long each report format takes for a large cluster, with and without --redact.

Run: .venv/bin/python bench/render_formats.py [nodes]   (results: bench/render_formats.txt)
Builds a report of N nodes from small hand-made captures (tests/builders.py), two of them with
findings, then times each renderer once (best of 3) through the same path the CLI uses.
"""

from __future__ import annotations

import contextlib
import io
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from builders import MIB, build_report, node

from doctor.facts.cluster import ClusterFacts
from doctor.render.output import Format, OutputOptions, emit


def best_of(runs: int, fn: Callable[[], object]) -> float:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return min(times)


def main(count: int) -> None:
    names = [f"gpu{i:04d}" for i in range(count)]
    nodes = {n: node(n, shm=(64 * MIB if i < 2 else 2048 * MIB)) for i, n in enumerate(names)}
    nics = {
        n: {"nccl": "eth0", "address": f"198.18.{i // 250}.{i % 250 + 1}"}
        for i, n in enumerate(names)
    }
    sections = {"nics": {"nodes": nics}}
    report = build_report(ClusterFacts(nodes=nodes), sections=sections)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        for fmt in ("text", "json", "junit", "markdown"):
            for redact in (False, True):
                opts = OutputOptions(
                    Format.json if fmt == "json" else Format.text,
                    junit_file=folder / "r.xml" if fmt == "junit" else None,
                    markdown_file=folder / "r.md" if fmt == "markdown" else None,
                    redact=redact,
                )

                def run(opts: OutputOptions = opts) -> None:
                    with contextlib.redirect_stdout(io.StringIO()):
                        emit(report, opts)

                label = f"{fmt}{' --redact' if redact else ''}"
                print(f"{count} nodes  {label:<18} {best_of(3, run):.3f} s")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 1024)
