"""Writes how many generated inputs each parser survived, once the session ends."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.faults.results import record
from tests.properties.counting import COUNTS


@pytest.fixture(scope="session", autouse=True)
def _record_counts() -> Iterator[None]:
    yield
    for (parser, test), examples in sorted(COUNTS.items()):
        record("properties", {"parser": parser, "test": test, "examples": examples})
