"""The interface-list grammars: NCCL (socket and IB), Gloo, Open MPI. Properties + examples."""

from __future__ import annotations

import ipaddress

from hypothesis import given, settings
from hypothesis import strategies as st

from doctor.nic.grammar import (
    NCCL_MAX_TOKENS,
    IfToken,
    nccl_list_active,
    parse_gloo_list,
    parse_mpi_list,
    parse_nccl_list,
)

# No per-example deadline: a loaded, shared CI machine must not turn these into flakes.
no_deadline = settings(deadline=None)

# Characters that matter to the grammars, plus ordinary name characters.
ALPHABET = st.sampled_from(list("^=:,e0th1ib_ -"))
VALUES = st.text(ALPHABET, max_size=40)
NAMES = st.text(st.sampled_from(list("eth01ib_")), min_size=1, max_size=6)


def c_atoi(text: str) -> int:
    """atoi() as C's runtime reads it: skip C white space, one sign, then ASCII digits."""
    i = 0
    while i < len(text) and text[i] in " \t\n\v\f\r":
        i += 1
    sign = 1
    if i < len(text) and text[i] in "+-":
        sign = -1 if text[i] == "-" else 1
        i += 1
    value = 0
    while i < len(text) and "0" <= text[i] <= "9":
        value = value * 10 + ord(text[i]) - ord("0")
        i += 1
    return sign * value


def reference_tokens(value: str) -> list[tuple[str, int]]:
    """A character-by-character port of NCCL's parseStringList() loop (src/misc/utils.cc),
    after ncclOsFindInterfaces() has stripped one '^' and then one '='."""
    if value.startswith("^"):
        value = value[1:]
    if value.startswith("="):
        value = value[1:]
    out: list[tuple[str, int]] = []
    cur = ""
    i = 0
    text = value + "\0"
    while i < len(text) and len(out) < NCCL_MAX_TOKENS:
        c = text[i]
        if c == ":":
            if cur:
                out.append((cur, c_atoi(text[i + 1 :])))
                cur = ""
            while text[i] not in ",\0":
                i += 1
            c = text[i]
        if c in ",\0":
            if cur:
                out.append((cur, -1))
                cur = ""
        else:
            cur += c
        if c == "\0":
            break
        i += 1
    return out


@no_deadline
@given(VALUES)
def test_nccl_tokens_match_nccls_own_loop(value: str) -> None:
    parsed = parse_nccl_list(value)
    assert [(t.name, t.port) for t in parsed.tokens] == reference_tokens(value)


@no_deadline
@given(st.text(max_size=80))
def test_nccl_parser_never_raises(value: str) -> None:
    parsed = parse_nccl_list(value)
    assert parsed.text == value
    assert len(parsed.tokens) <= NCCL_MAX_TOKENS


@no_deadline
@given(VALUES.filter(lambda v: not v.startswith("^")), NAMES)
def test_caret_inverts_the_whole_list(value: str, name: str) -> None:
    assert parse_nccl_list("^" + value).matches(name) != parse_nccl_list(value).matches(name)


@no_deadline
@given(st.lists(NAMES, min_size=1, max_size=5), NAMES)
def test_exact_lists_match_whole_names_only(names: list[str], name: str) -> None:
    parsed = parse_nccl_list("=" + ",".join(names))
    assert parsed.matches(name) == (name in names)


@no_deadline
@given(st.lists(NAMES, min_size=1, max_size=5), NAMES)
def test_prefix_lists_match_prefixes(names: list[str], name: str) -> None:
    assert parse_nccl_list(",".join(names)).matches(name) == any(name.startswith(n) for n in names)


def test_documented_nccl_forms() -> None:
    assert parse_nccl_list("eth").matches("eth10")
    assert not parse_nccl_list("=eth0").matches("eth01")
    assert parse_nccl_list("^docker").matches("eth0")
    assert not parse_nccl_list("^=docker0").matches("docker0")
    assert parse_nccl_list("^=docker0").matches("docker1")
    assert not parse_nccl_list("^=docker0").problems


def test_malformed_nccl_values_are_noted() -> None:
    assert parse_nccl_list("=^eth0").problems  # '^' must come first
    assert parse_nccl_list("^").problems  # excludes everything
    assert parse_nccl_list("eth0, eth1").problems  # NCCL does not trim spaces
    assert parse_nccl_list(",".join(f"e{i}" for i in range(17))).problems
    assert parse_nccl_list("x" * 64).problems


def test_ib_hca_ports() -> None:
    exact = parse_nccl_list("=mlx5_0:1,mlx5_1:1")
    assert exact.tokens == (IfToken("mlx5_0", 1), IfToken("mlx5_1", 1))
    assert exact.matches("mlx5_0", 1) and not exact.matches("mlx5_0", 2)
    # env.rst: "using mlx5_1 without a preceding = will select mlx5_1 as well as mlx5_10".
    assert parse_nccl_list("mlx5_1").matches("mlx5_10", 1)
    assert not parse_nccl_list("=mlx5_1").matches("mlx5_10", 1)
    assert not parse_nccl_list("^=mlx5_1,mlx5_4").matches("mlx5_4", 1)


def test_one_character_values_are_ignored_by_nccl() -> None:
    assert not nccl_list_active("e") and not nccl_list_active("")
    assert nccl_list_active("=e") and not nccl_list_active(None)


@no_deadline
@given(st.text(max_size=40))
def test_gloo_list_is_a_plain_comma_split(value: str) -> None:
    parsed = parse_gloo_list(value)
    assert parsed.names == tuple(value.split(","))
    if "" in parsed.names or value[:1] in ("^", "="):
        assert parsed.problems


@no_deadline
@given(st.text(max_size=60))
def test_mpi_parser_never_raises(value: str) -> None:
    parse_mpi_list(value)


def test_mpi_cidr_must_be_the_interfaces_own_subnet() -> None:
    nets = [ipaddress.ip_network("10.10.0.0/24")]
    assert parse_mpi_list("10.10.0.0/24").matches("eth0", nets)
    assert not parse_mpi_list("10.10.0.0/16").matches("eth0", nets)  # the documented trap
    assert parse_mpi_list("eth0,docker0").matches("docker0", [])
    assert parse_mpi_list("10.10.0.0/33").problems
    assert parse_mpi_list("^docker0").problems
