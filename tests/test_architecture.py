"""The shape of the tree: imports flow one way along the layers, no circles, small modules,
folders a newcomer can read, and vendors that do not lean on each other.

The layers follow the data (docs/architecture.md): the core model; the nodes (which ones, how to
reach them); the facts read from captures, by area; what follows from the facts (the NIC plan,
a log's explanation, pasted output read as captures); the stages that run on nodes; the checks
that judge and the report they fill; its renderers; the pipeline that owns the order; the job
launched behind it; the command line on top. A module may import its own layer and the ones
below; an import made only for type annotations (under ``TYPE_CHECKING``) does not count, since
it runs nothing. The imports that still run up a layer are listed, each with its reason.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("core", ("doctor.core",)),
    ("nodes", ("doctor.nodes",)),
    ("facts", ("doctor.facts",)),
    ("derived", ("doctor.nic", "doctor.explain", "doctor.paste")),
    ("stages", ("doctor.stages",)),
    ("judge", ("doctor.plugin", "doctor.judge", "checks")),
    ("render", ("doctor.render",)),
    ("pipeline", ("doctor.pipeline",)),
    ("job", ("doctor.job",)),
    ("cli", ("doctor.cli", "doctor.__main__")),
)
ORDER = list(dict.fromkeys(name for name, _ in LAYERS))
# Imports that run up a layer, each with why it stays (at most two: the rest were moved to
# where their logic belongs: the NCCL log reader a pasted log needs is under facts/nccl/, the
# peeling layer every reader shares is core/logline.py).
UPWARD_ALLOWED: set[str] = set()
MAX_UPWARD = 2
# The probe and the stacks agent ship to nodes as single files; the rest stays small.
LONG_MODULES_ALLOWED = {"doctor/stages/probe.py", "doctor/stages/stacks_agent.py"}
MAX_LINES = 450
MAX_CLI_LINES = 350  # a module of the command line: one group of commands
MAX_MODULES_PER_FOLDER = 20
# A vendor's modules: a folder or module named after it (doctor/facts/amd/, doctor/paste/amd.py,
# checks/amd.py). Adding a vendor touches no other vendor's modules.
VENDORS = ("nvidia", "amd")


def modules() -> dict[str, Path]:
    files = [*(ROOT / "doctor").rglob("*.py"), *(ROOT / "checks").rglob("*.py")]
    out = {}
    for f in files:
        parts = f.relative_to(ROOT).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = f
    return out


def layer_of(module: str) -> int:
    if module == "doctor":  # the package itself holds only the version
        return 0
    best, rank = -1, -1
    for name, prefixes in LAYERS:
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > best:
                best, rank = len(prefix), ORDER.index(name)
    assert rank >= 0, f"{module} is in no layer: add it to LAYERS"
    return rank


def _type_checking_lines(tree: ast.Module) -> set[int]:
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.body:
                lines.update(range(child.lineno, (child.end_lineno or child.lineno) + 1))
    return lines


def imports(known: dict[str, Path]) -> dict[str, set[str]]:
    """Module -> the project modules it imports at run time (lazy imports in functions too)."""
    graph: dict[str, set[str]] = {}
    for module, path in known.items():
        tree = ast.parse(path.read_text())
        typing_only = _type_checking_lines(tree)
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        deps: set[str] = set()
        for node in ast.walk(tree):
            if getattr(node, "lineno", 0) in typing_only:
                continue
            if isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*parts, base] if base else parts)
                for alias in node.names:
                    for candidate in (f"{base}.{alias.name}", base):
                        if candidate in known and candidate != module:
                            deps.add(candidate)
                            break
            elif isinstance(node, ast.Import):
                deps |= {a.name for a in node.names if a.name in known and a.name != module}
        graph[module] = deps
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_no_import_circles() -> None:
    assert cycles(imports(modules())) == []


def upward_imports() -> list[str]:
    graph = imports(modules())
    return sorted(
        f"{m} -> {d}" for m, deps in graph.items() for d in deps if layer_of(d) > layer_of(m)
    )


def test_imports_flow_one_way() -> None:
    assert upward_imports() == sorted(UPWARD_ALLOWED)
    assert len(UPWARD_ALLOWED) <= MAX_UPWARD


def test_modules_stay_small() -> None:
    long = {
        str(p.relative_to(ROOT)): n
        for p in modules().values()
        if (n := len(p.read_text().splitlines())) > MAX_LINES
    }
    assert {k: v for k, v in long.items() if k not in LONG_MODULES_ALLOWED} == {}


def folders() -> dict[Path, list[str]]:
    """Each folder of doctor/ and checks/ -> the module names directly in it."""
    out: dict[Path, list[str]] = {}
    for path in modules().values():
        out.setdefault(path.parent.relative_to(ROOT), []).append(path.stem)
    return out


def test_folders_stay_small() -> None:
    crowded = {str(f): len(names) for f, names in folders().items()}
    assert {f: n for f, n in crowded.items() if n > MAX_MODULES_PER_FOLDER} == {}


def _one_letter_apart(a: str, b: str) -> bool:
    if a == b or abs(len(a) - len(b)) > 1:
        return False
    if len(a) == len(b):
        return sum(x != y for x, y in zip(a, b, strict=True)) == 1
    short, long = sorted((a, b), key=len)
    return any(long[:i] + long[i + 1 :] == short for i in range(len(long)))


def _plural(a: str, b: str) -> bool:
    return b in (a + "s", a + "es") or a in (b + "s", b + "es")


def test_no_two_modules_of_a_folder_look_alike() -> None:
    """capture.py beside captures.py, flag.py beside flags.py: a newcomer cannot tell them apart."""
    alike = [
        f"{folder}: {a}.py / {b}.py"
        for folder, names in folders().items()
        for a in names
        for b in names
        if a < b and "__init__" not in (a, b) and (_plural(a, b) or _one_letter_apart(a, b))
    ]
    assert alike == []


def test_command_line_modules_hold_one_group_each() -> None:
    long = {
        str(p.relative_to(ROOT)): n
        for name, p in modules().items()
        if name.startswith("doctor.cli") and (n := len(p.read_text().splitlines())) > MAX_CLI_LINES
    }
    assert long == {}


def vendor_of(module: str) -> str | None:
    found = {v for part in module.split(".") for v in VENDORS if re.fullmatch(rf"{v}(_\w+)?", part)}
    assert len(found) <= 1, f"{module} belongs to several vendors"
    return next(iter(found), None)


def test_a_vendor_imports_no_other_vendor() -> None:
    """Adding a vendor touches no other vendor's modules: what vendors share (a GPU's shape,
    doctor/facts/gpu.py) lives outside every vendor's folder."""
    graph = imports(modules())
    crossing = sorted(
        f"{m} -> {d}"
        for m, deps in graph.items()
        for d in deps
        if vendor_of(m) and vendor_of(d) and vendor_of(m) != vendor_of(d)
    )
    assert crossing == []
    assert {vendor_of(m) for m in graph} >= set(VENDORS)  # each vendor is still found
