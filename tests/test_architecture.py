"""The shape of the tree: imports flow one way along the pipeline, no circles, small modules.

The layers follow the data (docs/architecture.md): core types, then what the user gave
(inventory, captures), the transports (which need no parser), the facts and the domain
reasoning over them (NIC replay, topology, log reading), the stages that run on nodes, the
checks that judge, the report, its renderers, the pipeline that owns the order, and the
command line on top. A module may import
its own layer and the ones below; an import made only for type annotations (under
``TYPE_CHECKING``) does not count, since it runs nothing.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "core",
        ("doctor.core.model", "doctor.core.errors", "doctor.core.units", "doctor.core.nodeset"),
    ),
    ("core", ("doctor.core.jsonable", "doctor.core.flag", "doctor.core.files")),
    ("inputs", ("doctor.nodes.inventory", "doctor.core.capture")),
    ("transport", ("doctor.nodes.transport",)),
    (
        "facts",
        ("doctor.facts", "doctor.facts.topo", "doctor.nic", "doctor.explain", "doctor.paste"),
    ),
    (
        "stages",
        (
            "doctor.stages.probe",
            "doctor.stages.collect",
            "doctor.stages",
            "doctor.stages.allreduce",
        ),
    ),
    (
        "checks",
        (
            "doctor.plugin",
            "doctor.judge.registry",
            "doctor.judge.runner",
            "doctor.judge.drift",
            "checks",
        ),
    ),
    ("report", ("doctor.judge.report",)),
    (
        "render",
        ("doctor.render", "doctor.render.redact", "doctor.render.output", "doctor.render.progress"),
    ),
    ("render", ("doctor.render.reference",)),
    (
        "pipeline",
        (
            "doctor.pipeline.request",
            "doctor.pipeline.steps",
            "doctor.nodes.connect",
            "doctor.pipeline.saved",
        ),
    ),
    ("pipeline", ("doctor.pipeline.baseline",)),
    ("pipeline", ("doctor.pipeline.prolog",)),
    ("pipeline", ("doctor.job",)),
    (
        "cli",
        (
            "doctor.cli.app",
            "doctor.cli.options",
            "doctor.cli.config",
            "doctor.cli.main",
            "doctor.__main__",
        ),
    ),
)
ORDER = list(dict.fromkeys(name for name, _ in LAYERS))
# The probe and the stacks agent ship to nodes as single files; the rest stays small.
LONG_MODULES_ALLOWED = {"doctor/stages/probe.py", "doctor/stages/stacks_agent.py"}
MAX_LINES = 450


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


def test_imports_flow_one_way() -> None:
    graph = imports(modules())
    upward = sorted(
        f"{m} -> {d}" for m, deps in graph.items() for d in deps if layer_of(d) > layer_of(m)
    )
    assert upward == []


def test_modules_stay_small() -> None:
    long = {
        str(p.relative_to(ROOT)): n
        for p in modules().values()
        if (n := len(p.read_text().splitlines())) > MAX_LINES
    }
    assert {k: v for k, v in long.items() if k not in LONG_MODULES_ALLOWED} == {}
