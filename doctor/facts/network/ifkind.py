"""What kind an interface is: one classifier for a probed node and for a pasted listing.

The kernel says it: netlink's IFLA_INFO_KIND (``ip -d``), the ARPHRD type (loopback, IPoIB),
sysfs's ``bridge/``, ``bonding/``, ``tun_flags`` and ``device`` link (a NIC on a bus). The probe
reads all of it; a paste shows only part (``ip -d`` the netlink kind, ``link/infiniband`` the
type, bond flags and bridge ports the roles) and never sysfs. Where the text says nothing more,
the kind is guessed from what is left: an ``@ifN`` peer in another namespace (a container's veth)
and the names udev, container runtimes and overlays give. A guess says so (``IfKind.guessed``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

# Kinds the kernel names in IFLA_INFO_KIND that we report as they are.
NETLINK_KINDS = {
    "veth",
    "bridge",
    "bond",
    "vlan",
    "macvlan",
    "macvtap",
    "ipvlan",
    "vxlan",
    "geneve",
    "wireguard",
    "ipoib",
    "dummy",
    "tun",
}

# Names, most specific first. udev's predictable names (systemd.net-naming-scheme: en*/ib*/wl*/
# ww* with o/s/p/x parts, derived from the device's bus position, so only a device has one;
# biosdevname em*/p*p*); net*, the interfaces Multus adds to a pod (an SR-IOV VF); not eth*, the
# kernel's default, which a container's veth, a cloud VM's virtio NIC and a bare NIC all get;
# GKE's gpu<N>rdma<N> and rdma<N>, HPE Slingshot's hsn<N>, a BlueField DPU's uplinks p<N> and
# its host PF representor pf<N>hpf. Then the names container runtimes, hypervisors, overlays
# and VPNs give their virtual devices.
_NAMED: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (kind, re.compile(pattern))
    for kind, pattern in (
        ("vxlan", r"(?:vxlan|flannel\.\d|cilium_vxlan$)"),  # flannel.1 before VLANs' name.N
        ("ipoib", r"ib(?:\d|[ops]\d)"),  # ib0, ib0.8001 (a P_Key child, not a VLAN), ibp12s0
        ("vlan", r"[\w-]+\.\d{1,4}$"),  # ens5.100, bond0.200
        ("bridge", r"(?:docker\d|virbr\d|br-|br\d|cni\d|cbr\d|lxcbr\d|vmbr\d|kube-bridge$|weave$)"),
        ("veth", r"(?:veth|cali[0-9a-f]|lxc[0-9a-f]{4})"),  # Calico's and Cilium's host ends
        ("wireguard", r"(?:wg\d|flannel-wg$)"),
        ("tun", r"(?:tun\d|tailscale\d|utun\d)"),
        ("tap", r"tap"),
        ("dummy", r"(?:dummy\d|kube-ipvs\d|nodelocaldns$)"),
        ("bond", r"bond\d"),
        (
            "physical",
            r"(?:en|em\d|p\d+p\d|wl|ww|net\d|gpu\d+rdma\d|rdma\d|hsn\d|p\d+$|pf\d+hpf$)",
        ),
    )
)


@dataclass(frozen=True)
class Evidence:
    """What is known of one interface. ``device`` is None where sysfs was not read (a paste)."""

    info: dict[str, Any] = field(default_factory=dict)  # netlink linkinfo (info_kind, info_data)
    loopback: bool = False
    infiniband: bool = False  # ARPHRD_INFINIBAND, `link/infiniband`
    bridge: bool = False
    bond: bool = False
    tun_flags: int | None = None
    device: bool | None = None  # sysfs: a device link (a NIC on a bus)
    peer_elsewhere: bool = False  # `@ifN`: its link is in another network namespace
    pair: bool = False  # `vA@vB` and `vB@vA`: each the other's link, which only a veth pair is
    # The listing holds Multus's net<N> interfaces, which only a Kubernetes pod has: its eth0
    # is the pod network's (a CNI's veth, ipvlan or macvlan), not a NIC.
    in_pod: bool = False


@dataclass(frozen=True)
class IfKind:
    name: str  # physical, veth, bridge, bond, vlan, ..., virtual; "unknown" where nothing says
    guessed: bool = False  # from the name or an @ifN peer, not from what the kernel reported


def classify(name: str, seen: Evidence) -> IfKind:
    kind = seen.info.get("info_kind")
    if kind == "tun":
        return IfKind("tap" if (seen.info.get("info_data") or {}).get("type") == "tap" else "tun")
    if kind in NETLINK_KINDS:
        return IfKind(str(kind))
    if seen.loopback:
        return IfKind("loopback")
    if seen.infiniband:
        return IfKind("ipoib")
    if seen.bridge:
        return IfKind("bridge")
    if seen.bond:
        return IfKind("bond")
    if seen.pair:
        return IfKind("veth")
    if seen.tun_flags is not None:
        return IfKind("tap" if seen.tun_flags & 0x2 else "tun")  # IFF_TAP
    if seen.device is not None:
        return IfKind("physical" if seen.device else "virtual")
    return _guess(name, seen.peer_elsewhere, seen.in_pod)


def _guess(name: str, peer_elsewhere: bool, in_pod: bool = False) -> IfKind:
    """The kind a name and its peer suggest, for a node seen only through pasted text."""
    if peer_elsewhere and not name.startswith(("ib", "bond")):
        return IfKind("veth", guessed=True)  # a pod's eth0@if12: its host end is in the root netns
    if in_pod and name == "eth0":
        return IfKind("virtual", guessed=True)
    for kind, pattern in _NAMED:
        if pattern.match(name):
            return IfKind(kind, guessed=True)
    return IfKind("unknown")
