"""Pasted `ibstat`, `ibv_devinfo` (-v), `rdma link`, `ibdev2netdev`, `show_gids`, `perfquery` and
`grep . /sys/class/infiniband/...` into RDMA sysfs.

The probe reads /sys/class/infiniband (doctor/facts/network/rdma.py), the files these tools read too
(libibumad and the kernel's verbs sysfs): each paste is written back into the entries it came
from, in the kernel's own notation ("4: ACTIVE", "5: LinkUp", "400 Gb/sec (4X NDR)", "RoCE v2"),
and only what it shows. `ibdev2netdev` shows which netdev an HCA port drives but not the port's
state; /dev/infiniband and libibverbs are never shown by any of them and stay absent. `perfquery`
names a port by its LID only: its text goes to a slot of its own and the facts put its counters
on the port with that LID (doctor/facts/network/ib_counters.py).
"""

from __future__ import annotations

import re
import zlib
from typing import Any

from doctor.facts.network.ib_counters import PERFQUERY_SLOT
from doctor.facts.network.rdma import ROOT
from doctor.paste.kind import Kind, command, matcher

# include/rdma/ib_verbs.h enum ib_port_state, and the names sysfs prints for it.
_STATES = {"NOP": 0, "DOWN": 1, "INIT": 2, "INITIALIZING": 2, "ARMED": 3, "ACTIVE": 4}
_STATES["ACTIVE_DEFER"] = _STATES["ACTIVEDEFER"] = 5
# The physical port states, as sysfs names them (drivers/infiniband/core/sysfs.c).
_PHYS = (
    "",
    "Sleep",
    "Polling",
    "Disabled",
    "PortConfigurationTraining",
    "LinkUp",
    "LinkErrorRecovery",
    "PhyTest",
)
_GID_TYPES = {"v1": "IB/RoCE v1", "v2": "RoCE v2"}
# ibv_devinfo's active_speed codes (include/infiniband/verbs.h enum ibv_port_speed; devinfo.c
# prints "100.0 Gbps (128)") and, where an old one prints no code, each lane's Gb/s → the
# generation the kernel's rate names (drivers/infiniband/core/sysfs.c rate_show).
_SPEED_CODES = {1: "SDR", 2: "DDR", 4: "QDR", 8: "FDR10", 16: "FDR", 32: "EDR", 64: "HDR"}
_SPEED_CODES.update({128: "NDR", 256: "XDR"})
_LANE_SPEEDS = {2.5: "SDR", 5.0: "DDR", 10.0: "QDR", 14.0: "FDR", 25.0: "EDR", 50.0: "HDR"}
_LANE_SPEEDS.update({100.0: "NDR", 200.0: "XDR"})


class _Sysfs:
    """The /sys/class/infiniband entries one paste shows, as a capture fragment."""

    def __init__(self) -> None:
        self.dirs: dict[str, set[str]] = {}
        self.files: dict[str, str] = {}

    def hca(self, name: str) -> str:
        self.dirs.setdefault(ROOT, set()).add(name)
        return f"{ROOT}/{name}"

    def port(self, hca: str, number: str) -> str:
        base = self.hca(hca)
        self.dirs.setdefault(f"{base}/ports", set()).add(number)
        return f"{base}/ports/{number}"

    def port_for(self, hca: str, port: str | None, entry: str) -> str:
        """The port a per-port line belongs to: the current one, or, where no "port:" line
        came first or the current port already has this entry (the output was grepped:
        `ibv_devinfo | grep -E 'hca_id|state'`), the next one, numbered from 1 in order."""
        if port is not None and f"{port}/{entry}" not in self.files:
            return port
        number = int(port.rsplit("/", 1)[1]) + 1 if port is not None else 1
        return self.port(hca, str(number))

    def listed(self, folder: str, entry: str) -> None:
        self.dirs.setdefault(folder, set()).add(entry)

    def fragment(self) -> dict[str, Any]:
        if not self.dirs:
            return {}
        return {
            "dirs": {path: {"entries": sorted(entries)} for path, entries in self.dirs.items()},
            "files": {path: {"text": text + "\n"} for path, text in self.files.items()},
        }


