"""`doctor explain` beside a user's grep, on the same 200 MB logs, in one run.

Run: ``python -m bench.explain_bench [--megabytes 200] [--runs 7]`` from the repository root.
The logs are written to a temp folder:

- mixed: every log fixture (tests/fixtures/logs: the real captures and the format fixtures), each
  followed by nine times as many ordinary lines as it has: the progress, metric and checkpoint
  lines a training job prints between failures (made up here in the shape of common trainers'
  output). The unit is repeated to the size, so its lines come back over and over.
- dense: real failure text where half the lines are NCCL INFO lines: every fixture once, then
  the NCCL INFO fixtures (tests/fixtures/logs/nccl and the NCCL captures) again until their INFO
  lines are as many as all others; repeated to the size.
- unique: the mixed log with every line behind its own RFC 3339 timestamp, as `kubectl logs
  --timestamps` prints it: no line comes back, so nothing read is skipped as read before (the
  cost where a log does not repeat itself; no target).

For each log the commands run one after the other, ``--runs`` times, alternating, so that both
see the same machine: a user's grep over the failure words (``grep -a -n -i -E 'error|warn|...'``;
``-a`` because one real capture holds NUL bytes, after which grep prints only "binary file
matches") writing its matches to a file, and ``doctor explain --format json``, the whole
command (start-up, scan, report) writing its report to a file; unpinned, as a user runs them
(grep uses one CPU, the doctor all it may). The doctor timed is the `doctor` command the
README's first command installs (`python3 install.py`: .venv here, or the active environment);
beside it, `python -m doctor` with this machine's own Python, whose site runs hooks of the
machine at every start (here a container's CA hook that imports certifi: 10 to 15 ms that no
user's install pays, and grep does not). Wall and CPU time (user + system, from wait4) and peak
resident memory are kept, medians and ratios go to bench/explain_bench.json, and the README's
explain rows are taken from it. ``--before PATH`` times another checkout's doctor (its PYTHONPATH,
e.g. ``git archive <commit> doctor checks`` unpacked and compiled) beside the same grep and this
one, in the same rounds: how the figures before a change are taken. ``--busy N`` runs N busy
processes (a Python loop each) through the rounds: the machine under load, as a user's shared
login node is (bench/explain_bench_loaded.json, with ``--busy 2`` on this 2-CPU machine).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.installed import ROOT, compile_bytecode, readme_doctor
from tests.explain.fixtures import LOGS, body

PY = sys.executable
GREP = "error|warn|fail|timed? ?out|refused|unreachable|abort|denied|exception|traceback|killed"
NCCL_INFO = b"NCCL INFO"


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


def fixture_lines() -> list[list[bytes]]:
    return [[x for x in body(p).split(b"\n") if x] for p in sorted(LOGS.glob("*/*.log"))]


def mixed_unit() -> list[bytes]:
    """Every log fixture, each followed by nine times as many ordinary lines as it has."""
    rng = random.Random(0)
    out: list[bytes] = []
    for lines in fixture_lines():
        out += lines
        out += [ordinary(rng, len(out) + k) for k in range(9 * len(lines))]
    return out


def dense_unit() -> list[bytes]:
    """Every fixture once, then the NCCL INFO ones again until half the lines are NCCL INFO."""
    fixtures = fixture_lines()
    out = [x for lines in fixtures for x in lines]
    nccl = [lines for lines in fixtures if sum(NCCL_INFO in x for x in lines) * 2 > len(lines)]
    info = sum(NCCL_INFO in x for x in out)
    while info * 2 < len(out):
        for lines in nccl:
            out += lines
            info += sum(NCCL_INFO in x for x in lines)
    return out


def write_repeated(path: Path, unit: list[bytes], megabytes: int) -> int:
    chunk = b"\n".join(unit) + b"\n"
    with path.open("wb") as out:
        for _ in range(max(1, (megabytes << 20) // len(chunk))):
            out.write(chunk)
    return path.stat().st_size


def write_stamped(path: Path, unit: list[bytes], megabytes: int) -> int:
    """The unit over and over, each line behind its own timestamp (a microsecond apart)."""
    start = dt.datetime(2024, 11, 20, 10, tzinfo=dt.timezone.utc).timestamp()
    n, written = 0, 0
    with path.open("wb") as out:
        while written < megabytes << 20:
            lines = []
            for line in unit:
                stamp = dt.datetime.fromtimestamp(start + n * 1e-6, dt.timezone.utc)
                lines.append(stamp.strftime("%Y-%m-%dT%H:%M:%S.%fZ ").encode() + line)
                n += 1
            chunk = b"\n".join(lines) + b"\n"
            out.write(chunk)
            written += len(chunk)
    return path.stat().st_size


def timed(argv: list[str], env: dict[str, str], cwd: Path) -> tuple[float, float, float]:
    """Wall seconds, CPU seconds and peak RSS (MB) of one child writing to a file, run in
    ``cwd`` (not this checkout: `python -m` would import the doctor there, and its
    pyproject.toml is a config file the doctor reads)."""
    with tempfile.TemporaryFile() as out:
        started = time.perf_counter()
        proc = subprocess.Popen(argv, stdout=out, env=env, cwd=cwd)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - started
        code = os.waitstatus_to_exitcode(status)
        if code not in (0, 1):  # grep: 1 when nothing matches
            raise SystemExit(f"{argv[:4]} exited {code}")
        return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


def summary(samples: list[tuple[float, float, float]]) -> dict[str, float]:
    return {
        "wall_s_median": round(statistics.median(s[0] for s in samples), 3),
        "wall_s_min": round(min(s[0] for s in samples), 3),
        "wall_s_max": round(max(s[0] for s in samples), 3),
        "cpu_s_median": round(statistics.median(s[1] for s in samples), 3),
        "peak_rss_mb": round(max(s[2] for s in samples), 1),
    }


Doctors = dict[str, tuple[list[str], Path | None]]  # name: the command, and PYTHONPATH or None


def side_by_side(path: Path, runs: int, doctors: Doctors) -> dict[str, object]:
    """grep and each doctor in turn, ``runs`` rounds."""
    commands: dict[str, tuple[list[str], dict[str, str]]] = {
        "grep": (["grep", "-a", "-n", "-i", "-E", GREP, str(path)], {})
    }
    for name, (command, checkout) in doctors.items():
        env = {"PYTHONPATH": str(checkout)} if checkout else {}
        commands[name] = ([*command, "explain", "--format", "json", str(path)], env)
    samples: dict[str, list[tuple[float, float, float]]] = {name: [] for name in commands}
    for _ in range(runs):
        for name, (argv, env) in commands.items():
            samples[name].append(timed(argv, {**os.environ, "LC_ALL": "C", **env}, path.parent))
    doc: dict[str, object] = {"bytes": path.stat().st_size, "lines": _lines(path)}
    grep = summary(samples["grep"])
    doc["grep"] = grep
    for name in doctors:
        mine = summary(samples[name])
        ratio = round(mine["wall_s_median"] / grep["wall_s_median"], 2)
        print(
            f"  grep {grep['wall_s_median']:.3f} s, {name} {mine['wall_s_median']:.3f} s: {ratio}x"
        )
        doc[name] = {
            **mine,
            "vs_grep_wall": ratio,
            "vs_grep_cpu": round(mine["cpu_s_median"] / grep["cpu_s_median"], 2),
        }
    return doc


def _lines(path: Path) -> int:
    with path.open("rb") as handle:
        return sum(block.count(b"\n") for block in iter(lambda: handle.read(1 << 24), b""))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--megabytes", type=int, default=200)
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument(
        "--before", type=Path, help="another checkout (its doctor/ compiled) timed beside it"
    )
    parser.add_argument("--busy", type=int, default=0, help="busy processes beside the rounds")
    parser.add_argument("--out", type=Path, default=Path(__file__).with_suffix(".json"))
    args = parser.parse_args()
    compile_bytecode()
    # Each as `python -m doctor`, except the first: the README's install, as a user runs it.
    doctors: Doctors = {
        "doctor_explain": ([str(readme_doctor())], None),
        "doctor_explain_system_python": ([PY, "-m", "doctor"], ROOT),
    }
    if args.before is not None:
        doctors["doctor_explain_before"] = ([PY, "-m", "doctor"], args.before.resolve())
    results: dict[str, object] = {}
    busy = [subprocess.Popen([PY, "-c", "while True: pass"]) for _ in range(args.busy)]
    try:
        _rounds(args, doctors, results)
    finally:
        for proc in busy:
            proc.kill()
            proc.wait()
    results["machine"] = {
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "runs": args.runs,
        "busy_processes": args.busy,
        "doctor": doctors["doctor_explain"][0][0],
        "system_python": PY,
        "before": str(args.before.resolve()) if args.before else None,
        "grep": subprocess.run(
            ["grep", "--version"], capture_output=True, text=True
        ).stdout.splitlines()[0],
        "load_average_after": [round(x, 1) for x in os.getloadavg()],
        "note": "shared machine, unpinned: wall time includes waiting for a CPU",
    }
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    print(json.dumps(results, indent=2))


def _rounds(args: argparse.Namespace, doctors: Doctors, results: dict[str, object]) -> None:
    """Each log written, timed side by side, and removed."""
    with tempfile.TemporaryDirectory(prefix="explain-bench-") as tmp:
        logs = {
            "mixed": lambda p: write_repeated(p, mixed_unit(), args.megabytes),
            "dense": lambda p: write_repeated(p, dense_unit(), args.megabytes),
            "unique": lambda p: write_stamped(p, mixed_unit(), args.megabytes),
        }
        for name, write in logs.items():
            path = Path(tmp) / f"{name}.log"
            size = write(path)
            print(f"{name}: {size / 1e6:.0f} MB", file=sys.stderr)
            results[name] = side_by_side(path, args.runs, doctors)
            path.unlink()


if __name__ == "__main__":
    main()
