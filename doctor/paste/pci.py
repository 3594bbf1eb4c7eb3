"""Pasted `lspci -vv` (`-nn`, `-s BDF` too): the PCIe link of each GPU and NIC it shows.

Its text goes to a slot of its own (doctor/facts/pcie_link.py reads LnkCap and LnkSta there),
not into /sys/bus/pci/devices: a paste shows neither the driver nor the NUMA node that the PCI
facts hold, and a GPU listed without them would read as a GPU without a driver.
"""

from __future__ import annotations

import re
import zlib
from typing import Any

from doctor.facts.pcie_link import LSPCI_SLOT
from doctor.paste.kind import Kind, command

# A device line: "17:00.0 Infiniband controller: ..." or with its domain, "0000:17:00.0 ...";
# its class is one lspci names (any words) before a colon, "[0207]" after it with -nn.
_DEVICE = re.compile(
    r"^(?:[0-9a-fA-F]{4,8}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]\s+[A-Za-z0-9][\w /-]*?"
    r"(?:\s*\[[0-9a-fA-F]{4}\])?:\s"
)


def _lspci(text: str) -> dict[str, Any]:
    if "LnkSta:" not in text and "LnkCap:" not in text:
        return {}  # `lspci` without -vv: no link shown
    slot = f"{LSPCI_SLOT}:{zlib.crc32(text.encode()):08x}"
    return {"commands": {slot: command(["lspci", "-vv"], text, "pasted")}}


PCI_KINDS = [Kind("lspci -vv", lambda line: _DEVICE.match(line) is not None, _lspci)]
DESCRIPTIONS = {
    "lspci -vv": "`lspci -vv`: the PCIe link (LnkCap, LnkSta) of each GPU and NIC shown",
}
