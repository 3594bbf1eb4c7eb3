"""Host facts from pasted outputs, captured here where the machine allows (df of full tmpfs
filesystems, free with swap on) and written from their tools' formats where it does not."""

from __future__ import annotations

from pathlib import Path

import pytest

from doctor.core.capture import Capture
from doctor.core.model import Missing
from doctor.facts.host.disk import parse_df
from doctor.facts.host.host import HostFacts, parse_host
from doctor.facts.host.memory import parse_free, parse_swaps
from doctor.facts.host.mounts import mount_of, parse_mount_listing, parse_mountinfo
from doctor.facts.host.sensors import parse_sensors
from doctor.facts.host.slurm import parse_scontrol_node
from doctor.paste.reader import document

FIXTURES = Path(__file__).parent.parent / "fixtures" / "host"
GIB = 1 << 30


def text(name: str) -> str:
    return (FIXTURES / name).read_text()


def host_of(*names: str) -> HostFacts:
    doc = document("paste", "\n".join(text(n) for n in names).encode(), False)
    return parse_host(Capture(doc))


def test_df_h_and_df_i_of_one_node_merge_per_mount() -> None:
    spaces = host_of("captured-df-h-full-tmpfs.txt", "captured-df-i-full-tmpfs.txt").spaces
    assert not isinstance(spaces, Missing)
    by = {s.path: s for s in spaces}
    full = by["/tmp/hc_cap/scratch"]
    assert (full.size, full.avail, full.free_pct) == (8 << 20, 0, 0.0)
    inodes = by["/tmp/hc_cap/inodes"]
    assert (inodes.files, inodes.ffree, inodes.inodes_free_pct) == (64, 0, 0.0)
    root = by["/"]
    assert root.size == 252 * GIB and root.files == 16777216


@pytest.mark.parametrize("name", ["captured-df-k.txt", "captured-df-TP.txt", "captured-df-h.txt"])
def test_every_df_form_gives_the_same_mounts(name: str) -> None:
    spaces = parse_df(text(name))
    assert {s.path for s in spaces} >= {"/", "/dev/shm", "/dev"}
    root = next(s for s in spaces if s.path == "/")
    assert root.free_pct is not None and 25 < root.free_pct < 35
    if name == "captured-df-TP.txt":
        assert root.mount is not None and root.mount.fstype == "ext4"


def test_a_long_source_name_wraps_its_numbers() -> None:
    spaces = {s.path: s for s in parse_df(text("written-df-wrapped.txt"))}
    assert set(spaces) == {"/", "/home", "/snap/core20/2318", "/run/user/1000"}
    assert spaces["/home"].avail == 5368320 * 1024
    assert spaces["/"].mount is None  # plain df names no type


@pytest.mark.parametrize(
    ("name", "total", "available", "swap"),
    [
        ("captured-free.txt", 24684092 * 1024, 24271456 * 1024, 0),
        ("captured-free-m.txt", 24105 << 20, 23702 << 20, 0),
        ("captured-free-h-swap-on.txt", 23 * GIB, 22 * GIB, 63 << 20),
        ("written-free-old-procps.txt", 65843520 * 1024, None, 8388604 * 1024),
    ],
)
def test_free_in_every_unit(name: str, total: int, available: int | None, swap: int) -> None:
    mem = parse_free(text(name))
    assert mem is not None
    assert abs(mem.total - total) < 4 << 20  # a later capture of the same machine may differ
    if available is None:
        assert mem.available is None
    else:
        assert mem.available is not None and abs(mem.available - available) < 512 << 20
    assert mem.swap_total == swap


def test_swap_areas_from_swapon_and_proc() -> None:
    (shown,) = parse_swaps(text("captured-swapon-show-on.txt"))
    (proc,) = parse_swaps(text("captured-proc-swaps-on.txt"))
    assert shown.name == proc.name == "/tmp/hc_swapcap"
    assert shown.size == 64 << 20 and proc.size == 65532 * 1024 and proc.used == 0
    assert parse_swaps(text("captured-proc-swaps.txt")) == ()


def test_mount_and_findmnt_give_the_same_table() -> None:
    mounts = parse_mount_listing(text("captured-mount.txt"))
    tree = parse_mount_listing(text("captured-findmnt.txt"))
    assert {(m.point, m.fstype) for m in mounts} >= {("/", "ext4"), ("/dev/shm", "tmpfs")}
    assert {(m.point, m.fstype) for m in tree} >= {("/", "ext4"), ("/dev/shm", "tmpfs")}
    found = mount_of("/dev/shm/x", tree)
    assert found is not None and found.point == "/dev/shm"


def test_mountinfo_unescapes_and_finds_the_longest_mount() -> None:
    table = parse_mountinfo(
        "22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw\n"
        "40 22 0:45 / /home rw,relatime shared:20 - nfs4 fs01:/export/home rw,vers=4.2\n"
        "41 40 0:46 / /home/my\\040data ro,relatime - fuse.sshfs me@h:/d ro\n"
    )
    assert [m.point for m in table] == ["/", "/home", "/home/my data"]
    assert table[1].network and table[2].network and table[2].read_only
    found = mount_of("/home/my data/f", table)
    assert found is not None and found.fstype == "fuse.sshfs"
    assert mount_of("/home/other", table) == table[1]


def test_sensors_readings_and_their_limits() -> None:
    temps = parse_sensors(text("written-sensors.txt"))
    by = {(t.chip, t.label): t for t in temps}
    package = by[("coretemp-isa-0000", "Package id 0")]
    assert (package.celsius, package.high, package.crit) == (45.0, 80.0, 100.0)
    nvme = by[("nvme-pci-0100", "Composite")]
    assert (nvme.high, nvme.crit) == (84.8, 84.8)  # crit on its own line
    assert ("nct6779-isa-0290", "AUXTIN1") not in by  # 127 °C: an unconnected input
    assert by[("acpitz-acpi-0", "temp1")].crit == 119.0


def test_sensors_in_fahrenheit() -> None:
    (t,) = parse_sensors(
        "k10temp-pci-00c3\nAdapter: PCI adapter\nTctl:  +122.0°F  (high = +176.0°F)\n"
    )
    assert t.celsius == pytest.approx(50.0) and t.high == pytest.approx(80.0)


def test_a_drained_node() -> None:
    node = parse_scontrol_node(text("written-scontrol-drain.txt"))
    assert node is not None
    assert (node.name, node.state) == ("gpu07", "IDLE+DRAIN")
    assert node.reason == "xid 79 on gpu 3 [root@2026-11-28T12:05:00]"
    assert node.words == {"IDLE", "DRAIN"}
