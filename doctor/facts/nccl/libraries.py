"""Every libnccl a node could load, which one torch and the dynamic loader pick, plugins, config."""

from __future__ import annotations

import fnmatch
import posixpath
import re
from dataclasses import dataclass
from typing import Any

from doctor.core.capture import Capture, CommandResult
from doctor.core.model import Missing
from doctor.facts.amd.sysfs import rocm_roots
from doctor.facts.child import last_words, marked
from doctor.facts.frameworks import torch_build
from doctor.facts.nccl.names import decode_version

# Must match NCCL_MARK in doctor/stages/probe.py: the line the probe's child prints its result on.
MARK = "@@cluster-doctor-nccl@@"
# A pasted NCCL_DEBUG=INFO log (doctor/paste): the probe never writes this slot.
LOG_SLOT = "nccl:debug_log"
LOGGED = "NCCL_DEBUG=INFO log"  # the library's "path" when all we have is what its log said
BANNER = re.compile(r"NCCL version (\d+\.\d+\.\d+)(\S*?)\+cuda(\d+\.\d+)")
SONAME = "libnccl.so.2"
# RCCL, NCCL's API for AMD GPUs: the same calls answer, so it is one more library here.
LIBRARIES = ("libnccl.so", "librccl.so")
# ncclResult_t (nccl.h): what a failed call returned.
RESULTS = {
    1: "ncclUnhandledCudaError",
    2: "ncclSystemError",
    3: "ncclInternalError",
    4: "ncclInvalidArgument",
    5: "ncclInvalidUsage",
    6: "ncclRemoteError",
    7: "ncclInProgress",
}
TORCH_GLOB = "libnccl.so.*[0-9]"  # the pattern torch/__init__.py preloads
# Folders under a sys.path entry that hold a libnccl, and what we call them.
SITE_SUBDIRS = (
    ("nvidia/nccl/lib", "wheel"),
    ("nvidia/cu13/lib", "wheel"),
    ("nvidia/cu12/lib", "wheel"),
    ("torch/lib", "torch"),
)


@dataclass(frozen=True)
class NcclLibrary:
    path: str  # the real file, symlinks resolved
    found_as: tuple[str, ...]  # every name it was found under
    sources: tuple[str, ...]  # "LD_LIBRARY_PATH", "ldconfig", "wheel", "torch"
    version: str | Missing  # "2.32.3": ncclGetVersion, else the banner inside the binary
    cuda: str | None  # the CUDA it was built for ("12.9"), from the banner
    unique_id_hex: str | Missing  # ncclGetUniqueId: 128 bytes (magic, bootstrap sockaddr)
    debug_log: str  # NCCL's own INFO log from that call (INIT,BOOTSTRAP,ENV,NET)

    @property
    def rccl(self) -> bool:
        return any(posixpath.basename(p).startswith("librccl") for p in (self.path, *self.found_as))


@dataclass(frozen=True)
class NcclConf:
    path: str
    role: str  # "NCCL_CONF_FILE", "user" (~/.nccl.conf) or "system" (/etc/nccl.conf)
    settings: tuple[tuple[str, str], ...] | Missing


@dataclass(frozen=True)
class NcclFacts:
    libraries: tuple[NcclLibrary, ...]
    # The real path a program linked against libnccl.so.2 gets (LD_LIBRARY_PATH, then the
    # ld.so cache); None when neither has one.
    loader_pick: str | None
    # The real path torch loads; None when torch needs none (a CPU build); Missing when there is
    # no torch, or a CUDA torch whose NCCL is not a separate file.
    torch_pick: str | Missing | None
    net_plugins: tuple[str, ...]
    conf_files: tuple[NcclConf, ...]  # in NCCL's precedence order, highest first
    # What a pasted NCCL_DEBUG=INFO log showed (version, CUDA, interfaces, transports per
    # process: doctor/facts/nccl/log.py); None when no log was pasted.
    log: dict[str, Any] | None = None

    def library(self, path: str | None) -> NcclLibrary | None:
        return next((lib for lib in self.libraries if lib.path == path), None)


def parse_conf(text: str) -> tuple[tuple[str, str], ...]:
    """nccl.conf: ``NAME=value`` lines, ``#`` comments (NCCL's initEnvFunc in src/misc/param.cc)."""
    out = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        key, sep, value = line.partition("=")
        if sep and key.strip():
            out.append((key.strip(), value.strip()))
    return tuple(out)


