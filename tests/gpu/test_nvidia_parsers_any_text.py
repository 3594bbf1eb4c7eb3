"""No NVIDIA parser or paste kind raises on any text: arbitrary, huge, binary-ish, truncated."""

from __future__ import annotations

import contextlib

from hypothesis import given, settings
from hypothesis import strategies as st

from doctor.facts.nvidia.gpu_host import parse_xid
from doctor.facts.nvidia.gpus import parse_smi_csv
from doctor.facts.nvidia.smi_table import parse_table
from doctor.facts.nvidia.smi_tree import parse_query_text, parse_query_xml
from doctor.facts.topo.smi_text import TopoParseError, parse_topo_text
from doctor.paste.nvidia import NVIDIA_KINDS

tokens = st.sampled_from(
    [
        *"|+=-:x \n\t\r0123456789.,/%",
        "NVIDIA-SMI 550.1",
        "Driver Version: 1",
        "Bus-Id",
        "Name",
        "MIG M.",
        "Processes:",
        "NVSMI LOG",
        "GPU 00000000:07:00.0",
        "    ",
        "<nvidia_smi_log>",
        "<gpu id='x'>",
        "</gpu>",
        "<pci>",
        "NVRM: Xid (PCI:0000:07:00): ",
        "GPU0",
        "NIC0",
        " X ",
        "SYS",
        "MiB",
        "index, name",
        "\x00",
        "\ufffd",
    ]
)
texts = st.one_of(st.text(max_size=400), st.lists(tokens, max_size=120).map("".join))


@settings(max_examples=200, deadline=None)
@given(texts)
def test_never_raises(text: str) -> None:
    parse_table(text)
    parse_query_text(text)
    parse_query_xml(text)
    parse_smi_csv(text)
    parse_xid(text)
    with contextlib.suppress(TopoParseError):
        parse_topo_text(text)
    for kind in NVIDIA_KINDS:
        for line in text.splitlines():
            kind.starts(line)
        assert isinstance(kind.parse(text), dict)


def test_huge_and_undecodable_input_is_bounded() -> None:
    huge = "|" + "=" * 5_000_000 + "\n" + ("| 0 x | y |\n" * 50_000)
    parse_table(huge)
    parse_query_text(huge)
    junk = bytes(range(256)).decode("latin-1") * 2000
    parse_query_xml("<nvidia_smi_log>" + junk)
    bomb = '<!DOCTYPE x [<!ENTITY a "aaaa">]><nvidia_smi_log>&a;</nvidia_smi_log>'
    assert parse_query_xml(bomb).children == []
