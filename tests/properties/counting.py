"""How many generated inputs each parser's properties tried in this run (for docs/reliability.md).

``@counted("parser")`` goes under ``@given``: hypothesis calls the wrapped test once per example,
and each call is counted against that parser; conftest.py writes the counts when the session
ends."""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Callable
from typing import Any, TypeVar

F = TypeVar("F", bound=Callable[..., Any])
# (parser, test name) -> examples tried
COUNTS: Counter[tuple[str, str]] = Counter()


def counted(parser: str) -> Callable[[F], F]:
    def wrap(test: F) -> F:
        @functools.wraps(test)
        def run(*args: Any, **kwargs: Any) -> Any:
            COUNTS[(parser, test.__name__)] += 1
            return test(*args, **kwargs)

        return run  # type: ignore[return-value]

    return wrap
