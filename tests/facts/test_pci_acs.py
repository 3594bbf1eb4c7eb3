"""ACS on PCIe bridges, read from config space.

No machine here has a PCIe bridge (this is a VM), so the config spaces are built below from the
documented layout (PCI Express Base Specification, 7.6: extended capabilities from 0x100, a
32-bit header of ID, version and next offset; ACS is ID 0x000D with its control word at +6),
not captured.
"""

from __future__ import annotations

import pytest

from checks.topo import acs_redirect
from doctor.core.capture import Capture
from doctor.core.model import Missing
from doctor.facts.pci import ROOT, Acs, parse_acs, parse_pci
from doctor.plugin import Skip
from doctor.stages import probe
from tests import factkit


def config(*caps: tuple[int, bytes], size: int = 4096) -> str:
    """A config space with the given extended capabilities (ID, body) chained from 0x100."""
    space = bytearray(size)
    offset = 0x100
    for i, (cap_id, body) in enumerate(caps):
        following = offset + 0x40 if i + 1 < len(caps) else 0
        header = cap_id | (1 << 16) | (following << 20)
        space[offset : offset + 4] = header.to_bytes(4, "little")
        space[offset + 4 : offset + 4 + len(body)] = body
        offset = following
    return space.hex()


def acs_body(control: int) -> bytes:
    return (0x007F).to_bytes(2, "little") + control.to_bytes(2, "little")


AER = (0x0001, bytes(8))
REDIRECTING = config(AER, (0x000D, acs_body(0x001D)))  # SrcValid ReqRedir CmpltRedir UpstreamFwd
OFF = config(AER, (0x000D, acs_body(0x0000)))


def test_the_acs_control_word_is_found_along_the_capability_chain() -> None:
    acs = parse_acs(REDIRECTING)
    assert isinstance(acs, Acs) and acs.redirects
    assert str(acs) == (
        "SrcValid+ TransBlk- ReqRedir+ CmpltRedir+ UpstreamFwd+ EgressCtrl- DirectTrans-"
    )
    off = parse_acs(OFF)
    assert isinstance(off, Acs) and not off.redirects


def test_no_acs_unreadable_and_garbage() -> None:
    assert parse_acs(config(AER)) is None
    short = parse_acs(config(AER, size=64))  # what a user other than root reads
    assert isinstance(short, Missing) and short.kind == "unreadable"
    assert isinstance(parse_acs("zz"), Missing)
    looped = bytearray(bytes.fromhex(config(AER)))
    looped[0x100:0x104] = (0x0001 | (0x100 << 20)).to_bytes(4, "little")  # next: itself
    assert parse_acs(looped.hex()) is None


def capture(bridge_config: str | None) -> Capture:
    """A GPU and a NIC below one switch port, as the probe captures them."""
    devices = {
        "0000:00:01.0": ("0x060400", "/sys/devices/pci0000:00/0000:00:01.0"),
        "0000:01:00.0": ("0x030200", "/sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0"),
        "0000:01:00.1": ("0x020700", "/sys/devices/pci0000:00/0000:00:01.0/0000:01:00.1"),
    }
    vendors = {"0000:00:01.0": "0x10b5", "0000:01:00.0": "0x10de", "0000:01:00.1": "0x15b3"}
    files: dict = {}
    values: dict = {}
    for addr, (klass, real) in devices.items():
        base = f"{ROOT}/{addr}"
        files |= {
            f"{base}/class": {"text": klass + "\n"},
            f"{base}/vendor": {"text": vendors[addr] + "\n"},
            f"{base}/device": {"text": "0x1234\n"},
        }
        values[f"realpath:{base}"] = {"value": real}
    if bridge_config is not None:
        values[f"pci-config:{ROOT}/0000:00:01.0"] = {"value": bridge_config}
    raw = {"probe": {}, "dirs": {ROOT: {"entries": sorted(devices)}}, "files": files}
    return Capture({**raw, "values": values})


def judged(bridge_config: str | None) -> list:
    pci = parse_pci(capture(bridge_config))
    return list(acs_redirect.fn(factkit.node("n1", pci=pci)))


def test_a_redirecting_bridge_above_a_gpu_and_a_nic_is_named() -> None:
    (finding,) = judged(REDIRECTING)
    assert finding.code == "pci.acs.redirect" and finding.data == {"bridges": ["0000:00:01.0"]}
    assert "ReqRedir+" in finding.evidence[0]
    assert "setpci -s 0000:00:01.0 ECAP_ACS+0x6.w=0000" in finding.fix.commands[0]
    assert judged(OFF) == []


def test_unreadable_config_space_skips_with_the_reason() -> None:
    with pytest.raises(Skip, match="root only"):
        judged(config(AER, size=64))
    assert judged(None) == []  # an older capture without config space: nothing to judge


def test_the_probe_reads_config_space_only_of_bridges_above_a_gpu_or_a_nic(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # This VM has no PCIe bridge: the probe's sysfs reads are answered from its own caches
    # (a root port above a GPU, a switch port above nothing but a disk controller).
    tree = {
        "0000:00:01.0": ("0x060400", "0x8086", "/sys/devices/pci0000:00/0000:00:01.0"),
        "0000:01:00.0": ("0x030200", "0x10de", "/sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0"),
        "0000:00:02.0": ("0x060400", "0x8086", "/sys/devices/pci0000:00/0000:00:02.0"),
        "0000:02:00.0": ("0x010802", "0x144d", "/sys/devices/pci0000:00/0000:00:02.0/0000:02:00.0"),
    }
    p = probe.Probe(dict(probe.DEFAULT_SPEC))
    p.dirs[ROOT] = {"entries": sorted(tree)}
    for addr, (klass, vendor, _) in tree.items():
        p.files[f"{ROOT}/{addr}/class"] = {"text": klass + "\n"}
        p.files[f"{ROOT}/{addr}/vendor"] = {"text": vendor + "\n"}
    real = {f"{ROOT}/{addr}": path for addr, (_, _, path) in tree.items()}
    monkeypatch.setattr(probe.os.path, "realpath", lambda path: real.get(path, path))
    monkeypatch.setattr(probe, "_config_hex", lambda device: REDIRECTING)
    probe.collect_pci(p)
    assert sorted(k for k in p.values if k.startswith("pci-config:")) == [
        f"pci-config:{ROOT}/0000:00:01.0"
    ]
