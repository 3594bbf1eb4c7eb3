"""Training frameworks on the node: torch, horovod, deepspeed (read from files, never imported
unless the probe was asked to import torch)."""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from typing import Any

from doctor.core.capture import Capture
from doctor.core.model import Missing
from doctor.facts.child import last_words, marked

# Must match TORCH_MARK in doctor/stages/probe.py.
TORCH_MARK = "@@cluster-doctor-torch@@"
_NCCL_PIN = re.compile(r"^nvidia-nccl-cu\d+\s*==\s*([\w.]+)", re.I)


@dataclass(frozen=True)
class Package:
    name: str
    location: str  # the package folder the node's Python would import
    version: str | Missing
    requires: tuple[str, ...]  # Requires-Dist lines of its metadata, extras left out


@dataclass(frozen=True)
class TorchRuntime:
    """What an imported torch said (only when the probe ran with ``torch: true``)."""

    version: str
    cuda: str | None
    nccl: str | None  # torch.cuda.nccl.version(): the NCCL (RCCL on ROCm) it was compiled with
    mapped_nccl: tuple[str, ...]  # the libnccl files mapped into the process after import
    cuda_available: bool | None
    backends: tuple[str, ...]  # torch.distributed backends available: nccl, gloo, mpi
    import_seconds: float
    hip: str | None = None  # torch.version.hip: the HIP of a ROCm build


@dataclass(frozen=True)
class TorchFacts:
    package: Package
    cuda: str | None  # the CUDA it was built for; None for a CPU or ROCm build
    git_version: str | None
    nccl_pin: str | None  # the nvidia-nccl-cu* version its wheel metadata pins
    runtime: TorchRuntime | Missing | None  # None: the probe was not asked to import torch
    hip: str | None = None  # the HIP (ROCm) it was built for; None for a CUDA or CPU build


@dataclass(frozen=True)
class HorovodFacts:
    package: Package
    extensions: tuple[str, ...]  # frameworks it was built for (horovod/<fw>/mpi_lib*.so)


@dataclass(frozen=True)
class DeepSpeedFacts:
    package: Package
    torch_info: tuple[tuple[str, str], ...]  # as built: torch, cuda and nccl versions


@dataclass(frozen=True)
class FrameworkFacts:
    torch: TorchFacts | None
    horovod: HorovodFacts | None
    deepspeed: DeepSpeedFacts | None


def parse_assignments(text: str) -> dict[str, Any]:
    """Top-level ``name = <literal>`` assignments of a Python file (version.py and the like).

    A file that does not parse whole (damaged, cut short, edited by hand) is read line by line,
    so one bad line does not hide the versions on the others."""
    try:
        body = ast.parse(text).body
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        body = [node for line in text.splitlines() for node in _statement(line)]
    out: dict[str, Any] = {}
    for node in body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target, value = node.targets[0], node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            target, value = node.target, node.value
        else:
            continue
        if isinstance(target, ast.Name):
            try:
                out[target.id] = ast.literal_eval(value)
            except (ValueError, TypeError, RecursionError, MemoryError):
                continue  # computed at import time: not ours to evaluate
    return out


def _statement(line: str) -> list[ast.stmt]:
    try:
        return ast.parse(line.strip()).body
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return []


def parse_metadata(text: str) -> tuple[str | None, tuple[str, ...]]:
    """Version and Requires-Dist from a METADATA/PKG-INFO header block."""
    version, requires = None, []
    for line in text.splitlines():
        if not line.strip():
            break  # the headers end at the first blank line; the description follows
        key, _, value = line.partition(":")
        if key == "Version":
            version = value.strip()
        elif key == "Requires-Dist" and "extra ==" not in value:  # optional extras: not installed
            requires.append(value.strip())
    return version, tuple(requires)


