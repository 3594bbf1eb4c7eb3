"""Score `doctor explain` on a corpus of labelled logs: the class of the first failure, the
culprit in the JSON, and no FAIL on a healthy log.

Run: ``python -m bench.explain_score [--before PATH] [--out bench/explain_score.json]`` from the
repository root. ``--before PATH`` scores another checkout's doctor (its PYTHONPATH: e.g. ``git
archive <commit> doctor checks | tar -x -C PATH``) on the same corpus and labels, side by side.

The corpus: every log named in a ``LABELS.jsonl`` under tests/fixtures/logs. Each line of that
file labels one log of its folder (a file, or a folder holding one job's logs: every rank's file)::

    {"log": "srun-kill.log", "class": "process.crash", "code": "slurm.task_killed",
     "culprit": {"ranks": [3], "nodes": ["node2"]},
     "reported_by": {"ranks": [0, 1], "nodes": ["node1"]},
     "origin": "bed", "note": "rank 3 SIGKILLed; the others lost it"}

- ``class`` (required): the class of the job's first real failure, one of
  bench/explain_classes.py's CLASSES; ``none`` for a healthy log.
- ``code`` (optional): the finding code that names it, where one does; scored exactly.
- ``culprit`` (optional; null or absent where the text shows none): the ranks and nodes the first
  failure's finding must name, in its ``data.ranks`` and ``nodes``.
- ``reported_by`` (optional): ranks and nodes that only reported the failure (a peer that lost
  the culprit, a launcher): named in any finding's ``nodes`` or ``data.ranks``, a false culprit.
- ``origin`` (required): ``captured`` (run here or on a lent GPU), ``bed`` (the test beds:
  tests/cluster's harness, the shared bed) or ``format`` (written from the emitter's source
  format strings, which the fixture's header cites).

Each log is read as a user's would be, minus the fixture's leading ``#`` header (it cites the
sources, format strings included): copied without it to a temp folder under its own name, then
explained in process (doctor.explain.scan.explain, then the JSON document `doctor explain
--format json` prints). The doctor's first failure is the JSON's ``context.first_error``; where
that is null, its first FAIL finding, else its first WARN (a hang's verdict, an unrecognised
error). Printed: the confusion matrix (expected class by row, the doctor's by column), the
culprit right, wrong or missing, FAILs and WARNs on healthy logs, false culprits, and each miss.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.explain_classes import CLASSES, class_of

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "tests" / "fixtures" / "logs"
LABELS = "LABELS.jsonl"
ORIGINS = ("captured", "bed", "format")
_KEYS = {"log", "class", "code", "culprit", "reported_by", "origin", "note"}


class LabelError(ValueError):
    """A LABELS.jsonl line is malformed; the message names the file and line."""


@dataclass(frozen=True)
class Names:
    """Ranks and nodes."""

    ranks: frozenset[int] = frozenset()
    nodes: frozenset[str] = frozenset()

    @classmethod
    def parse(cls, raw: object, where: str) -> Names:
        if not isinstance(raw, dict) or set(raw) - {"ranks", "nodes"}:
            raise LabelError(f"{where}: expected {{'ranks': [...], 'nodes': [...]}}, got {raw!r}")
        ranks, nodes = raw.get("ranks", []), raw.get("nodes", [])
        if not all(isinstance(r, int) for r in ranks) or not all(isinstance(n, str) for n in nodes):
            raise LabelError(f"{where}: ranks are integers, nodes strings")
        return cls(frozenset(ranks), frozenset(nodes))

    def __bool__(self) -> bool:
        return bool(self.ranks or self.nodes)

    def names(self) -> set[str]:
        return {f"rank {r}" for r in self.ranks} | {f"node {n}" for n in self.nodes}


@dataclass(frozen=True)
class Label:
    """What a corpus log is: its name (relative to the corpus), its first failure's class, the
    code where one names it, the culprit and those that only reported, and where it came from."""

    name: str
    path: Path
    cls: str
    code: str | None
    culprit: Names | None
    reported_by: Names
    origin: str

    @property
    def healthy(self) -> bool:
        return self.cls == "none"


def read_labels(corpus: Path = CORPUS) -> list[Label]:
    """Every labelled log under ``corpus``, by name; a malformed line raises LabelError."""
    out = []
    for labels in sorted(corpus.rglob(LABELS)):
        for n, line in enumerate(labels.read_text().splitlines(), 1):
            if line.strip():
                out.append(_label(labels, n, line, corpus))
    names = [label.name for label in out]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise LabelError(f"labelled twice: {', '.join(twice)}")
    return sorted(out, key=lambda label: label.name)


def _label(labels: Path, n: int, line: str, corpus: Path) -> Label:
    where = f"{labels.relative_to(corpus)}:{n}"
    try:
        raw = json.loads(line)
    except json.JSONDecodeError as exc:
        raise LabelError(f"{where}: {exc}") from None
    if not isinstance(raw, dict) or set(raw) - _KEYS or not {"log", "class", "origin"} <= set(raw):
        raise LabelError(f"{where}: keys are {sorted(_KEYS)}; log, class and origin required")
    path = labels.parent / raw["log"]
    if not path.exists():
        raise LabelError(f"{where}: no such log {raw['log']}")
    if raw["class"] not in CLASSES:
        raise LabelError(f"{where}: class {raw['class']!r} is none of {sorted(CLASSES)}")
    if raw["origin"] not in ORIGINS:
        raise LabelError(f"{where}: origin {raw['origin']!r} is none of {ORIGINS}")
    code = raw.get("code")
    if code is not None and class_of(code) != raw["class"]:
        raise LabelError(f"{where}: code {code} is of class {class_of(code)}, not {raw['class']}")
    culprit = raw.get("culprit")
    return Label(
        name=str(path.relative_to(corpus)),
        path=path,
        cls=raw["class"],
        code=code,
        culprit=None if culprit is None else Names.parse(culprit, where),
        reported_by=Names.parse(raw.get("reported_by", {}), where),
        origin=raw["origin"],
    )


def body(data: bytes) -> bytes:
    """A fixture without its leading '#' header (tests/explain/fixtures.py reads them so too)."""
    lines = data.split(b"\n")
    start = 0
    while start < len(lines) and lines[start].startswith(b"#"):
        start += 1
    return b"\n".join(lines[start:])


def _copy(path: Path, into: Path) -> Path:
    """The log (a file, or a folder of them) under ``into``, each file without its header."""
    out = into / path.name
    if path.is_dir():
        for f in sorted(p for p in path.rglob("*") if p.is_file()):
            target = out / f.relative_to(path)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(body(f.read_bytes()))
    else:
        out.write_bytes(body(path.read_bytes()))
    return out


def explain_doc(path: Path) -> dict[str, Any]:
    """The JSON document `doctor explain --format json` prints for the log, without its header."""
    from doctor.explain.scan import explain
    from doctor.explain.source import expand
    from doctor.render.explain import explain_json

    with tempfile.TemporaryDirectory(prefix="explain-score-") as tmp:
        return explain_json(explain(expand([str(_copy(path, Path(tmp)))])))


def answer(doc: dict[str, Any]) -> dict[str, Any]:
    """What the doctor answered: its first failure (code, culprit) and every name it blamed."""
    findings = [f for f in doc["findings"] if f["severity"] in ("fail", "warn")]
    first = doc["context"].get("first_error")
    chosen = None
    if first is not None:
        chosen = next((f for f in findings if f["code"] == first["code"]), None)
    if chosen is None:
        chosen = next((f for f in findings if f["severity"] == "fail"), None)
    if chosen is None:
        chosen = next(iter(findings), None)
    return {
        "code": None if chosen is None else chosen["code"],
        "ranks": [] if chosen is None else sorted(chosen["data"].get("ranks", [])),
        "nodes": [] if chosen is None else sorted(chosen["nodes"]),
        "fails": sum(f["severity"] == "fail" for f in findings),
        "warns": sum(f["severity"] == "warn" for f in findings),
        # Every name a FAIL or WARN gives as a cause, by the finding that gives it.
        "blamed": sorted(
            {(f["code"], f"rank {r}") for f in findings for r in f["data"].get("ranks", [])}
            | {(f["code"], f"node {n}") for f in findings for n in f["nodes"]}
        ),
    }


def answers(labels: list[Label]) -> dict[str, dict[str, Any]]:
    return {label.name: answer(explain_doc(label.path)) for label in labels}


def answers_of(checkout: Path, labels: list[Label]) -> dict[str, dict[str, Any]]:
    """The answers of another checkout's doctor, on the same logs (this module, run there)."""
    env = dict(os.environ, PYTHONPATH=f"{checkout.resolve()}{os.pathsep}{ROOT}")
    done = subprocess.run(
        [sys.executable, "-m", "bench.explain_score", "--answers"],
        cwd=checkout.resolve(),  # `-m` puts the working folder first on the path: the checkout's
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    got: dict[str, dict[str, Any]] = json.loads(done.stdout)
    missing = {label.name for label in labels} - set(got)
    if missing:
        raise RuntimeError(f"{checkout} answered no {sorted(missing)}")
    return got


def culprit_verdict(label: Label, got: dict[str, Any]) -> str | None:
    """right, wrong or missing: the first failure's finding against the labelled culprit (None:
    the label names none). A label that gives only ranks (or only nodes) judges those alone."""
    if not label.culprit:
        return None
    named = Names(frozenset(got["ranks"]), frozenset(got["nodes"]))
    if not named:
        return "missing"
    if _outside(label.culprit, named.names()):
        return "wrong"
    return "right" if named.names() & label.culprit.names() else "missing"


def _outside(culprit: Names, names: set[str]) -> set[str]:
    """The names that are not the culprit, of the kinds (ranks, nodes) the label gives."""
    judged = {"rank": bool(culprit.ranks), "node": bool(culprit.nodes)}
    return {n for n in names if judged[n.split(" ", 1)[0]] and n not in culprit.names()}


def false_culprits(label: Label, got: dict[str, Any]) -> list[str]:
    """Names blamed that only reported: a labelled reporter, anything on a healthy log, or
    anything but the culprit (of the kinds it gives) where the label names one."""
    reporters = label.reported_by.names()
    out = []
    for code, name in got["blamed"]:
        other = bool(label.culprit and _outside(label.culprit, {name}))
        if label.healthy or name in reporters or other:
            out.append(f"{name} ({code})")
    return out


def score(labels: list[Label], got: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The figures, the confusion matrix and each log's row."""
    rows = []
    confusion: Counter[tuple[str, str]] = Counter()
    for label in labels:
        mine = got[label.name]
        cls = class_of(mine["code"])
        confusion[(label.cls, cls)] += 1
        rows.append(
            {
                "log": label.name,
                "origin": label.origin,
                "expected": label.cls,
                "expected_code": label.code,
                "got": cls,
                "got_code": mine["code"],
                "class_right": cls == label.cls,
                "code_right": None if label.code is None else mine["code"] == label.code,
                "culprit": culprit_verdict(label, mine),
                "named": {"ranks": mine["ranks"], "nodes": mine["nodes"]},
                "false_culprits": false_culprits(label, mine),
                "fails": mine["fails"],
                "warns": mine["warns"],
            }
        )
    failed = [r for r in rows if r["expected"] != "none"]
    healthy = [r for r in rows if r["expected"] == "none"]
    coded = [r for r in rows if r["code_right"] is not None]
    culprits = Counter(r["culprit"] for r in rows if r["culprit"] is not None)
    return {
        "figures": {
            "logs": len(rows),
            "failed": len(failed),
            "failed_class_right": sum(r["class_right"] for r in failed),
            "failed_silent": sum(r["got"] == "none" for r in failed),
            "coded": len(coded),
            "code_right": sum(bool(r["code_right"]) for r in coded),
            "culprit_right": culprits["right"],
            "culprit_wrong": culprits["wrong"],
            "culprit_missing": culprits["missing"],
            "healthy": len(healthy),
            "healthy_with_fail": sum(r["fails"] > 0 for r in healthy),
            "healthy_with_warn": sum(r["warns"] > 0 for r in healthy),
            "logs_with_false_culprit": sum(bool(r["false_culprits"]) for r in rows),
        },
        "confusion": {f"{e} -> {g}": n for (e, g), n in sorted(confusion.items())},
        "rows": rows,
    }


def matrix(scored: dict[str, Any]) -> list[str]:
    """The confusion matrix as text: expected by row, got by column (columns by index)."""
    cells = {tuple(k.split(" -> ")): n for k, n in scored["confusion"].items()}
    expected = sorted({e for e, _ in cells})
    got = sorted({g for _, g in cells})
    width = max(len(c) for c in expected + got)
    out = ["columns: " + "  ".join(f"{i}={g}" for i, g in enumerate(got))]
    out.append(f"{'expected':<{width}} " + " ".join(f"{i:>3}" for i in range(len(got))))
    for e in expected:
        row = " ".join(f"{cells.get((e, g), 0) or '.':>3}" for g in got)
        out.append(f"{e:<{width}} {row}")
    return out


FIGURES = (
    ("failed logs: first failure's class right", "failed_class_right", "failed"),
    ("failed logs: nothing said", "failed_silent", "failed"),
    ("labelled codes right", "code_right", "coded"),
    ("culprit in the JSON: right", "culprit_right", None),
    ("culprit in the JSON: wrong", "culprit_wrong", None),
    ("culprit in the JSON: missing", "culprit_missing", None),
    ("healthy logs with a FAIL", "healthy_with_fail", "healthy"),
    ("healthy logs with a WARN", "healthy_with_warn", "healthy"),
    ("logs naming a rank/node that only reported", "logs_with_false_culprit", "logs"),
)


def _cell(figures: dict[str, int], key: str, of: str | None) -> str:
    return f"{figures[key]}/{figures[of]}" if of else str(figures[key])


def report(now: dict[str, Any], before: dict[str, Any] | None) -> list[str]:
    """The figures (before beside now), the confusion matrices and the misses, as text."""
    out = []
    for title, scored in (("before", before), ("now", now)):
        if scored is not None:
            out += [f"confusion matrix, {title}:", *matrix(scored), ""]
    head = f"{'':<46}{'before':>10}{'now':>10}" if before else f"{'':<46}{'now':>10}"
    out.append(head)
    for text, key, of in FIGURES:
        cells = [_cell(s["figures"], key, of) for s in (before, now) if s is not None]
        out.append(f"{text:<46}" + "".join(f"{c:>10}" for c in cells))
    out.append("")
    for row in now["rows"]:
        problems = []
        if not row["class_right"]:
            problems.append(f"class {row['got']} ({row['got_code']}), expected {row['expected']}")
        if row["culprit"] in ("wrong", "missing"):
            problems.append(f"culprit {row['culprit']}: named {row['named']}")
        if row["false_culprits"]:
            problems.append("blamed " + ", ".join(row["false_culprits"]))
        if row["expected"] == "none" and row["fails"]:
            problems.append(f"{row['fails']} FAIL on a healthy log")
        if problems:
            out.append(f"  {row['log']}: " + "; ".join(problems))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--before", type=Path, help="another checkout, scored beside this one")
    parser.add_argument("--out", type=Path, default=Path(__file__).with_suffix(".json"))
    parser.add_argument("--answers", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    labels = read_labels()
    if args.answers:  # run by answers_of, under another checkout's PYTHONPATH
        print(json.dumps(answers(labels)))
        return
    now = score(labels, answers(labels))
    before = None if args.before is None else score(labels, answers_of(args.before, labels))
    print("\n".join(report(now, before)))
    origins = Counter(label.origin for label in labels)
    args.out.write_text(
        json.dumps(
            {
                "corpus": {"logs": len(labels), "by_origin": dict(sorted(origins.items()))},
                "before": None if before is None else {"checkout": str(args.before), **before},
                "now": now,
            },
            indent=2,
        )
        + "\n"
    )


if __name__ == "__main__":
    main()
