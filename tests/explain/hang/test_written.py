"""`doctor explain` on what a hung job left: the same verdict as the live look, from text.

The H200 captures (tests/fixtures/gpu/h200/hang-*: each rank's log, py-spy's text and JSON, the
Flight Recorder dumps and RAS's reports, taken by hand while the job hung) are what the live look
judges in tests/hang/test_gpu_captures.py; read as files here, they must give the same finding,
naming the same rank and no other. The tools' own reports (tests/fixtures/logs/hang/tools/) name
the rank they say is missing."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from doctor.explain.hang.written import file_ranks
from doctor.explain.scan import explain
from doctor.explain.source import expand
from doctor.render.explain import all_findings, explain_json, hang_findings

ROOT = Path(__file__).resolve().parents[2]
H200 = ROOT / "fixtures" / "gpu" / "h200"
H100 = ROOT / "fixtures" / "gpu" / "h100"
TOOLS = ROOT / "fixtures" / "logs" / "hang" / "tools"


def hang(*paths: Path) -> list[dict[str, Any]]:
    doc = explain_json(explain([str(p) for p in paths]))
    return [f for f in doc["findings"] if f["check"] == "hang"]


@pytest.mark.parametrize(
    ("mode", "code", "ranks", "reported"),
    [
        ("sleep", "hang.outside_collective", [1], [0]),
        ("kill", "hang.rank_gone", [1], [0]),
        ("op", "hang.mismatch", [0, 1], []),  # one rank a side: neither is the odd one
        ("size", "hang.mismatch", [0, 1], []),
    ],
)
@pytest.mark.parametrize("gpu", [H200, H100])
def test_the_gpu_captures_read_as_files_give_the_live_verdict(
    mode: str, code: str, ranks: list[int], reported: list[int], gpu: Path
) -> None:
    files = sorted((gpu / f"hang-{mode}").iterdir())
    (found,) = hang(*files)
    assert found["code"] == code and found["severity"] == "fail"
    assert found["data"]["ranks"] == ranks and found["data"]["reported_by"]["ranks"] == reported
    assert found["data"]["evidence_from"] == "text the job left"


def test_the_sleeping_rank_is_named_with_its_node_pid_and_line() -> None:
    (found,) = hang(*sorted((H200 / "hang-sleep").iterdir()))
    assert found["nodes"] == ["vm"]  # from NCCL's prefix vm:936 in the rank's own log
    assert "rank 1 (vm, pid 936) at job.py:71 <module>" in found["summary"]
    assert found["data"]["pids"] == [{"rank": 1, "node": "vm", "pid": 936}]
    assert "launched 3 AllReduce operations, the others up to 4 (NCCL RAS)" in found["summary"]


@pytest.mark.parametrize(
    ("mode", "code"), [("sleep", "hang.outside_collective"), ("op", "hang.mismatch")]
)
@pytest.mark.parametrize("given", ["torchrun.log", "rank files", "everything"])
def test_a_job_the_watchdog_ended_names_the_rank_behind(mode: str, code: str, given: str) -> None:
    """Four NCCL ranks on the H100 under torchrun, rank 2 asleep or broadcasting, left to the
    watchdog's 15 s timeout and torchrun's teardown (tests/fixtures/gpu/h100/ended-*): what the
    console kept (--tee 3), each rank's own files (--log-dir), or those and Flight Recorder's
    dumps. torchrun's root cause is rank 1 or 0 (SIGABRT after its own timeout): never named."""
    here = H100 / f"ended-{mode}"
    files = {
        "torchrun.log": [here / "torchrun.log"],
        "rank files": sorted(here.glob("logs/*/attempt_0/*/*.log")),
        "everything": sorted(p for p in here.rglob("*") if p.is_file()),
    }[given]
    (found,) = hang(*files)
    assert found["code"] == code and found["data"]["ranks"] == [2]
    assert found["data"]["reported_by"]["ranks"] == [0, 1, 3]


def test_one_kind_of_evidence_alone_names_the_same_rank_or_none() -> None:
    """Flight Recorder's dumps alone, RAS alone: rank 1. py-spy's stacks alone (without native
    frames) cannot: NCCL's collectives are asynchronous, so rank 0's host thread is past its
    all_reduce call, waiting in .item(): no rank is in a collective, and none is blamed."""
    here = H200 / "hang-sleep"
    for files in ([here / "fr_0", here / "fr_1"], [here / "ras-status.txt"]):
        (found,) = hang(*files)
        assert found["code"] == "hang.outside_collective" and found["data"]["ranks"] == [1]
    (stacks,) = hang(here / "pyspy-rank0.json", here / "pyspy-rank1.json")
    assert stacks["code"] == "hang.stalled" and stacks["data"]["ranks"] == []


