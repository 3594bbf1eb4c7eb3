"""NCCL's selection rules on small address lists, and decoding what the library answered."""

from __future__ import annotations

from doctor.facts.network.net import AF_INET, AF_INET6, IFF_RUNNING, IFF_UP, IfAddr, NetFacts
from doctor.nic.config import Setting
from doctor.nic.nccl import (
    decode_unique_id,
    match_subnet,
    parse_bootstrap_log,
    parse_comm_id,
    select,
    socket_family,
)

RUNNING = IFF_UP | IFF_RUNNING

# Captured on this machine from libnccl.so.2 2.32.3 (nvidia-nccl-cu12) in a namespace whose
# only usable interface was lo: ncclGetUniqueId's 128 bytes, then its NCCL_DEBUG=INFO lines.
REAL_ID_LO = "71a6dd793fe4888f02008fcb7f000001" + "00" * 112
REAL_LOG_LO = (
    "vm:10509:10509 [0] NCCL INFO ENV/Plugin: Could not find: libnccl-env.so\n"
    "vm:10509:10509 [0] NCCL INFO Bootstrap: Using lo:127.0.0.1<0>\n"
)
REAL_LOG_NONE = (
    "vm:10553:10553 [0] NCCL INFO NCCL_SOCKET_FAMILY set by environment to AF_INET6\n"
    "[2026-11-22 04:07:56] vm:10553:10553 [0] bootstrap.cc:129 (bootstrapNetInit) "
    "NCCL WARN Bootstrap : no socket interface found\n"
)
# Written from the pre-2.24 format string "Bootstrap : Using%s" with entries " [%d]%s:%s"
# (src/bootstrap.cc at v2.23.4); no such library is installed here to capture it.
OLD_FORMAT_LOG = "host:1:1 [0] NCCL INFO Bootstrap : Using [0]eno1:10.1.2.3<0>\n"


def addr(name: str, address: str, prefix: int, flags: int = RUNNING, scope: int = 0) -> IfAddr:
    family = AF_INET6 if ":" in address else AF_INET
    return IfAddr(name, family, address, prefix, flags, scope)


def net_of(*addrs: IfAddr) -> NetFacts:
    return NetFacts({}, tuple(addrs), "getifaddrs", (), "h", (), {})


def env(**values: str) -> dict[str, Setting]:
    return {k: Setting(v, "env") for k, v in values.items()}


def first(net: NetFacts, version: tuple[int, int, int] | None, **values: str) -> str | None:
    chosen = select(net, env(**values), version, bootstrap=True).first
    return chosen.name if chosen else None


def test_decode_real_unique_id() -> None:
    got = decode_unique_id(REAL_ID_LO)
    assert got is not None
    assert (got.family, got.address, got.port) == (AF_INET, "127.0.0.1", 0x8FCB)
    assert decode_unique_id("zz") is None


def test_parse_real_bootstrap_logs() -> None:
    ok = parse_bootstrap_log(REAL_LOG_LO)
    assert (ok.interface, ok.address, ok.warning) == ("lo", "127.0.0.1", None)
    none = parse_bootstrap_log(REAL_LOG_NONE)
    assert none.interface is None and none.warning == "Bootstrap : no socket interface found"
    old = parse_bootstrap_log(OLD_FORMAT_LOG)
    assert (old.interface, old.address) == ("eno1", "10.1.2.3")


def test_virbr_and_running_rules_change_at_2_28_3() -> None:
    net = net_of(
        addr("lo", "127.0.0.1", 8),
        addr("eth1", "198.18.9.1", 24, flags=IFF_UP),  # up, no carrier
        addr("virbr0", "198.19.122.1", 24),
        addr("eth0", "198.18.1.1", 24),
    )
    assert first(net, (2, 28, 3)) == "eth0"
    assert first(net, None) == "eth0"  # unknown version: today's rules
    assert first(net, (2, 27, 7)) == "eth1"  # no IFF_RUNNING test before 2.28.3
    without_eth1 = net_of(*(a for a in net.ifaddrs if a.name != "eth1"))
    assert first(without_eth1, (2, 27, 7)) == "virbr0"  # virbr was not excluded


def test_ib_first_then_docker_then_lo() -> None:
    net = net_of(
        addr("lo", "127.0.0.1", 8), addr("docker0", "172.17.0.1", 16), addr("ib0", "198.19.0.1", 24)
    )
    assert first(net, None) == "ib0"
    assert first(net_of(*net.ifaddrs[:2]), None) == "docker0"
    assert first(net_of(net.ifaddrs[0]), None) == "lo"


def test_socket_family_and_ipv6_loopback() -> None:
    net = net_of(
        addr("lo", "::1", 128), addr("eth0", "198.18.1.1", 24), addr("eth0", "fe80::1", 64)
    )
    assert first(net, None, NCCL_SOCKET_FAMILY="AF_INET6") == "eth0"
    assert socket_family("AF_INET") == AF_INET and socket_family("inet6") is None


def test_socket_list_keeps_one_address_per_interface_up_to_16() -> None:
    addrs = [addr(f"eth{i}", f"198.18.{i}.1", 24) for i in range(20)]
    addrs.insert(1, addr("eth0", "198.19.0.1", 24))
    chosen = select(net_of(*addrs), {}, None, bootstrap=False).interfaces
    assert len(chosen) == 16 and chosen[0].address == "198.18.0.1"


def test_comm_id_forms() -> None:
    assert parse_comm_id("198.18.0.1:29500") is not None
    v6 = parse_comm_id("[fe80::1%eth0]:29500")
    assert v6 is not None and (v6.host, v6.port, v6.scope_ifname) == ("fe80::1", 29500, "eth0")
    assert parse_comm_id("[fe80::1:29500") is None
    net = net_of(addr("eth0", "fe80::1", 64, scope=2), addr("eth1", "fe80::2", 64, scope=3))
    hit = match_subnet(net.ifaddrs, "fe80::9", 3)
    assert hit is not None and hit.name == "eth1"
