"""AMD GPUs from sysfs: amdgpu's /sys/class/drm/cardN/device, the KFD topology, ROCm's version.

Formats, from the kernel's amdgpu and amdkfd sources (drivers/gpu/drm/amd): a RAS block's
``ras/<block>_err_count`` is ``ue: N`` / ``ce: N`` lines (newer kernels add ``de: N``);
``ras/gpu_vram_bad_pages`` is one ``0x<pfn> : 0x<size> : <flag>`` line per page, flag R
(retired), P (pending: retired at the next reset) or F (could not be retired); KFD's
``topology/nodes/N/properties`` and ``io_links/M/properties`` are ``name value`` lines, an
io_link's ``type`` 2 PCIe and 11 XGMI (CRAT_IOLINK_TYPE_*), its ``weight`` 20 for PCIe and
15 per XGMI hop (KFD_CRAT_XGMI_WEIGHT); a GPU node's ``location_id`` is its PCI
``bus << 8 | device << 3 | function`` in ``domain``.
"""

from __future__ import annotations

import posixpath
import re

from doctor.core.capture import Capture
from doctor.core.model import Missing
from doctor.facts.amd.amdsmi import parse_amd_smi
from doctor.facts.amd.model import AmdFacts, AmdGpu, KfdLink, KfdProcess, RasCount
from doctor.facts.amd.text_output import amd_from_text, parse_text, text_links

DRM = "/sys/class/drm"
KFD = "/sys/class/kfd/kfd"
AMD_VENDOR = "0x1002"
IOLINK_TYPES = {2: "PCIe", 11: "XGMI"}
XGMI_WEIGHT = 15
# Must match AMD_PEER_MEMORY in doctor/stages/probe.py: where RCCL looks for amdkfd peer memory.
PEER_MEMORY = (
    "/sys/kernel/mm/memory_peers/amdkfd/version",
    "/sys/kernel/memory_peers/amdkfd/version",
    "/sys/memory_peers/amdkfd/version",
)
_KV = re.compile(r"^\s*([A-Za-z_]\w*)\s*[: ]\s*(-?\w+)\s*$")
_COUNT = re.compile(r"\b(ue|ce|de)\s*:\s*(\d+)", re.IGNORECASE)
_BAD_PAGE = re.compile(r"^\s*0x[0-9a-f]+\s*:\s*0x[0-9a-f]+\s*:\s*([RPF])\s*$", re.IGNORECASE)
_BDF = re.compile(r"[0-9a-f]{4,}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]", re.IGNORECASE)
_SPEED = re.compile(r"(\d+(?:\.\d+)?)\s*GT/s", re.IGNORECASE)
# PCIe transfer rate (GT/s) → generation.
PCIE_GENS = {2.5: 1, 5.0: 2, 8.0: 3, 16.0: 4, 32.0: 5, 64.0: 6}


def properties(text: str) -> dict[str, str]:
    """KFD's ``name value`` lines (junk lines are skipped)."""
    out = {}
    for line in text.splitlines():
        m = _KV.match(line)
        if m:
            out[m.group(1).lower()] = m.group(2)
    return out


def _int(text: str | None) -> int | None:
    if text is None:
        return None
    try:
        return int(text.strip(), 0)
    except ValueError:
        return None


def _text(value: str | Missing) -> str | None:
    if isinstance(value, Missing):
        return None
    text = value.strip()
    return text or None


def pcie_gen(speed: str | None) -> int | None:
    """amdgpu's ``current_link_speed``, "16.0 GT/s PCIe" → 4."""
    m = _SPEED.search(speed or "")
    return PCIE_GENS.get(float(m.group(1))) if m else None


