"""Pasted text, round three: per-port state of every HCA generation, nccl-tests' and rccl-tests'
version headers, and `rocm-smi --showtopo` pasted alone. (Interface kinds from evidence only are
in test_nic_kinds.py.) Every fixture here is written from the tool's source, as its header says.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from doctor.facts.amd.sysfs import AmdFacts
from doctor.facts.nccl.libraries import NcclFacts
from doctor.facts.network.rdma import RdmaFacts, parse_rdma
from doctor.facts.node import parse_node
from tests.paste.pastekit import pasted, read_text, written_blocks

AMD = Path(__file__).resolve().parents[1] / "fixtures" / "amd"


def ports(text: str) -> dict[str, tuple[int | None, str]]:
    rdma = parse_rdma(read_text(text))
    assert isinstance(rdma, RdmaFacts), rdma
    return {f"{h.name}/{p.number}": (p.state, p.link_layer) for h in rdma.hcas for p in h.ports}


def test_mlx4_ports_have_their_state_whole_or_grepped() -> None:
    want = {"mlx4_0/1": (4, "InfiniBand"), "mlx4_0/2": (1, "Ethernet")}
    blocks = written_blocks("written-ibv_devinfo-mlx4.txt")
    assert ports(blocks["full"]) == want
    # `grep -E 'hca_id|state'` drops the "port:" lines: the states number the ports in order.
    assert ports(blocks["grepped"]) == want


def log_of(text: str) -> dict[str, Any]:
    nccl = parse_node("n1", read_text(text)).nccl
    assert isinstance(nccl, NcclFacts) and nccl.log is not None, nccl
    return nccl.log


def test_nccl_tests_header_gives_the_versions_and_every_rank() -> None:
    log = log_of(pasted("written-nccl-tests.txt"))
    assert (log["benchmark"], log["version"], log["cuda"], log["cuda_driver"]) == (
        "nccl-tests 2.19.6",
        "2.25.1",
        "12.8",
        12080,
    )
    ranks = {(p["host"], p["rank"], p["cuda_dev"], p["bus_id"]) for p in log["processes"]}
    assert ranks == {
        ("gpu-a", 0, 0, "1b000"),
        ("gpu-a", 1, 1, "43000"),
        ("gpu-b", 2, 0, "1b000"),
        ("gpu-b", 3, 1, "43000"),
    }


def test_rccl_tests_header_and_rccl_banner_give_rccl_hip_and_rocm() -> None:
    log = log_of(pasted("written-rccl-tests.txt"))
    assert (log["library"], log["version"], log["hip"], log["rocm"]) == (
        "RCCL",
        "2.20.5",
        "6.2.41133-dd7f95766",
        "6.2.0.0-66-8fd0e14",
    )
    assert log["benchmark"] == "rccl-tests develop:4b2b5d3"
    (proc,) = log["processes"]
    assert (proc["host"], proc["cuda_dev"], proc["bus_id"]) == ("mi210-1", 0, "83000")


def test_rocm_smi_showtopo_alone_gives_every_gpu_and_xgmi_link() -> None:
    amd = parse_node("n1", read_text((AMD / "rocm-smi-showtopo-mi210.txt").read_text())).amd
    assert isinstance(amd, AmdFacts), amd
    assert [g.bus_id for g in amd.gpus] == ["GPU0", "GPU1", "GPU2", "GPU3"]
    links = {(link.src, link.dst): (link.type, link.weight, link.hops) for link in amd.links}
    assert links[("GPU0", "GPU1")] == ("XGMI", 15, 1)
    assert links[("GPU2", "GPU3")] == ("XGMI", 15, 1)
    assert links[("GPU0", "GPU2")] == ("PCIe", 40, 2)
    assert len(links) == 6
