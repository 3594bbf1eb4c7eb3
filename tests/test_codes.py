"""Every finding code any module can put in a report is declared by a registered check, so
`doctor checks list`, the generated reference and --select/--exclude reach all of them."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from checks.allreduce import RANK_SOURCES
from doctor.explain.catalogue import catalogue
from doctor.judge.registry import load_checks

ROOT = Path(__file__).resolve().parent.parent
SOURCES = sorted([*(ROOT / "doctor").rglob("*.py"), *(ROOT / "checks").rglob("*.py")])


def declared() -> set[str]:
    return {code for spec in load_checks() for code in spec.codes}


def _patterns(node: ast.expr) -> list[str]:
    """The code(s) an expression can evaluate to, as regexes (f-string holes match a word)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [re.escape(node.value)]
    if isinstance(node, ast.JoinedStr):
        parts = [
            re.escape(v.value) if isinstance(v, ast.Constant) else r"[\w]+" for v in node.values
        ]
        return ["".join(parts)]
    if isinstance(node, ast.IfExp):
        return _patterns(node.body) + _patterns(node.orelse)
    return []  # a variable: the call that gives it a value is found on its own


def _assigned(function: ast.AST) -> dict[str, list[ast.expr]]:
    """Within a function: each local name and every value assigned to it."""
    values: dict[str, list[ast.expr]] = {}
    for node in ast.walk(function):
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    values.setdefault(target.id, []).append(node.value)
    return values


def emitted() -> dict[str, str]:
    """Every code given to Finding(...), to a NodeFailure (node.reach reports each as a finding
    of its code) or to a helper's ``code=``, with where it stands; a code held in a local
    variable counts by each value assigned to it."""
    found: dict[str, str] = {}
    for path in SOURCES:
        tree = ast.parse(path.read_text())
        functions = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)]
        for function in functions:
            local = _assigned(function)
            for node in ast.walk(function):
                if not isinstance(node, ast.Call):
                    continue
                args = [k.value for k in node.keywords if k.arg == "code"]
                name = getattr(node.func, "id", getattr(node.func, "attr", ""))
                # A node that could not be probed becomes a finding with its failure's code.
                position = {"Finding": 0, "NodeFailure": 1, "_fail": 1}.get(name)
                if position is not None and len(node.args) > position:
                    args.append(node.args[position])
                for arg in args:
                    values = local.get(arg.id, []) if isinstance(arg, ast.Name) else [arg]
                    for value in values:
                        for pattern in _patterns(value):
                            found[pattern] = f"{path.relative_to(ROOT)}:{node.lineno}"
    return found


def test_every_code_a_module_emits_is_declared() -> None:
    codes = declared()
    found = emitted()
    assert len(found) > 80  # the scan sees the checks' codes, not a handful
    undeclared = {
        where: pattern
        for pattern, where in found.items()
        if not any(re.fullmatch(pattern, code) for code in codes)
    }
    assert undeclared == {}


def test_the_log_diagnosis_codes_a_rank_can_produce_are_declared() -> None:
    rank = {s.code for s in catalogue() if s.source in RANK_SOURCES}
    assert rank and rank <= declared()


def test_findings_are_made_only_by_checks_and_the_log_diagnosis() -> None:
    makers = {
        str(path.relative_to(ROOT))
        for path in SOURCES
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
        if node.func.id == "Finding"
    }
    outside = {m for m in makers if not m.startswith("checks/")}
    # drift.py is the group-by helper checks call; the explain engine's explanation turns
    # signatures into findings (declared by the allreduce check for what ranks print).
    assert outside == {"doctor/judge/drift.py", "doctor/explain/explanation.py"}
