"""nccl.libraries and nccl.torch_vs_system on built facts and on the real machine's capture."""

from __future__ import annotations

from pathlib import Path

from checks.nccl import nccl_libraries, nccl_torch_vs_system
from doctor.core.capture import Capture
from doctor.core.model import Missing, Status
from doctor.facts.node import parse_node
from doctor.judge.runner import run_checks
from tests import factkit as fk


def run(check, facts):
    (result,) = run_checks([check], fk.cluster(facts))
    return result


def test_real_machine_one_nccl_passes() -> None:
    assert run(nccl_libraries, fk.real("cpu-torch-wheel")).status is Status.PASS
    skipped = run(nccl_torch_vs_system, fk.real("cpu-torch-wheel"))
    assert skipped.status is Status.SKIP and "CPU build" in skipped.reason


def test_several_versions_say_which_wins_for_torch_and_for_the_loader() -> None:
    facts = fk.node(
        nccl=fk.nccl(
            fk.lib(fk.WHEEL, "2.27.7", ("wheel",)),
            fk.lib(fk.SYSTEM, "2.18.3", ("ldconfig",)),
            torch=fk.WHEEL,
            loader=fk.SYSTEM,
        )
    )
    result = run(nccl_libraries, facts)
    assert result.status is Status.WARN
    (finding,) = result.findings
    assert finding.code == "nccl.several_versions"
    assert f"torch loads 2.27.7 ({fk.WHEEL})" in finding.summary
    assert f"LD_LIBRARY_PATH/ld.so users get 2.18.3 ({fk.SYSTEM})" in finding.summary
    assert finding.data["versions"] == ["2.18.3", "2.27.7"]


def test_same_version_twice_is_not_several() -> None:
    facts = fk.node(nccl=fk.nccl(fk.lib(fk.WHEEL), fk.lib(fk.SYSTEM), loader=fk.SYSTEM))
    assert run(nccl_libraries, facts).status is Status.PASS


def test_no_nccl_on_a_gpu_node_fails_but_a_cpu_node_skips() -> None:
    no_libs = fk.nccl(torch=None)
    assert [
        f.code for f in run(nccl_libraries, fk.node(pci=[fk.gpu()], nccl=no_libs)).findings
    ] == ["nccl.none"]
    cpu = run(nccl_libraries, fk.node(pci=[fk.nic()], nccl=no_libs))
    assert (cpu.status, cpu.reason) == (Status.SKIP, "no libnccl, and no NVIDIA GPU that needs one")


def test_cuda_torch_with_nccl_linked_in_is_not_none() -> None:
    linked = fk.nccl(torch=Missing("torch (CUDA 11.7) has no separate libnccl", "absent"))
    facts = fk.node(pci=[fk.gpu()], nccl=linked, frameworks=fk.torch("1.13.1+cu117", "11.7"))
    outcome = run(nccl_libraries, facts)
    assert (outcome.status, outcome.findings) == (Status.SKIP, ())
    assert outcome.reason == "no separate libnccl: torch's NCCL is linked into libtorch_cuda.so"


def test_gpu_node_without_torch_or_nccl_fails() -> None:
    no_torch = fk.nccl(torch=Missing("torch is not installed for the probe's Python", "absent"))
    facts = fk.node(pci=[fk.gpu()], nccl=no_torch)
    assert [f.code for f in run(nccl_libraries, facts).findings] == ["nccl.none"]


def test_unloadable_library_is_named() -> None:
    bad = fk.lib(
        "/opt/old/libnccl.so.2", Missing("/opt/old/libnccl.so.2: OSError: bad ELF", "failed")
    )
    (finding,) = run(nccl_libraries, fk.node(nccl=fk.nccl(bad, torch=None))).findings
    assert finding.code == "nccl.unloadable" and "bad ELF" in finding.summary
    assert finding.fix is not None and finding.fix.commands == ("ldd /opt/old/libnccl.so.2",)


def test_real_unloadable_library_from_the_probe(tmp_path: Path, monkeypatch) -> None:
    """The probe run for real with a file named libnccl.so.2 that is not a library."""
    from doctor.stages import probe

    (tmp_path / "libnccl.so.2").write_text("not an ELF file\n")
    monkeypatch.setenv("LD_LIBRARY_PATH", str(tmp_path))
    facts = parse_node("vm", Capture(probe.collect({})))
    codes = {f.code for f in run(nccl_libraries, facts).findings}
    assert "nccl.unloadable" in codes


def test_torch_differs_from_system() -> None:
    facts = fk.node(
        nccl=fk.nccl(
            fk.lib(fk.WHEEL, "2.27.7"),
            fk.lib(fk.SYSTEM, "2.18.3"),
            torch=fk.WHEEL,
            loader=fk.SYSTEM,
        )
    )
    (finding,) = run(nccl_torch_vs_system, facts).findings
    assert finding.code == "nccl.torch_differs"
    assert finding.summary == "torch loads NCCL 2.27.7, the system NCCL is 2.18.3"
    assert finding.fix is not None
    assert "pip install nvidia-nccl-cu12==2.27.7" in finding.fix.commands


def test_torch_and_system_agree() -> None:
    facts = fk.node(
        nccl=fk.nccl(fk.lib(fk.WHEEL), fk.lib(fk.SYSTEM), torch=fk.WHEEL, loader=fk.SYSTEM)
    )
    assert run(nccl_torch_vs_system, facts).status is Status.PASS


def test_no_system_nccl_skips() -> None:
    result = run(nccl_torch_vs_system, fk.node(nccl=fk.nccl(fk.lib(), loader=None)))
    assert result.status is Status.SKIP and "no system libnccl" in result.reason


def test_real_two_versions_wheel_and_ld_library_path() -> None:
    """nvidia-nccl-cu12 2.21.5's libnccl on LD_LIBRARY_PATH beside the 2.32.3 wheel, for real."""
    (finding,) = run(nccl_libraries, fk.real("cpu-two-nccl")).findings
    assert finding.code == "nccl.several_versions"
    assert finding.summary == (
        "2 NCCL versions reachable (2.21.5, 2.32.3): torch (a CPU build) loads none; "
        "LD_LIBRARY_PATH/ld.so users get 2.21.5 (/tmp/doctor-nccl-2.21/lib/libnccl.so.2)"
    )


def test_real_libraries_with_a_cuda_torch_differ() -> None:
    """The real two-NCCL capture, with torch's version.py edited to a CUDA build (written: no
    CUDA torch here), so torch preloads the 2.32.3 wheel while the loader gives 2.21.5."""
    capture = fk.raw("cpu-two-nccl")
    version_py = next(p for p in capture["files"] if p.endswith("/torch/version.py"))
    text = capture["files"][version_py]["text"]
    capture["files"][version_py]["text"] = text.replace(
        "cuda: Optional[str] = None", "cuda = '12.9'"
    )
    (finding,) = run(nccl_torch_vs_system, fk.real("cpu-two-nccl", raw_capture=capture)).findings
    assert finding.summary == "torch loads NCCL 2.32.3, the system NCCL is 2.21.5"
    assert (
        finding.fix is not None and "pip install nvidia-nccl-cu12==2.32.3" in finding.fix.commands
    )
