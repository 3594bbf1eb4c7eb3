"""tests/run.py, the one command that runs the tests on a fresh Debian machine."""

from __future__ import annotations

import ast
import importlib.util
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_a_prepared_machine_goes_straight_to_the_tests() -> None:
    # This machine was prepared by that command: nothing is missing, and it names the Python.
    proc = subprocess.run(
        [sys.executable, str(ROOT / "tests" / "run.py"), "--check"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == f"{sys.executable}\n"
    assert proc.stderr == ""  # no apt-get, no pip install


def test_ci_and_the_readme_use_that_command() -> None:
    assert "python3 tests/run.py -q" in (ROOT / ".ci" / "run").read_text()
    assert "python3 tests/run.py -q" in (ROOT / "README.md").read_text()


def test_a_python_without_the_packages_is_told_everything_missing(tmp_path: Path) -> None:
    # A fresh virtualenv has pip and nothing else: --check lists every missing install, one a
    # line, and runs none of them.
    subprocess.run([sys.executable, "-m", "venv", str(tmp_path / "venv")], check=True, timeout=120)
    python = tmp_path / "venv" / "bin" / "python"
    proc = subprocess.run(
        [str(python), str(ROOT / "tests" / "run.py"), "--check"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert (proc.returncode, proc.stdout) == (1, "")
    assert proc.stderr.splitlines() == [
        "tests/run.py: missing: torch 2.13.0",
        "tests/run.py: missing: this checkout with its test extras",
    ]


# Calls that run their first argument as a command line (subprocess's, the harness's ``sh`` and a
# node's or namespace's ``run``, a transport's or launcher's ``execute``/``start``).
RUNNERS = {"run", "Popen", "check_output", "check_call", "call", "sh", "execute", "start"}
PYTHONS = {"python", "python3"}


def _programs_in(tree: ast.AST) -> set[str]:
    """The programs named literally as a command line's first word in one test module: the first
    element of an argv list, ``sh("ip", ...)``, the word after ``ip netns exec <ns>``, and the
    first word of each string a loop feeds to ``<string>.split()`` as an argv."""
    loops: dict[str, list[str]] = {}  # loop variable -> the string constants it runs over
    for node in ast.walk(tree):
        looped = isinstance(node, (ast.For, ast.comprehension))
        if (
            looped
            and isinstance(node.target, ast.Name)
            and isinstance(node.iter, ast.Tuple | ast.List)
        ):
            texts = [e.value for e in node.iter.elts if isinstance(e, ast.Constant)]
            loops[node.target.id] = [t for t in texts if isinstance(t, str)]
    found: set[str] = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or not node.args:
            continue
        name = getattr(node.func, "attr", getattr(node.func, "id", ""))
        if name not in RUNNERS:
            continue
        first = node.args[0]
        words: list[str] = []
        if isinstance(first, (ast.List, ast.Tuple)):
            words = [e.value for e in first.elts if isinstance(e, ast.Constant)]
            words = [w for w in words if isinstance(w, str)]
            if not (first.elts and isinstance(first.elts[0], ast.Constant)):
                words = []
        elif isinstance(first, ast.Constant) and isinstance(first.value, str) and name == "sh":
            words = [a.value for a in node.args if isinstance(a, ast.Constant)]
        elif (
            isinstance(first, ast.Call)
            and getattr(first.func, "attr", "") == "split"
            and isinstance(first.func, ast.Attribute)
            and isinstance(first.func.value, ast.Name)
        ):
            found.update(t.split()[0] for t in loops.get(first.func.value.id, []) if t.split())
        if words:
            found.add(words[0])
            if words[:3] == ["ip", "netns", "exec"] and len(words) > 4:
                found.add(words[4])
    return {Path(p).name for p in found if not p.startswith("-")}


def test_every_program_a_test_names_is_one_run_py_installs() -> None:
    # A test that runs a program tests/run.py does not install passes only on machines that
    # happen to have it (busybox and ifconfig did, until a bare Debian root said otherwise).
    spec = importlib.util.spec_from_file_location("run_script", ROOT / "tests" / "run.py")
    assert spec is not None and spec.loader is not None
    run_script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(run_script)
    named: dict[str, set[str]] = {}
    for path in sorted((ROOT / "tests").rglob("*.py")):
        for program in _programs_in(ast.parse(path.read_text(), str(path))):
            named.setdefault(program, set()).add(str(path.relative_to(ROOT)))
    unknown = {p: sorted(w) for p, w in named.items() if p not in run_script.PROGRAMS}
    assert set(unknown) <= PYTHONS, f"not in tests/run.py's PROGRAMS: {unknown}"
    assert {"busybox", "ifconfig", "ip", "tc", "ssh-keygen", "pgrep"} <= set(named), named
