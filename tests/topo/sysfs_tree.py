"""Build a probe capture from an indented sysfs PCI tree fixture (tests/fixtures/topo/sysfs/*.tree).

A tree file lists root complexes (``pci0000:17 numa=0 cpus=0-31``) and, indented below them,
the devices of the PCI hierarchy as sysfs nests them under /sys/devices:
``ADDRESS KIND [HCA|-] [NETDEV|-] [PORT-STATE]`` with KIND one of bridge, gpu, nvswitch, nic
(an HCA's one port is ``4:ACTIVE`` unless the line says otherwise, e.g. ``1:DOWN``). The capture
holds what the probe's pci and topo sections record for such a machine (class/vendor/numa_node
files, realpath values, the /sys/class/net and /sys/class/infiniband listings).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from doctor.core.capture import Capture

FIXTURES = Path(__file__).parent.parent / "fixtures" / "topo"
KINDS = {  # class, vendor
    "bridge": ("0x060400", "0x10b5"),
    "gpu": ("0x030200", "0x10de"),
    "nvswitch": ("0x068000", "0x10de"),
    "hca": ("0x020700", "0x15b3"),
    "eth": ("0x020000", "0x8086"),
}


def tree_capture(
    name: str, nvml: dict[str, Any] | None = None, smi: str | None = None
) -> dict[str, Any]:
    """The raw capture of the machine a tree file describes, plus optional NVML / nvidia-smi."""
    files: dict[str, Any] = {}
    values: dict[str, Any] = {}
    dirs: dict[str, Any] = {}
    pci: list[str] = []
    nets: list[str] = []
    hcas: list[str] = []
    stack: list[tuple[int, str]] = []
    numa, cpus = "-1", ""
    for line in (FIXTURES / "sysfs" / name).read_text().splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        depth = len(line) - len(line.lstrip())
        fields = line.split()
        if depth == 0:
            opts = dict(f.split("=") for f in fields[1:])
            numa, cpus = opts["numa"], opts.get("cpus", "")
            stack = [(0, f"/sys/devices/{fields[0]}")]
            continue
        while stack[-1][0] >= depth:
            stack.pop()
        path = f"{stack[-1][1]}/{fields[0]}"
        stack.append((depth, path))
        addr, kind = fields[0], fields[1]
        if kind == "nic":
            kind = "hca" if fields[2] != "-" else "eth"
        pci.append(addr)
        base = f"/sys/bus/pci/devices/{addr}"
        cls, vendor = KINDS[kind]
        files[f"{base}/class"] = {"text": cls + "\n"}
        files[f"{base}/vendor"] = {"text": vendor + "\n"}
        files[f"{base}/device"] = {"text": "0x1234\n"}
        files[f"{base}/numa_node"] = {"text": numa + "\n"}
        if cpus:
            files[f"{base}/local_cpulist"] = {"text": cpus + "\n"}
        values[f"realpath:{base}"] = {"value": path}
        if fields[1] == "nic":
            hca, netdev = fields[2], fields[3]
            if hca != "-":
                hcas.append(hca)
                state = fields[4] if len(fields) > 4 else "4:ACTIVE"
                dirs[f"/sys/class/infiniband/{hca}/ports"] = {"entries": ["1"]}
                port = f"/sys/class/infiniband/{hca}/ports/1"
                files[f"{port}/state"] = {"text": state.replace(":", ": ") + "\n"}
                files[f"{port}/link_layer"] = {"text": "InfiniBand\n"}
                files[f"{port}/rate"] = {"text": "400 Gb/sec (4X NDR)\n"}
                values[f"realpath:/sys/class/infiniband/{hca}/device"] = {"value": path}
                dirs[f"/sys/class/infiniband/{hca}/device/net"] = {
                    "entries": [] if netdev == "-" else [netdev]
                }
            if netdev != "-":
                nets.append(netdev)
                values[f"realpath:/sys/class/net/{netdev}/device"] = {"value": path}
    dirs["/sys/bus/pci/devices"] = {"entries": sorted(pci)}
    dirs["/sys/class/net"] = {"entries": sorted([*nets, "lo"])}
    dirs["/sys/class/infiniband"] = (
        {"entries": sorted(hcas)} if hcas else {"error": {"kind": "absent", "detail": "ENOENT"}}
    )
    values["nvml:topology"] = (
        {"value": nvml}
        if nvml is not None
        else {
            "error": {
                "kind": "failed",
                "detail": "LookupError: pynvml is not importable: No module named 'pynvml'",
            }
        }
    )
    commands = {
        "nvidia-smi:topo": {
            "argv": ["nvidia-smi", "topo", "-m"],
            "rc": 0,
            "stdout": smi,
            "stderr": "",
        }
        if smi is not None
        else {"argv": ["nvidia-smi"], "error": {"kind": "absent", "detail": "not on PATH"}}
    }
    return {
        "probe": {"version": 1},
        "files": files,
        "dirs": dirs,
        "links": {},
        "commands": commands,
        "values": values,
    }


def capture(name: str, nvml: dict[str, Any] | None = None, smi: str | None = None) -> Capture:
    return Capture(tree_capture(name, nvml, smi))


def smi_text(name: str) -> str:
    return (FIXTURES / "smi" / name).read_text()