def ras_counts(cap: Capture, device: str) -> tuple[RasCount, ...] | None:
    entries = cap.dir(f"{device}/ras")
    if isinstance(entries, Missing):
        return None
    out = []
    for entry in entries:
        if not entry.endswith("_err_count"):
            continue
        text = _text(cap.file(f"{device}/ras/{entry}"))
        counts = {k.lower(): int(v) for k, v in _COUNT.findall(text or "")}
        if "ue" in counts or "ce" in counts:
            block = entry[: -len("_err_count")]
            out.append(RasCount(block, counts.get("ue", 0), counts.get("ce", 0)))
    return tuple(out)


def bad_page_flags(text: str) -> list[str]:
    """The flag letter of each ``gpu_vram_bad_pages`` line, upper case."""
    return [m.group(1).upper() for m in map(_BAD_PAGE.match, text.splitlines()) if m]


def _bus_id(cap: Capture, device: str) -> str | None:
    target = cap.link(device)
    if isinstance(target, Missing):
        return None
    name = posixpath.basename(target.rstrip("/"))
    return (
        name.lower()
        if re.fullmatch(r"[0-9a-fA-F]{4,}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.\d", name)
        else None
    )


def kfd_nodes(cap: Capture) -> dict[int, dict[str, str]]:
    """KFD topology node number → its properties (gpu_id added from its own file)."""
    listing = cap.dir(f"{KFD}/topology/nodes")
    out: dict[int, dict[str, str]] = {}
    for node in [] if isinstance(listing, Missing) else listing:
        if not node.isdigit():
            continue
        base = f"{KFD}/topology/nodes/{node}"
        props = properties(_text(cap.file(f"{base}/properties")) or "")
        gpu_id = _text(cap.file(f"{base}/gpu_id"))
        if gpu_id is not None:
            props["gpu_id"] = gpu_id
        out[int(node)] = props
    return out


def node_bus_id(props: dict[str, str]) -> str | None:
    """A GPU node's PCI address from ``domain`` and ``location_id``; None for a CPU node."""
    location = _int(props.get("location_id"))
    if not _int(props.get("gpu_id")) or location is None:
        return None
    domain = _int(props.get("domain")) or 0
    bus, devfn = location >> 8, location & 0xFF
    return f"{domain:04x}:{bus:02x}:{devfn >> 3:02x}.{devfn & 7}"


def _node_name(nodes: dict[int, dict[str, str]], number: int) -> str:
    bus = node_bus_id(nodes.get(number, {}))
    return bus if bus is not None else f"cpu{number}"


def kfd_links(cap: Capture, nodes: dict[int, dict[str, str]]) -> tuple[KfdLink, ...]:
    out = []
    for number in sorted(nodes):
        for kind in ("io_links", "p2p_links"):
            base = f"{KFD}/topology/nodes/{number}/{kind}"
            listing = cap.dir(base)
            for link in [] if isinstance(listing, Missing) else listing:
                props = properties(_text(cap.file(f"{base}/{link}/properties")) or "")
                kind_no, dst = _int(props.get("type")), _int(props.get("node_to"))
                if kind_no is None or dst is None:
                    continue
                src = _int(props.get("node_from"))
                name = IOLINK_TYPES.get(kind_no, f"type {kind_no}")
                weight = _int(props.get("weight"))
                hops = weight // XGMI_WEIGHT if name == "XGMI" and weight else None
                out.append(
                    KfdLink(
                        _node_name(nodes, number if src is None else src),
                        _node_name(nodes, dst),
                        name,
                        weight,
                        hops,
                        kind == "io_links",
                    )
                )
    return tuple(out)


