"""RDMA beyond port state, from pasted ibstat, ibv_devinfo -v, perfquery and sysfs lines: rates
and widths against the node's other ports, the GPU profile and the run's threshold; counters
and flaps against rdma-core's thresholds. Healthy outputs stay clean."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from doctor.cli.main import main
from doctor.core.model import Finding, Missing
from doctor.facts.cluster import ClusterFacts
from doctor.facts.network.rdma import RdmaFacts, parse_rdma
from doctor.facts.node import parse_node
from doctor.judge.registry import load_checks
from doctor.judge.runner import run_checks
from doctor.pipeline.steps import derive
from tests.paste.pastekit import pasted, read_text

H100_XML = Path(__file__).parent.parent / "fixtures" / "gpu" / "h100" / "nvidia-smi-q.xml"
RDMA_CHECKS = ("rdma.link", "rdma.ports", "rdma.counters")


def findings(text: str) -> list[Finding]:
    """The rdma link checks' findings on a paste, as `doctor analyze` derives its facts."""
    node = parse_node("n1", read_text(text))
    nodes = derive({"n1": node}, Missing("a paste", "unsupported"))
    outcomes = run_checks(load_checks(), ClusterFacts(nodes=nodes))
    return [f for o in outcomes for f in o.findings if o.check in RDMA_CHECKS]


def rdma_of(text: str) -> RdmaFacts:
    rdma = parse_rdma(read_text(text))
    assert isinstance(rdma, RdmaFacts), rdma
    return rdma


def test_a_healthy_ndr_node_is_clean() -> None:
    text = pasted("written-ibstat-ndr.txt")
    rdma = rdma_of(text)
    ports = [
        (h.name, h.hca_type, p.rate_gbps, p.lid, p.link_layer) for h in rdma.hcas for p in h.ports
    ]
    assert ports[0] == ("mlx5_0", "MT4129", 400.0, 100, "InfiniBand")
    assert ports[8] == ("mlx5_8", "MT4129", 200.0, 0, "Ethernet")
    assert findings(text) == []
    # The RoCE port's GIDs are not shown by ibstat: no "no RoCE v2 GID" for it.
    node = parse_node("n1", read_text(text))
    outcomes = run_checks(load_checks(), ClusterFacts(nodes={"n1": node}))
    assert not [f for o in outcomes for f in o.findings]


def test_a_port_trained_down_is_named_against_its_siblings() -> None:
    found = findings(pasted("written-ibstat-ndr-degraded.txt"))
    assert [(f.code, f.summary.split(" runs")[0]) for f in found] == [
        ("rdma.rate.degraded", "mlx5_3 port 1")
    ]
    assert found[0].data == {"threshold": "relative", "rate": 200.0, "expected": 400.0}
    assert "relative" in found[0].evidence[-1]
    # mlx5_6 is down (rdma.state names it): its "Rate: 10" is not a degraded rate.


def test_of_two_ports_the_one_below_its_sibling_is_named() -> None:
    """Two ports, no rate shared by two: a port never trains above its link, so the slower of
    two ports of one model is the one trained down (a tie goes to the faster rate)."""
    text = pasted("written-ibstat-ndr.txt")
    blocks = text.split("CA '")
    two = "CA '".join(blocks[:3])  # mlx5_0 and mlx5_1
    assert [h.name for h in rdma_of(two).hcas] == ["mlx5_0", "mlx5_1"]
    assert findings(two) == []
    slow = "CA '".join([blocks[0], blocks[1], blocks[2].replace("Rate: 400", "Rate: 200")])
    (found,) = findings(slow)
    assert found.code == "rdma.rate.degraded"
    assert found.summary.startswith("mlx5_1 port 1 runs at 200 Gb/s, below the 400 Gb/s")
    three = "CA '".join([*blocks[:3], blocks[3].replace("Rate: 400", "Rate: 100")])
    assert {f.summary.split(" runs")[0] for f in findings(three)} == {"mlx5_2 port 1"}


def test_ibv_devinfo_gives_width_and_generation_and_a_narrow_port_is_named() -> None:
    text = pasted("written-ibv_devinfo-v-ndr.txt")
    rdma = rdma_of(text)
    rates = {h.name: (h.ports[0].rate_gbps, h.ports[0].width, h.ports[0].speed) for h in rdma.hcas}
    assert rates["mlx5_0"] == (400.0, 4, "NDR")
    assert rates["mlx5_3"] == (200.0, 2, "NDR")
    assert rates["mlx5_4"] == (200.0, 4, "HDR")  # RoCE at 200 GbE, as the kernel reports it
    found = findings(text)
    assert [f.code for f in found] == ["rdma.width.degraded"]
    assert "2X of 4X" in found[0].summary
    # The ConnectX-7 model comes from vendor_part_id, as sysfs's hca_type names it.
    assert {h.hca_type for h in rdma.hcas} == {"MT4129"}