@pytest.mark.parametrize(
    ("name", "ranks"),
    [
        ("frtrace/gloo-skip.txt", [2]),
        ("frtrace/h200-sleep.txt", [1]),
        ("horovod/v0.28-missing-ranks.log", [2, 3]),
    ],
)
def test_a_tools_report_names_the_rank_it_says_is_missing(name: str, ranks: list[int]) -> None:
    (found,) = hang(TOOLS / name)
    assert found["code"] == "hang.outside_collective" and found["data"]["ranks"] == ranks


def test_the_gloo_dumps_name_the_rank_that_skipped_a_collective() -> None:
    dumps = [TOOLS / "gloo-skip" / f"rank_{r}" for r in range(3)]
    (found,) = hang(*dumps)
    assert found["code"] == "hang.outside_collective" and found["data"]["ranks"] == [2]
    assert found["data"]["reported_by"]["ranks"] == [0, 1]


def test_a_healthy_ras_report_gives_no_finding() -> None:
    assert hang(H200 / "hang-size" / "ras-status.txt") == []
    assert hang(H200 / "hang-size" / "ras-status.json") == []


def test_a_log_without_a_hang_has_no_hang_facts(tmp_path: Path) -> None:
    log = tmp_path / "train.log"
    log.write_text("epoch 1 loss 0.5\nNCCL INFO Bootstrap: Using eth0:10.0.0.1<0>\n")
    result = explain([str(log)])
    assert result.hang is None and hang_findings(result) == []


def test_garbage_never_raises(tmp_path: Path) -> None:
    junk = tmp_path / "junk.txt"
    junk.write_bytes(
        b"Thread 0x (idle):\n    (x.py:)\nProcess : \nRank  has launched\n\x80\x05junk"
        b'\nWorkNCCL(SeqNum=, OpType=)\nMissing ranks:\n3: [\n{"communicators": [{'
    )
    json.dumps(explain_json(explain([str(junk)])))  # a document, whatever it found
    all_findings(explain([str(junk)]))


def test_file_names_give_ranks() -> None:
    names = [
        "logs/rank3.log",
        "logs/node2_rank_12.txt",
        "fr_5",
        "run/attempt_0/7/stderr.log",
        "slurm/out_0.log",
        "slurm/out_1.log",
        "slurm/out_2.log",
        "notes.txt",
        "job-1234.log",
    ]
    assert file_ranks(names) == {
        "logs/rank3.log": 3,
        "logs/node2_rank_12.txt": 12,
        "fr_5": 5,
        "run/attempt_0/7/stderr.log": 7,
        "slurm/out_0.log": 0,
        "slurm/out_1.log": 1,
        "slurm/out_2.log": 2,
    }


WATCHDOG = ROOT / "fixtures" / "logs" / "hang" / "watchdog"
GLOO = ROOT / "fixtures" / "logs" / "hang" / "gloo"


@pytest.mark.parametrize(
    ("name", "code", "ranks"),
    [
        # Written from ProcessGroupNCCL.cpp's wordings (no GPU here; each file's first line says
        # which version): the rank whose last enqueued work is below the one the others wait
        # in, in its own process group, and only it.
        ("v2.3-dump.log", "hang.outside_collective", [3]),
        ("v2.4-subgroups-kubectl.log", "hang.outside_collective", [6]),  # global rank 6 (TP 2)
        ("v2.5-guid-ray.log", "hang.outside_collective", [2]),
        ("v2.6-today-journald.log", "hang.outside_collective", [2]),
        ("spliced.log", "hang.outside_collective", [2]),  # its line spliced after rank 0's head
        ("v2.2-pg.log", "hang.outside_collective", [1]),  # the desync report's lagging rank
        ("desync-report.log", "hang.outside_collective", [3, 5, 6]),
        ("v2.0-mpirun.log", "hang.symmetric", []),
        ("blocking-wait.log", "hang.one_rank", []),
        ("v2.2-dev-monitor.log", "hang.one_rank", []),
    ],
)
def test_every_ranks_watchdog_lines_name_the_rank_behind(
    name: str, code: str, ranks: list[int]
) -> None:
    (found,) = hang(WATCHDOG / name)
    assert (found["code"], found["data"]["ranks"]) == (code, ranks), found["summary"]
    assert not set(ranks) & set(found["data"]["reported_by"]["ranks"])


