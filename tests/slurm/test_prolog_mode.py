"""Prolog mode's contract: one reason line, exit 1 only on real findings, never drain on a bug."""

from __future__ import annotations

import io

import pytest

from doctor.cli.main import main
from doctor.core.model import Finding, Severity
from doctor.judge.registry import load_checks, select
from doctor.pipeline import prolog
from doctor.pipeline import steps as pipeline


def test_reason_line_names_node_code_and_the_rest() -> None:
    bad = [
        Finding("shm.too_small", Severity.FAIL, "/dev/shm is only 64 MiB\n(NCCL needs 1 GiB)"),
        Finding("limits.memlock", Severity.FAIL, "memlock is 64 KiB"),
    ]
    assert prolog.reason_line("gpu7", bad) == (
        "cluster-doctor: gpu7: shm.too_small: /dev/shm is only 64 MiB (NCCL needs 1 GiB) "
        "(+1 more: limits.memlock)"
    )


def test_healthy_node_exits_zero_silently() -> None:
    err = io.StringIO()
    assert prolog.run_prolog(select(load_checks(), ["shm.size"], ()), Severity.FAIL, err) == 0
    assert err.getvalue() == ""


def test_a_broken_doctor_never_drains(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*args: object, **kw: object) -> None:
        raise RuntimeError("probe exploded")

    monkeypatch.setattr(pipeline, "gather", broken)
    err = io.StringIO()
    assert prolog.run_prolog(load_checks(), Severity.FAIL, err) == prolog.EXIT_HEALTHY
    assert "cannot judge this node: probe exploded" in err.getvalue()


@pytest.mark.parametrize(
    "argv",
    [
        ["preflight", "--prolog"],
        ["preflight", "--local", "--launcher", "srun"],
        ["preflight", "--local", "--slurm-nodes", "node1"],
        ["preflight", "--launcher", "srun"],
    ],
)
def test_usage_errors(argv: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("SLURM_JOB_ID", "SLURM_JOB_NODELIST", "SLURM_STEP_ID"):
        monkeypatch.delenv(name, raising=False)
    assert main(argv) == 2
