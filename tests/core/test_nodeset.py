from __future__ import annotations

import hostlist
from hypothesis import given
from hypothesis import strategies as st

from doctor.core.nodeset import compact, name_peers, split_by_value


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


def test_a_peer_address_is_named_by_its_node_once() -> None:
    owners = {"198.18.0.2": "node2", "fd00::3": "node3", "198.18.0.1": "node1"}

    def named(text: str) -> str:
        return name_peers(text, owners, own=("node1",))

    assert (
        named("a Gloo peer went away (198.18.0.2)") == "a Gloo peer went away (node2, 198.18.0.2)"
    )
    assert named("connect to 198.18.0.2<45678>: refused") == (
        "connect to node2 (198.18.0.2<45678>): refused"
    )
    assert named("from [fd00::3]:99 and 198.18.0.2:41850.") == (
        "from node3 ([fd00::3]:99) and node2 (198.18.0.2:41850)."
    )
    # Not a longer address, not an interface's own listing, not the finding's own node, and not
    # a node the text names already.
    for same in ("198.18.0.23", "eth0:198.18.0.2", "198.18.0.1 here", "node2 at 198.18.0.2"):
        assert named(same) == same
