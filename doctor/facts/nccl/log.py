"""Read NCCL_DEBUG=INFO output (NCCL 2.4 to today, and RCCL) into facts per process.

Pure functions over text; no I/O. The line shapes and the NCCL sources they follow are in
doctor/facts/nccl/lines.py; what a node's processes add up to is doctor/facts/nccl/use.py.
Every line may be junk, cut short or from another version: what does not match is skipped.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from doctor.core.logline import NOWHERE, Origin, strip_prefixes
from doctor.facts.nccl import lines as L
from doctor.facts.nccl import nccl_tests as T
from doctor.facts.nccl.banner import BannerOrigin
from doctor.facts.nccl.lines import KEYWORDS, NetDevice
from doctor.facts.nccl.process import (
    MAX_DEVICES,
    MAX_ENV,
    MAX_LINKS,
    MAX_NOTES,
    NcclProcess,
    Plugin,
    cut,
)
from doctor.facts.nccl.use import summarise
from doctor.facts.nccl.world import world_size

__all__ = ["KEYWORDS", "NcclLog", "NcclProcess", "parse_nccl_log"]

# Bounds that keep memory flat on a 10,000-rank log (or garbage that looks like one).
MAX_PROCESSES = 1024


@dataclass
class NcclLog:
    """Facts accumulated from NCCL lines, fed one message at a time (streaming)."""

    versions: Counter[str] = field(default_factory=Counter)  # every version line, however bare
    cudas: Counter[str] = field(default_factory=Counter)
    # What the log shows first (a log of one job shows one): a line read again, or skipped as
    # read before, changes none of these.
    library: str | None = None
    cuda_driver: int | None = None
    hip: str | None = None  # RCCL's banner
    rocm: str | None = None
    library_path: str | None = None
    benchmark: str | None = None  # "nccl-tests 2.19.6", "rccl-tests develop:4b2b5d3"
    processes: dict[tuple[str | None, int | None], NcclProcess] = field(default_factory=dict)
    processes_dropped: int = 0  # lines from processes beyond MAX_PROCESSES
    # Who printed a bare version line (NCCL before 2.9 prints it once, on stdout, with no
    # prefix): what its wrapping says, resolved through the processes once all is read.
    printed_by: BannerOrigin = field(default_factory=BannerOrigin)
    launcher_hosts: dict[int, str] = field(default_factory=dict)  # launcher rank -> host
    world_size: int | None = None  # the largest the launcher's or framework's lines gave
    # The version the last feed() tallied: a scanner that skips a line it read before tallies
    # it again (doctor/explain/engine.py, Replay), so the counts stay those of every line.
    last_tally: tuple[str, str | None] | None = None

    @property
    def version(self) -> str | None:
        """The version most lines gave (a job on mixed versions shows them all in ``versions``)."""
        return self.versions.most_common(1)[0][0] if self.versions else None

    @property
    def cuda(self) -> str | None:
        return self.cudas.most_common(1)[0][0] if self.cudas else None

    def feed(self, text: str, origin: Origin = NOWHERE) -> bool:
        """Read one line, its wrapping peeled (logline.strip_prefixes) into ``origin``; True
        when it told us something."""
        host, pid = origin.host, origin.pid
        self.last_tally = None
        m = L.MARKER.search(text)
        if m is None:  # a bare banner (NCCL 2.4's version on stdout, RCCL's extra lines) or a
            said = self._banner(text, None)  # framework's count of ranks (world.py)
            if said and L.VERSION.match(text):  # the banner itself, not an error quoting it
                self.printed_by.note(origin)
            elif not said and (n := world_size(text)) is not None:
                self.world_size = max(n, self.world_size or 0)
                return True
            return said
        if host is None and m.start() and (o := L.ORIGIN.search(text, 0, m.start())) is not None:
            host, pid = o["host"], int(o["pid"])  # behind an unknown prefix, or a DIAG line
        key = (host, pid)
        proc = self.processes.get(key)
        if proc is None:
            if len(self.processes) >= MAX_PROCESSES:
                self.processes_dropped += 1
                return False
            proc = NcclProcess(host, pid)
        msg = m["msg"]
        said = self._banner(msg, proc) or (
            _diag(msg, proc) if m["lvl"] == "DIAG" else _feed_process(msg, proc)
        )
        if m["lvl"] != "INFO" and (net := L.network_hint(origin.src, msg)) is not None:
            if net in proc.net_hints or len(proc.net_hints) < MAX_NOTES:
                proc.net_hints[net] += 1
            said = True
        elif m["lvl"] == "INFO" and (named := L.plugin_network(msg)) is not None:
            proc.note_plugin_net(named)
            said = True
        if origin.rank is not None and host and len(self.launcher_hosts) < MAX_PROCESSES:
            self.launcher_hosts.setdefault(origin.rank, host)
        if said:
            self.processes[key] = proc  # only processes that told us something are kept
        return said

    def _banner(self, text: str, proc: NcclProcess | None) -> bool:
        if proc is None and text[:1] in "#r" and self._benchmark(text):
            return True
        if "ersion" not in text and "Librccl" not in text:  # most lines: no regex at all
            return False
        if (v := L.VERSION.search(text)) is not None:
            version = v["ver"] + v["suffix"]
            self.tally(version, v["platver"])
            self.library = self.library or v["lib"]
            if proc is not None:
                proc.library, proc.version = v["lib"], version
                proc.cuda = v["platver"] or proc.cuda
            return True
        if (d := L.DRIVER.search(text)) is not None:
            driver = int(d["v"])
            self.cuda_driver = driver if self.cuda_driver is None else self.cuda_driver
            if proc is not None:
                proc.cuda_driver = driver
            return True
        if (x := L.RCCL_EXTRA.search(text.strip())) is not None:
            value = cut(x["value"])
            if x["what"] == "HIP version":
                self.hip = self.hip or value
            elif x["what"] == "ROCm version":
                self.rocm = self.rocm or value
            else:
                self.library_path = self.library_path or value
            return True
        return False

    def tally(self, version: str, platform: str | None, times: int = 1) -> None:
        """Count a version line (and the CUDA or HIP it was built for), ``times`` over."""
        self.versions[version] += times
        if platform:
            self.cudas[platform] += times
        self.last_tally = (version, platform)

    def _benchmark(self, text: str) -> bool:
        """nccl-tests' or rccl-tests' header: the library's version, and each rank's process,
        host and GPU (nccl_tests.py)."""
        if (h := T.header(text)) is not None:
            benchmark, version = h
            self.benchmark = self.benchmark or benchmark
            if version is not None:
                self.tally(version, None)
                self.library = self.library or "NCCL"
            return True
        if (d := T.device(text)) is None:
            return False
        proc = self.processes.get((d.host, d.pid))
        if proc is None and len(self.processes) >= MAX_PROCESSES:
            self.processes_dropped += 1
            return False
        proc = self.processes.setdefault((d.host, d.pid), NcclProcess(d.host, d.pid))
        proc.rank = d.rank if proc.rank is None else proc.rank
        proc.cuda_dev = d.cuda_dev if proc.cuda_dev is None else proc.cuda_dev
        proc.bus_id = proc.bus_id or d.bus_id
        return True

    def absorb(self, later: NcclLog) -> None:
        """Take in what the next part of a log (scanned in parallel) said."""
        self.versions.update(later.versions)
        self.cudas.update(later.cudas)
        for name in ("library", "cuda_driver", "hip", "rocm", "library_path", "benchmark"):
            if getattr(self, name) is None:
                setattr(self, name, getattr(later, name))
        for key, proc in later.processes.items():
            if key in self.processes:
                self.processes[key].absorb(proc)
            elif len(self.processes) < MAX_PROCESSES:
                self.processes[key] = proc
            else:
                self.processes_dropped += 1
        self.processes_dropped += later.processes_dropped
        self.printed_by.absorb(later.printed_by)
        self.world_size = max(later.world_size or 0, self.world_size or 0) or None
        for rank, host in later.launcher_hosts.items():
            self.launcher_hosts.setdefault(rank, host)

    def version_printed_by(self) -> list[str]:
        """The hosts that printed the bare version lines, where their wrapping, a process of
        the same pid or launcher rank, or a log of one host tells."""
        return self.printed_by.hosts(
            self.launcher_hosts, {p.pid: p.host for p in self.processes.values() if p.host}
        )

    def shared_hostnames(self) -> dict[str, list[str]]:
        """Hostnames several machines use: one name whose processes bootstrapped from different
        addresses, and whose NCCL_HOSTID (if shown) does not tell them apart. NCCL then takes
        those machines for one host (its host hash is hostname + boot_id, or NCCL_HOSTID)."""
        addresses: dict[str, set[str]] = {}
        hostids: dict[str, set[str]] = {}
        for p in self.processes.values():
            if p.host and p.bootstrap:
                addresses.setdefault(p.host, set()).add(p.bootstrap[0][1])
                hostids.setdefault(p.host, set()).add(p.env.get("NCCL_HOSTID", ""))
        return {
            host: sorted(found)
            for host, found in sorted(addresses.items())
            if len(found) > 1 and len(hostids[host]) < len(found)
        }

    def nranks(self) -> int | None:
        """NCCL's rank count; where no NCCL line gives one, the launcher's or framework's."""
        counts = [p.nranks for p in self.processes.values() if p.nranks is not None]
        return max(counts) if counts else self.world_size

    def nnodes(self) -> int | None:
        """The node count NCCL computed; before 2.19 (no nNodes line) the hosts that spoke, when
        every rank of the job spoke."""
        counts = [p.nnodes for p in self.processes.values() if p.nnodes is not None]
        if counts:
            return max(counts)
        ranks = {p.rank for p in self.processes.values() if p.rank is not None}
        hosts = {p.host for p in self.processes.values() if p.host and p.rank is not None}
        nranks = self.nranks()
        if nranks is not None and hosts and len(ranks) == nranks:
            return len(hosts)
        return None

    def transports(self) -> dict[str, int]:
        """Channel connections per transport, over every process."""
        total: Counter[str] = Counter()
        for p in self.processes.values():
            total.update(p.transports())
        return dict(total)

    def is_empty(self) -> bool:
        return not self.versions and self.cuda_driver is None and not self.processes

    def to_json(self) -> dict[str, Any]:
        procs = sorted(
            self.processes.values(),
            key=lambda p: (p.rank if p.rank is not None else 1 << 30, p.host or "", p.pid or 0),
        )
        return {
            "library": self.library,
            "version": self.version,
            "versions": dict(self.versions),
            "cuda": self.cuda,
            "cuda_driver": self.cuda_driver,
            "hip": self.hip,
            "rocm": self.rocm,
            "library_path": self.library_path,
            "benchmark": self.benchmark,
            "version_printed_by": self.version_printed_by(),
            "shared_hostnames": self.shared_hostnames(),
            "nranks": self.nranks(),
            "world_size": self.world_size,
            "nnodes": self.nnodes(),
            "transports": self.transports(),
            **summarise(self.processes.values(), self.library, list(self.versions)).to_json(),
            "processes": [p.to_json() for p in procs],
            "processes_dropped": self.processes_dropped,
        }


