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

import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

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
    proc = subprocess.run(
        [sys.executable, "-m", "doctor", "explain", "--format", "json", str(log)],
        capture_output=True,
        check=True,
    )
    seconds = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    log.unlink()
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    doc = json.loads(proc.stdout)
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
        # ru_maxrss of children is the largest child so far: the dense run is measured first.
        "peak_rss_megabytes": round(after.ru_maxrss / 1024, 1),
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
        "note": "shared 2-core machine: wall time includes other users' load; CPU time does not",
    }
    Path(__file__).with_suffix(".json").write_text(json.dumps(results, indent=2) + "\n")
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
