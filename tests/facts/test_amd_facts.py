"""AMD GPUs: the real probe reads a written amdgpu/KFD sysfs tree (tests/amdtree.py), and
its amdsmi child runs against a stand-in amdsmi module (a MOCK: no AMD GPU and no
libamd_smi.so here) whose answers have the shapes of amdsmi's py-interface (ROCm 6.2,
amdsmi_interface.py): dicts for ECC counts, lists of dicts for bad pages and processes,
{"fw_list": [...]} for firmware, {"hops", "type"} for link types.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from doctor.core.capture import Capture
from doctor.core.model import Missing
from doctor.facts.amd.model import AmdFacts
from doctor.facts.amd.sysfs import bad_page_flags, parse_amd, pcie_gen, properties
from doctor.facts.gpu import GpuFacts
from doctor.facts.node import NodeFacts, parse_node
from tests.amdtree import AmdNode, bdf, write_amd_node
from tests.conftest import run_probe

FAKE_AMDSMI = '''
"""MOCK amdsmi for tests/facts/test_amd_facts.py: two MI300X GPUs joined by XGMI."""
import enum


class AmdSmiLibraryException(Exception):
    pass


class AmdSmiFwBlock(enum.IntEnum):
    AMDSMI_FW_ID_SMU = 1
    AMDSMI_FW_ID_PSP_SOSDRV = 22


BDFS = ["0000:05:00.0", "0000:15:00.0"]


def amdsmi_init(flag=None): return None
def amdsmi_shut_down(): return None
def amdsmi_get_lib_version(): return {"major": 24, "minor": 6, "release": 2, "build": 0}
def amdsmi_get_processor_handles(): return [0, 1]
def amdsmi_get_gpu_device_bdf(h): return BDFS[h]
def amdsmi_get_gpu_device_uuid(h): return "%d1ff74a1-0000-1000-80aa-0123456789ab" % h
def amdsmi_get_gpu_asic_info(h): return {"market_name": "AMD Instinct MI300X"}
def amdsmi_get_gpu_driver_info(h):
    return {"driver_name": "amdgpu", "driver_version": "6.8.5", "driver_date": "2015/01/01"}
def amdsmi_get_gpu_vbios_info(h): return {"version": "022.040.003.042.000001"}
def amdsmi_get_fw_info(h):
    return {"fw_list": [{"fw_name": AmdSmiFwBlock.AMDSMI_FW_ID_SMU, "fw_version": "85.101.0"},
                        {"fw_name": AmdSmiFwBlock.AMDSMI_FW_ID_PSP_SOSDRV,
                         "fw_version": "00.36.02.5C"}]}
def amdsmi_get_gpu_total_ecc_count(h):
    return {"correctable_count": 0, "uncorrectable_count": 5 * h, "deferred_count": 0}
def amdsmi_get_gpu_bad_page_info(h):
    if h == 0:
        raise AmdSmiLibraryException("Error code: 2 | AMDSMI_STATUS_NOT_SUPPORTED")
    return [{"value": 0, "page_address": 0x1000, "page_size": 4096, "status": 1}]
def amdsmi_get_gpu_process_list(h):
    return [{"name": "python3", "pid": 777, "mem": 1 << 30}] if h == 1 else []
def amdsmi_topo_get_link_type(a, b): return {"hops": 1, "type": 1}
'''
BROKEN_AMDSMI = 'raise OSError("libamd_smi.so: cannot open shared object file")\n'


def _node(tmp_path: Path, node: AmdNode, module: str | None = None) -> NodeFacts:
    root = tmp_path / "root"
    write_amd_node(root, node)
    env = dict(os.environ)
    if module is not None:
        (tmp_path / "lib").mkdir()
        (tmp_path / "lib" / "amdsmi.py").write_text(module)
        env["PYTHONPATH"] = str(tmp_path / "lib")
    raw = run_probe({"root": str(root)}, env=env)
    return parse_node("mi300x", Capture(raw))


def _amd(facts: NodeFacts) -> AmdFacts:
    assert isinstance(facts.amd, AmdFacts), facts.amd
    return facts.amd


def test_probe_reads_amd_gpus_links_and_versions_from_sysfs(tmp_path: Path) -> None:
    facts = _node(tmp_path, AmdNode(narrow={3: 8}, missing_xgmi=((0, 5),)))
    amd = _amd(facts)
    assert [g.bus_id for g in amd.gpus] == [bdf(i) for i in range(8)]  # the BMC's card0 is not
    gpu = amd.gpus[3]
    assert (gpu.link_width, gpu.link_width_max, gpu.link_gen, gpu.numa_node) == (8, 16, 5, 0)
    assert gpu.product == "AMD Instinct MI300X" and gpu.kfd_node == 5 and gpu.gpu_id == 1003
    assert gpu.firmware == (("smc", "0x00557a00"), ("sos", "0x00380005"))
    assert gpu.xgmi_hive == "5217049339851234"
    assert (amd.rocm_version, amd.amdgpu_version) == ("6.2.1-112", "6.8.5")
    assert amd.rocm_installs == ("rocm-6.2.1",)
    assert amd.numa_balancing is False and amd.cmdline and "iommu=pt" in amd.cmdline
    assert amd.peer_memory == "/sys/kernel/mm/memory_peers/amdkfd/version"
    pairs = amd.pair_links()
    assert len(pairs) == 27 and frozenset((bdf(0), bdf(5))) not in pairs
    assert all(link.type == "XGMI" and link.hops == 1 for link in pairs.values())
    to_cpu = [link for link in amd.links if link.src == bdf(5) and link.dst.startswith("cpu")]
    assert [(link.dst, link.type) for link in to_cpu] == [("cpu1", "PCIe")]
    # The same GPUs in the shared GPU facts, for the vendor-neutral checks.
    assert isinstance(facts.gpus, GpuFacts) and facts.gpus.source == "amdgpu"
    assert [g.vendor for g in facts.gpus.gpus] == ["amd"] * 8
    assert facts.gpus.gpus[3].health.pcie_width == 8
    assert isinstance(amd.smi, Missing) and amd.smi.kind == "absent"  # no amdsmi here


def test_ras_counts_bad_pages_and_kfd_processes(tmp_path: Path) -> None:
    node = AmdNode(ras_ue={2: 3}, pending_pages={2: 2}, processes={4242: ("python3", 1)})
    facts = _node(tmp_path, node)
    gpus = facts.gpus.gpus if isinstance(facts.gpus, GpuFacts) else ()
    assert gpus[2].ecc_uncorrected_volatile == 3 and gpus[2].health.retired_pending is True
    assert gpus[0].ecc_uncorrected_volatile == 0 and gpus[0].health.retired_pages == 0
    assert gpus[0].ecc_corrected_volatile == 2  # the xgmi_wafl block's correctable count
    procs = gpus[1].health.processes
    assert procs is not None and [(p.pid, p.name) for p in procs] == [(4242, "python3")]
    assert gpus[0].health.processes == ()


def test_amdsmi_child_runs_against_a_stand_in_module(tmp_path: Path) -> None:
    amd = _amd(_node(tmp_path, AmdNode(), FAKE_AMDSMI))
    assert not isinstance(amd.smi, Missing), amd.smi
    first, second = amd.smi.gpus
    assert (first.bus_id, first.ecc_uncorrectable, first.bad_pages) == (bdf(0), 0, None)
    assert (second.ecc_uncorrectable, second.bad_pages, second.bad_pages_pending) == (5, 1, 1)
    assert second.processes == ((777, "python3", 1 << 30),)
    assert ("SMU", "85.101.0") in first.firmware and first.driver == "6.8.5"
    assert [(lk.a, lk.b, lk.type, lk.hops) for lk in amd.smi.links] == [(bdf(0), bdf(1), "XGMI", 1)]
    assert amd.smi.lib_version == "24.6.2"


def test_amdsmi_that_cannot_load_its_library_is_missing_with_the_reason(tmp_path: Path) -> None:
    amd = _amd(_node(tmp_path, AmdNode(), BROKEN_AMDSMI))
    assert isinstance(amd.smi, Missing) and "libamd_smi.so" in amd.smi.reason


def test_a_node_without_amd_gpus_has_no_amd_facts() -> None:
    raw: dict[str, Any] = {"probe": {"version": 1}, "dirs": {"/sys/class/drm": {"entries": []}}}
    assert isinstance(parse_amd(Capture(raw)), Missing)


def test_formats_tolerate_junk_and_other_shapes() -> None:
    assert properties("junk line here\r\ntype 11\r\n  weight   30 \n") == {
        "type": "11",
        "weight": "30",
    }
    text = "0x00001000 : 0x00001000 : R\nnoise\n0x00002000 : 0x00001000 : p\r\n"
    assert bad_page_flags(text) == ["R", "P"]
    assert (pcie_gen("16.0 GT/s PCIe"), pcie_gen("2.5 GT/s"), pcie_gen("unknown")) == (4, 1, None)


def _tool(folder: Path, name: str, body: str) -> None:
    folder.mkdir(exist_ok=True)
    (folder / name).write_text("#!/bin/sh\n" + body)
    (folder / name).chmod(0o755)


def test_without_kfd_the_probe_runs_amd_smi_and_reads_its_links(tmp_path: Path) -> None:
    # A stand-in amd-smi (a MOCK: no AMD GPU here) printing the written fixtures of
    # tests/fixtures/amd for `static` and `topology`, as the real one would on this node.
    fixtures = Path(__file__).parent.parent / "fixtures" / "amd"
    bin_dir = tmp_path / "bin"
    _tool(
        bin_dir,
        "amd-smi",
        f'case "$1" in static) cat {fixtures}/amd-smi-static.txt ;;'
        f" topology) cat {fixtures}/amd-smi-topology.txt ;; esac\n",
    )
    write_amd_node(tmp_path / "root", AmdNode(kfd=False))
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    raw = run_probe({"root": str(tmp_path / "root")}, env=env)
    assert raw["commands"]["amd:amd-smi-topology"]["argv"][1:] == ["topology"]
    amd = parse_amd(Capture(raw))
    assert isinstance(amd, AmdFacts) and len(amd.gpus) == 8
    pairs = amd.pair_links()
    assert pairs[frozenset((bdf(2), bdf(6)))].type == "PCIe"  # what the tool said
    assert pairs[frozenset((bdf(0), bdf(1)))].type == "XGMI"


def test_a_hanging_rocm_smi_is_killed_at_its_deadline(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    _tool(bin_dir, "rocm-smi", "exec sleep 60\n")
    write_amd_node(tmp_path / "root", AmdNode(kfd=False))
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    raw = run_probe({"root": str(tmp_path / "root"), "deadline": 4.0}, env=env, timeout=30)
    entry = raw["commands"]["amd:rocm-smi"]
    assert entry["error"]["kind"] == "timeout" and entry["seconds"] < 4
    amd = parse_amd(Capture(raw))
    assert isinstance(amd, AmdFacts) and len(amd.gpus) == 8 and amd.links == ()
