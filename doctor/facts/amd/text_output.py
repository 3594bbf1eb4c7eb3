"""AMD GPUs from pasted tool output: rocm-smi, amd-smi (default, list/static, topology), rocminfo.

Formats, from the tools' sources (ROCm 6.2/6.3): rocm-smi (rocm_smi_lib python_smi_tools/
rocm_smi.py) prints ``GPU[N]\\t\\t: <name>: <value>`` lines, a concise table under a
``Concise Info`` spacer, and ``--showtopo`` matrices under ``Weight``/``Hops``/``Link Type
between two GPUs`` spacers (``GPU0  GPU1 ...`` columns, PCIE/XGMI cells); amd-smi's human
format (amdsmi_cli/amdsmi_logger.py) is its JSON as upper-case YAML, ``GPU: N`` then nested
``KEY: value`` lines four spaces deeper per level, and ``amd-smi topology`` prints ``<NAME>
TABLE:`` tables with bus ids as column and row heads; newer amd-smi without arguments prints a
table whose header names the amdgpu and ROCm versions and whose rows open with a bus id;
rocminfo (rocminfo.cc) prints ``Agent N`` blocks of ``Label: value`` lines (``Device Type: GPU``,
``BDFID: <bus << 8 | devfn>``, ``Node: <KFD node>``). A GPU is named by its index in each
output; outputs that give bus ids name the others' indices.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from doctor.core.capture import Capture
from doctor.core.model import Missing
from doctor.facts.amd import json_output
from doctor.facts.amd.model import AmdFacts, AmdGpu, KfdLink, RasCount

# The capture slots the paste reader (doctor/paste/amd.py) fills, one per kind; the probe runs
# amd-smi or rocm-smi into the same ones where sysfs cannot show the GPUs (doctor/stages/probe.py).
ROCM_SMI = "amd:rocm-smi"
AMD_SMI = "amd:amd-smi"  # `amd-smi` alone: the default table
AMD_SMI_TREE = "amd:amd-smi-tree"  # list, static, metric... in the human (YAML-like) format
AMD_SMI_TOPOLOGY = "amd:amd-smi-topology"
AMD_SMI_JSON = "amd:amd-smi-json"  # any amd-smi subcommand with --json
ROCM_SMI_JSON = "amd:rocm-smi-json"
ROCMINFO = "amd:rocminfo"
SLOTS = (ROCM_SMI, ROCM_SMI_JSON, AMD_SMI, AMD_SMI_TREE, AMD_SMI_TOPOLOGY, AMD_SMI_JSON, ROCMINFO)

BDF = re.compile(r"\b([0-9a-f]{4,8}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7])\b", re.IGNORECASE)
_GPU_LINE = re.compile(r"^\s*GPU\[(\d+)\][^:]*:\s*(.+?)\s*:\s*(.*?)\s*$")
_SPACER = re.compile(r"^\s*=+\s*(.*?)\s*=+\s*$")
_MATRIX_HEAD = re.compile(r"^\s*(GPU\d+\s+)+GPU\d+\s*$|^\s*GPU0\s*$")
_TREE = re.compile(r"^(\s*)([A-Z][A-Z0-9_ ]*?)\s*:\s*(.*?)\s*$")
_TABLE_TITLE = re.compile(r"^\s*([A-Z][A-Z ]*?) TABLE\s*:\s*$")
_DEFAULT_ROW = re.compile(r"^\s*\|?\s*" + BDF.pattern[2:-2] + r"\s+(.*?)\s*\|", re.IGNORECASE)
_SPEED = re.compile(r"(\d+(?:\.\d+)?)\s*GT/s", re.IGNORECASE)
_GENS = {2.5: 1, 5.0: 2, 8.0: 3, 16.0: 4, 32.0: 5, 64.0: 6}


@dataclass
class TextGpu:
    index: int
    bus_id: str | None = None
    name: str | None = None
    device_id: str | None = None
    uuid: str | None = None
    numa: int | None = None
    width_max: int | None = None
    gen_max: int | None = None
    ecc_uncorrectable: int | None = None
    ecc_correctable: int | None = None
    bad_pages_pending: int | None = None
    bad_pages_failed: int | None = None  # "un_res": pages that could not be retired


@dataclass(frozen=True)
class TextLink:
    a: int  # GPU indices
    b: int
    type: str  # XGMI, PCIe, or what the tool printed
    hops: int | None
    weight: int | None


@dataclass
class TextFacts:
    gpus: dict[int, TextGpu] = field(default_factory=dict)
    links: dict[tuple[int, int], TextLink] = field(default_factory=dict)
    rocm_version: str | None = None
    amdgpu_version: str | None = None
    sources: list[str] = field(default_factory=list)

    def gpu(self, index: int) -> TextGpu:
        return self.gpus.setdefault(index, TextGpu(index))

    def link(self, a: int, b: int, **values: object) -> None:
        if a == b:
            return
        key = (min(a, b), max(a, b))
        old = self.links.get(key, TextLink(key[0], key[1], "?", None, None))
        kept = {k: v for k, v in values.items() if v is not None}
        self.links[key] = TextLink(
            key[0],
            key[1],
            str(kept.get("type", old.type)),
            _int(kept.get("hops", old.hops)),
            _int(kept.get("weight", old.weight)),
        )


def _int(value: object) -> int | None:
    if isinstance(value, int):
        return value
    try:
        return int(str(value).strip(), 0)
    except ValueError:
        return None


def _link_type(text: str) -> str | None:
    word = text.strip().upper()
    return {"XGMI": "XGMI", "PCIE": "PCIe"}.get(word)


def _gen(text: str) -> int | None:
    m = _SPEED.search(text)
    return _GENS.get(float(m.group(1))) if m else None


def bus_id(text: str) -> str:
    """A bus id as sysfs writes it: 4-digit domain, lower case."""
    domain, rest = text.lower().split(":", 1)
    return f"{int(domain, 16):04x}:{rest}"


# -- rocm-smi -------------------------------------------------------------------------------


def read_rocm_smi(text: str, out: TextFacts) -> None:
    section = ""
    columns: list[int] = []
    concise_header = False
    for raw in text.splitlines():
        line = raw.replace("\t", "    ").rstrip()
        spacer = _SPACER.match(line)
        if spacer and spacer.group(1):  # a bare "=====" line closes nothing
            section, columns, concise_header = spacer.group(1).lower(), [], False
            continue
        found = _GPU_LINE.match(line)
        if found:
            _rocm_smi_value(out.gpu(int(found.group(1))), found.group(2), found.group(3))
            continue
        if line.strip().lower().startswith("driver version:"):
            out.amdgpu_version = line.split(":", 1)[1].strip() or None
        elif "between two gpus" in section:
            if _MATRIX_HEAD.match(line):
                columns = [int(t[3:]) for t in line.split()]
                for index in columns:  # the matrices alone name every GPU (no Numa section)
                    out.gpu(index)
                continue
            cells = line.split()
            if columns and cells and re.fullmatch(r"GPU\d+", cells[0]):
                row = int(cells[0][3:])
                for col, cell in zip(columns, cells[1:], strict=False):
                    if section.startswith("weight"):
                        out.link(row, col, weight=_int(cell))
                    elif section.startswith("hops"):
                        out.link(row, col, hops=_int(cell))
                    elif section.startswith("link type"):
                        out.link(row, col, type=_link_type(cell))
        elif "concise hardware info" in section:  # --showhw: a BUS column per GPU row
            words, found = line.split(), BDF.search(line)
            if words and words[0].isdigit() and found:
                out.gpu(int(words[0])).bus_id = bus_id(found.group(1))
        elif "concise info" in section:
            words = line.split()
            if words[:1] in (["Device"], ["GPU"]):
                concise_header = True
            elif concise_header and words and words[0].isdigit():
                gpu = out.gpu(int(words[0]))
                device = next(
                    (w.strip("[],") for w in words if w.strip("[").startswith("0x")), None
                )
                gpu.device_id = gpu.device_id or device


_JSON_TOPOLOGY = re.compile(
    r"\(Topology\) (Weight|Hops|Link type) between DRM devices (\d+) and (\d+)", re.IGNORECASE
)


def read_rocm_smi_json(text: str, out: TextFacts) -> None:
    doc = json_output.rocm_smi_cards(text) or {}
    for key, values in doc.items():
        if not isinstance(values, dict):
            continue
        if key.startswith("card") and key[4:].isdigit():
            for name, value in values.items():
                _rocm_smi_value(out.gpu(int(key[4:])), str(name), str(value))
        elif key == "system":
            for name, value in values.items():
                m = _JSON_TOPOLOGY.search(str(name))
                if m:
                    field = {"weight": "weight", "hops": "hops", "link type": "type"}[m[1].lower()]
                    cell = _link_type(str(value)) if field == "type" else _int(value)
                    out.link(int(m[2]), int(m[3]), **{field: cell})
                elif str(name).lower() == "driver version":
                    out.amdgpu_version = str(value).strip() or out.amdgpu_version


def _rocm_smi_value(gpu: TextGpu, name: str, value: str) -> None:
    key = name.strip().lower()
    if key == "pci bus" and BDF.search(value):
        gpu.bus_id = bus_id(BDF.search(value).group(1))  # type: ignore[union-attr]
    elif key in ("device name", "card series", "market name") and value and not gpu.name:
        gpu.name = value
    elif key in ("(topology) numa node", "numa node"):
        gpu.numa = _int(value)
    elif key == "unique id" and value not in ("N/A", ""):
        gpu.uuid = value
    elif key == "device id" and value.startswith("0x"):
        gpu.device_id = value


# -- amd-smi -----------------------------------------------------------------------------------


def tree_records(text: str) -> list[dict[str, str]]:
    """amd-smi's human format: one flat {"ASIC.MARKET_NAME": value} per ``GPU: N`` block."""
    records: list[dict[str, str]] = []
    stack: list[tuple[int, str]] = []
    for raw in text.splitlines():
        line = raw.replace("\t", "    ").rstrip()
        m = _TREE.match(line)
        if not m:
            continue
        depth, key, value = len(m.group(1)), m.group(2).strip().replace(" ", "_"), m.group(3)
        if depth == 0 and key == "GPU":
            records.append({"GPU": value})
            stack = []
            continue
        if not records:
            continue
        while stack and stack[-1][0] >= depth:
            stack.pop()
        path = ".".join([*(k for _, k in stack), key])
        if path.endswith(".PAGE_ADDRESS"):  # one per bad page listed under PENDING, UN_RES
            count = path.rsplit(".", 1)[0] + "#"
            records[-1][count] = str(int(records[-1].get(count, "0")) + 1)
        if value:
            records[-1].setdefault(path, value)
        else:
            stack.append((depth, key))
    return records