def _state(name: str) -> str | None:
    """'Active', 'PORT_ACTIVE', 'ACTIVE' → '4: ACTIVE' (None for a name it does not know)."""
    key = name.upper().removeprefix("PORT_")
    number = _STATES.get(key)
    return None if number is None else f"{number}: {key}"


def _phys(name: str) -> str | None:
    """'LinkUp', 'LINK_UP', 'link_up' → '5: LinkUp'."""
    key = name.replace("_", "").lower()
    for number, known in enumerate(_PHYS):
        if known and known.lower() == key:
            return f"{number}: {known}"
    return None


def _link_layer(name: str) -> str:
    """As sysfs names it: libibverbs before rdma-core printed "IB" for InfiniBand (mlx4 era)."""
    return {"IB": "InfiniBand"}.get(name, name)


def _value(line: str) -> tuple[str, str]:
    key, _, value = line.partition(":")
    return key.strip().lower(), value.strip()


def parse_ibstat(text: str) -> dict[str, Any]:
    sysfs = _Sysfs()
    hca = port = None
    for line in text.splitlines():
        if m := re.match(r"^\s*CA '([^']+)'", line):
            hca, port = m[1], None
            sysfs.hca(hca)
            continue
        if hca is None:
            continue
        if m := re.match(r"^\s*Port (\d+):\s*$", line):
            port = sysfs.port(hca, m[1])
            continue
        key, value = _value(line)
        if key == "firmware version" and value:
            sysfs.files[f"{ROOT}/{hca}/fw_ver"] = value
        elif key == "ca type" and value:
            sysfs.files[f"{ROOT}/{hca}/hca_type"] = value
        elif not value:
            continue
        elif key == "state" and (state := _state(value)):
            port = sysfs.port_for(hca, port, "state")
            sysfs.files[f"{port}/state"] = state
        elif key == "physical state" and (phys := _phys(value)):
            port = sysfs.port_for(hca, port, "phys_state")
            sysfs.files[f"{port}/phys_state"] = phys
        elif port is None:
            continue
        elif key == "rate" and (rate := re.fullmatch(r"(\d+(?:\.\d+)?)\s*(\(FDR10\))?", value)):
            # ibstat prints the rate alone (the width is not shown), "(FDR10)" after an FDR10 one.
            sysfs.files[f"{port}/rate"] = f"{rate[1]} Gb/sec" + (" (4X FDR10)" if rate[2] else "")
        elif key == "base lid" and value.isdigit():
            sysfs.files[f"{port}/lid"] = hex(int(value))
        elif key == "link layer":
            sysfs.files[f"{port}/link_layer"] = _link_layer(value)
    return sysfs.fragment()


_SPEED = re.compile(r"([\d.]+)\s*Gbps")
_WIDTH = re.compile(r"(\d+)X")
_GID = re.compile(r"^\s*GID\[\s*(\d+)\]:\s*([0-9a-fA-F:]{39})(?:\s*,\s*(.+?))?\s*$")


def parse_ibv_devinfo(text: str) -> dict[str, Any]:
    sysfs = _Sysfs()
    hca = port = None
    width: dict[str, int] = {}
    speed: dict[str, float] = {}
    generation: dict[str, str] = {}
    for line in text.splitlines():
        if gid := _GID.match(line):
            if port is not None:
                sysfs.listed(f"{port}/gids", gid[1])
                sysfs.files[f"{port}/gids/{gid[1]}"] = gid[2].lower()
                kind = {"RoCE v1": "IB/RoCE v1"}.get(gid[3] or "", gid[3])  # sysfs's names
                if kind in ("IB/RoCE v1", "RoCE v2"):
                    sysfs.files[f"{port}/gid_attrs/types/{gid[1]}"] = kind
            continue
        key, value = _value(line)
        if key == "hca_id" and value:
            hca, port = value.split()[0], None
            sysfs.hca(hca)
        elif hca is None or not value:
            continue
        elif key == "fw_ver":
            sysfs.files[f"{ROOT}/{hca}/fw_ver"] = value
        elif key == "board_id":
            sysfs.files[f"{ROOT}/{hca}/board_id"] = value
        elif key == "vendor_part_id" and value.isdigit():
            sysfs.files[f"{ROOT}/{hca}/hca_type"] = f"MT{value}"
        elif key == "port" and value.isdigit():
            port = sysfs.port(hca, value)
        elif key == "state" and (state := _state(value.split()[0])):
            port = sysfs.port_for(hca, port, "state")
            sysfs.files[f"{port}/state"] = state
        elif key == "phys_state" and (phys := _phys(value.split()[0])):
            port = sysfs.port_for(hca, port, "phys_state")
            sysfs.files[f"{port}/phys_state"] = phys
        elif port is None:
            continue
        elif key == "link_layer":
            sysfs.files[f"{port}/link_layer"] = _link_layer(value)
        elif key == "active_width" and (w := _WIDTH.match(value)):
            width[port] = int(w[1])
        elif key == "active_speed" and (s := _SPEED.match(value)):
            speed[port] = float(s[1])
            code = re.search(r"\((\d+)\)", value)
            name = _SPEED_CODES.get(int(code[1])) if code else _LANE_SPEEDS.get(float(s[1]))
            if name:
                generation[port] = name
        elif key == "port_lid" and value.isdigit():
            sysfs.files[f"{port}/lid"] = hex(int(value))
    for port, lanes in width.items():
        if port in speed:  # sysfs: "200 Gb/sec (4X HDR)"
            gen = f" {generation[port]}" if port in generation else ""
            sysfs.files[f"{port}/rate"] = f"{lanes * speed[port]:g} Gb/sec ({lanes}X{gen})"
    return sysfs.fragment()


