"""`doctor topo`: the topology report of this node, or of a saved `nvidia-smi topo -m` output."""

from __future__ import annotations

import enum
import json
import sys
from pathlib import Path

from rich.console import Console

from doctor.capture import Capture, CaptureError
from doctor.collect import gather, probe_spec
from doctor.errors import UsageError
from doctor.facts.topo import parse_topo
from doctor.inventory import local_node
from doctor.model import Missing
from doctor.report import EXIT_INTERNAL, EXIT_OK
from doctor.topo.render import TopoView, render_topology, topo_json, view_of
from doctor.topo.smi_text import TopoParseError, export_topo_text, parse_topo_text
from doctor.transport.local import LocalTransport


class TopoFormat(str, enum.Enum):
    text = "text"  # the rich matrix, legend and NIC affinity
    json = "json"
    plain = "plain"  # `nvidia-smi topo -m` layout, readable by --input


def view_from_file(path: Path) -> TopoView:
    """Read a saved `nvidia-smi topo -m` output, or a node's capture from `doctor collect`.

    Anything that is neither is a one-line usage error.
    """
    try:
        text = path.read_bytes().decode("utf-8", "replace")
    except OSError as exc:
        raise UsageError(f"{path}: {exc.strerror}") from None
    if text.lstrip().startswith("{"):
        return _view_from_capture(path, text)
    try:
        topo = parse_topo_text(text)
    except TopoParseError as exc:
        raise UsageError(f"{path}: not an nvidia-smi topo -m output: {exc}") from None
    # nvidia-smi lists RDMA (ibverbs) devices only, so every NIC row is one.
    return TopoView(path.name, str(path), topo, topo.nics)


def _view_from_capture(path: Path, text: str) -> TopoView:
    try:
        cap = Capture(json.loads(text))
    except (ValueError, CaptureError) as exc:
        raise UsageError(f"{path}: not a probe capture: {exc}") from None
    facts = parse_topo(cap)
    if isinstance(facts, Missing):
        raise UsageError(f"{path}: no topology in this capture: {facts.reason}")
    return view_of(path.stem, facts)


def local_view(deadline: float) -> TopoView | str:
    """Probe this node and build its view, or say in one line why that failed."""
    node = local_node()
    result = gather([node], LocalTransport(), probe_spec([], deadline=deadline))[node.name]
    if not isinstance(result, Capture):
        return result.summary
    facts = parse_topo(result)
    if isinstance(facts, Missing):
        return f"topology of {node.name}: {facts.reason}"
    return view_of(node.name, facts)


def run_topo(input_file: Path | None, fmt: TopoFormat, deadline: float, out: Console) -> int:
    view = view_from_file(input_file) if input_file is not None else local_view(deadline)
    if isinstance(view, str):
        Console(file=sys.stderr).print(f"doctor: {view}", markup=False, highlight=False)
        return EXIT_INTERNAL
    if fmt is TopoFormat.json:
        sys.stdout.write(json.dumps(topo_json(view), indent=2) + "\n")
    elif fmt is TopoFormat.plain:
        if not view.topology.gpus:
            raise UsageError(f"--format plain: no NVIDIA GPU on {view.node}, no matrix to write")
        sys.stdout.write(export_topo_text(view.topology))
    else:
        render_topology(view, out)
    return EXIT_OK