def read_amd_smi_tree(text: str, out: TextFacts) -> None:
    for record in tree_records(text):
        _apply(record, out)


def read_amd_smi_json(text: str, out: TextFacts) -> None:
    for record in json_output.records(text):
        _apply(record, out)
    for a, b, kind, hops, weight in json_output.links(text):
        if BDF.fullmatch(a) and BDF.fullmatch(b):
            columns = [bus_id(a), bus_id(b)]
            i, j = _index_of(out, columns[0], columns), _index_of(out, columns[1], columns)
            out.link(i, j, type=_link_type(kind), hops=_int(hops), weight=_int(weight))


def _apply(record: dict[str, str], out: TextFacts) -> None:
    """One GPU's record of amd-smi's human or JSON format."""
    index = _int(record.get("GPU"))
    if index is None:
        return
    gpu = out.gpu(index)
    bdf = BDF.search(record.get("BDF") or record.get("BUS.BDF") or "")
    if bdf:
        gpu.bus_id = bus_id(bdf.group(1))
    gpu.uuid = record.get("UUID") or gpu.uuid
    gpu.name = record.get("ASIC.MARKET_NAME") or record.get("BOARD.PRODUCT_NAME") or gpu.name
    gpu.device_id = record.get("ASIC.DEVICE_ID") or gpu.device_id
    gpu.numa = _int(record.get("NUMA.NODE", "")) if "NUMA.NODE" in record else gpu.numa
    width = record.get("BUS.MAX_PCIE_WIDTH")
    gpu.width_max = _int(width) if width else gpu.width_max
    gpu.gen_max = _gen(record.get("BUS.MAX_PCIE_SPEED", "")) or gpu.gen_max
    ue = record.get("ECC.TOTAL_UNCORRECTABLE_COUNT")
    ce = record.get("ECC.TOTAL_CORRECTABLE_COUNT")
    gpu.ecc_uncorrectable = _int(ue) if ue else gpu.ecc_uncorrectable
    gpu.ecc_correctable = _int(ce) if ce else gpu.ecc_correctable
    for key, attr in (("PENDING", "bad_pages_pending"), ("UN_RES", "bad_pages_failed")):
        if key in record or f"{key}#" in record:  # "No bad pages found." or a list
            setattr(gpu, attr, _int(record.get(f"{key}#", "0")))
    if record.get("DRIVER.NAME", "amdgpu") == "amdgpu" and record.get("DRIVER.VERSION"):
        out.amdgpu_version = record["DRIVER.VERSION"]


