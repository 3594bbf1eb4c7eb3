"""The probe's RDMA section on a written sysfs tree (no HCA exists here: the files are laid out as
drivers/infiniband/core/sysfs.c and mlx5's hw_counters name them): width, generation, LID,
counters and their second sample, the modules in /sys/module, the HCA's own PCIe link."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from checks.links import rdma as rdma_link
from doctor.core.capture import Capture
from doctor.core.model import Status
from doctor.facts.cluster import ClusterFacts
from doctor.facts.network.rdma import RdmaFacts, parse_rdma
from doctor.facts.node import parse_node
from doctor.facts.pcie_link import parse_pcie_links
from doctor.judge.registry import load_checks
from doctor.judge.runner import run_checks
from doctor.stages import probe
from tests import factkit as fk

IB = "/sys/class/infiniband"


def write(root: Path, path: str, text: str) -> None:
    target = root / path.lstrip("/")
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text)


def hca_tree(root: Path) -> None:
    """Two ConnectX-7 ports (the second's PCIe link at x8), a nvidia_peermem module and an inbox
    mlx5_core (no version file), each HCA's PCI function linked as sysfs links it."""
    (root / "sys/bus/pci/devices").mkdir(parents=True)
    for i, width in enumerate(("16", "8")):
        base = f"{IB}/mlx5_{i}"
        function = f"/sys/devices/pci0000:00/0000:{0x18 + i:02x}:00.0"
        for name, text in (
            ("class", "0x020700"),
            ("vendor", "0x15b3"),
            ("device", "0x1021"),
            ("current_link_width", width),
            ("max_link_width", "16"),
            ("current_link_speed", "32.0 GT/s PCIe"),
            ("max_link_speed", "32.0 GT/s PCIe"),
        ):
            write(root, f"{function}/{name}", text + "\n")
        address = function.rsplit("/", 1)[1]
        (root / f"sys/bus/pci/devices/{address}").symlink_to(root / function.lstrip("/"))
        write(root, f"{base}/hca_type", "MT4129\n")
        write(root, f"{base}/fw_ver", "28.39.1002\n")
        (root / base.lstrip("/") / "device").symlink_to(root / function.lstrip("/"))
        rate = "400 Gb/sec (4X NDR)"
        port = f"{base}/ports/1"
        for name, text in (
            ("state", "4: ACTIVE"),
            ("phys_state", "5: LinkUp"),
            ("rate", rate),
            ("link_layer", "InfiniBand"),
            ("lid", f"0x{100 + i:x}"),
            ("counters/symbol_error", "0"),
            ("counters/link_downed", "1"),
            ("counters/port_rcv_errors", "0"),
            ("hw_counters/rnr_nak_retry_err", "0"),
        ):
            write(root, f"{port}/{name}", text + "\n")
    (root / "sys/module/nvidia_peermem").mkdir(parents=True)
    write(root, "/sys/module/nvidia_peermem/version", "1.1\n")
    (root / "sys/module/mlx5_core").mkdir(parents=True)


def test_the_probe_reads_counters_twice_and_the_facts_give_their_growth(tmp_path: Path) -> None:
    hca_tree(tmp_path)
    p = probe.Probe(dict(probe.DEFAULT_SPEC, root=str(tmp_path)))
    probe.collect_pci(p)
    probe.collect_rdma(p)
    assert len(p.counter_paths) == 8
    # The link flaps and a queue pair runs out of RNR retries while the probe's other
    # sections run; the second sample, read as the probe ends, sees it.
    write(tmp_path, f"{IB}/mlx5_1/ports/1/counters/link_downed", "3\n")
    write(tmp_path, f"{IB}/mlx5_1/ports/1/hw_counters/rnr_nak_retry_err", "7\n")
    probe.second_sample(p)
    raw = p.to_json()
    cap = Capture(raw)
    rdma = parse_rdma(cap)
    assert isinstance(rdma, RdmaFacts)
    first, second = (h.ports[0] for h in rdma.hcas)
    assert (first.width, first.speed, first.lid, first.rate_gbps) == (4, "NDR", 100, 400.0)
    assert second.counters is not None and second.counters.seconds is not None
    assert second.counters.increase("link_downed") == 2
    assert second.counters.increase("hw:rnr_nak_retry_err") == 7
    assert first.counters is not None and first.counters.increase("link_downed") == 0
    assert rdma.modules == {"nvidia_peermem": "1.1", "mlx5_core": ""}
    assert rdma.gdr_module == "nvidia_peermem"
    links = parse_pcie_links(cap)
    assert isinstance(links, dict)
    assert [(a, x.kind, x.width, x.speed) for a, x in links.items()] == [
        ("0000:18:00.0", "nic", 16, 32.0),
        ("0000:19:00.0", "nic", 8, 32.0),
    ]
    assert [h.pci_address for h in rdma.hcas] == ["0000:18:00.0", "0000:19:00.0"]
    node = parse_node("n1", cap)
    outcomes = run_checks(load_checks(), ClusterFacts(nodes={"n1": node}))
    found = {(f.code, f.summary.split(":")[0]) for o in outcomes for f in o.findings}
    assert ("rdma.link.flapping", "mlx5_1 port 1") in found
    assert ("rdma.counters.rising", "mlx5_1 port 1") in found
    # The HCA at x8 is named by its PCI function (pcie.links), its siblings are not.
    narrow = [f for o in outcomes for f in o.findings if f.code == "pcie.nic.narrow"]
    assert [f.data["devices"] for f in narrow] == [["0000:19:00.0"]]
    assert not any(name.startswith("mlx5_0") for _, name in found)


def test_no_hca_no_second_sample(tmp_path: Path) -> None:
    p = probe.Probe(dict(probe.DEFAULT_SPEC, root=str(tmp_path)))
    probe.collect_rdma(p)
    probe.second_sample(p)
    assert "rdma:counters-later" not in p.values


def test_a_probed_node_counts_its_ports_against_the_expected_count(
    tmp_path: Path, thresholds: Callable[[dict[str, Any]], None]
) -> None:
    hca_tree(tmp_path)
    p = probe.Probe(dict(probe.DEFAULT_SPEC, root=str(tmp_path)))
    probe.collect_rdma(p)
    node = parse_node("n1", Capture(p.to_json()))
    # No GPU profile and no threshold set: nothing says how many ports this node should have.
    assert run_checks([rdma_link.port_count], fk.cluster(node))[0].status is Status.SKIP
    thresholds({"rdma": {"ib_ports": 4, "ib_rate_gbps": 400}})
    (outcome,) = run_checks([rdma_link.port_count], fk.cluster(node))
    (finding,) = outcome.findings
    assert finding.summary.startswith("2 active IB port(s) at 400 Gb/s, 4 expected")
    assert finding.data["threshold"] == "absolute"
    thresholds({"rdma": {"ib_ports": 2, "ib_rate_gbps": 400}})
    assert run_checks([rdma_link.port_count], fk.cluster(node))[0].status is Status.PASS
