"""`doctor topo` on an AMD node: the real probe reads a written MI300X node (tests/amdtree.py,
no AMD GPU here); XGMI pairs come from the KFD topology, NIC distances from the PCI tree."""

from __future__ import annotations

import json
from pathlib import Path

from rich.console import Console

from doctor.core.capture import Capture
from doctor.facts.topo.matrix import closeness, nccl_path
from doctor.facts.topo.topology import TopoFacts, parse_topo
from doctor.facts.topo.view import nic_affinity, topo_json, view_from_file, view_of
from doctor.render.topo import render_topology
from tests.amdtree import AmdNode, write_amd_node
from tests.conftest import run_probe


def _raw(tmp_path: Path) -> dict:
    write_amd_node(tmp_path / "root", AmdNode(hca=True, missing_xgmi=((0, 5),)))
    return run_probe({"root": str(tmp_path / "root")})


def test_matrix_has_xgmi_pairs_and_the_closest_nic(tmp_path: Path) -> None:
    facts = parse_topo(Capture(_raw(tmp_path)))
    assert isinstance(facts, TopoFacts) and facts.source == "kfd"
    topo = facts.topology
    assert topo.gpus == tuple(f"GPU{i}" for i in range(8)) and topo.nics == ("mlx5_0",)
    assert topo.label("GPU0", "GPU1") == "XGMI" and topo.label("GPU4", "GPU7") == "XGMI"
    assert topo.label("GPU0", "GPU5") == "SYS"  # its XGMI link is down, and the sockets differ
    assert topo.affinity_of("GPU6") == {"CPU Affinity": "96-191", "NUMA Affinity": "1"}
    view = view_of("mi300x", facts)
    near = nic_affinity(view)
    assert near["GPU0"] == {
        "nics": ["mlx5_0"],
        "label": "PIX",
        "nccl_path": "PIX",
        "rdma": True,
        "gdr": True,
    }
    assert near["GPU5"]["label"] == "SYS" and near["GPU5"]["gdr"] is False
    assert topo_json(view)["links"]["GPU2-GPU3"] == "XGMI"
    out = Console(record=True, width=200)
    render_topology(view, out)
    text = out.export_text()
    assert "topology from kfd" in text and "XGMI# = AMD Infinity Fabric" in text


def test_a_saved_amd_capture_reads_back_as_the_same_topology(tmp_path: Path) -> None:
    raw = _raw(tmp_path)
    saved = tmp_path / "mi300x.json"
    saved.write_text(json.dumps(raw))
    assert view_from_file(saved).topology == parse_topo(Capture(raw)).topology  # type: ignore[union-attr]


def test_xgmi_labels_sort_and_name_like_rccl() -> None:
    assert closeness("XGMI") < closeness("XGMI2") < closeness("PIX")
    assert nccl_path("XGMI2") == "XGMI"
