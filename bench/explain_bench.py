"""Throughput and memory of `doctor explain` on large logs made by repeating the real captures.

Run: ``python bench/explain_bench.py [MEGABYTES]`` (default 1024). Two logs of that size are
written to a temp folder and each is read by ``python -m doctor explain --format json`` in a
child process; wall time, CPU time, lines/s and the child's peak RSS go to
bench/explain_bench.json.

- dense: every real capture (tests/fixtures/logs/real) repeated: mostly failure lines, the
  worst case (about 1 line in 5 gets past the keyword filter and is parsed).
- quiet: only the lines of those captures that hold no keyword (tracebacks, frames, banners),
  repeated: real text with nothing to explain, the floor a long healthy log costs per line.
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from doctor.explain.engine import Scanner  # noqa: E402

REAL = ROOT / "tests" / "fixtures" / "logs" / "real"


def corpus() -> bytes:
    """Every real capture's body (the '#' header dropped), one after another."""
    parts = []
    for path in sorted(REAL.glob("*.log")):
        lines = path.read_bytes().split(b"\n")
        parts.append(b"\n".join(line for line in lines if not line.startswith(b"# captured")))
    return b"\n".join(parts) + b"\n"


def quiet(unit: bytes) -> bytes:
    scanner = Scanner()
    return b"\n".join(line for line in unit.split(b"\n") if not scanner.reads(line)) + b"\n"


def peak_rss(proc: subprocess.Popen[bytes]) -> int:
    """The largest sum of resident memory over ``proc`` and its children, sampled until it ends."""
    root = psutil.Process(proc.pid)
    peak = 0
    while proc.poll() is None:
        total = 0
        with contextlib.suppress(psutil.Error):
            for p in [root, *root.children(recursive=True)]:
                with contextlib.suppress(psutil.Error):
                    total += p.memory_info().rss
        peak = max(peak, total)
        time.sleep(0.05)
    return peak


def measure(unit: bytes, megabytes: int, folder: Path) -> dict[str, object]:
    repeats = max(1, megabytes * 1024 * 1024 // len(unit))
    log = folder / "big.log"
    with log.open("wb") as out:
        for _ in range(repeats):
            out.write(unit)
    size = log.stat().st_size
    lines = unit.count(b"\n") * repeats
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    with tempfile.TemporaryFile() as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "doctor", "explain", "--format", "json", str(log)], stdout=out
        )
        peak = peak_rss(proc)
        if proc.wait() != 0:
            raise RuntimeError(f"doctor explain exited {proc.returncode}")
        seconds = time.perf_counter() - start
        out.seek(0)
        doc = json.loads(out.read())
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    log.unlink()
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    assert doc["context"]["lines"] == lines, (doc["context"]["lines"], lines)
    gib = (1 << 30) / size
    return {
        "bytes": size,
        "lines": lines,
        "seconds": round(seconds, 2),
        "cpu_seconds": round(cpu, 2),
        "lines_per_second": round(lines / seconds),
        "lines_per_cpu_second": round(lines / cpu),
        "seconds_per_gib": round(seconds * gib, 1),
        "cpu_seconds_per_gib": round(cpu * gib, 1),
        # The scan runs in one process per CPU: their resident memory summed, at its peak.
        "peak_rss_megabytes_all_processes": round(peak / (1 << 20), 1),
        "findings": len(doc["findings"]),
    }


def main() -> None:
    megabytes = int(sys.argv[1]) if len(sys.argv) > 1 else 1024
    unit = corpus()
    with tempfile.TemporaryDirectory(prefix="explain-bench-") as tmp:
        results = {
            "dense": measure(unit, megabytes, Path(tmp)),
            "quiet": measure(quiet(unit), megabytes, Path(tmp)),
        }
    results["machine"] = {
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "load_average_after": [round(x, 1) for x in os.getloadavg()],
        "note": "wall time on an otherwise idle machine; CPU time is summed over the processes",
    }
    Path(__file__).with_suffix(".json").write_text(json.dumps(results, indent=2) + "\n")
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
