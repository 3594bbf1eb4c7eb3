"""Throughput and memory of `doctor explain` on a large log made by repeating the real captures.

Run: ``python bench/explain_bench.py [MEGABYTES]`` (default 1024). Writes the log to a temp
file, runs ``python -m doctor explain --format json`` on it in a child process, and records
wall time, lines/s, MB/s and the child's peak RSS in bench/explain_bench.json.
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
REAL = ROOT / "tests" / "fixtures" / "logs" / "real"


def corpus() -> bytes:
    """Every real capture's body (the '#' header dropped), one after another."""
    parts = []
    for path in sorted(REAL.glob("*.log")):
        lines = path.read_bytes().split(b"\n")
        parts.append(b"\n".join(line for line in lines if not line.startswith(b"# captured")))
    return b"\n".join(parts) + b"\n"


def main() -> None:
    megabytes = int(sys.argv[1]) if len(sys.argv) > 1 else 1024
    unit = corpus()
    repeats = max(1, megabytes * 1024 * 1024 // len(unit))
    with tempfile.TemporaryDirectory(prefix="explain-bench-") as tmp:
        log = Path(tmp) / "big.log"
        with log.open("wb") as out:
            for _ in range(repeats):
                out.write(unit)
        size = log.stat().st_size
        lines = unit.count(b"\n") * repeats
        start = time.perf_counter()
        proc = subprocess.run(
            [sys.executable, "-m", "doctor", "explain", "--format", "json", str(log)],
            capture_output=True,
            check=True,
        )
        seconds = time.perf_counter() - start
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    peak_kib, cpu = usage.ru_maxrss, usage.ru_utime + usage.ru_stime
    doc = json.loads(proc.stdout)
    assert doc["context"]["lines"] == lines, (doc["context"]["lines"], lines)
    result = {
        "bytes": size,
        "lines": lines,
        "seconds": round(seconds, 2),
        "lines_per_second": round(lines / seconds),
        "megabytes_per_second": round(size / seconds / 1e6, 1),
        "cpu_seconds": round(cpu, 2),
        "seconds_per_gigabyte": round(seconds * (1 << 30) / size, 1),
        "cpu_seconds_per_gigabyte": round(cpu * (1 << 30) / size, 1),
        "note": "measured at this size and extrapolated linearly to 1 GiB (memory is flat)",
        "peak_rss_megabytes": round(peak_kib / 1024, 1),
        "findings": len(doc["findings"]),
        "corpus": "every real capture repeated: a failure-dense log (about 1 line in 6 is read)",
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "machine": platform.machine(),
    }
    (Path(__file__).with_suffix(".json")).write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
