"""Wall time of prolog mode (``doctor preflight --local --prolog``) on this node, and its parts.

The target is under 2 s per job start. Parts: importing the CLI, and the probe alone (its deadline
in prolog mode is 1.5 s). The load average is saved with the result: on a shared machine it moves
every number. Usage: python3 -m bench.srun_prolog [--runs N] [--out bench/srun_prolog.json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

from bench import kernel_window
from bench.installed import compile_bytecode
from doctor.judge.registry import load_checks
from doctor.pipeline.prolog import PROLOG_DEADLINE
from doctor.pipeline.request import ProbeSettings, Request
from doctor.pipeline.steps import probe_spec
from doctor.stages.collect import probe_argv, probe_source

DOCTOR = [sys.executable, "-m", "doctor"]


def timed(argv: list[str], stdin: bytes | None = None) -> float:
    started = time.perf_counter()
    subprocess.run(argv, input=stdin, capture_output=True, check=False)
    return time.perf_counter() - started


def summary(samples: list[float]) -> dict[str, float]:
    return {
        "median_s": round(statistics.median(samples), 3),
        "min_s": round(min(samples), 3),
        "max_s": round(max(samples), 3),
    }


def main() -> None:
    kernel_window.from_now()
    compile_bytecode()
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--out", type=Path, default=Path(__file__).with_suffix(".json"))
    args = parser.parse_args()
    load_before = os.getloadavg()[0]
    prolog = [timed([*DOCTOR, "preflight", "--local", "--prolog"]) for _ in range(args.runs)]
    imports = [timed([sys.executable, "-c", "import doctor.cli.app"]) for _ in range(args.runs)]
    settings = ProbeSettings(deadline=PROLOG_DEADLINE)
    spec = probe_spec(Request("prolog", probe=settings, checks=tuple(load_checks())), [])
    probe = [timed(probe_argv(sys.executable, spec), probe_source()) for _ in range(args.runs)]
    result = {
        "machine": f"{platform.node()} {platform.machine()}, {os.cpu_count()} CPUs, "
        f"Python {platform.python_version()}",
        "load_average_1min": [round(load_before, 2), round(os.getloadavg()[0], 2)],
        "runs": args.runs,
        "prolog_wall": summary(prolog),
        "import_doctor_cli": summary(imports),
        "probe_alone": summary(probe),
        "target_s": 2.0,
    }
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
