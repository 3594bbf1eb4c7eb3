"""A job's whole log as users paste it: the echoed launch command first, the program's and the
launcher's own lines among NCCL's, NCCL's version printed once. `doctor explain` (the scanner)
and `doctor analyze` (the paste reader, the NCCL facts, the checks) read from it what they read
from NCCL's lines alone.

The NCCL lines are real: two ranks on an H200 with NCCL 2.28.9
(tests/fixtures/logs/real/healthy-nccl-two-hostids-default-subsys.log), and a torchrun job
captured here (tests/fixtures/paste/torchrun-job-nccl-bootstrap.log: its header says how).
NCCL before 2.9 printed its version once, bare on stdout, in rank 0's process: the property keeps
one of the log's version lines, as that bare line, and drops the others.

The paste reader split such a log into several segments wherever a line another kind knows
(``WORLD_SIZE=2`` is `env`, ``eth0: flags=...`` is `ifconfig`) or a prompt came between NCCL's
lines, and each segment's log replaced the one before: the segment holding the version line was
dropped, and a log without one read as a library that "could not be loaded".
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from doctor.core.model import Missing
from doctor.facts.cluster import ClusterFacts
from doctor.facts.nccl.libraries import NcclFacts, parse_nccl
from doctor.facts.nccl.log import NcclLog
from doctor.facts.node import parse_node
from doctor.judge.registry import load_checks
from doctor.judge.runner import run_checks
from tests.explain.fixtures import LOGS, body
from tests.explain.test_nccl_scarce import read
from tests.paste.pastekit import PASTES, read_text

TWO_RANKS = body(LOGS / "real" / "healthy-nccl-two-hostids-default-subsys.log").decode()
NCCL_LINES = [line for line in TWO_RANKS.splitlines() if "NCCL INFO" in line]
VERSION = "NCCL version 2.28.9+cuda13.0"
VERSION_AT = [i for i, line in enumerate(NCCL_LINES) if line.endswith(VERSION)]
JOB = PASTES / "torchrun-job-nccl-bootstrap.log"

LAUNCHES = [
    "+ torchrun --nproc_per_node=2 train.py",  # bash -x
    "++ srun --mpi=pmix -N2 torchrun --nnodes=2 train.py",
    "$ srun -N2 --ntasks-per-node=1 python train.py",
    "user@login1:~$ mpirun -np 2 -H gpu1,gpu2 python train.py",
    "[me@login1 run]$ NCCL_DEBUG=INFO sbatch --wait job.sh",
    "",
]
# Lines that are not NCCL's: the launcher's and the program's own (real: the two captures'), and
# lines another paste kind, the splitter's prompt or its comment rule takes for their own.
PROGRAM = sorted(
    {line for line in TWO_RANKS.splitlines() if "NCCL" not in line}
    | {
        line
        for line in body(JOB).decode().splitlines()
        if "NCCL" not in line and "orld" not in line
    }
)
OTHER_KINDS = [
    "WORLD_SIZE=2",
    "MASTER_ADDR=10.1.0.11",
    "eth0: flags=4163<UP,BROADCAST,RUNNING,MULTICAST>  mtu 1500",
    "1: lo: <LOOPBACK,UP,LOWER_UP> mtu 65536 qdisc noqueue state UNKNOWN group default qlen 1000",
    "$ nvidia-smi",
    ">>> import torch",
    "# epoch 0 done",
    "",
]
FOREIGN = st.sampled_from(PROGRAM + OTHER_KINDS)


def facts_of(log: NcclLog) -> dict[str, Any]:
    doc = log.to_json()
    keys = ("version", "cuda", "nranks", "nnodes", "network", "bootstrap", "transports")
    return {k: doc[k] for k in keys}


def pasted(text: str) -> NcclFacts:
    nccl = parse_nccl(read_text(text))
    assert isinstance(nccl, NcclFacts), nccl
    return nccl


@settings(max_examples=120, deadline=None)
@given(
    launch=st.sampled_from(LAUNCHES),
    kept=st.sampled_from(VERSION_AT),
    foreign=st.lists(st.tuples(st.integers(0, len(NCCL_LINES)), FOREIGN), max_size=14),
)
def test_the_version_printed_once_among_foreign_lines_is_read(
    launch: str, kept: int, foreign: list[tuple[int, str]]
) -> None:
    lines = [
        VERSION if i == kept else line
        for i, line in enumerate(NCCL_LINES)
        if i == kept or i not in VERSION_AT
    ]
    for at, line in sorted(foreign, key=lambda x: -x[0]):
        lines.insert(min(at, len(lines)), line)
    text = "\n".join([launch, *lines]) + "\n"
    alone = facts_of(read("\n".join(NCCL_LINES)))
    assert (alone["version"], alone["cuda"], alone["nranks"]) == ("2.28.9", "13.0", 2)
    assert facts_of(read(text)) == alone
    nccl = pasted(text)
    (lib,) = nccl.libraries
    assert (lib.version, lib.cuda) == ("2.28.9", "13.0")
    assert nccl.log is not None and {k: nccl.log[k] for k in alone} == alone


def test_a_real_job_log_reads_whole_in_both_readers() -> None:
    text = body(JOB).decode()
    assert text.startswith("+ torchrun ")
    doc = read(text).to_json()
    # torchrun's "global_world_sizes=[2, 2]" gives the ranks; its "group_world_size=1" (the
    # agents, one per node) does not.
    assert (doc["version"], doc["cuda"], doc["nranks"], doc["world_size"]) == (
        "2.32.3", "12.9", 2, 2,
    )  # fmt: skip
    assert [p["bootstrap"] for p in doc["processes"]] == [["eth0:192.0.2.2"]] * 2
    nccl = pasted(text)
    assert [lib.version for lib in nccl.libraries] == ["2.32.3"]
    assert nccl.log is not None and nccl.log["nranks"] == 2


def test_a_pasted_excerpt_without_a_version_is_no_unloadable_library() -> None:
    text = "\n".join(line for line in body(JOB).decode().splitlines() if "version" not in line)
    node = parse_node("n1", read_text(text))
    assert isinstance(node.nccl, NcclFacts)
    assert isinstance(node.nccl.libraries[0].version, Missing)
    outcomes = {o.check: o for o in run_checks(load_checks(), ClusterFacts(nodes={"n1": node}))}
    assert all(f.code != "nccl.unloadable" for o in outcomes.values() for f in o.findings)
    libraries = outcomes["nccl.libraries"]
    assert (libraries.status.value, libraries.reason) == (
        "skip", "the pasted NCCL log shows no version line: no library to judge",
    )  # fmt: skip