def _diag(msg: str, proc: NcclProcess) -> bool:
    m = L.DIAG.match(msg)
    if m is None or len(proc.diagnostics) >= MAX_NOTES:
        return m is not None
    note = (m["status"] or m["word"] or "", cut(m["text"]))
    if note not in proc.diagnostics:  # a line printed twice (or read twice) is one diagnosis
        proc.diagnostics.append(note)
    return True


def _feed_process(msg: str, proc: NcclProcess) -> bool:
    """One message of one process; cheap substring tests keep most regexes off most lines."""
    if " via " in msg:
        return _link(msg, proc)
    if "comm " in msg and (c := L.COMM.search(msg)) is not None:
        _comm(c, proc)
        return True
    if ("Using" in msg or "Assigned NET" in msg) and _using(msg, proc):
        return True
    if "NET/" in msg:
        if (d := L.NET_DEVICE_LINE.search(msg)) is not None:
            if not proc.net_devices_of:
                proc.net_devices_of = d["net"]
            _add_devices(proc, L.net_devices(msg[d.end() :]))
            return True
        if (n := L.NO_DEVICE.search(msg)) is not None:
            if n["net"] not in proc.no_devices:
                proc.no_devices.append(n["net"])
            return True
    pluginish = "lugin" in msg or "NET/OFI" in msg or "not found" in msg or " ver." in msg
    if pluginish and _plugin(msg, proc.plugin):
        return True
    if ("RDMA" in msg or "DMA-BUF" in msg or "GDR" in msg) and _gdr(msg, proc):
        return True
    if " set " in msg and (e := L.ENV.search(msg)) is not None:
        if e["name"] in proc.env or len(proc.env) < MAX_ENV:
            proc.env[e["name"]] = cut(e["value"])
        return True
    if "libibverbs" in msg and L.NO_VERBS.search(msg):
        proc.no_verbs = True
        return True
    if "NVLS" in msg and L.NVLS.search(msg):
        proc.nvls = True
        return True
    if L.RAS.match(msg):
        proc.ras = True
        return True
    if "Init COMPLETE" in msg:
        proc.init_complete = True
        return True
    return False


