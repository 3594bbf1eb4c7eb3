"""The scoring harness (bench/explain_score.py): its labels, its classes, and how it judges an
answer."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.explain_classes import CLASSES, class_of
from bench.explain_score import (
    LABELS,
    Label,
    LabelError,
    Names,
    answer,
    culprit_verdict,
    false_culprits,
    read_labels,
    score,
)
from checks.hang import CODES as HANG_CODES
from doctor.explain.catalogue import catalogue
from tests.explain.fixtures import LOGS


def test_every_log_fixture_is_labelled() -> None:
    labelled = {label.name for label in read_labels()}
    fixtures = {str(p.relative_to(LOGS)) for p in LOGS.glob("*/*.log")}
    fixtures |= {str(p.relative_to(LOGS)) for p in LOGS.glob("hang/exits/*.log")}
    assert fixtures - labelled == set()


def test_every_code_explain_gives_has_a_class() -> None:
    codes = {s.code for s in catalogue()} | set(HANG_CODES) | {"explain.unrecognised"}
    assert {c for c in codes if class_of(c) == "?"} == set()
    assert {class_of(c) for c in codes} <= set(CLASSES)


def test_a_prefix_takes_whole_parts_only() -> None:
    assert class_of("gpu.xid.memory") == "gpu.health"
    assert class_of("gpu.xidx") == "?"
    assert class_of(None) == "none"


def _corpus(tmp_path: Path, *lines: dict[str, object]) -> Path:
    (tmp_path / "a.log").write_text("# header\nhello\n")
    (tmp_path / LABELS).write_text("".join(json.dumps(x) + "\n" for x in lines))
    return tmp_path


@pytest.mark.parametrize(
    "line, words",
    [
        ({"log": "b.log", "class": "hang", "origin": "format"}, "no such log"),
        ({"log": "a.log", "class": "slow", "origin": "format"}, "class 'slow'"),
        ({"log": "a.log", "class": "hang", "origin": "pasted"}, "origin"),
        ({"log": "a.log", "class": "hang", "origin": "format", "code": "cuda.oom"}, "gpu.memory"),
        ({"log": "a.log", "class": "hang"}, "required"),
        ({"log": "a.log", "class": "hang", "origin": "format", "culprit": [3]}, "ranks"),
    ],
)
def test_a_bad_label_is_named(tmp_path: Path, line: dict[str, object], words: str) -> None:
    with pytest.raises(LabelError, match=words):
        read_labels(_corpus(tmp_path, line))


def _label(culprit: Names | None, reported: Names | None = None, cls: str = "hang") -> Label:
    return Label("a.log", Path("a.log"), cls, None, culprit, reported or Names(), "format")


def _doc(*findings: tuple[str, str, list[str], list[int]], first: str | None = None) -> dict:
    return {
        "findings": [
            {"code": c, "severity": s, "nodes": n, "data": {"ranks": r} if r else {}}
            for c, s, n, r in findings
        ],
        "context": {"first_error": None if first is None else {"code": first}},
    }


def test_the_first_failure_is_the_json_first_error_else_the_first_fail() -> None:
    doc = _doc(
        ("hang.stalled", "warn", [], []),
        ("torch.nccl.comm_aborted", "fail", ["n1"], []),
        ("cuda.ecc", "fail", ["n2"], [3]),
        first="cuda.ecc",
    )
    got = answer(doc)
    assert (got["code"], got["ranks"], got["nodes"]) == ("cuda.ecc", [3], ["n2"])
    doc["context"]["first_error"] = None
    assert answer(doc)["code"] == "torch.nccl.comm_aborted"
    assert answer(_doc(("hang.one_rank", "warn", [], [])))["code"] == "hang.one_rank"
    assert answer(_doc(("nccl.ib.no_libibverbs", "info", ["n"], [])))["code"] is None


def test_the_culprit_is_right_wrong_or_missing() -> None:
    culprit = Names(frozenset({3}), frozenset({"node2"}))
    got = answer(_doc(("x.y", "fail", ["node2"], [3]), first="x.y"))
    assert culprit_verdict(_label(culprit), got) == "right"
    got = answer(_doc(("x.y", "fail", ["node1"], [3]), first="x.y"))
    assert culprit_verdict(_label(culprit), got) == "wrong"
    got = answer(_doc(("x.y", "fail", [], []), first="x.y"))
    assert culprit_verdict(_label(culprit), got) == "missing"
    # A label that gives only the node judges the node alone.
    got = answer(_doc(("x.y", "fail", ["node2"], [0, 1]), first="x.y"))
    assert culprit_verdict(_label(Names(nodes=frozenset({"node2"}))), got) == "right"
    assert culprit_verdict(_label(None), got) is None


def test_a_name_that_only_reported_is_a_false_culprit() -> None:
    label = _label(Names(frozenset({3})), Names(nodes=frozenset({"node1"})))
    got = answer(
        _doc(("a.b", "fail", ["node1"], [3]), ("c.d", "warn", [], [0]), ("e.f", "info", [], [5]))
    )
    assert false_culprits(label, got) == ["node node1 (a.b)", "rank 0 (c.d)"]
    healthy = _label(None, cls="none")
    assert false_culprits(healthy, answer(_doc(("a.b", "warn", ["n"], [])))) == ["node n (a.b)"]


def test_score_counts_the_confusion_and_healthy_fails() -> None:
    labels = [
        _label(None, cls="gpu.memory"),
        Label("b.log", Path("b.log"), "none", None, None, Names(), "captured"),
    ]
    got = {
        "a.log": answer(_doc(("cuda.oom", "fail", [], []), first="cuda.oom")),
        "b.log": answer(_doc(("net.unreachable", "fail", [], []), first="net.unreachable")),
    }
    scored = score(labels, got)
    assert scored["confusion"] == {"gpu.memory -> gpu.memory": 1, "none -> network.connect": 1}
    figures = scored["figures"]
    assert (figures["failed_class_right"], figures["failed"]) == (1, 1)
    assert (figures["healthy_with_fail"], figures["healthy"]) == (1, 1)