def _gpu(cap: Capture, card: str, device: str, kfd: dict[str, tuple[int, int]]) -> AmdGpu | None:
    bus = _bus_id(cap, device)
    if bus is None:
        return None

    def attr(name: str) -> str | None:
        return _text(cap.file(f"{device}/{name}"))

    bad = cap.file(f"{device}/ras/gpu_vram_bad_pages")  # empty: no bad page
    flags = bad_page_flags(bad) if isinstance(bad, str) else None
    node, gpu_id = kfd.get(bus, (None, None))
    return AmdGpu(
        card=card,
        bus_id=bus,
        device_id=attr("device"),
        product=attr("product_name"),
        numa_node=_int(attr("numa_node")),
        link_width=_int(attr("current_link_width")),
        link_width_max=_int(attr("max_link_width")),
        link_gen=pcie_gen(attr("current_link_speed")),
        link_gen_max=pcie_gen(attr("max_link_speed")),
        unique_id=attr("unique_id"),
        serial=attr("serial_number"),
        vbios=attr("vbios_version"),
        vram_total=_int(attr("mem_info_vram_total")),
        ras=ras_counts(cap, device),
        bad_pages=None if flags is None else len(flags),
        bad_pages_pending=None if flags is None else flags.count("P"),
        bad_pages_failed=None if flags is None else flags.count("F"),
        kfd_node=node,
        gpu_id=gpu_id,
        firmware=_firmware(cap, device),
        xgmi_hive=attr("xgmi_hive_info/xgmi_hive_id"),
        **_temperature(cap, device),
    )


