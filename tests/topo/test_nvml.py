"""The NVML path, on answers the probe's collector records from a fake pynvml (MOCK: no GPU here).

The fake answers with the shapes nvidia-ml-py documents (see fake_pynvml.py); the machines are
the ones the sysfs tree fixtures describe, so NIC distances come from the same trees.
"""

from __future__ import annotations

from doctor.facts.topo.nvml import bitmask_members, bus_id, compact_ranges
from doctor.facts.topo.topology import TopoFacts, parse_topo
from tests.topo.machines import dgx_a100, hgx_h100, pcie_4gpu
from tests.topo.sysfs_tree import capture, smi_text


def facts_of(tree: str, nvml: dict, smi: str | None = None) -> TopoFacts:
    facts = parse_topo(capture(tree, nvml, smi))
    assert isinstance(facts, TopoFacts), facts
    return facts


def test_bus_id_is_spelled_as_sysfs_does() -> None:
    assert bus_id("00000000:1B:00.0") == "0000:1b:00.0"
    assert bus_id("0000:1b:00.0") == "0000:1b:00.0"


def test_affinity_masks_become_cpu_lists() -> None:
    assert compact_ranges(bitmask_members([0xFF, 0, 0b101]) or []) == "0-7,128,130"
    assert bitmask_members({"error": "NVMLError_NotSupported"}) is None


def test_probe_records_every_nvml_answer_raw() -> None:
    raw = hgx_h100()
    gpu0 = raw["devices"][0]
    assert gpu0["bus_id"] == "00000000:1B:00.0"  # bytes from the binding, decoded
    assert len(gpu0["nvlinks"]) == 18  # stopped at the first INVALID_ARGUMENT
    assert gpu0["numa_node_id"]["error"].startswith("NVMLError_NotSupported")
    assert raw["pairs"][0]["common_ancestor"] == 40
    assert len(raw["pairs"]) == 28


def test_hgx_h100_nvml_agrees_with_nvidia_smi_text() -> None:
    smi = smi_text("hgx-h100-nvswitch-nic-legend.txt")
    facts = facts_of("hgx-8gpu-nvswitch.tree", hgx_h100(), smi)
    assert facts.source == "nvml"
    assert facts.mismatches == ()
    assert facts.topology.label("GPU0", "GPU7") == "NV18"
    assert facts.topology.affinity_of("GPU5") == {
        "CPU Affinity": "56-111,168-223",
        "NUMA Affinity": "1",
        "GPU NUMA ID": "N/A",
    }
    assert facts.rdma == tuple(f"mlx5_{i}" for i in range(10))


def test_nvswitch_found_by_pci_class_without_remote_type() -> None:
    facts = facts_of("hgx-8gpu-nvswitch.tree", dgx_a100())
    assert {facts.topology.label("GPU0", g) for g in facts.topology.gpus[1:]} == {"NV12"}
    assert facts.nvml[0].peers == {"nvswitch": 12}


def test_links_down_lower_that_gpus_count() -> None:
    facts = facts_of("hgx-8gpu-nvswitch.tree", hgx_h100(down={5: 2}))
    assert facts.topology.label("GPU4", "GPU5") == "NV16"
    assert facts.topology.label("GPU4", "GPU6") == "NV18"
    assert [(g.name, g.links_down) for g in facts.nvml if g.links_down] == [("GPU5", 2)]


def test_direct_nvlink_bridge_and_pcie_levels() -> None:
    facts = facts_of("dual-socket-pcie.tree", pcie_4gpu(bridged=True, p2p={}))
    links = facts.topology.links()
    assert links["GPU0-GPU1"] == "NV4"
    assert links["GPU0-GPU2"] == "SYS"
    assert links["GPU0-mlx5_0"] == "PXB"


def test_pcie_only_nvml_agrees_with_nvidia_smi_text() -> None:
    smi = smi_text("dual-socket-pcie-4gpu-nic-legend.txt")
    facts = facts_of("dual-socket-pcie.tree", pcie_4gpu(bridged=False, p2p={}), smi)
    assert facts.mismatches == ()
    assert facts.topology.label("GPU0", "GPU1") == "PIX"


def test_p2p_status_kept_per_pair() -> None:
    facts = facts_of("dual-socket-pcie.tree", pcie_4gpu(bridged=True, p2p={(0, 1): 4, (1, 3): 3}))
    assert facts.p2p == {
        "GPU0-GPU1": {"read": "DISABLED_BY_REGKEY", "write": "DISABLED_BY_REGKEY"},
        "GPU1-GPU3": {"read": "IOH_TOPOLOGY_NOT_SUPPORTED", "write": "IOH_TOPOLOGY_NOT_SUPPORTED"},
    }


def test_nvml_without_sysfs_places_leaves_nics_out() -> None:
    # A GPU NVML knows but sysfs does not show (a container without /sys/bus/pci): no distance
    # to a NIC can be computed, so none is guessed.
    raw = hgx_h100()
    raw["devices"][3]["bus_id"] = "00000000:77:00.0"
    facts = facts_of("hgx-8gpu-nvswitch.tree", raw)
    assert facts.topology.nics == ()
    assert len(facts.topology.gpus) == 8
    assert "a GPU is missing from sysfs: NICs left out of the matrix" in facts.notes


def test_garbled_nvml_capture_falls_back_with_a_note() -> None:
    facts = facts_of("hgx-8gpu-nvswitch.tree", {"devices": "not a list"})
    assert facts.source == "sysfs"
    assert "NVML: no device list in the NVML capture" in facts.notes
    for devices in ([{"bus_id": None}], [3, "x"]):
        facts = facts_of("hgx-8gpu-nvswitch.tree", {"devices": devices})
        assert facts.source == "sysfs"
        assert "NVML: GPU0: no PCI bus id in the NVML capture" in facts.notes
    odd_links = [{"bus_id": "00000000:1B:00.0", "nvlinks": 5}]
    facts = facts_of("hgx-8gpu-nvswitch.tree", {"devices": odd_links})
    assert (facts.source, facts.nvml[0].links_up) == ("nvml", 0)


def test_pair_no_source_can_place_is_sys_with_a_note() -> None:
    raw = hgx_h100()
    raw["devices"][3]["bus_id"] = "00000000:77:00.0"  # sysfs has no such device
    for link in raw["devices"][3]["nvlinks"]:
        link["state"] = 0  # and no NVLink to fall back on
    raw["pairs"] = [p for p in raw["pairs"] if 3 not in (p["a"], p["b"])]
    facts = facts_of("hgx-8gpu-nvswitch.tree", raw)
    assert facts.topology.label("GPU0", "GPU3") == "SYS"
    assert "GPU0-GPU3: no PCI place known, shown as SYS" in facts.notes
    assert facts.topology.label("GPU0", "GPU1") == "NV18"