def test_perfquery_counters_land_on_the_port_with_their_lid() -> None:
    text = pasted("written-ibstat-ndr-degraded.txt") + pasted("written-perfquery.txt")
    rdma = rdma_of(text)
    counted = {h.name: h.ports[0].counters for h in rdma.hcas if h.ports[0].counters}
    assert set(counted) == {"mlx5_1", "mlx5_3"}  # LIDs 101 and 103
    bad = counted["mlx5_3"]
    assert bad is not None and bad.source == "perfquery"
    assert (bad.values["symbol_error"], bad.values["link_downed"]) == (4713, 14)
    # The extended block's 64-bit data counter wins over the saturated 32-bit one.
    assert bad.values["port_xmit_data"] == 98172662119823
    codes = {(f.code, f.summary.split(":")[0].split(" runs")[0]) for f in findings(text)}
    assert codes == {
        ("rdma.rate.degraded", "mlx5_3 port 1"),
        ("rdma.link.flapping", "mlx5_3 port 1"),
        ("rdma.counters.errors", "mlx5_3 port 1"),
    }
    errors = next(f for f in findings(text) if f.code == "rdma.counters.errors")
    assert "symbol_error 4713 (> 10)" in errors.summary and "port_rcv_errors 231" in errors.summary
    assert "link_error_recovery" not in errors.summary  # 3: under 10


def test_perfquery_alone_is_judged_on_a_port_named_by_its_lid() -> None:
    text = pasted("written-perfquery.txt")
    rdma = rdma_of(text)
    assert [h.name for h in rdma.hcas] == ["lid 101", "lid 103"]
    found = findings(text)
    assert {f.code for f in found} == {"rdma.link.flapping", "rdma.counters.errors"}
    assert all(f.summary.startswith("lid 103 port 1") for f in found)


def test_sysfs_lines_are_the_files_they_name() -> None:
    base = "/sys/class/infiniband/mlx5_2/ports/1"
    text = (
        f"{base}/state:4: ACTIVE\n{base}/rate:400 Gb/sec (4X NDR)\n"
        f"{base}/counters/link_downed:37\n{base}/counters/symbol_error:0\n"
        f"{base}/hw_counters/rnr_nak_retry_err:0\n"
    )
    rdma = rdma_of(text)
    port = rdma.hcas[0].ports[0]
    assert (port.rate_gbps, port.width, port.speed, port.active) == (400.0, 4, "NDR", True)
    assert port.counters is not None and port.counters.values["hw:rnr_nak_retry_err"] == 0
    assert [f.code for f in findings(text)] == ["rdma.link.flapping"]


def test_the_gpu_profile_sets_the_rate_and_the_run_can_set_its_own(
    thresholds: Callable[[dict[str, Any]], None],
) -> None:
    ibstat = pasted("written-ibstat-ndr.txt").replace("Rate: 400", "Rate: 200")
    text = ibstat + H100_XML.read_text()
    found = findings(text)
    below = [f for f in found if f.code == "rdma.rate.below_profile"]
    assert len(below) == 8 and below[0].data["threshold"] == "absolute"
    assert "H100 SXM profile" in below[0].evidence[-1]
    # A paste may show some HCAs only: the count of ports is judged on probed nodes alone.
    assert not [f for f in found if f.code == "rdma.ports.missing"]
    # Without the GPUs there is no profile: the uniform 200 is not judged.
    assert findings(ibstat) == []
    # The run's own threshold wins, and says where it came from.
    thresholds({"rdma.ib_rate_gbps": 200})
    assert findings(text) == []
    thresholds({"rdma.ib_rate_gbps": 800})
    lower = findings(pasted("written-ibstat-ndr.txt"))
    assert {f.code for f in lower} == {"rdma.rate.below_profile"}
    assert "doctor.toml" in lower[0].evidence[-1]


def test_a_config_threshold_reaches_the_checks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    paste = tmp_path / "n1.txt"
    paste.write_text(pasted("written-ibstat-ndr-degraded.txt"))
    monkeypatch.chdir(tmp_path)
    argv = ["analyze", str(paste), "--select", "rdma.link", "--fail-on", "warn"]
    (tmp_path / "doctor.toml").write_text("[thresholds.rdma]\nib_rate_gbps = 800\n")
    assert main(argv) == 1
    out = capsys.readouterr().out
    assert "rdma.rate.below_profile" in out and "doctor.toml" in out
    (tmp_path / "doctor.toml").write_text("[thresholds.rdma]\nnonsense = 1\n")
    assert main(argv) == 2
    assert "rdma.nonsense" in capsys.readouterr().err


def test_ibstatus_gives_the_sysfs_files_and_a_port_trained_at_edr_is_named() -> None:
    text = pasted("written-ibstatus.txt")
    rdma = rdma_of(text)
    ports = {
        h.name: (h.ports[0].rate_gbps, h.ports[0].width, h.ports[0].speed, h.ports[0].lid)
        for h in rdma.hcas
    }
    assert ports["mlx5_0"] == (200.0, 4, "HDR", 0x11)
    assert ports["mlx5_2"] == (100.0, 4, "EDR", 0x13)
    (found,) = findings(text)
    assert found.code == "rdma.rate.degraded"
    assert found.summary.startswith("mlx5_2 port 1 runs at 100 Gb/s (4X EDR), below the 200 Gb/s")
    assert "of the node's other InfiniBand ports" in found.summary  # no model shown: none named
