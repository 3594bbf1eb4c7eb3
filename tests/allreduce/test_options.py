from __future__ import annotations

import pytest

from doctor.core.errors import UsageError
from doctor.pipeline.request import parse_env, parse_size, parse_sizes


def test_sizes_as_a_range_are_powers_of_two() -> None:
    assert parse_sizes("1K..8K") == (1024, 2048, 4096, 8192)
    assert parse_sizes("1KiB..1KiB") == (1024,)
    assert parse_sizes("64M,4k") == (64 << 20, 4096)
    assert parse_size("1G") == 1 << 30


@pytest.mark.parametrize("text", ["", "1X..2K", "8K..1K", "2", "1K..", "-1K"])
def test_bad_sizes_are_usage_errors(text: str) -> None:
    with pytest.raises(UsageError, match="--sizes"):
        parse_sizes(text)


def test_recommendation_pairs() -> None:
    assert parse_env(["GLOO_SOCKET_IFNAME=eth0", "NCCL_SOCKET_IFNAME==eth0"]) == {
        "GLOO_SOCKET_IFNAME": "eth0",
        "NCCL_SOCKET_IFNAME": "=eth0",
    }
    with pytest.raises(UsageError, match="NAME=VALUE"):
        parse_env(["eth0"])
    with pytest.raises(UsageError, match="NAME=VALUE"):
        parse_env(["1X=eth0"])