@dataclass(frozen=True)
class _Call:
    version: str | Missing
    cuda: str | None
    unique_id_hex: str | Missing
    debug_log: str


def parse_call(result: CommandResult | Missing, path: str) -> _Call:
    """The probe's child for one library: its marker line as JSON, the rest NCCL's log."""
    if isinstance(result, Missing):
        return _Call(result, None, result, "")
    data, log = marked(result, MARK)
    if data is None:
        missing = Missing(f"{path}: probe child died: {last_words(result)}", "failed")
        return _Call(missing, None, missing, "\n".join(log))
    banner = BANNER.search(data.get("banner") or "")
    error = data.get("error")
    version: str | Missing
    if data.get("version_rc") == 0 and isinstance(data.get("version_code"), int):
        version = decode_version(data["version_code"])
    elif banner:
        version = banner.group(1)
    else:
        version = Missing(f"{path}: {error or 'no version'}", "failed")
    uid: str | Missing
    if data.get("unique_id_rc") == 0 and data.get("unique_id_hex"):
        uid = str(data["unique_id_hex"])
    elif "unique_id_rc" in data:
        rc = data["unique_id_rc"]
        uid = Missing(f"{path}: ncclGetUniqueId returned {rc} ({RESULTS.get(rc, '?')})", "failed")
    else:
        uid = Missing(f"{path}: {error or 'ncclGetUniqueId was not called'}", "failed")
    return _Call(version, banner.group(3) if banner else None, uid, "\n".join(log))


def _ldconfig_entries(cap: Capture) -> list[tuple[str, str]]:
    """(name, path) for every libnccl* and librccl* line of ``ldconfig -p``, in cache order."""
    result = cap.command("ldconfig")
    if isinstance(result, Missing):
        return []
    out = []
    for line in result.stdout.splitlines():
        name, sep, target = line.strip().partition(" => ")
        if sep and name.startswith(("libnccl", "librccl")):
            out.append((name.split(" ", 1)[0], target.strip()))
    return out


def _listed(cap: Capture, folder: str) -> list[str]:
    entries = cap.dir(folder)
    return [] if isinstance(entries, Missing) else entries


def _real(cap: Capture, path: str) -> str:
    real = cap.value(f"realpath:{path}")
    return real if isinstance(real, str) else path


def _ld_library_dirs(cap: Capture) -> list[str]:
    env = cap.value("env")
    raw = env.get("LD_LIBRARY_PATH", "") if isinstance(env, dict) else ""
    return [d for d in raw.split(":") if d]


def _site_dirs(cap: Capture) -> list[str]:
    value = cap.value("sys.path")
    return [d for d in value if isinstance(d, str)] if isinstance(value, list) else []


def _candidates(cap: Capture) -> list[tuple[str, str]]:
    """(path as found, source) for every libnccl and net plugin, in discovery order."""
    found = [
        (posixpath.join(d, e), "LD_LIBRARY_PATH")
        for d in _ld_library_dirs(cap)
        for e in _listed(cap, d)
        if e.startswith(("libnccl", "librccl"))
    ]
    found += [(path, "ldconfig") for _, path in _ldconfig_entries(cap)]
    for folder in (f"{root}/lib" for root in rocm_roots(cap)):
        found += [(posixpath.join(folder, e), "rocm") for e in _listed(cap, folder)]
    for site in _site_dirs(cap):
        for sub, source in SITE_SUBDIRS:
            folder = posixpath.join(site, sub)
            found += [(posixpath.join(folder, e), source) for e in _listed(cap, folder)]
    return found


