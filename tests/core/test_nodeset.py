from __future__ import annotations

import hostlist
from hypothesis import given
from hypothesis import strategies as st

from doctor.nodeset import compact, split_by_value


def test_compact_keeps_padding_and_ranges() -> None:
    names = ["node03", "node07", "node08", "node09", "gpu-a"]
    assert compact(names) == "gpu-a,node[03,07-09]"
    assert compact(["n1"]) == "n1"
    assert compact([]) == ""


@given(
    st.sets(
        st.tuples(st.sampled_from(["node", "gpu", "a-b"]), st.integers(0, 300), st.booleans()),
        min_size=1,
        max_size=40,
    )
)
def test_compact_expands_back_to_the_same_names(items: set[tuple[str, int, bool]]) -> None:
    names = {f"{prefix}{n:03d}" if pad else f"{prefix}{n}" for prefix, n, pad in items}
    # Slurm's own hostlist expander must read what we print.
    assert set(hostlist.expand_hostlist(compact(names))) == names


def test_split_majority_and_baseline() -> None:
    values = {"n1": "2.21.5", "n2": "2.21.5", "n3": "2.18.1"}
    split = split_by_value(values)
    assert split and split.reference == "2.21.5" and split.others == {"2.18.1": ("n3",)}
    assert split_by_value({"a": 1, "b": 1}) is None
    against = split_by_value(values, baseline="2.18.1")
    assert against and against.others == {"2.21.5": ("n1", "n2")}
    assert split_by_value({"a": 1}, baseline=2) is not None
