"""Pasted `nvidia-smi nvlink -s` / `-e`: the NVLink facts the NVML path gives, judged by the same
topo.nvlink check (doctor/facts/topo/smi_nvlink.py)."""

from __future__ import annotations

from pathlib import Path

from checks.topo import gpu_sockets, nvlink_health
from doctor.core.model import CheckOutcome, Severity, Status
from doctor.facts.cluster import ClusterFacts
from doctor.facts.node import parse_node
from doctor.facts.topo.topology import TopoFacts
from doctor.judge.runner import run_checks
from doctor.plugin import CheckSpec
from tests.paste.pastekit import pasted, read_text

STATUS = pasted("written-nvidia-smi-nvlink-s.txt")
ERRORS = pasted("written-nvidia-smi-nvlink-e.txt")


def run(spec: CheckSpec, text: str) -> CheckOutcome:
    cluster = ClusterFacts(nodes={"n1": parse_node("n1", read_text(text))})
    (outcome,) = run_checks([spec], cluster)
    return outcome


def topo_of(text: str) -> TopoFacts:
    topo = parse_node("n1", read_text(text)).topo
    assert isinstance(topo, TopoFacts), topo
    return topo


def test_status_gives_each_gpu_s_active_links() -> None:
    topo = topo_of("$ nvidia-smi nvlink -s\n" + STATUS)
    assert topo.source == "nvlink" and not topo.topology.gpus
    assert [(g.name, g.model, g.links_up, g.links_down) for g in topo.nvml][:2] == [
        ("GPU0", "NVIDIA H100 80GB HBM3", 18, 0),
        ("GPU1", "NVIDIA H100 80GB HBM3", 18, 0),
    ]
    assert run(nvlink_health, STATUS).status is Status.PASS
    # The checks that need the matrix say why they cannot judge.
    assert (
        run(gpu_sockets, STATUS).reason == "only `nvidia-smi nvlink` was pasted: no topology matrix"
    )


def test_inactive_links_are_degraded_and_down() -> None:
    lines = STATUS.splitlines(True)
    gpu5 = lines.index(next(ln for ln in lines if ln.startswith("GPU 5:")))
    for n in (gpu5 + 3, gpu5 + 4):  # GPU 5's links 2 and 3
        lines[n] = lines[n].replace("26.562 GB/s", "<inactive>")
    outcome = run(nvlink_health, "".join(lines))
    assert [(f.code, f.severity) for f in outcome.findings] == [
        ("topo.nvlink.degraded", Severity.FAIL),
        ("topo.nvlink.down", Severity.WARN),
    ]
    assert outcome.findings[0].summary.startswith("GPU5 has fewer NVLinks")
    assert outcome.findings[1].data == {"down": {"GPU5": 2}}


def test_a_paste_cut_inside_a_gpu_blames_no_gpu() -> None:
    cut = "".join(STATUS.splitlines(True)[: 3 + 19 * 7 + 8])  # GPU 7 with 7 of its 18 links
    assert run(nvlink_health, cut).status is Status.PASS


def test_error_counters_are_summed_per_gpu_and_a_recovery_is_named() -> None:
    topo = topo_of(STATUS + ERRORS)  # back to back, no prompt: one segment, both read
    assert topo.nvml[2].link_errors == {"replay": 3, "recovery": 1, "crc_flit": 12}
    assert topo.nvml[0].link_errors == {"replay": 0, "recovery": 0, "crc_flit": 0}
    outcome = run(nvlink_health, "$ nvidia-smi nvlink -e\n" + ERRORS)  # -e alone: no link count
    assert [
        (f.code, f.summary.split(" failed")[0].split(" counted")[0]) for f in outcome.findings
    ] == [
        ("topo.nvlink.errors", "NVLinks on GPU2"),  # 3 replays + 12 CRC: imbue's 5 or more
        ("topo.nvlink.recovery", "NVLinks on GPU2"),
    ]
    errors = outcome.findings[0]
    assert errors.data["errors"] == {"GPU2": {"replay": 3, "crc_flit": 12}}
    assert errors.data["threshold"] == "absolute"
    assert errors.evidence[-1].endswith("gpu.nvlink_errors = 5 count (absolute)")
    # Under the threshold (3 replays and 1 CRC error), the counts are shown, not judged.
    quiet = ERRORS.replace("CRC Errors: 12", "CRC Errors: 1")
    assert [f.code for f in run(nvlink_health, quiet).findings] == ["topo.nvlink.recovery"]


def test_a_gpu_without_nvlink_and_a_gpu_list_are_not_nvlink_facts() -> None:
    header = "GPU 0: Tesla T4 (UUID: GPU-0d1e2f30-0000-0000-0000-000000000000)\n"
    # Written from nvidia-smi's documented message for a GPU without active NVLinks.
    none = header + "\t NVML: Unable to retrieve NVLink information as all links are inActive\n"
    assert run(nvlink_health, none).reason == "no NVLink between the GPUs"
    # `nvidia-smi -L` has the same header and nothing else: not read as NVLink state.
    cap = read_text("$ nvidia-smi -L\n" + header + "$ ip a\n" + pasted("netns-ip-a.txt"))
    assert [s["kind"] for s in cap.raw["probe"]["segments"]] == [None, "ip addr"]


def test_with_a_pasted_topology_matrix_both_are_judged() -> None:
    matrix = Path(__file__).parent.parent / "fixtures/topo/smi/hgx-h100-nvswitch-nic-legend.txt"
    text = "$ nvidia-smi topo -m\n" + matrix.read_text() + "$ nvidia-smi nvlink -e\n" + ERRORS
    topo = topo_of(text)
    assert topo.source == "nvidia-smi" and len(topo.topology.gpus) == 8
    outcome = run(nvlink_health, text)  # the matrix's NV18s agree; GPU2's errors are named
    assert [f.code for f in outcome.findings] == ["topo.nvlink.errors", "topo.nvlink.recovery"]
    assert run(gpu_sockets, text).status is not Status.SKIP