@pytest.mark.parametrize(
    ("name", "code", "ranks"),
    [
        # Real Gloo jobs (torch 2.13, tests/explain/hang/capture_gloo.py).
        ("monitored-barrier-late-rank.log", "hang.outside_collective", [1]),
        ("monitored-barrier-late-root.log", "hang.outside_collective", [0]),
        ("monitored-barrier-wait-all.log", "hang.outside_collective", [1, 2]),
        ("allreduce-late-rank-detail.log", "hang.outside_collective", [1]),
        ("mismatch-detail.log", "hang.mismatch", [0, 1]),
        ("allreduce-late-rank.log", "hang.one_rank", []),  # the late rank printed nothing
    ],
)
def test_a_real_gloo_jobs_output_names_the_late_rank(
    name: str, code: str, ranks: list[int]
) -> None:
    (found,) = hang(GLOO / name)
    assert (found["code"], found["data"]["ranks"]) == (code, ranks), found["summary"]


def test_every_rank_at_its_first_collective_names_the_path(tmp_path: Path) -> None:
    """Two nodes' ranks each time out in SeqNum 1 (written from ProcessGroupNCCL.cpp 2.5's
    wording): no rank is behind; the preflight's reachability and NIC checks are the next step."""
    lines = []
    for rank, host in ((0, "node1"), (1, "node1"), (2, "node2"), (3, "node2")):
        lines.append(
            f"[rank{rank}]:[E1127 10:00:00.000000000 ProcessGroupNCCL.cpp:632] [Rank {rank}] "
            "Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1, OpType=ALLREDUCE, "
            "NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600021 milliseconds before "
            "timing out."
        )
        lines.append(
            f"{host}:{4000 + rank}:{4000 + rank} [{rank % 2}] NCCL INFO cudaDriverVersion 12040"
        )
    log = tmp_path / "job.log"
    log.write_text("\n".join(lines) + "\n")
    (found,) = hang(log)
    assert found["code"] == "hang.first_collective" and found["data"]["ranks"] == []
    assert found["data"]["reported_by"]["ranks"] == [0, 1, 2, 3]
    assert found["data"]["related_checks"] == ["reach.tcp", "nics.nccl"]


def _timeout(rank: int, seq: int) -> str:
    """ProcessGroupNCCL.cpp 2.5's timeout line (written from its source: no GPU here)."""
    return (
        f"[rank{rank}]:[E1127 10:00:00.000000000 ProcessGroupNCCL.cpp:632] [Rank {rank}] "
        f"Watchdog caught collective operation timeout: WorkNCCL(SeqNum={seq}, OpType=ALLREDUCE, "
        "NumelIn=1048576, NumelOut=1048576, Timeout(ms)=600000) ran for 600021 milliseconds "
        "before timing out."
    )


def _job(quiet: set[int], seq: int = 1211, extra: tuple[str, ...] = ()) -> str:
    """Four ranks' stderr in one file (torchrun labels each line): each rank's warning at its
    start, then the ranks not in ``quiet`` time out in collective ``seq``."""
    lines = [
        f"[rank{r}]:[W1127 09:00:00.000000000 ProcessGroupNCCL.cpp:4561] [PG ID 0 PG GUID 0 "
        f"Rank {r}]  using GPU {r} to perform barrier as devices used by this process are "
        "currently unknown."
        for r in range(4)
    ]
    lines += ["epoch 3 step 1200 loss 2.3120"] * 3
    lines += [_timeout(r, seq) for r in range(4) if r not in quiet]
    return "\n".join([*lines, *extra]) + "\n"


@pytest.mark.parametrize(
    ("quiet", "seq", "code", "ranks"),
    [
        ({2}, 1211, "hang.outside_collective", [2]),  # the one rank that never timed out
        ({2}, 1, "hang.first_collective", []),  # at #1 ranks arrive minutes apart: no one
        ({1, 2}, 1211, "hang.symmetric", []),  # two quiet: one may be a waiter killed first
        (set(), 1211, "hang.symmetric", []),
    ],
)
def test_the_one_rank_whose_output_holds_no_timeout_is_named(
    tmp_path: Path, quiet: set[int], seq: int, code: str, ranks: list[int]
) -> None:
    log = tmp_path / "job.log"
    log.write_text(_job(quiet, seq))
    (found,) = hang(log)
    assert (found["code"], found["data"]["ranks"]) == (code, ranks), found["summary"]
    assert found["data"]["reported_by"]["ranks"] == [r for r in range(4) if r not in quiet]