def _link(msg: str, proc: NcclProcess) -> bool:
    c = L.LINK.search(msg) or L.COLLNET_LINK.search(msg)
    if c is None:
        return False
    src = int(c["src"])
    dst = int(c["dst"]) if "dst" in c.re.groupindex else src
    if len(proc.links) < MAX_LINKS:
        proc.links[(int(c["ch"]), src, dst, c["dir"] or "")] = L.link(c["via"])
    if proc.rank is None:  # a sender prints itself first, a receiver last
        proc.rank = dst if c["dir"] == "receive" else src
    return True


def _comm(c: re.Match[str], proc: NcclProcess) -> None:
    nranks = int(c["nranks"])
    if c["state"] == "Abort COMPLETE":
        proc.aborted = True
    if c["state"] == "Init COMPLETE":
        proc.init_complete = True
    if proc.nranks is not None and nranks < proc.nranks:
        return  # a sub-communicator: the world comm says who this process is
    proc.rank, proc.nranks = int(c["rank"]), nranks
    if c["nnodes"] is not None:
        proc.nnodes, proc.local_ranks = int(c["nnodes"]), int(c["local"])
    if c["dev"] is not None:
        proc.cuda_dev = int(c["dev"])
    if c["bus"] is not None:
        proc.bus_id = c["bus"].lower()


