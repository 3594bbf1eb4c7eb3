"""The allreduce stage as a test sees it: run it, then judge its facts with the registered check."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from checks.allreduce import allreduce as allreduce_check
from doctor.core.model import Finding
from doctor.facts.allreduce import AllreduceFacts, RunResult
from doctor.facts.cluster import ClusterFacts
from doctor.judge.runner import run_checks
from doctor.nodes.transport.launch import Launcher
from doctor.stages.allreduce.stage import Job, run_allreduce


@dataclass
class Staged:
    facts: AllreduceFacts
    findings: list[Finding]

    @property
    def runs(self) -> list[RunResult]:
        return list(self.facts.runs)

    def section(self) -> dict[str, Any]:
        return self.facts.section()


def judge(facts: AllreduceFacts) -> list[Finding]:
    (outcome,) = run_checks([allreduce_check], ClusterFacts(nodes={}, allreduce=facts))
    assert outcome.status.value != "crash", outcome.reason
    return list(outcome.findings)


def run_stage(job: Job, launcher: Launcher) -> Staged:
    facts = run_allreduce(job, launcher)
    return Staged(facts, judge(facts))
