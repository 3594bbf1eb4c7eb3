"""PCIe links of the RDMA NICs and GPUs from a pasted `lspci -vv`: a narrower link than the
device can do is named (absolute), a NIC slower than its siblings too (relative); an idle GPU's
link speed and a NIC whose slot is a generation older than it are not warnings."""

from __future__ import annotations

from pathlib import Path

from doctor.core.model import Finding, Missing, Status
from doctor.facts.node import parse_node
from doctor.facts.pcie_link import parse_lspci, parse_pcie_links
from doctor.judge.registry import load_checks
from doctor.judge.runner import run_checks
from tests import factkit as fk
from tests.paste.pastekit import pasted, read_text

H100_XML = Path(__file__).parent.parent / "fixtures" / "gpu" / "h100" / "nvidia-smi-q.xml"


def outcome(text: str):  # type: ignore[no-untyped-def]
    node = parse_node("n1", read_text(text))
    return next(o for o in run_checks(load_checks(), fk.cluster(node)) if o.check == "pcie.links")


def test_the_links_lspci_shows() -> None:
    links = {x.address: x for x in parse_lspci(pasted("written-lspci-vv-degraded.txt"))}
    nic = links["0000:29:00.0"]
    assert (nic.kind, nic.width, nic.width_max, nic.speed, nic.speed_max) == (
        "nic",
        8,
        16,
        16.0,
        32.0,
    )
    gpu = links["0000:19:00.0"]
    assert (gpu.kind, gpu.width, gpu.speed) == ("gpu", 16, 2.5)
    assert "ConnectX-7" in nic.name and nic.source == "lspci -vv"


def test_a_healthy_node_passes() -> None:
    result = outcome(pasted("written-lspci-vv.txt"))
    assert result.status is Status.PASS, result.findings  # the idle GPU at 2.5 GT/s included


def test_a_narrow_nic_a_slow_nic_and_a_narrow_gpu_are_named() -> None:
    result = outcome(pasted("written-lspci-vv-degraded.txt"))
    found: dict[str, Finding] = {f.code: f for f in result.findings}
    assert set(found) == {"pcie.nic.narrow", "pcie.nic.slow", "pcie.gpu.narrow"}
    assert found["pcie.nic.narrow"].data == {"threshold": "absolute", "devices": ["0000:29:00.0"]}
    assert found["pcie.nic.slow"].data["threshold"] == "relative"
    assert found["pcie.gpu.narrow"].data["devices"] == ["0000:2a:00.0"]
    fix = found["pcie.nic.narrow"].fix
    assert fix is not None and fix.commands == (
        "sudo lspci -vv -s 0000:29:00.0 | grep -E 'LnkCap|LnkSta'",
    )


def test_plain_lspci_is_no_link_and_a_gpu_reporting_its_own_link_is_left_to_gpu_pcie() -> None:
    plain = "$ lspci\n18:00.0 Infiniband controller: Mellanox\n$ ip a\n" + pasted("netns-ip-a.txt")
    assert isinstance(parse_pcie_links(read_text(plain)), Missing)  # not read: not "no links"
    lspci = pasted("written-lspci-vv-degraded.txt").replace("2a:00.0 3D", "00:06.0 3D")
    text = lspci + H100_XML.read_text()  # the H100 at 00:06.0 reports x16 of x16 itself
    found = {f.code: f for f in outcome(text).findings}
    assert "pcie.gpu.narrow" not in found and "pcie.nic.narrow" in found


def test_a_paste_that_starts_with_a_gpu_is_read() -> None:
    """`lspci -vv -s <gpu>`: the class "3D controller" starts with a digit, as the paste does."""
    text = pasted("written-lspci-vv-degraded.txt")
    gpu = text[text.index("2a:00.0 3D controller") : text.index("3a:00.0 Infiniband")]
    found = {f.code: f for f in outcome(gpu).findings}
    assert set(found) == {"pcie.gpu.narrow"}
    assert found["pcie.gpu.narrow"].data["devices"] == ["0000:2a:00.0"]


def test_a_damaged_sysfs_width_is_no_width() -> None:
    """str.isdigit() takes "²" and int() refuses it: a damaged value read no width, never a crash
    (found by tests/properties/test_captures.py)."""
    from doctor.facts.pcie_link import _lanes

    assert _lanes("²") is None and _lanes(" 16\n") == 16