_RDMA_LINK = re.compile(r"^\s*(?:\d+/\d+:\s*)?link\s+(?P<dev>[^/\s]+)/(?P<port>\d+)\b(?P<rest>.*)$")


def parse_rdma_link(text: str) -> dict[str, Any]:
    sysfs = _Sysfs()
    for line in text.splitlines():
        m = _RDMA_LINK.match(line)
        if not m:
            continue
        port = sysfs.port(m["dev"], m["port"])
        rest = dict(re.findall(r"(\w+) (\S+)", m["rest"]))
        if (state := _state(rest.get("state", ""))) is not None:
            sysfs.files[f"{port}/state"] = state
        if (phys := _phys(rest.get("physical_state", ""))) is not None:
            sysfs.files[f"{port}/phys_state"] = phys
        if "netdev" in rest:
            sysfs.listed(f"{ROOT}/{m['dev']}/device/net", rest["netdev"])
    return sysfs.fragment()


_IBDEV2NETDEV = re.compile(r"^\s*(?P<dev>\S+) port (?P<port>\d+) ==> (?P<netdev>\S+)")


def parse_ibdev2netdev(text: str) -> dict[str, Any]:
    sysfs = _Sysfs()
    for line in text.splitlines():
        if m := _IBDEV2NETDEV.match(line):
            sysfs.port(m["dev"], m["port"])
            sysfs.listed(f"{ROOT}/{m['dev']}/device/net", m["netdev"])
    return sysfs.fragment()


_SHOW_GIDS_HEADER = re.compile(r"^\s*DEV\s+PORT\s+INDEX\s+GID\b")
_SHOW_GIDS_ROW = re.compile(
    r"^\s*(?P<dev>\S+)\s+(?P<port>\d+)\s+(?P<index>\d+)\s+(?P<gid>[0-9a-fA-F:]{39})\s+"
    r"(?:\d{1,3}(?:\.\d{1,3}){3}\s+)?(?P<ver>v[12])\b\s*(?P<netdev>\S+)?"
)


def parse_show_gids(text: str) -> dict[str, Any]:
    sysfs = _Sysfs()
    for line in text.splitlines():
        if not (m := _SHOW_GIDS_ROW.match(line)):
            continue
        port, index = sysfs.port(m["dev"], m["port"]), m["index"]
        sysfs.listed(f"{port}/gids", index)
        sysfs.files[f"{port}/gids/{index}"] = m["gid"].lower()
        sysfs.files[f"{port}/gid_attrs/types/{index}"] = _GID_TYPES[m["ver"]]
        if m["netdev"]:
            sysfs.files[f"{port}/gid_attrs/ndevs/{index}"] = m["netdev"]
    return sysfs.fragment()