def _temperature(cap: Capture, device: str) -> dict[str, int | None]:
    """The junction sensor's (else the tightest sensor's) temperature and margin to its
    critical limit, from amdgpu's hwmon, in °C."""
    listing = cap.dir(f"{device}/hwmon")
    found: list[tuple[bool, int, int]] = []  # (junction, margin, temperature)
    for hwmon in listing if isinstance(listing, list) else []:
        for sensor in ("temp1", "temp2", "temp3"):
            base = f"{device}/hwmon/{hwmon}/{sensor}"
            now, crit = (
                _int(_text(cap.file(f"{base}_input"))),
                _int(_text(cap.file(f"{base}_crit"))),
            )
            if now is None or not crit:
                continue
            label = (_text(cap.file(f"{base}_label")) or "").lower()
            found.append((label == "junction", (crit - now) // 1000, now // 1000))
    if not found:
        return {"temperature": None, "temperature_margin": None}
    junction = [f for f in found if f[0]]
    _, margin, now = min(junction or found, key=lambda f: f[1])
    return {"temperature": now, "temperature_margin": margin}


def _firmware(cap: Capture, device: str) -> tuple[tuple[str, str], ...]:
    """amdgpu's fw_version files ("sos_fw_version": "0x00380005"), by block name."""
    entries = cap.dir(f"{device}/fw_version")
    out = []
    for entry in [] if isinstance(entries, Missing) else entries:
        version = _text(cap.file(f"{device}/fw_version/{entry}"))
        if version is not None:
            out.append((entry.removesuffix("_fw_version"), version))
    return tuple(out)


def _processes(cap: Capture, by_gpu_id: dict[int, str]) -> tuple[KfdProcess, ...] | Missing:
    listing = cap.dir(f"{KFD}/proc")
    if isinstance(listing, Missing):
        return listing
    out = []
    for pid in listing:
        if not pid.isdigit():
            continue
        entries = cap.dir(f"{KFD}/proc/{pid}")
        vram = []
        for entry in [] if isinstance(entries, Missing) else entries:
            gpu_id, used = _int(entry[len("vram_") :]), None
            if entry.startswith("vram_"):
                used = _int(_text(cap.file(f"{KFD}/proc/{pid}/{entry}")))
            if gpu_id in by_gpu_id and used:
                vram.append((by_gpu_id[gpu_id], used))
        if vram:
            out.append(KfdProcess(int(pid), _text(cap.file(f"/proc/{pid}/comm")), tuple(vram)))
    return tuple(out)


def _first_text(cap: Capture, paths: list[str]) -> str | Missing:
    reasons = []
    for path in paths:
        value = cap.file(path)
        if isinstance(value, str) and value.strip():
            return value.strip()
        reasons.append(f"{path}: {value.reason if isinstance(value, Missing) else 'empty'}")
    return Missing("; ".join(reasons) or "not looked for", "absent")


def rocm_roots(cap: Capture) -> list[str]:
    """Where ROCm is installed: the node's $ROCM_PATH, then /opt/rocm (ROCm's install docs)."""
    env = cap.value("env")
    rocm = env.get("ROCM_PATH") if isinstance(env, dict) else None
    roots = [rocm.rstrip("/")] if isinstance(rocm, str) and rocm.strip("/") else []
    return list(dict.fromkeys([*roots, "/opt/rocm"]))


def _lines(value: object) -> list[str] | None:
    return [str(v) for v in value] if isinstance(value, list) else None


def parse_amd(cap: Capture) -> AmdFacts | Missing:
    cards = cap.dir(DRM)
    devices = []
    for card in [] if isinstance(cards, Missing) else cards:
        if re.fullmatch(r"card\d+", card):
            device = f"{DRM}/{card}/device"
            if (_text(cap.file(f"{device}/vendor")) or "").lower() == AMD_VENDOR:
                devices.append((card, device))
    nodes = kfd_nodes(cap)
    kfd = {
        bus: (number, _int(props.get("gpu_id")) or 0)
        for number, props in sorted(nodes.items(), reverse=True)  # a partition's first node wins
        if (bus := node_bus_id(props)) is not None
    }
    if not devices and not kfd:
        text = parse_text(cap)
        if text is not None and (text.gpus or text.rocm_version or text.amdgpu_version):
            return amd_from_text(text)  # `amd-smi version` alone: versions, no GPU list
        return Missing("no AMD GPU: no amdgpu card in /sys/class/drm and no KFD GPU node", "absent")
    gpus = [g for card, dev in devices if (g := _gpu(cap, card, dev, kfd)) is not None]
    links = kfd_links(cap, nodes)
    if not links:  # no KFD topology in sysfs: what amd-smi or rocm-smi said, if they ran
        text = parse_text(cap)
        links = text_links(text) if text is not None else ()
    gpus.sort(key=lambda g: g.bus_id)
    by_gpu_id = {gid: bus for bus, (_, gid) in kfd.items() if gid}
    opt = cap.dir("/opt")
    installs = () if isinstance(opt, Missing) else tuple(e for e in opt if e.startswith("rocm-"))
    numa = _text(cap.file("/proc/sys/kernel/numa_balancing"))
    peer = next((p for p in PEER_MEMORY if isinstance(cap.file(p), str)), None)
    symbol = _lines(cap.value("kallsyms:ib_register_peer_memory_client"))
    if peer is None and symbol and any(re.search(r"\s[tT]\s", line) for line in symbol):
        peer = "/proc/kallsyms: ib_register_peer_memory_client"
    return AmdFacts(
        gpus=tuple(gpus),
        links=links,
        processes=_processes(cap, by_gpu_id),
        amdgpu_version=_first_text(cap, ["/sys/module/amdgpu/version"]),
        rocm_version=_first_text(cap, [f"{r}/.info/version" for r in rocm_roots(cap)]),
        rocm_installs=installs,
        numa_balancing=None if numa is None else numa != "0",
        cmdline=_text(cap.file("/proc/cmdline")),
        hyperv=(_text(cap.file("/sys/devices/virtual/dmi/id/bios_version")) or "").startswith(
            "Hyper-V UEFI Release"
        ),
        peer_memory=peer,
        dmabuf_kernel=_dmabuf(cap),
        smi=parse_amd_smi(cap),
    )


def _dmabuf(cap: Capture) -> tuple[str, ...] | Missing:
    names = [n for n in cap.raw.get("values", {}) if n.startswith("kernel-config:")]
    if not names:
        return Missing("the kernel's build configuration was not read", "unsupported")
    value = cap.value(names[0])
    lines = _lines(value)
    if lines is None:
        return value if isinstance(value, Missing) else Missing("unreadable", "failed")
    return tuple(sorted({ln.split("=")[0].strip() for ln in lines if ln.strip().endswith("=y")}))
