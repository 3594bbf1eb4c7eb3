"""PCIe links of the GPUs and NICs: the width and speed each trained at, and the most it can do.

Two sources, one shape. sysfs (drivers/pci/pci-sysfs.c): ``current_link_width`` "16",
``max_link_width``, ``current_link_speed`` "16.0 GT/s PCIe" (older kernels "16 GT/s", "Unknown
speed"), ``max_link_speed``; the probe reads them for network and GPU functions. A pasted
`lspci -vv` (pciutils ls-caps.c): a device line ``17:00.0 Infiniband controller: Mellanox ...``
and, under it, ``LnkCap: Port #0, Speed 32GT/s, Width x16, ...`` and ``LnkSta: Speed 16GT/s
(downgraded), Width x8 (downgraded)``. A virtual function shows "Speed unknown, Width x0": not
reported, never "narrow".
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from doctor.core.capture import Capture, CommandResult
from doctor.core.model import Missing
from doctor.facts.gpu import sysfs_bus_id

ROOT = "/sys/bus/pci/devices"
ATTRS = ("current_link_width", "max_link_width", "current_link_speed", "max_link_speed")
LSPCI_SLOT = "lspci:vv"  # a pasted `lspci -vv` lands in "lspci:vv:<crc>"
# The class names lspci prints (pciutils lib/pci.ids "C" lines) for the functions judged here.
_KINDS = {
    "infiniband controller": "nic",
    "ethernet controller": "nic",
    "network controller": "nic",
    "3d controller": "gpu",
    "vga compatible controller": "gpu",
    "display controller": "gpu",
    "processing accelerators": "gpu",
}
_DEVICE = re.compile(
    r"^(?P<addr>(?:[0-9a-fA-F]{4,8}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7])\s+"
    r"(?P<class>[^:\[]+?)(?:\s*\[[0-9a-fA-F]{4}\])?:\s*(?P<name>.*)$"
)
_LINK = re.compile(r"^\s*Lnk(?P<which>Cap|Sta):\s*(?P<rest>.*)$")
_SPEED = re.compile(r"Speed\s+(?P<gts>\d+(?:\.\d+)?)\s*GT/s", re.I)
_WIDTH = re.compile(r"Width\s+x(?P<lanes>\d+)", re.I)
_SYSFS_SPEED = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*GT/s")


@dataclass(frozen=True)
class PcieLink:
    address: str  # sysfs form, 0000:17:00.0
    kind: str  # "nic", "gpu" or "other"
    name: str  # what lspci calls the device, or its class where sysfs gave the link
    width: int | None
    width_max: int | None
    speed: float | None  # GT/s
    speed_max: float | None
    source: str  # "sysfs" or "lspci -vv"

    @property
    def narrow(self) -> bool:
        return bool(self.width and self.width_max and self.width < self.width_max)

    @property
    def slow(self) -> bool:
        return bool(self.speed and self.speed_max and self.speed < self.speed_max)


def _lanes(text: object) -> int | None:
    if isinstance(text, str) and text.strip().isdecimal():
        return int(text.strip()) or None  # 0: a VF or a link that is down; not reported
    return None


def _gts(text: object) -> float | None:
    m = _SYSFS_SPEED.match(text) if isinstance(text, str) else None
    return float(m.group(1)) if m else None


def _kind(pci_class: str) -> str:
    code = pci_class.strip().lower()
    if code.startswith("0x02"):
        return "nic"
    if code.startswith(("0x03", "0x12")):
        return "gpu"
    return "other"


def _sysfs(cap: Capture) -> list[PcieLink]:
    listing = cap.dir(ROOT)
    out = []
    for addr in listing if isinstance(listing, list) else []:
        base = f"{ROOT}/{addr}"
        values = {a: cap.file(f"{base}/{a}") for a in ATTRS}
        if all(isinstance(v, Missing) for v in values.values()):
            continue
        klass = cap.file(f"{base}/class")
        out.append(
            PcieLink(
                address=addr,
                kind=_kind(klass) if isinstance(klass, str) else "other",
                name=klass.strip() if isinstance(klass, str) else "?",
                width=_lanes(values["current_link_width"]),
                width_max=_lanes(values["max_link_width"]),
                speed=_gts(values["current_link_speed"]),
                speed_max=_gts(values["max_link_speed"]),
                source="sysfs",
            )
        )
    return out


def parse_lspci(text: str) -> list[PcieLink]:
    """Every device of an `lspci -vv` output that shows its link (LnkCap and LnkSta)."""
    found: dict[str, dict[str, object]] = {}
    current: dict[str, object] | None = None
    for line in text.splitlines()[:200_000]:
        line = line.rstrip("\r")
        if device := _DEVICE.match(line):
            klass = device["class"].strip().lower()
            current = {"kind": _KINDS.get(klass, "other"), "name": line.strip()[:160]}
            found[sysfs_bus_id(device["addr"])] = current
            continue
        link = _LINK.match(line)
        if link is None or current is None:
            continue
        speed, width = _SPEED.search(link["rest"]), _WIDTH.search(link["rest"])
        suffix = "_max" if link["which"] == "Cap" else ""
        current["speed" + suffix] = float(speed["gts"]) if speed else None
        current["width" + suffix] = (int(width["lanes"]) or None) if width else None
    return [
        PcieLink(
            address=addr,
            kind=str(info["kind"]),
            name=str(info["name"]),
            width=_opt_int(info.get("width")),
            width_max=_opt_int(info.get("width_max")),
            speed=_opt_float(info.get("speed")),
            speed_max=_opt_float(info.get("speed_max")),
            source="lspci -vv",
        )
        for addr, info in found.items()
        if "width" in info or "width_max" in info
    ]


def _opt_int(value: object) -> int | None:
    return value if isinstance(value, int) else None


def _opt_float(value: object) -> float | None:
    return value if isinstance(value, float) else None


def parse_pcie_links(cap: Capture) -> dict[str, PcieLink] | Missing:
    """Each function's link by its sysfs address: pasted lspci output where there is some (it
    names the device), else what the probe read from sysfs."""
    links = {link.address: link for link in _sysfs(cap)}
    pasted = sorted(n for n in cap.raw.get("commands", {}) if n.startswith(LSPCI_SLOT + ":"))
    for name in pasted:
        result = cap.command(name)
        if isinstance(result, CommandResult):
            links.update((link.address, link) for link in parse_lspci(result.stdout))
    if not links and isinstance(cap.dir(ROOT), Missing) and not pasted:
        return Missing("no PCI link was captured", "unsupported")
    return links