def package(cap: Capture, name: str, version_file: str, key: str = "__version__") -> Package | None:
    """A package found next to the node's Python, or None when it is not installed."""
    folder = cap.value(f"module:{name}")
    if not isinstance(folder, str):
        return None
    version: str | None = None
    requires: tuple[str, ...] = ()
    meta = cap.value(f"dist:{name}")
    text = cap.file(meta) if isinstance(meta, str) else None
    if isinstance(text, str):
        version, requires = parse_metadata(text)
    source = cap.file(f"{folder}/{version_file}")
    if version is None and isinstance(source, str):
        found = parse_assignments(source).get(key)
        version = found if isinstance(found, str) else None
    return Package(
        name,
        folder,
        version if version else Missing(f"{name} at {folder} names no version", "failed"),
        requires,
    )


def parse_torch_runtime(cap: Capture) -> TorchRuntime | Missing | None:
    result = cap.command("torch")
    if isinstance(result, Missing):
        return None if result.kind == "unsupported" else result
    data, _ = marked(result, TORCH_MARK)
    if data is None:
        return Missing(f"import torch failed: {last_words(result)}", "failed")
    nccl = data.get("nccl")
    dist = data.get("distributed") or {}
    return TorchRuntime(
        version=str(data.get("version")),
        cuda=data.get("cuda"),
        nccl=".".join(str(x) for x in nccl[:3]) if isinstance(nccl, list) else None,
        mapped_nccl=tuple(data.get("mapped_nccl") or ()),
        cuda_available=data.get("cuda_available"),
        backends=tuple(sorted(k for k, v in dist.items() if v is True)),
        import_seconds=float(data.get("import_seconds", 0.0)),
        hip=data.get("hip") if isinstance(data.get("hip"), str) else None,
    )


def torch_build(cap: Capture) -> tuple[Package, dict[str, Any] | None] | None:
    """torch's package and its version.py values (``cuda`` None: a CPU build); None: unreadable."""
    pkg = package(cap, "torch", "version.py")
    if pkg is None:
        return None
    text = cap.file(f"{pkg.location}/version.py")
    return pkg, parse_assignments(text) if isinstance(text, str) else None


def parse_torch(cap: Capture) -> TorchFacts | None:
    build = torch_build(cap)
    if build is None:
        return None
    pkg, values = build
    values = values or {}
    pins = (_NCCL_PIN.match(r) for r in pkg.requires)
    cuda, git, hip = values.get("cuda"), values.get("git_version"), values.get("hip")
    return TorchFacts(
        package=pkg,
        cuda=cuda if isinstance(cuda, str) else None,
        git_version=git if isinstance(git, str) else None,
        nccl_pin=next((m.group(1) for m in pins if m), None),
        runtime=parse_torch_runtime(cap),
        hip=hip if isinstance(hip, str) else None,
    )


def parse_horovod(cap: Capture) -> HorovodFacts | None:
    pkg = package(cap, "horovod", "__init__.py")
    if pkg is None:
        return None
    built = []
    for fw in ("torch", "tensorflow", "mxnet"):
        entries = cap.dir(f"{pkg.location}/{fw}")
        if not isinstance(entries, Missing) and any(e.startswith("mpi_lib") for e in entries):
            built.append(fw)
    return HorovodFacts(pkg, tuple(built))


def parse_deepspeed(cap: Capture) -> DeepSpeedFacts | None:
    pkg = package(cap, "deepspeed", "git_version_info_installed.py", key="version")
    if pkg is None:
        return None
    text = cap.file(f"{pkg.location}/git_version_info_installed.py")
    info = parse_assignments(text).get("torch_info") if isinstance(text, str) else None
    items = (
        tuple(sorted((str(k), str(v)) for k, v in info.items())) if isinstance(info, dict) else ()
    )
    return DeepSpeedFacts(pkg, items)


def parse_frameworks(cap: Capture) -> FrameworkFacts:
    return FrameworkFacts(parse_torch(cap), parse_horovod(cap), parse_deepspeed(cap))
