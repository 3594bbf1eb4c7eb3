"""NVIDIA pastes land in the probe's capture slots and come out as the facts the probe gives.

The text is from tests/fixtures/nvidia/ (written from the documented formats) and, for the last
test, from lent GPUs (tests/fixtures/gpu/: real H200 and H100 output); the paste reader's splitting
is stood in for by starts() over the lines."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from doctor.core.capture import Capture
from doctor.core.model import Missing
from doctor.facts.gpu import GpuFacts
from doctor.facts.node import parse_node
from doctor.facts.nvidia.driver import DriverFacts, parse_driver
from doctor.facts.nvidia.gpu_host import parse_gpu_host
from doctor.facts.nvidia.gpus import parse_gpus
from doctor.facts.topo.smi_text import parse_topo_text
from doctor.paste.nvidia import NVIDIA_KINDS
from doctor.paste.reader import document

FIXTURES = Path(__file__).parent.parent / "fixtures"


def text(name: str, folder: str = "nvidia") -> str:
    raw = (FIXTURES / folder / name).read_text()
    return "".join(line for line in raw.splitlines(True) if not line.startswith("# "))


def capture(*pastes: str) -> Capture:
    """Split like the paste reader: a segment runs from a line a kind starts to the next."""
    doc: dict[str, Any] = {"probe": {}, "files": {}, "commands": {}}
    for paste in pastes:
        lines = paste.splitlines(True)
        opens = [
            (i, kind) for i, line in enumerate(lines) for kind in NVIDIA_KINDS if kind.starts(line)
        ]
        for n, (i, kind) in enumerate(opens):
            end = opens[n + 1][0] if n + 1 < len(opens) else len(lines)
            for section, entries in kind.parse("".join(lines[i:end])).items():
                doc[section].update(entries)
    return Capture(doc)


def kinds(paste: str) -> list[str]:
    return [kind.name for line in paste.splitlines() for kind in NVIDIA_KINDS if kind.starts(line)]


@pytest.mark.parametrize(
    ("fixture", "kind"),
    [
        ("smi-table-wide.txt", "nvidia-smi"),
        ("smi-table-classic.txt", "nvidia-smi"),
        ("smi-table-old.txt", "nvidia-smi"),
        ("smi-q.txt", "nvidia-smi -q"),
        ("smi-q-old.txt", "nvidia-smi -q"),
        ("smi-q.xml", "nvidia-smi -q -x"),
        ("smi-query-csv-header.csv", "nvidia-smi --query-gpu --format=csv"),
        ("proc-version-open.txt", "/proc/driver/nvidia/version"),
        ("nvcc-version.txt", "nvcc --version"),
    ],
)
def test_each_output_opens_exactly_one_segment_of_its_kind(fixture: str, kind: str) -> None:
    assert kinds(text(fixture)) == [kind]


def test_wide_table_with_prompt_and_processes() -> None:
    cap = capture(text("smi-table-wide.txt"))
    gpus = parse_gpus(cap)
    assert isinstance(gpus, GpuFacts) and gpus.source == "nvidia-smi table"
    first, second = gpus.gpus
    assert (first.index, first.name, first.bus_id) == (0, "NVIDIA H100 80GB HBM3", "0000:18:00.0")
    assert (first.persistence_mode, second.persistence_mode) == (True, False)
    assert first.memory_total == 81559 << 20
    assert (first.ecc_uncorrected_volatile, second.ecc_uncorrected_volatile) == (0, 2)
    assert (first.health.compute_mode, second.health.compute_mode) == (
        "default",
        "exclusive_process",
    )
    assert first.health.mig is False
    (proc,) = first.health.processes or ()
    assert (proc.pid, proc.name, proc.used_memory) == (48211, "/opt/conda/bin/python3", 1528 << 20)
    assert second.health.processes == ()
    driver = parse_driver(cap)
    assert isinstance(driver, DriverFacts)
    assert (driver.version, driver.cuda_version) == ("570.124.06", "12.8")
    assert isinstance(driver.module_version, Missing)  # a table does not show the module


def test_classic_indented_table_with_mig_and_no_processes() -> None:
    gpus = parse_gpus(capture(text("smi-table-classic.txt")))
    assert isinstance(gpus, GpuFacts)
    a, b = gpus.gpus
    assert (a.health.mig, b.health.mig) == (True, False)
    assert b.ecc_uncorrected_volatile is None  # "N/A" is not 0
    assert a.name == "NVIDIA A100-SXM..."  # truncated by nvidia-smi: kept as shown
    assert a.health.processes == () and b.health.processes == ()


def test_old_table_has_no_cuda_version_and_no_mig_column() -> None:
    cap = capture(text("smi-table-old.txt"))
    gpus = parse_gpus(cap)
    assert isinstance(gpus, GpuFacts)
    assert [g.bus_id for g in gpus.gpus] == ["0000:85:00.0", "0000:86:00.0"]
    assert all(g.health.mig is None for g in gpus.gpus)  # unknown, not "off"
    assert gpus.gpus[0].health.processes and gpus.gpus[0].health.processes[0].pid == 30711
    driver = parse_driver(cap)
    assert isinstance(driver, DriverFacts) and driver.version == "375.66"
    assert isinstance(driver.cuda_version, Missing)


def test_query_text_and_xml_give_health() -> None:
    gpus = parse_gpus(capture(text("smi-q.txt")))
    assert isinstance(gpus, GpuFacts) and gpus.source == "nvidia-smi -q"
    good, bad = gpus.gpus
    assert good.health.throttle == ("idle",) and good.health.fabric_state == "completed"
    assert (bad.health.pcie_gen, bad.health.pcie_gen_max) == (3, 5)
    assert (bad.health.pcie_width, bad.health.pcie_width_max) == (8, 16)
    assert bad.health.throttle == ("hw_slowdown", "hw_thermal_slowdown")
    assert (bad.health.remap_pending, bad.health.remap_failed) == (True, False)
    # SRAM SEC-DED (1) + DRAM (2) volatile; parity and SEC-DED are both uncorrectable.
    assert (bad.ecc_uncorrected_volatile, bad.ecc_uncorrected_aggregate) == (3, 6)
    assert bad.ecc_corrected_volatile == 12
    assert bad.health.mig_pending is True and bad.health.fabric_state == "in_progress"
    xml = parse_gpus(capture(text("smi-q.xml")))
    assert isinstance(xml, GpuFacts) and xml.source == "nvidia-smi -q -x"
    assert xml.gpus[1].health.remap_failed is True
    assert xml.gpus[1].health.compute_mode == "prohibited"
    assert xml.gpus[1].ecc_uncorrected_aggregate == 7


def test_old_query_text_with_crlf() -> None:
    gpus = parse_gpus(capture(text("smi-q-old.txt")))
    assert isinstance(gpus, GpuFacts)
    (gpu,) = gpus.gpus
    assert (gpu.ecc_uncorrected_volatile, gpu.ecc_corrected_volatile) == (1, 3)
    assert (gpu.health.retired_pages, gpu.health.retired_pending) == (3, True)
    assert gpu.health.throttle == ("hw_power_brake_slowdown",)
    assert gpu.health.remap_pending is None


def test_truncated_xml_keeps_what_came_before_the_cut() -> None:
    full = text("smi-q.xml")
    cut = full[: full.index('<gpu id="00000000:0F:00.0">') + 200]
    gpus = parse_gpus(capture(cut))
    assert isinstance(gpus, GpuFacts)
    assert gpus.gpus[0].health.pcie_width_max == 16 and len(gpus.gpus) == 2


def test_csv_with_header_and_units() -> None:
    gpus = parse_gpus(capture(text("smi-query-csv-header.csv")))
    assert isinstance(gpus, GpuFacts)
    a, b = gpus.gpus
    assert a.memory_total == 81920 << 20
    assert (b.health.pcie_width, b.health.throttle, b.health.retired_pending) == (
        8,
        ("hw_slowdown",),
        True,
    )
    assert b.health.mig is None  # "[N/A]"


def test_proc_version_and_nvcc_together() -> None:
    paste = text("proc-version-open.txt") + "$ nvcc --version\n" + text("nvcc-version.txt")
    driver = parse_driver(capture(paste))
    assert isinstance(driver, DriverFacts)
    assert (driver.module_version, driver.kernel_module, driver.toolkit) == (
        "570.133.20",
        "open",
        "12.4",
    )


def test_topo_paste_goes_through_the_topology_reader() -> None:
    folder = FIXTURES / "topo" / "smi"
    for path in sorted(folder.iterdir()):
        paste = text(path.name, "topo/smi")
        assert kinds(paste) == ["nvidia-smi topo -m"], path.name
        cap = capture("user@node:~$ nvidia-smi topo -m\n" + paste)
        entry = cap.command("nvidia-smi:topo")
        assert not isinstance(entry, Missing), path.name
        assert parse_topo_text(entry.stdout).devices, path.name


def test_xid_lines_from_journalctl_and_dmesg() -> None:
    log = (
        "[ 8811.120931] NVRM: Xid (PCI:0000:3b:00): 79, pid=1912, name=python, GPU has fallen "
        "off the bus.\n"
        "Jun 02 10:00:01 node7 kernel: NVRM: Xid (PCI:0000:5e:00): 13, Graphics Exception\n"
    )
    # A kernel log is the host kinds' (doctor/paste/host.py): read through the whole reader.
    host = parse_gpu_host(Capture(document("paste", log.encode(), False)))
    assert not isinstance(host.xid, Missing)
    assert [(e.bus_id, e.code) for e in host.xid] == [("0000:3b:00", 79), ("0000:5e:00", 13)]


def test_pasted_node_parses_whole() -> None:
    cap = capture(text("smi-q.txt") + text("proc-version-proprietary.txt"))
    facts = parse_node("pasted", cap)
    assert isinstance(facts.gpus, GpuFacts) and isinstance(facts.driver, DriverFacts)
    assert facts.driver.module_version == "535.183.06"
    assert facts.driver.version == "550.90.07"  # what nvidia-smi said, as NVML would


@pytest.mark.parametrize("gpu", ["h200", "h100"])
@pytest.mark.parametrize("output", ["nvidia-smi.txt", "nvidia-smi-q.xml"])
def test_a_real_gpus_own_output_pasted_gives_what_nvml_gave_the_probe(
    gpu: str, output: str
) -> None:
    """nvidia-smi's table and -q -x of a lent H200 and H100 (tests/fixtures/gpu/), against the
    doctor's probe of the same machine (NVML through pynvml) taken minutes apart."""
    probe = parse_gpus(Capture(json.loads((FIXTURES / "gpu" / gpu / "probe.json").read_text())))
    pasted = parse_gpus(capture(text(output, f"gpu/{gpu}")))
    assert isinstance(probe, GpuFacts) and isinstance(pasted, GpuFacts)
    (nvml,) = probe.gpus
    (seen,) = pasted.gpus
    assert (seen.name, seen.bus_id) == (nvml.name, nvml.bus_id)
    assert seen.ecc_uncorrected_volatile == nvml.ecc_uncorrected_volatile
    if output.endswith(".xml"):  # the table does not say these
        assert seen.ecc_enabled == nvml.ecc_enabled
        assert (seen.health.pcie_gen_max, seen.health.pcie_width) == (
            nvml.health.pcie_gen_max,
            nvml.health.pcie_width,
        )
