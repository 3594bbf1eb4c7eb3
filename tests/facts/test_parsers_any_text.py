"""Every text parser answers (a value or None) on any input, never raises."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from doctor.core.capture import CommandResult
from doctor.facts.child import marked
from doctor.facts.frameworks import parse_metadata
from doctor.facts.mpi import parse_mpirun_version
from doctor.facts.nccl.libraries import MARK, parse_conf
from doctor.facts.nvidia.driver import parse_nvrm
from doctor.facts.nvidia.gpus import parse_smi_csv

# Text shaped like the real thing: the separators and markers these parsers look for.
tokens = st.sampled_from([*'ab09.,:= \n\t[]/-+#@{}"', MARK, "NVRM version:", "Version:"])
noise = st.lists(tokens, max_size=80).map("".join)
texts = st.one_of(st.text(max_size=300), noise)


@settings(max_examples=150, deadline=None)
@given(texts)
def test_parsers_never_raise(text: str) -> None:
    parse_nvrm(text)
    parse_smi_csv(text)
    parse_conf(text)
    parse_mpirun_version(text)
    parse_metadata(text)
    marked(CommandResult(("x",), 0, text, "", 0.0), MARK)


@settings(max_examples=100, deadline=None)
@given(
    st.lists(
        st.text(alphabet="0123456789abcdefABCDEF:.[]/N A", max_size=20), min_size=11, max_size=11
    )
)
def test_smi_rows_with_odd_cells(cells: list[str]) -> None:
    """A row of the right width with any cell content still parses (bad cells become None)."""
    for gpu in parse_smi_csv(", ".join(c.replace(",", "") for c in cells)):
        assert gpu.memory_total is None or gpu.memory_total >= 0