def read_amd_smi_topology(text: str, out: TextFacts) -> None:
    title, columns = "", list[str]()
    for raw in text.splitlines():
        line = raw.rstrip()
        head = _TABLE_TITLE.match(line)
        if head:
            title, columns = head.group(1).strip().upper(), []
            continue
        ids = [bus_id(b) for b in BDF.findall(line)]
        cells = line.split()
        if len(ids) > 1 and len(ids) == len(cells):
            columns = ids  # the header: one bus id per column
            continue
        if not columns or len(ids) != 1 or not cells or not BDF.fullmatch(cells[0]):
            continue
        if ids[0] not in columns:
            continue  # a row for a GPU the header did not name
        row = _index_of(out, ids[0], columns)
        for col, cell in zip(columns, cells[1:], strict=False):
            other = _index_of(out, col, columns)
            if title == "LINK TYPE":
                out.link(row, other, type=_link_type(cell))
            elif title == "HOPS":
                out.link(row, other, hops=_int(cell))
            elif title == "WEIGHT":
                out.link(row, other, weight=_int(cell))


def _index_of(out: TextFacts, bus: str, columns: list[str]) -> int:
    """A bus id's GPU index: the one another output gave it, else its column."""
    known = next((g.index for g in out.gpus.values() if g.bus_id == bus), None)
    if known is not None:
        return known
    index = columns.index(bus)
    out.gpu(index).bus_id = out.gpu(index).bus_id or bus
    return index