def _torch_pick(cap: Capture) -> str | Missing | None:
    """The libnccl torch loads: its own torch/lib copy, else the wheel it preloads from sys.path.

    torch/__init__.py ``_preload_cuda_deps`` walks sys.path in order and takes the first
    ``nvidia/nccl/lib/libnccl.so.*[0-9]`` (or ``nvidia/cu<major>/lib`` for CUDA 13 builds).
    """
    build = torch_build(cap)
    if build is None:
        return Missing("torch is not installed for the probe's Python", "absent")
    pkg, values = build
    own = sorted(e for e in _listed(cap, f"{pkg.location}/lib") if e.startswith(LIBRARIES))
    if own:
        return _real(cap, f"{pkg.location}/lib/{own[0]}")
    cuda = values.get("cuda") if values is not None else None
    if values is not None and isinstance(values.get("hip"), str):
        # A ROCm build links ROCm's librccl.so.1, as the dynamic loader finds it.
        rocm = [path for name, path in _ldconfig_entries(cap) if name.startswith("librccl.so")]
        return _real(cap, rocm[0]) if rocm else Missing("torch (ROCm) finds no librccl", "absent")
    if values is not None and not isinstance(cuda, str):
        return None  # a CPU build: no NCCL at all
    subs = ["nvidia/nccl/lib"] + ([f"nvidia/cu{cuda.split('.')[0]}/lib"] if cuda else [])
    for site in _site_dirs(cap):
        for sub in subs:
            folder = posixpath.join(site, sub)
            hits = sorted(e for e in _listed(cap, folder) if fnmatch.fnmatch(e, TORCH_GLOB))
            if hits:
                return _real(cap, posixpath.join(folder, hits[0]))
    return Missing(
        f"torch (CUDA {cuda}) has no separate libnccl: linked into libtorch_cuda.so or absent",
        "absent",
    )


def _loader_pick(cap: Capture) -> str | None:
    for folder in _ld_library_dirs(cap):
        if SONAME in _listed(cap, folder):
            return _real(cap, posixpath.join(folder, SONAME))
    for name, path in _ldconfig_entries(cap):
        if name == SONAME:
            return _real(cap, path)
    return None


def _conf_files(cap: Capture) -> tuple[NcclConf, ...]:
    paths = cap.value("nccl:conf_files")
    if not isinstance(paths, dict):
        return ()
    # NCCL reads $NCCL_CONF_FILE, else ~/.nccl.conf; then /etc/nccl.conf, without overriding.
    conf_file = paths.get("NCCL_CONF_FILE")
    first = ("NCCL_CONF_FILE", conf_file) if conf_file else ("user", paths.get("user"))
    out = []
    for role, path in (first, ("system", paths.get("system"))):
        if not isinstance(path, str):
            continue
        text = cap.file(path)
        if isinstance(text, Missing) and text.kind == "absent":
            continue
        out.append(NcclConf(path, role, parse_conf(text) if isinstance(text, str) else text))
    return tuple(out)


def _from_log(cap: Capture) -> NcclFacts | Missing | None:
    """The NCCL a pasted log shows, as one library; None where no log was pasted."""
    text = cap.value(LOG_SLOT)
    if not isinstance(text, str):
        return None
    # Imported here: only a pasted log needs the log reader, and probing must not load it.
    from doctor.facts.nccl.log import parse_nccl_log

    log = parse_nccl_log(text.splitlines())
    if log.is_empty():
        return Missing("the pasted NCCL_DEBUG=INFO log says nothing NCCL does", "absent")
    unknown = Missing("not shown in an NCCL_DEBUG=INFO log", "unsupported")
    version = log.version or Missing("the pasted log has no 'NCCL version' line", "absent")
    lib = NcclLibrary(LOGGED, (), ("log",), version, log.cuda, unknown, "")
    return NcclFacts((lib,), None, unknown, (), (), log.to_json())


def parse_nccl(cap: Capture) -> NcclFacts | Missing:
    logged = _from_log(cap)
    if isinstance(cap.value("sys.path"), Missing) and isinstance(cap.command("ldconfig"), Missing):
        # Nothing was searched for libraries (a paste): only a pasted log can say anything.
        if logged is not None:
            return logged
        return Missing("no NCCL libraries were looked for, and no NCCL log", "unsupported")
    by_real: dict[str, tuple[list[str], list[str]]] = {}
    plugins: list[str] = []
    for path, source in _candidates(cap):
        name = posixpath.basename(path)
        if name.startswith("libnccl-net"):
            if path not in plugins:
                plugins.append(path)
            continue
        if not name.startswith(LIBRARIES):
            continue
        names, sources = by_real.setdefault(_real(cap, path), ([], []))
        if path not in names:
            names.append(path)
        if source not in sources:
            sources.append(source)
    libraries = []
    for real, (names, sources) in by_real.items():
        call = parse_call(cap.command(f"nccl:{real}"), real)
        libraries.append(
            NcclLibrary(
                real,
                tuple(names),
                tuple(sources),
                call.version,
                call.cuda,
                call.unique_id_hex,
                call.debug_log,
            )
        )
    return NcclFacts(
        libraries=tuple(libraries),
        loader_pick=_loader_pick(cap),
        torch_pick=_torch_pick(cap),
        net_plugins=tuple(plugins),
        conf_files=_conf_files(cap),
    )
