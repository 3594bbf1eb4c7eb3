"""NCCL_SOCKET_IFNAME / NCCL_IB_HCA, GLOO_SOCKET_IFNAME and Open MPI's if_include lists: any
value parses (the libraries never reject one), into bounded, well-formed tokens."""

from __future__ import annotations

import ipaddress

from hypothesis import example, given, settings
from hypothesis import strategies as st

from doctor.nic.grammar import (
    NCCL_MAX_TOKENS,
    parse_gloo_list,
    parse_mpi_list,
    parse_nccl_list,
)
from tests.properties.counting import counted
from tests.properties.strategies import any_text

PIECES = ["eth0", "ens5", "ib", "mlx5_0", "=", "^", "^=", ",", ":", ":1", "lo", "docker",
          "10.0.0.0/8", "fe80::/64", "/", "198.18.0.0/24", " ", "ens", "0" * 70]  # fmt: skip
NAMES = st.sampled_from(["eth0", "ens5", "lo", "mlx5_0", "docker0", "", " eth0", "é"])
LONG_DIGITS = st.text(alphabet="0123456789", min_size=4000, max_size=6000)
VALUES = st.one_of(any_text(PIECES), LONG_DIGITS.map(lambda d: f"mlx5_0:{d}"))


def one_line_problems(problems: tuple[str, ...]) -> None:
    assert all(isinstance(p, str) and p and "\n" not in p for p in problems), problems


@settings(max_examples=400, deadline=None)
@given(VALUES, NAMES, st.integers(-1, 4))
@example("mlx5_0:" + "9" * 5000, "mlx5_0", 1)  # more digits than int() takes by default
@example("\r\n" + "0" * 70, "eth0", 0)  # a long name with a line break, quoted in one line
@counted("NCCL_SOCKET_IFNAME / NCCL_IB_HCA")
def test_nccl_list(text: str, name: str, port: int) -> None:
    parsed = parse_nccl_list(text)
    assert len(parsed.tokens) <= NCCL_MAX_TOKENS
    assert all(t.name and isinstance(t.port, int) for t in parsed.tokens)
    one_line_problems(parsed.problems)
    assert isinstance(parsed.matches(name, port), bool)


@settings(max_examples=300, deadline=None)
@given(VALUES)
@counted("GLOO_SOCKET_IFNAME")
def test_gloo_list(text: str) -> None:
    parsed = parse_gloo_list(text)
    assert ",".join(parsed.names) == text
    one_line_problems(parsed.problems)


@settings(max_examples=300, deadline=None)
@given(VALUES, NAMES)
@counted("Open MPI btl/oob_tcp_if_include")
def test_mpi_list(text: str, name: str) -> None:
    parsed = parse_mpi_list(text)
    one_line_problems(parsed.problems)
    for t in parsed.tokens:
        assert t.text and (t.network is None or isinstance(t.network, ipaddress._BaseNetwork))
    assert isinstance(parsed.matches(name, [ipaddress.ip_network("10.0.0.0/8")]), bool)
