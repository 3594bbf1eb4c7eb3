"""Which libnccl a job on the node would load, its version, and the bootstrap choice it made."""

from __future__ import annotations

from doctor.core.model import Missing
from doctor.facts.nccl.libraries import NcclLibrary
from doctor.facts.node import NodeFacts
from doctor.nic.nccl import LibraryBootstrap, Version, decode_unique_id, parse_bootstrap_log


def pick(facts: NodeFacts) -> NcclLibrary | None:
    """torch's libnccl first (what a training job loads), then the dynamic loader's, then any."""
    nccl = facts.nccl
    if isinstance(nccl, Missing) or not nccl.libraries:
        return None
    for path in (nccl.torch_pick, nccl.loader_pick):
        lib = nccl.library(path) if isinstance(path, str) else None
        if lib is not None:
            return lib
    if not isinstance(facts.amd, Missing) and facts.amd.gpus:
        # An AMD node's jobs load RCCL: its interface choice is the one to predict.
        return next((lib for lib in nccl.libraries if lib.rccl), nccl.libraries[0])
    return nccl.libraries[0]


def parse_version(text: str) -> Version | None:
    parts = text.split(".")
    if len(parts) != 3 or not all(p.isdigit() for p in parts):
        return None
    return int(parts[0]), int(parts[1]), int(parts[2])


def nccl_version(facts: NodeFacts) -> Version | None:
    lib = pick(facts)
    if lib is None or isinstance(lib.version, Missing):
        return None
    return parse_version(lib.version)


def bootstrap(facts: NodeFacts) -> LibraryBootstrap | None:
    """The library's own answer: the 'Bootstrap: Using' log line and the address in its id."""
    lib = pick(facts)
    if lib is None:
        return None
    logged = parse_bootstrap_log(lib.debug_log)
    uid = lib.unique_id_hex
    addr = None if isinstance(uid, Missing) else decode_unique_id(uid)
    net = facts.net
    owner = None if addr is None or isinstance(net, Missing) else net.owner(addr.address)
    return LibraryBootstrap(logged, addr, owner)
