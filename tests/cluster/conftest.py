"""Fixtures for multi-node tests on real network namespaces (root; missing capability = failure)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest

from tests.cluster.harness import Cluster, make_cluster


@pytest.fixture
def new_cluster(tmp_path: Path) -> Iterator[Callable[..., Cluster]]:
    """``new_cluster(3)`` builds a fresh cluster; all of them are torn down after the test."""
    with ExitStack() as stack:

        def build(n: int = 3, **kw: object) -> Cluster:
            workdir = tmp_path / f"cluster{len(stack._exit_callbacks)}"
            workdir.mkdir()
            return stack.enter_context(make_cluster(n, workdir, **kw))  # type: ignore[arg-type]

        yield build
