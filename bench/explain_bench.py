"""Throughput and memory of `doctor explain` on one core, beside the floors of reading the file.

Run: ``python -m bench.explain_bench [--megabytes 200] [--runs 5]`` from the repository root.
Two logs of that size are written to a temp folder:

- mixed: every log fixture (tests/fixtures/logs: the real captures and the format fixtures), each
  followed by nine times as many ordinary lines as it has: the progress, metric and checkpoint
  lines a training job prints between failures (made up here in the shape of common trainers'
  output; none holds a keyword). About one line in forty holds a keyword.
- dense: the fixtures alone, repeated: the worst case, where one line in four holds a keyword
  and goes through the Python side of the scan.

Each command runs ``--runs`` times per log as a child pinned to CPU 0 (``taskset -c 0``, so
the parallel path is off: one core does everything); its wall time, CPU time (user + system)
and peak resident memory (the child's own, from wait4) are recorded and the medians kept:

- ``doctor explain --format json`` (the whole command: start-up, scan, report);
- ``keyword pass``: Python reading the same blocks and running only the keyword search
  (iter_blocks + KeywordIndex.lines), the part of the scan that is not per-line Python work;
- ``python for line in f`` (binary): the simplest Python loop over the file's lines;
- ``grep -c -E`` over the same keywords (LC_ALL=C);
- the first two on an empty log: their fixed cost (start-up, imports, the report), so that the
  per-line Python cost (``python_us_per_keyword_line``) is the scan's CPU beyond the keyword
  pass, each less its fixed cost, over the lines holding a keyword.

The result goes to bench/explain_bench.json; the README's explain rows are taken from it.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.installed import compile_bytecode
from doctor.explain.engine import Scanner
from tests.explain.fixtures import LOGS, body

PY = sys.executable
KEYWORD_PASS = """
import sys
from doctor.explain.engine import Scanner
from doctor.explain.source import MAX_LINE, iter_blocks
index = Scanner()._index
with open(sys.argv[1], "rb") as f:
    print(sum(1 for block in iter_blocks(f) for _ in index.lines(block, MAX_LINE)))
"""
LINE_LOOP = """
import sys
with open(sys.argv[1], "rb") as f:
    for line in f:
        pass
