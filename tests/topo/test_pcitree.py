"""PCI distances from sysfs paths, on a capture recorded here and on written multi-socket trees."""

from __future__ import annotations

import json

import pytest

from doctor.core.capture import Capture
from doctor.facts.topo.pcitree import PciPlace, nccl_switches, pci_label, place_from_realpath
from doctor.facts.topo.smi_text import parse_topo_text
from doctor.facts.topo.topology import TopoFacts, cross_check, parse_topo
from tests.topo.sysfs_tree import FIXTURES, capture, smi_text


def place(path: str, numa: int | None = 0) -> PciPlace:
    found = place_from_realpath(path, numa)
    assert found is not None
    return found


ROOT17 = "/sys/devices/pci0000:17/0000:17:00.0"
SWITCH = f"{ROOT17}/0000:18:00.0"  # a switch's upstream port under root port 17:00.0
GPU_A = place(f"{SWITCH}/0000:19:00.0/0000:1a:00.0")
GPU_B = place(f"{SWITCH}/0000:19:04.0/0000:1b:00.0")
# a second switch below one of the first switch's downstream ports
NIC_DEEP = place(f"{SWITCH}/0000:19:0c.0/0000:1c:00.0/0000:1d:00.0/0000:1e:00.0")
ON_ROOT_PORT = place(f"{ROOT17}/0000:20:00.0")
OTHER_ROOT_PORT = place("/sys/devices/pci0000:17/0000:17:02.0/0000:30:00.0")
OTHER_BRIDGE_SAME_NUMA = place("/sys/devices/pci0000:3a/0000:3a:00.0/0000:3b:00.0", numa=0)
OTHER_SOCKET = place("/sys/devices/pci0000:b0/0000:b0:00.0/0000:b1:00.0", numa=1)


@pytest.mark.parametrize(
    ("a", "b", "label"),
    [
        (GPU_A, GPU_A, "X"),
        (GPU_A, GPU_B, "PIX"),  # one switch: down, up, down
        (GPU_A, NIC_DEEP, "PXB"),  # two switches, no host bridge
        (GPU_A, ON_ROOT_PORT, "PHB"),  # through the root complex
        (ON_ROOT_PORT, OTHER_ROOT_PORT, "PHB"),
        (GPU_A, OTHER_BRIDGE_SAME_NUMA, "NODE"),  # another host bridge, same NUMA node
        (GPU_A, OTHER_SOCKET, "SYS"),
    ],
)
def test_pci_label(a: PciPlace, b: PciPlace, label: str) -> None:
    assert pci_label(a, b) == label
    assert pci_label(b, a) == label


def test_nccl_climbs_two_components_at_a_time() -> None:
    # ncclTopoGetXmlFromSys: a device's parent is the component two levels up (the switch's
    # upstream port); a device one or zero levels below the root port hangs off the CPU.
    assert nccl_switches(GPU_A) == ("0000:18:00.0",)
    assert nccl_switches(NIC_DEEP) == ("0000:1c:00.0", "0000:18:00.0")
    assert nccl_switches(ON_ROOT_PORT) == ()


def test_virtio_tail_is_not_a_bus_address() -> None:
    # Recorded on this VM: /sys/class/net/eth0/device → …/0000:00:03.0/virtio2
    found = place("/sys/devices/pci0000:00/0000:00:03.0/virtio2", None)
    assert found.address == "0000:00:03.0"
    assert found.root == "pci0000:00"


def test_non_pci_paths_have_no_place() -> None:
    assert place_from_realpath("/sys/devices/virtual/net/veth0", 0) is None
    assert place_from_realpath("/sys/devices/platform/soc/eth0", 0) is None


def test_recorded_vm_capture() -> None:
    raw = json.loads((FIXTURES / "sysfs" / "vm-virtio.capture.json").read_text())
    facts = parse_topo(Capture(raw))
    assert isinstance(facts, TopoFacts), facts
    assert facts.topology.gpus == ()
    assert [(n.name, n.address, n.rdma) for n in facts.nics] == [("eth0", "0000:00:03.0", False)]
    assert facts.source == "sysfs"
    assert any("NVML" in note for note in facts.notes)


def test_dual_socket_tree_matches_its_nvidia_smi_matrix() -> None:
    facts = parse_topo(capture("dual-socket-pcie.tree"))
    assert isinstance(facts, TopoFacts), facts
    assert facts.source == "sysfs"
    assert facts.topology.gpus == ("GPU0", "GPU1", "GPU2", "GPU3")
    assert facts.rdma == ("mlx5_0", "mlx5_1")
    # ib0/ib1 belong to the HCAs; only the onboard port is listed as a plain netdev
    assert [n.name for n in facts.nics] == ["mlx5_0", "mlx5_1", "eno1"]
    assert facts.topology.label("GPU0", "eno1") == "NODE"
    smi = parse_topo_text(smi_text("dual-socket-pcie-4gpu-nic-legend.txt"))
    assert cross_check(facts.topology, smi) == ()
    assert facts.topology.affinity_of("GPU2") == {
        "CPU Affinity": "32-63,96-127",
        "NUMA Affinity": "1",
    }


def test_hgx_tree_gpu_nic_distances_match_nvidia_smi() -> None:
    facts = parse_topo(capture("hgx-8gpu-nvswitch.tree"))
    assert isinstance(facts, TopoFacts), facts
    smi = parse_topo_text(smi_text("hgx-h100-nvswitch-nic-legend.txt"))
    # sysfs cannot see NVLink: only the GPU pairs differ from nvidia-smi, every NIC cell agrees
    mismatches = cross_check(facts.topology, smi)
    assert mismatches
    assert all("NV18 in nvidia-smi" in m for m in mismatches)
    for gpu in facts.topology.gpus:
        assert facts.topology.closest_nics(gpu)[0] == "PIX"