def read_amd_smi_default(text: str, out: TextFacts) -> None:
    rocm = re.search(r"ROCm version:\s*([\w.+-]+)", text)
    driver = re.search(r"amdgpu version:\s*([\w.+-]+)", text)
    out.rocm_version = rocm.group(1) if rocm else out.rocm_version
    out.amdgpu_version = driver.group(1) if driver else out.amdgpu_version
    index = 0
    for line in text.splitlines():
        m = re.match(
            r"^\s*\|?\s*([0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7])\s+(.*?)\s*\|", line
        )
        if m:
            gpu = out.gpu(index)
            gpu.bus_id, gpu.name = bus_id(m.group(1)), m.group(2).strip() or gpu.name
            index += 1


# -- rocminfo ---------------------------------------------------------------------------------


def read_rocminfo(text: str, out: TextFacts) -> None:
    module = re.search(r"ROCk module version\s+(\S+)\s+is loaded", text)
    out.amdgpu_version = module.group(1) if module else out.amdgpu_version
    agents: list[dict[str, str]] = []
    for line in text.splitlines():
        if re.match(r"^\s*Agent\s+\d+\s*$", line):
            agents.append({})
            continue
        m = re.match(r"^\s{1,4}([A-Z][\w ()]*?):\s+(.*?)\s*$", line)
        if agents and m and m.group(1) not in agents[-1]:
            agents[-1][m.group(1)] = m.group(2)
    gpus = [a for a in agents if a.get("Device Type", "").upper() == "GPU"]
    for index, agent in enumerate(gpus):  # HIP numbers the GPU agents in this order
        gpu = out.gpu(index)
        bdf = _int(agent.get("BDFID", ""))
        if bdf is not None and gpu.bus_id is None:
            gpu.bus_id = f"0000:{bdf >> 8:02x}:{(bdf >> 3) & 0x1F:02x}.{bdf & 7}"
        gpu.name = gpu.name or agent.get("Marketing Name") or agent.get("Name")
        uuid = agent.get("Uuid")
        gpu.uuid = gpu.uuid or (uuid if uuid and uuid.startswith("GPU-") else None)