def test_a_quiet_ranks_own_file_names_it(tmp_path: Path) -> None:
    """torchrun --log-dir's files (one a rank, its number in the path): rank 3's file holds its
    training lines and no timeout."""
    for r in range(4):
        folder = tmp_path / "attempt_0" / str(r)
        folder.mkdir(parents=True)
        text = "epoch 3 step 1200 loss 2.3120\n" + ("" if r == 3 else _timeout(r, 88) + "\n")
        (folder / "stderr.log").write_text(text)
    (found,) = hang(*map(Path, expand([str(tmp_path)])))
    assert (found["code"], found["data"]["ranks"]) == ("hang.outside_collective", [3])
    assert found["summary"] == (
        "rank 3 holds the job while 3 wait in all_reduce #88: rank 3 (its output is here and "
        "holds no timeout: most likely it never reached the collective)"
    )


def test_a_global_timeout_notice_without_numbers_leaves_a_quiet_rank_unnamed(
    tmp_path: Path,
) -> None:
    """PyTorch 2.2 tells every live rank, the one that held the job too, of another's timeout
    (ProcessGroupNCCL.cpp's heartbeat monitor, written from its source): the quiet rank may be a
    waiter killed before its own timeout."""
    notice = (
        "[rank2]:[E ProcessGroupNCCL.cpp:1316] [PG 0 Rank 2] Received a global timeout from "
        "another rank and will start to dump the debug info."
    )
    log = tmp_path / "job.log"
    log.write_text(_job({1, 2}, extra=(notice,)))
    (found,) = hang(log)
    assert (found["code"], found["data"]["ranks"]) == ("hang.symmetric", [])


def test_the_watchdogs_signature_names_no_rank_as_its_cause() -> None:
    doc = explain_json(explain([str(WATCHDOG / "v2.3-dump.log")]))
    for f in doc["findings"]:
        if f["code"] == "torch.nccl.watchdog_timeout":
            assert "ranks" not in f["data"] and "[reported by rank" in f["summary"]


PASTED = ROOT / "fixtures" / "logs" / "hang" / "pasted"


def pasted(tmp_path: Path, *names: str) -> list[dict[str, Any]]:
    """Real captures (tests/fixtures/logs/hang/pasted/README.md) pasted one after another into
    one text, as a user pastes them into an issue: no file names to give ranks."""
    paste = tmp_path / "paste.txt"
    paste.write_bytes(b"".join((PASTED / n).read_bytes() for n in names))
    return hang(paste)


def test_pasted_py_spy_dumps_name_the_process_in_its_dataloader(tmp_path: Path) -> None:
    """Ranks 0 and 2 wait in all_reduce; rank 1 (pid 13132) waits for its DataLoader worker."""
    names = ("pyspy_rank0_allreduce.txt", "pyspy_rank1_subprocesses.txt", "pyspy_rank2_locals.txt")
    (found,) = pasted(tmp_path, *names)
    assert found["code"] == "hang.outside_collective"
    assert [p["pid"] for p in found["data"]["pids"]] == [13132]
    assert "waiting for its DataLoader" in found["summary"]


def test_pdsh_output_names_the_node_and_pid(tmp_path: Path) -> None:
    (found,) = pasted(tmp_path, "pdsh_pyspy.txt")
    assert found["nodes"] == ["node2"] and found["data"]["pids"][0]["pid"] == 13132


def test_faulthandler_dumps_without_pids_stay_three_processes(tmp_path: Path) -> None:
    (found,) = pasted(tmp_path, "faulthandler_usr1.txt")
    assert found["code"] == "hang.outside_collective" and "2 wait in all_reduce" in found["summary"]


def test_a_broadcast_against_the_others_allreduce_is_a_mismatch(tmp_path: Path) -> None:
    (found,) = pasted(tmp_path, "pyspy_rank0_op.txt", "pyspy_rank1_broadcast.txt")
    assert found["code"] == "hang.mismatch"
    assert "broadcast called at job.py:92" in found["summary"]


def test_a_sigint_traceback_names_the_rank(tmp_path: Path) -> None:
    (found,) = pasted(tmp_path, "traceback_sigint_rank1.txt")
    assert found["code"] == "hang.outside_collective" and found["data"]["ranks"] == [1]
    assert found["data"]["reported_by"]["ranks"] == [0, 2]


def test_every_readers_keyword_holds_a_sign_the_scan_looks_for() -> None:
    """scan.py imports the hang readers only where a log holds one of SIGNS: each keyword a
    reader accepts text by must hold one, or text it reads would never reach it. (A launcher's
    word on a killed rank, words.EXITS, is not hang evidence alone: read only beside some.)"""
    from doctor.explain.hang.pasted import KEYWORDS as PASTED
    from doctor.explain.hang.signs import SIGNS
    from doctor.explain.hang.verdicts import KEYWORDS as VERDICTS
    from doctor.explain.hang.watchdog import KEYWORDS as WATCHDOG

    for keyword in (*PASTED, *VERDICTS, *WATCHDOG):
        assert any(sign in keyword.encode() for sign in SIGNS), keyword
