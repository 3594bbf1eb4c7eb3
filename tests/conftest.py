"""Shared fixtures. Tests that need root and network namespaces fail (never skip) without them."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings

from doctor.pipeline.request import SINCE_ENV
from doctor.stages.collect import probe_argv, probe_source

REPO = Path(__file__).resolve().parent.parent

# A suite started in the background (`cmd &`, nohup) inherits SIGINT ignored, and so would every
# doctor it starts: the Ctrl-C tests would then test nothing. Python's own handler here, and so
# the default disposition in every child.
signal.signal(signal.SIGINT, signal.default_int_handler)

# The tests choose colour and terminal themselves (FORCE_COLOR, NO_COLOR, force_terminal): what
# the caller's environment says of its own terminal must not decide them. Under TERM=dumb (an
# editor's shell, a chroot's `env -i TERM=dumb`) rich draws no colour and no live line even when
# told it is on a terminal, and five tests failed for it.
for _name in ("TERM", "NO_COLOR", "FORCE_COLOR"):
    os.environ.pop(_name, None)

# Property tests judge what a parser returns, not how fast: on 2 shared cores with namespace
# nodes running beside them, hypothesis's 200 ms per-example deadline fails healthy code.
settings.register_profile("shared-machine", deadline=None)
settings.load_profile("shared-machine")


@pytest.fixture(autouse=True)
def kernel_log_window(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every doctor a test starts judges only the kernel log lines printed since the test began:
    a line written to /dev/kmsg stays until reboot, so a test that plants one (or a real
    machine's past) must not reach the next test, nor a run of the suite tomorrow."""
    monkeypatch.setenv(SINCE_ENV, f"@{time.time():.6f}")


def run_probe(
    spec: dict[str, Any] | None = None,
    *,
    prefix: list[str] | None = None,
    python: str = sys.executable,
    flags: tuple[str, ...] = (),
    env: dict[str, str] | None = None,
    timeout: float = 60,
) -> dict[str, Any]:
    """Run the real probe the way nodes run it: its source on the stdin of ``python``."""
    # The kernel log's window starts now, as for every doctor a test starts (kernel_log_window).
    from doctor.facts.kernel.events import WORDS  # as the doctor's spec names them (probe_spec)

    spec = {"deadline": 20.0, "since": time.time(), "kernel_words": list(WORDS), **(spec or {})}
    interpreter, *rest = probe_argv(python, spec)
    proc = subprocess.run(
        [*(prefix or []), interpreter, *flags, *rest],
        input=probe_source(),
        capture_output=True,
        timeout=timeout,
        env=env,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr.decode()
    raw: dict[str, Any] = json.loads(proc.stdout)
    return raw


@pytest.fixture(scope="session")
def local_raw() -> dict[str, Any]:
    """One real capture of this machine, shared by the tests that only read it."""
    return run_probe()


@pytest.fixture
def thresholds() -> Iterator[Callable[[dict[str, Any]], None]]:
    """Set thresholds as doctor.toml's [thresholds] table would (doctor/judge/thresholds.py);
    the shipped ones again after the test."""
    from doctor.judge.thresholds import set_overrides

    yield lambda table: set_overrides(table, "doctor.toml")
    set_overrides({}, "")
