"""How long topology parsing takes: the nvidia-smi text reader, the export, and parse_topo.

Run: python bench/topo_parse.py > bench/topo_parse.txt
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from doctor.core.capture import Capture  # noqa: E402
from doctor.facts.topo.smi_text import export_topo_text, parse_topo_text  # noqa: E402
from doctor.facts.topo.topology import parse_topo  # noqa: E402
from tests.topo.machines import hgx_h100  # noqa: E402
from tests.topo.sysfs_tree import capture  # noqa: E402

SMI = ROOT / "tests" / "fixtures" / "topo" / "smi" / "hgx-h100-nvswitch-nic-legend.txt"


def per_call(fn, repeat: int) -> float:
    started = time.perf_counter()
    for _ in range(repeat):
        fn()
    return (time.perf_counter() - started) / repeat


def main() -> None:
    text = SMI.read_text()
    topo = parse_topo_text(text)
    nvml_capture = capture("hgx-8gpu-nvswitch.tree", hgx_h100(), text)
    raw = json.loads(
        subprocess.run(
            [sys.executable, str(ROOT / "doctor" / "stages" / "probe.py"), '{"deadline": 10}'],
            capture_output=True,
            check=True,
        ).stdout
    )
    rows = [
        ("parse_topo_text (18x18 HGX matrix)", per_call(lambda: parse_topo_text(text), 300)),
        ("export_topo_text (same)", per_call(lambda: export_topo_text(topo), 300)),
        (
            "parse_topo (HGX tree + NVML + nvidia-smi)",
            per_call(lambda: parse_topo(nvml_capture), 100),
        ),
        ("parse_topo (this machine's capture)", per_call(lambda: parse_topo(Capture(raw)), 100)),
    ]
    load = os.getloadavg()[0]
    print(f"# Python {platform.python_version()} on {platform.machine()}, load average {load:.1f}")
    for name, seconds in rows:
        print(f"{name:<45} {seconds * 1e3:8.3f} ms")
    section = raw["probe"]["sections"]["topo"]["seconds"]
    print(f"{'probe topo section on this machine':<45} {section * 1e3:8.3f} ms")


if __name__ == "__main__":
    main()