def parse_perfquery_text(text: str) -> dict[str, Any]:
    """The text as it was, in a slot of its own: the facts put its counters on the port with the
    LID its header names once every segment is merged."""
    slot = f"{PERFQUERY_SLOT}:{zlib.crc32(text.encode()):08x}"
    return {"commands": {slot: command(["perfquery"], text, "pasted")}}


# `grep . /sys/class/infiniband/*/ports/*/counters/*` (or `grep -H`, `head`): path:value lines.
_SYSFS_LINE = re.compile(r"^\s*(?P<path>/sys/class/infiniband/[\w.:/-]+?):(?P<value>.*)$")


def parse_sysfs_lines(text: str) -> dict[str, Any]:
    sysfs = _Sysfs()
    for line in text.splitlines():
        m = _SYSFS_LINE.match(line)
        if m is None or "/../" in m["path"] or m["path"].endswith("/"):
            continue
        parts = m["path"].split("/")
        for depth in range(4, len(parts)):  # every folder above the file lists what is below
            sysfs.listed("/".join(parts[:depth]), parts[depth])
        sysfs.files[m["path"]] = m["value"].strip()
    return sysfs.fragment()


# ibstatus (infiniband-diags/scripts/ibstatus) prints the sysfs files themselves, a port a block.
_IBSTATUS = re.compile(r"^\s*Infiniband device '(?P<dev>[^']+)' port (?P<port>\d+) status:")
_IBSTATUS_FILES = {
    "base lid": "lid",
    "sm lid": "sm_lid",
    "state": "state",
    "phys state": "phys_state",
    "rate": "rate",
    "link_layer": "link_layer",
}


def parse_ibstatus(text: str) -> dict[str, Any]:
    sysfs = _Sysfs()
    port = None
    for line in text.splitlines():
        if m := _IBSTATUS.match(line):
            port = sysfs.port(m["dev"], m["port"])
            continue
        key, value = _value(line)
        name = _IBSTATUS_FILES.get(key)
        if port is not None and name and value and value != "unknown":
            sysfs.files[f"{port}/{name}"] = _link_layer(value) if name == "link_layer" else value
    return sysfs.fragment()


RDMA_KINDS = [
    Kind("ibstat", matcher(r"\s*CA '[^']+'\s*$"), parse_ibstat),
    # "hca_id:\tmlx4_0", or "hca_id:mlx4_0" where a copy lost the tabs devinfo.c separates
    # its fields with (the fields read the same: _value).
    Kind("ibv_devinfo", matcher(r"\s*hca_id:\s*\S"), parse_ibv_devinfo),
    Kind("rdma link", lambda line: _RDMA_LINK.match(line) is not None, parse_rdma_link),
    Kind("ibdev2netdev", lambda line: _IBDEV2NETDEV.match(line) is not None, parse_ibdev2netdev),
    Kind(
        "show_gids",
        lambda line: bool(_SHOW_GIDS_HEADER.match(line) or _SHOW_GIDS_ROW.match(line)),
        parse_show_gids,
    ),
    Kind("ibstatus", lambda line: _IBSTATUS.match(line) is not None, parse_ibstatus),
    Kind(
        "perfquery",
        matcher(r"\s*#\s*Port (?:extended )?counters:"),
        parse_perfquery_text,
        hash_lines=True,
    ),
    Kind(
        "/sys/class/infiniband files", lambda line: bool(_SYSFS_LINE.match(line)), parse_sysfs_lines
    ),
]
DESCRIPTIONS = {
    "ibstat": "`ibstat`: HCAs, firmware, port state, physical state, rate, link layer",
    "ibv_devinfo": "`ibv_devinfo` (`-v` too): the same, with GIDs; the rate from width and speed",
    "rdma link": "`rdma link`: port state, physical state and netdev per HCA port",
    "ibdev2netdev": "`ibdev2netdev`: the netdev each HCA port drives (not the port's state)",
    "show_gids": "`show_gids`: RoCE GIDs, their version (v1/v2) and netdev",
    "ibstatus": "`ibstatus`: each port's state, physical state, rate with width and generation, "
    "LID, link layer (the sysfs files themselves)",
    "perfquery": "`perfquery` (`-x` too): a port's error counters, put on the port with its LID",
    "/sys/class/infiniband files": "`grep . /sys/class/infiniband/*/ports/*/{rate,state,"
    "counters/*}`: the files themselves (path:value lines)",
}
