"""The light commands load only what they use: no allreduce, log reader, rich table or torch.

`doctor --version` and `doctor collect` run at every job start in some sites (prologs, CI); each
module they import costs every run. Measured in a fresh interpreter, as a user runs them.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

HEAVY = (
    "doctor.stages.allreduce",
    "doctor.explain",
    "doctor.render",
    "rich.table",
    "torch",
    "paramiko",
)
# What every command prints with (consoles, its output options, live progress, the host lists'
# flags) lives beside the renderers; the renderers themselves are what must not load.
LIGHT = (
    "doctor.render",
    "doctor.render.output",
    "doctor.render.progress",
    "doctor.render.hostlists",
)


def loaded_by(argv: list[str], cwd: Path) -> list[str]:
    code = (
        "import json, sys\n"
        "from doctor.cli.main import main\n"
        f"code = main({argv!r})\n"
        "print(json.dumps(sorted(sys.modules)), file=sys.stderr)\n"
        "sys.exit(code)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=cwd
    )
    assert proc.returncode == 0, proc.stderr
    modules: list[str] = json.loads(proc.stderr.strip().splitlines()[-1])
    return modules


def heavy(modules: list[str]) -> list[str]:
    return [m for m in modules if m.startswith(HEAVY) and m not in LIGHT]


def test_version_loads_no_pipeline_and_nothing_heavy(tmp_path: Path) -> None:
    modules = loaded_by(["--version"], tmp_path)
    assert heavy(modules) == []
    assert "doctor.pipeline.steps" not in modules and "doctor.facts.node" not in modules


def test_collect_on_this_node_loads_nothing_it_does_not_use(tmp_path: Path) -> None:
    modules = loaded_by(["collect", "--save-raw", str(tmp_path / "out")], tmp_path)
    assert "doctor.pipeline.steps" in modules  # it did run
    assert heavy(modules) == []
    assert list((tmp_path / "out").glob("*.json"))
