"""Baselines: saved from a known-good node, loaded as ClusterFacts.baseline, judged against."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from builders import MIB, raw_capture

from doctor.cli.main import main
from doctor.core.capture import Capture
from doctor.core.errors import UsageError
from doctor.core.model import Finding
from doctor.facts.cluster import ClusterFacts
from doctor.facts.node import NodeFacts, parse_node
from doctor.judge.drift import drift_findings
from doctor.judge.runner import run_checks
from doctor.pipeline.baseline import load_baseline, save_baseline
from doctor.plugin import cluster_check
from doctor.render.json_report import validate


@cluster_check("test.kernel", "Test drift check on the kernel", codes={"test.kernel_drift": "x"})
def kernel_drift(cluster: ClusterFacts) -> Iterator[Finding]:
    def kernel(facts: NodeFacts) -> str:
        return facts.system.kernel  # type: ignore[union-attr]

    yield from drift_findings(cluster, kernel, code="test.kernel_drift", what="kernel")


def kernels(**by_node: str) -> ClusterFacts:
    return ClusterFacts(
        nodes={n: parse_node(n, Capture(raw_capture(n, kernel=k))) for n, k in by_node.items()}
    )


def test_saved_baseline_round_trips_and_is_named_by_hostname(tmp_path: Path) -> None:
    path = tmp_path / "good.json"
    save_baseline(path, raw_capture("golden01", kernel="6.1.0-21"))
    facts = load_baseline(path)
    assert facts.node == "golden01"
    assert facts.system.kernel == "6.1.0-21"  # type: ignore[union-attr]


def test_baseline_overrides_the_majority(tmp_path: Path) -> None:
    cluster = kernels(gpu01="6.1.0-18", gpu02="6.1.0-18", gpu03="6.1.0-21")
    (majority,) = run_checks([kernel_drift], cluster)[0].findings
    assert majority.nodes == ("gpu03",)
    path = tmp_path / "good.json"
    save_baseline(path, raw_capture("golden01", kernel="6.1.0-21"))
    cluster = dataclasses.replace(cluster, baseline=load_baseline(path))
    (against_baseline,) = run_checks([kernel_drift], cluster)[0].findings
    assert against_baseline.nodes == ("gpu01", "gpu02")
    assert "expected 6.1.0-21 (the baseline: gpu03)" in against_baseline.evidence


@pytest.mark.parametrize("content", [b"{not json", b'{"probe": 1}', b"[]"])
def test_a_bad_baseline_is_a_usage_error(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "bad.json"
    path.write_bytes(content)
    with pytest.raises(UsageError, match=r"--baseline .*bad\.json"):
        load_baseline(path)


def test_cli_saves_from_a_capture_and_analyze_uses_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    captures = tmp_path / "captures"
    captures.mkdir()
    (captures / "gpu01.json").write_text(json.dumps(raw_capture("gpu01", shm=4096 * MIB)))
    good = tmp_path / "good.json"
    good.write_text(json.dumps(raw_capture("golden01")))
    baseline = tmp_path / "baseline.json"
    assert main(["baseline", "save", str(baseline), "--from", str(good)]) == 0
    assert json.loads(baseline.read_text())["values"]["hostname"]["value"] == "golden01"
    capsys.readouterr()
    argv = ["analyze", str(captures), "--select", "shm", "-f", "json"]
    assert main([*argv, "--baseline", str(baseline)]) == 0
    doc = json.loads(capsys.readouterr().out)
    validate(doc)
    assert doc["baseline"]["node"] == "golden01"
    assert main(["analyze", str(captures), "--baseline", str(tmp_path / "nope.json")]) == 2
    assert "--baseline" in capsys.readouterr().err


def test_cli_saves_this_node_as_a_baseline(tmp_path: Path) -> None:
    path = tmp_path / "this.json"
    assert main(["--quiet", "baseline", "save", str(path), "--deadline", "10"]) == 0
    assert load_baseline(path).system.cpus > 0  # type: ignore[union-attr]