READERS = (
    # Bus ids first, so that the outputs naming GPUs by index only can be matched to them.
    (AMD_SMI_TREE, read_amd_smi_tree),
    (AMD_SMI_JSON, read_amd_smi_json),
    (AMD_SMI, read_amd_smi_default),
    (ROCMINFO, read_rocminfo),
    (AMD_SMI_TOPOLOGY, read_amd_smi_topology),
    (ROCM_SMI, read_rocm_smi),
    (ROCM_SMI_JSON, read_rocm_smi_json),
)


def parse_text(cap: Capture) -> TextFacts | None:
    """Whatever the pasted AMD outputs say; None where none was pasted."""
    out = TextFacts()
    for slot, read in READERS:
        result = cap.command(slot)
        if not isinstance(result, Missing):
            read(result.stdout, out)
            out.sources.append(" ".join(result.argv))
    return out if out.sources else None


def text_links(text: TextFacts) -> tuple[KfdLink, ...]:
    """The links a tool printed, between GPUs named by bus id where it gave one."""
    names = {i: g.bus_id or f"GPU{i}" for i, g in text.gpus.items()}
    return tuple(
        KfdLink(names[a], names[b], link.type, link.weight, link.hops, True)
        for (a, b), link in sorted(text.links.items())
        if a in names and b in names
    )


def amd_from_text(text: TextFacts) -> AmdFacts:
    """The facts pasted tool outputs give: GPUs, links, versions; the host was not looked at."""
    names = {i: g.bus_id or f"GPU{i}" for i, g in text.gpus.items()}
    gpus = []
    for index in sorted(text.gpus):
        g = text.gpus[index]
        ecc = g.ecc_uncorrectable, g.ecc_correctable
        gpus.append(
            AmdGpu(
                card=f"GPU{index}",
                bus_id=names[index],
                device_id=g.device_id,
                product=g.name,
                numa_node=g.numa,
                link_width=None,
                link_width_max=g.width_max,
                link_gen=None,
                link_gen_max=g.gen_max,
                unique_id=g.uuid,
                serial=None,
                vbios=None,
                vram_total=None,
                ras=None if ecc == (None, None) else (RasCount("total", ecc[0] or 0, ecc[1] or 0),),
                bad_pages=None,
                bad_pages_pending=g.bad_pages_pending,
                bad_pages_failed=g.bad_pages_failed,
                kfd_node=None,
                gpu_id=None,
            )
        )
    links = text_links(text)
    unseen = Missing(f"not in the pasted output ({', '.join(text.sources)})", "unsupported")
    return AmdFacts(
        gpus=tuple(gpus),
        links=links,
        processes=unseen,
        amdgpu_version=text.amdgpu_version or unseen,
        rocm_version=text.rocm_version or unseen,
        rocm_installs=(),
        numa_balancing=None,
        cmdline=None,
        hyperv=False,
        peer_memory=unseen,
        dmabuf_kernel=unseen,
        smi=unseen,
    )