def _using(msg: str, proc: NcclProcess) -> bool:
    if (b := L.BOOTSTRAP.search(msg)) is not None:
        proc.bootstrap = L.endpoints(b["rest"])
        return True
    if (n := L.NET_USING.search(msg)) is not None:
        rest = n["rest"]
        if (o := L.OOB.search(rest)) is not None:
            proc.ib_oob = o["oob"]
            rest = rest[: o.start()]
        devices = L.net_devices(rest)
        if devices:
            proc.net_devices, proc.net_devices_of = devices[:MAX_DEVICES], n["net"]
        elif found := L.endpoints(rest):  # not "NET/Socket: Using 2 threads and 8 sockets"
            proc.socket_ifs = found
        return True
    if (w := L.NETWORK.search(msg)) is not None:
        proc.network = cut(w["net"])
        return True
    return False


def _add_devices(proc: NcclProcess, devices: list[NetDevice]) -> None:
    known = {d.number for d in proc.net_devices}
    for d in devices:
        if d.number not in known and len(proc.net_devices) < MAX_DEVICES:
            proc.net_devices.append(d)


def _plugin(msg: str, plugin: Plugin) -> bool:
    if (m := L.PLUGIN_LOADED.search(msg)) is not None:
        if m["kind"] == "net":
            plugin.loaded, plugin.name, plugin.api = True, cut(m["name"]), m["api"]
        return True
    if (e := L.PLUGIN_LOAD_ERROR.search(msg)) is not None:
        if e["path"]:
            plugin.path = cut(e["path"])
        error = e["err"] or e["failed"] or e["dlerr"] or ""
        if L.PLUGIN_ABSENT.search(msg) or e["errno"] == "2":
            plugin.absent = True
        elif "symbol" not in error or "not supported" in error:
            # "Failed to find ncclNetPlugin_v8 symbol" is NCCL trying older plugin APIs.
            plugin.note_error(cut(error))
        return True
    if L.PLUGIN_ABSENT.search(msg):
        plugin.absent = True
        return True
    if (x := L.PLUGIN_NETWORK_MISSING.search(msg)) is not None:
        plugin.note_error(cut(f"network {x['net']} not found"))
        return True
    if (p := L.PLUGIN_PATH.search(msg)) is not None:
        plugin.path = cut(p["path"])
        return True
    if (h := L.HPCX_PLUGIN.search(msg)) is not None:
        plugin.name = plugin.name or cut(h["name"])
        return True
    if (o := L.OFI_VERSION.search(msg)) is not None:
        plugin.version = cut(f"{o['name']} {o['ver']}".strip())
        return True
    if (s := L.OFI_PROVIDER.search(msg)) is not None:
        plugin.provider = cut(s["prov"] + (f" ({s['fabric']})" if s["fabric"] else ""))
        plugin.nics = int(s["nics"]) if s["nics"] else plugin.nics
        return True
    if (v := L.PLUGIN_VERSION.search(msg)) is not None:
        plugin.version = cut(f"{v['name']} {v['ver']}")
        return True
    return False


def _gdr(msg: str, proc: NcclProcess) -> bool:
    if (g := L.GDR.search(msg)) is not None:
        hca = g["name"] or g["hca"]
        state = g["state"].lower()
        why = g["why"] or ""
        if state == "disabled" and why and "distance" not in why:
            state += f" ({why})"
        if hca in proc.gdr_hcas or len(proc.gdr_hcas) < MAX_DEVICES:
            proc.gdr_hcas[hca] = state
        return True
    if L.DMABUF.search(msg):
        proc.dmabuf = True
        return True
    if (r := L.RING_GDR.search(msg)) is not None:
        proc.ring_gdr = r["gdr"] == "1"
        return True
    return False


def parse_nccl_log(lines: Iterable[str]) -> NcclLog:
    """Parse a whole NCCL_DEBUG=INFO log (launcher prefixes allowed) into NcclLog."""
    log = NcclLog()
    for line in lines:
        log.feed(*strip_prefixes(line))
    return log