"""


def ordinary(rng: random.Random, i: int) -> bytes:
    """A line of the kind a healthy training job prints (progress, metrics, checkpoints)."""
    loss, norm = rng.random() * 3, rng.random()
    shapes = (
        f"2024-11-20 10:{i // 60 % 60:02d}:{i % 60:02d},{i % 1000:03d} - INFO - train.py:212 - "
        f"epoch {i // 5000} step {i % 5000}/5000 loss {loss:.4f} lr 3.00e-04 grad_norm {norm:.3f}",
        f" {i % 100:2d}%|#####     | {i % 5000}/5000 [03:12<03:55, {norm * 20:.2f}it/s, "
        f"loss={loss:.3f}]",
        f"{{'loss': {loss:.4f}, 'grad_norm': {norm:.3f}, 'learning_rate': 3e-04, "
        f"'epoch': {i / 5000:.2f}}}",
        f" iteration {i:8d}/  500000 | consumed samples: {i * 1024:12d} | elapsed time per "
        f"iteration (ms): {800 + norm * 30:.1f} | learning rate: 3.000E-04 | global batch size:"
        f"  1024 | lm loss: {loss:.6E} | loss scale: 1.0 | grad norm: {norm:.3f} |",
        f"[rank{i % 8}]: INFO:root:eval accuracy {norm:.4f} at step {i}",
        f"Saving checkpoint to /checkpoints/run42/step_{i} (took {loss * 3:.2f} s)",
    )
    return shapes[i % len(shapes)].encode()


def unit(ordinary_per_line: int) -> bytes:
    """One pass over every log fixture, each followed by its share of ordinary lines."""
    rng = random.Random(0)
    out: list[bytes] = []
    for path in sorted(LOGS.glob("*/*.log")):
        lines = [line for line in body(path).split(b"\n") if line]
        out += lines
        out += [ordinary(rng, len(out) + k) for k in range(ordinary_per_line * len(lines))]
    return b"\n".join(out) + b"\n"


def write_log(path: Path, chunk: bytes, megabytes: int) -> int:
    repeats = max(1, (megabytes << 20) // len(chunk))
    with path.open("wb") as out:
        for _ in range(repeats):
            out.write(chunk)
    return len(chunk) * repeats


def timed(argv: list[str]) -> tuple[float, float, float, bytes]:
    """Wall seconds, CPU seconds and peak RSS (MB) of one child, and its stdout."""
    with tempfile.TemporaryFile() as out:
        started = time.perf_counter()
        proc = subprocess.Popen(argv, stdout=out, env={**os.environ, "LC_ALL": "C"})
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - started
        proc.returncode = os.waitstatus_to_exitcode(status)
        if proc.returncode not in (0, 1):  # explain exits 1 on findings, grep on no match
            raise SystemExit(f"{argv[:4]} exited {proc.returncode}")
        out.seek(0)
        return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, out.read()


def measure(name: str, argv: list[str], size: int, runs: int) -> tuple[dict[str, float], bytes]:
    samples = [timed(["taskset", "-c", "0", *argv]) for _ in range(runs)]
    wall = statistics.median(s[0] for s in samples)
    cpu = statistics.median(s[1] for s in samples)
    print(f"  {name:22s} {wall:7.2f} s wall {cpu:7.2f} s CPU", file=sys.stderr)
    return {
        "wall_s_median": round(wall, 3),
        "wall_s_min": round(min(s[0] for s in samples), 3),
        "wall_s_max": round(max(s[0] for s in samples), 3),
        "cpu_s_median": round(cpu, 3),
        "mb_per_s_wall": round(size / 1e6 / wall, 1),
        "mb_per_s_cpu": round(size / 1e6 / cpu, 1),
        "peak_rss_mb": round(max(s[2] for s in samples), 1),
    }, samples[-1][3]


def grep_pattern(keywords: tuple[bytes, ...]) -> str:
    """The keywords as one POSIX ERE alternation."""
    return "|".join(re.sub(r"([][\\.^$*+?(){}|])", r"\\\1", k.decode()) for k in keywords)


def explain_argv(path: Path) -> list[str]:
    return [PY, "-m", "doctor", "explain", "--format", "json", str(path)]


def bench_log(path: Path, size: int, runs: int, empty: Path) -> dict[str, object]:
    keywords = Scanner()._index.keywords
    explain, report = measure("doctor explain", explain_argv(path), size, runs)
    keyword_pass, held = measure("keyword pass", [PY, "-c", KEYWORD_PASS, str(path)], size, runs)
    # What both cost on an empty log (start-up, imports, the report): not per line.
    explain_fixed, _ = measure("doctor explain, empty", explain_argv(empty), size, runs)
    keyword_fixed, _ = measure(
        "keyword pass, empty", [PY, "-c", KEYWORD_PASS, str(empty)], size, runs
    )
    loop, _ = measure("python for line in f", [PY, "-c", LINE_LOOP, str(path)], size, runs)
    grep, counted = measure(
        "grep -c -E", ["grep", "-c", "-E", grep_pattern(keywords), str(path)], size, runs
    )
    doc = json.loads(report)
    lines = doc["context"]["lines"]
    keyword_lines = int(held)
    # Per-line Python work: the scan's CPU beyond the keyword pass (each less its fixed cost),
    # over the lines it reads.
    scan = explain["cpu_s_median"] - explain_fixed["cpu_s_median"]
    search = keyword_pass["cpu_s_median"] - keyword_fixed["cpu_s_median"]
    per_line = (scan - search) / max(1, keyword_lines)
    return {
        "bytes": size,
        "lines": lines,
        "lines_holding_a_keyword": keyword_lines,
        "grep_matching_lines": int(counted),
        "findings": [f["code"] for f in doc["findings"]],
        "doctor_explain": explain,
        "keyword_pass": keyword_pass,
        "python_for_line_in_f": loop,
        "grep_c_E": grep,
        "explain_vs_line_loop_wall": round(explain["wall_s_median"] / loop["wall_s_median"], 1),
        "explain_vs_grep_wall": round(explain["wall_s_median"] / grep["wall_s_median"], 1),
        "doctor_explain_fixed_cpu_s": explain_fixed["cpu_s_median"],
        "keyword_pass_fixed_cpu_s": keyword_fixed["cpu_s_median"],
        "python_us_per_keyword_line": round(per_line * 1e6, 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--megabytes", type=int, default=200)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    compile_bytecode()
    results: dict[str, object] = {}
    with tempfile.TemporaryDirectory(prefix="explain-bench-") as tmp:
        empty = Path(tmp) / "empty.log"
        empty.write_bytes(b"")
        for name, ordinary_per_line in (("mixed", 9), ("dense", 0)):
            path = Path(tmp) / f"{name}.log"
            size = write_log(path, unit(ordinary_per_line), args.megabytes)
            print(f"{name}: {size / 1e6:.0f} MB", file=sys.stderr)
            results[name] = bench_log(path, size, args.runs, empty)
            path.unlink()
    results["machine"] = {
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "pinned_to": "CPU 0 (taskset -c 0)",
        "runs": args.runs,
        "load_average_after": [round(x, 1) for x in os.getloadavg()],
        "note": "shared machine: wall time includes waiting for CPU 0, CPU time does not",
    }
    Path(__file__).with_suffix(".json").write_text(json.dumps(results, indent=2) + "\n")
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
