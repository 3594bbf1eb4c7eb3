"""Pasted stack dumps and process tables read into the live look's processes, on real captures of a
hung job (tests/fixtures/logs/hang/pasted/README.md): the same frames whichever tool printed
them, where each rank is (doctor/facts/hang/position.py), several processes, hosts mixed by pdsh,
headers users write, foreign and broken text."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from doctor.core.logline import strip_prefixes
from doctor.explain.hang.pasted import KEYWORDS, read_pasted
from doctor.facts.hang.position import moved, position, waiting_on
from doctor.facts.hang.stacks import JobProcess

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "logs" / "hang" / "pasted"
JOB = "/work/main/tests/hang/job.py"  # the captures' path of tests/hang/job.py
SITE = "/root/.pyenv/versions/3.11.7/lib/python3.11/site-packages/"
RANK0, RANK1, RANK2, WORKER, AGENT, HELD = 13131, 13132, 13133, 13254, 13128, 13587


def fixture(name: str) -> str:
    return (FIXTURES / name).read_text()


def read(text: str) -> list[JobProcess]:
    lines = [(origin, message) for message, origin in map(strip_prefixes, text.splitlines())]
    return read_pasted(lines, "the paste")


def where(process: JobProcess) -> tuple[str, str | None, str, int, str]:
    """Where a process is, as the hang model keys it, and what it is doing."""
    at = position(process)
    site = at.site
    return (at.kind, at.op, site.file if site else "", site.line if site else 0, at.doing)


def lines_of(process: JobProcess) -> list[tuple[str, int, str]]:
    """The main thread's Python frames, innermost first."""
    main = process.main_thread()
    assert main is not None
    return [(f.file, f.line, f.function) for f in main.python()]


IN_ALLREDUCE = ("collective", "all_reduce", JOB, 61, "")
IN_LOADER = ("outside", None, JOB, 86, "waiting for its DataLoader")


def test_pyspy_text_of_a_rank_in_all_reduce() -> None:
    (rank,) = read(fixture("pyspy_rank0_allreduce.txt"))
    assert (rank.node, rank.pid, rank.role, rank.parent) == ("", RANK0, "rank", None)
    assert rank.argv[:3] == ("/root/.pyenv/versions/3.11.7/bin/python3", "-u", JOB)
    assert where(rank) == IN_ALLREDUCE
    # Innermost first, the files as the live look (--json) names them.
    assert lines_of(rank) == [
        (SITE + "torch/distributed/distributed_c10d.py", 3252, "all_reduce"),
        (SITE + "torch/distributed/c10d_logger.py", 83, "_exception_logger.<locals>.wrapper"),
        (JOB, 61, "allreduce"),
        (JOB, 88, "<module>"),
    ]


def test_pyspy_text_of_a_rank_in_broadcast() -> None:
    (rank,) = read(fixture("pyspy_rank1_broadcast.txt"))
    assert rank.pid == 20608
    assert where(rank) == ("collective", "broadcast", JOB, 92, "")
    (other,) = read(fixture("pyspy_rank0_op.txt"))
    assert where(other) == ("collective", "all_reduce", JOB, 61, "")


def test_pyspy_subprocesses_a_rank_and_its_dataloader_worker() -> None:
    rank, worker = read(fixture("pyspy_rank1_subprocesses.txt"))
    assert (rank.pid, rank.role, worker.pid, worker.role, worker.parent) == (
        RANK1,
        "rank",
        WORKER,
        "child",
        RANK1,
    )
    assert where(rank) == IN_LOADER
    assert [t.name for t in rank.threads] == ["MainThread", "QueueFeederThread"]
    assert where(worker)[:4] == ("outside", None, JOB, 72)
    assert lines_of(worker)[0] == (JOB, 72, "Blocked.__getitem__")


def test_pyspy_text_reads_the_files_json_names() -> None:
    """The text's short file names, put back, are the JSON's: one process, two dumps."""
    (text,) = read(fixture("pyspy_rank1_subprocesses.txt"))[:1]
    (live,) = read(fixture("pyspy_rank1.json"))
    assert live.pid == RANK1
    assert lines_of(text) == lines_of(live)
    assert where(live) == IN_LOADER


def test_pyspy_locals_are_no_frames() -> None:
    (plain,) = read(fixture("pyspy_rank0_allreduce.txt"))
    (with_locals,) = read(fixture("pyspy_rank2_locals.txt"))
    assert with_locals.pid == RANK2
    assert lines_of(with_locals) == lines_of(plain)
    main = with_locals.main_thread()
    assert main is not None and len(main.frames) == 4


def test_pyspy_native_frames() -> None:
    (native,) = read(fixture("pyspy_rank0_native.txt"))
    (plain,) = read(fixture("pyspy_rank0_allreduce.txt"))
    assert lines_of(native) == lines_of(plain)
    main = native.main_thread()
    assert main is not None
    assert [f.function for f in main.frames[:4]] == [
        "0x7ffb1f2a3f16",
        "pthread_cond_wait",
        "std::condition_variable::wait",
        "c10d::Work::wait",
    ]
    assert all(f.native for f in main.frames[:6]) and not main.frames[6].native
    assert main.frames[4].function.startswith("pybind11::cpp_function::initialize<")
    assert where(native) == IN_ALLREDUCE
    (json_native,) = read(fixture("pyspy_rank0_native.json"))
    json_main = json_native.main_thread()
    assert json_main is not None
    assert [(f.function, f.native) for f in json_main.frames] == [
        (f.function, f.native) for f in main.frames
    ]


def test_pyspy_core() -> None:
    (rank,) = read(fixture("pyspy_core_rank2.txt"))
    assert rank.pid == 20609 and rank.argv[:2] == ("/usr/bin/python3", "-u")
    assert [(t.name, t.active) for t in rank.threads] == [("MainThread", False)]
    assert where(rank) == ("collective", "all_reduce", JOB, 61, "")


def test_json_arrays_one_after_another_pretty_or_not() -> None:
    one, two = fixture("pyspy_rank1.json"), fixture("pyspy_rank0_native.json")
    compact = json.dumps(json.loads(one)) + "\n" + json.dumps(json.loads(two))
    for text in (one + two, compact, compact.replace("\n", "")):
        assert [p.pid for p in read(text)] == [RANK1, RANK0]
    assert read(one.rsplit("}", 3)[0]) == []  # cut short: nothing half read


def test_pystack_remote() -> None:
    (rank,) = read(fixture("pystack_rank0.txt"))
    (spy,) = read(fixture("pyspy_rank0_allreduce.txt"))
    assert rank.pid == RANK0  # the main thread's id
    assert [x[:2] for x in lines_of(rank)] == [x[:2] for x in lines_of(spy)]
    assert where(rank) == IN_ALLREDUCE
    (native,) = read(fixture("pystack_rank1_native.txt"))
    (live,) = read(fixture("pyspy_rank1.json"))
    assert native.pid == RANK1 and [t.tid for t in native.threads] == [13255, RANK1]
    assert [x[:2] for x in lines_of(native)] == [x[:2] for x in lines_of(live)]
    main = native.main_thread()
    assert main is not None
    assert main.frames[0] == main.frames[0].__class__(
        "__poll", "../sysdeps/unix/sysv/linux/poll.c", 29, True
    )
    assert main.frames[-1].function == "_start" and main.frames[-1].native
    assert where(native) == IN_LOADER


def test_pystack_worker_and_core() -> None:
    (worker,) = read(fixture("pystack_worker.txt"))
    assert (worker.pid, worker.role, worker.threads[0].name) == (WORKER, "child", "pt_data_worker")
    assert where(worker)[2:4] == (JOB, 72)
    (core,) = read(fixture("pystack_core_rank2.txt"))
    assert core.pid == 20609 and core.argv[:3] == ("/usr/bin/python3", "-u", JOB)
    assert where(core) == ("collective", "all_reduce", JOB, 61, "")


def test_pystack_dumps_back_to_back() -> None:
    """pystack prints no process header: a process's main thread, the one that runs the
    script's module, comes last, and a thread after it is the next process's."""
    ranks = read(fixture("pystack_rank0.txt") + fixture("pystack_rank1_native.txt"))
    assert [(r.pid, [t.tid for t in r.threads]) for r in ranks] == [
        (RANK0, [RANK0]),
        (RANK1, [13255, RANK1]),
    ]
    assert [where(r) for r in ranks] == [IN_ALLREDUCE, IN_LOADER]
    both = read(fixture("pystack_rank1_native.txt") + fixture("pystack_worker.txt"))
    assert [(r.pid, r.role) for r in both] == [(RANK1, "rank"), (WORKER, "child")]


def test_faulthandler_dumps_back_to_back() -> None:
    """Three processes' dumps with no label between: a dump's threads are parted by an empty
    line, a new dump starts right below the last frame."""
    ranks = read(fixture("faulthandler_usr1.txt"))
    assert [where(r) for r in ranks] == [IN_ALLREDUCE, IN_LOADER, IN_ALLREDUCE]
    assert [len(r.threads) for r in ranks] == [1, 2, 1]
    assert ranks[1].threads[0].tid == 0x00007FD3BB869B80  # the main thread first
    (later,) = read(fixture("faulthandler_later_rank2.txt"))
    (aborted,) = read(fixture("faulthandler_abort_rank2.txt"))
    assert where(later) == IN_ALLREDUCE
    assert where(aborted) == ("collective", "all_reduce", JOB, 61, "")


def test_tracebacks_of_ranks_labelled_by_torchrun() -> None:
    ranks = read(fixture("traceback_sigint_rank1.txt"))  # torchrun's own traceback: dropped
    assert [(r.rank, r.role) for r in ranks] == [(1, "rank"), (0, "rank"), (2, "rank")]
    assert [where(r) for r in ranks] == [IN_LOADER, IN_ALLREDUCE, IN_ALLREDUCE]
    assert lines_of(ranks[1])[0][2] == "all_reduce"


def test_a_chained_traceback_keeps_where_it_was_and_what_called_it() -> None:
    """Python's own output (taken now): the first traceback is where the process was, the
    chained one adds the frames outside it."""
    script = (
        "import time\n"
        "def wait():\n"
        "    time.sleep(30)\n"
        "def step():\n"
        "    try:\n"
        "        wait()\n"
        "    except KeyboardInterrupt:\n"
        "        raise RuntimeError('stopped')\n"
        "def main():\n"
        "    step()\n"
        "import signal, threading, os\n"
        "threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGINT)).start()\n"
        "main()\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert "During handling of the above exception" in done.stderr
    (process,) = read(done.stderr)
    assert [(f, n) for f, _, n in lines_of(process)] == [
        ("<string>", "wait"),
        ("<string>", "step"),
        ("<string>", "main"),
        ("<string>", "<module>"),
    ]


def state(process: JobProcess) -> tuple[str, str] | None:
    """The state and wchan a table gave the process."""
    return (process.last.state, process.last.wchan) if process.last else None


def test_gdb_py_bt_of_every_thread() -> None:
    (rank1,) = read(fixture("gdb_pybt_rank1.txt"))
    (rank0,) = read(fixture("gdb_pybt_rank0.txt"))
    assert (rank1.pid, rank0.pid) == (10301, 10300)  # the process gdb detached from
    assert [(t.tid, t.name, len(t.frames)) for t in rank0.threads] == [
        (10842, "pt_gloo_runloop", 0),
        (10841, "pt_gloo_runloop", 0),
        (10840, "gloo_tcp_loop", 0),
        (10300, "python3", 4),
    ]
    assert (where(rank1), where(rank0)) == (IN_LOADER, IN_ALLREDUCE)
    (spy,) = read(fixture("pyspy_rank1.json"))
    assert [x[:2] for x in lines_of(rank1)] == [x[:2] for x in lines_of(spy)]


def test_a_traceback_most_recent_call_first() -> None:
    """One thread's stack innermost first under "Traceback (most recent call first):": gdb's
    py-bt of its current thread, and faulthandler's first wording (its tests' expected output
    before "Stack"): the capture's frames under that header."""
    frames = fixture("faulthandler_later_rank2.txt").splitlines()[2:]
    (rank,) = read(
        "Fatal Python error: Aborted\n\nTraceback (most recent call first):\n" + "\n".join(frames)
    )
    assert where(rank) == IN_ALLREDUCE and len(rank.threads[0].frames) == 4


def test_process_tables() -> None:
    table = {p.pid: p for p in read(fixture("ps_eo_wchan.txt"))}
    assert AGENT not in table and HELD not in table  # the launcher; not a Python process
    assert state(table[RANK0]) == ("S", "futex_do_wait")
    assert state(table[RANK1]) == ("S", "poll_schedule_timeout.constprop.")  # 32 columns
    assert (table[WORKER].role, table[WORKER].parent) == ("child", RANK1)
    assert state(table[WORKER]) == ("S", "wait_for_partner")
    assert waiting_on("wait_for_partner", "S") == "waiting on a pipe or FIFO"
    assert not table[RANK1].threads and "process table" in (table[RANK1].stack_error or "")
    aux = {p.pid: p for p in read(fixture("ps_aux.txt"))}
    assert state(aux[RANK0]) == ("S", "")  # no WCHAN column
    threads = [p for p in read(fixture("ps_eLf.txt")) if p.pid == RANK0]
    assert len(threads) == 1 and threads[0].last is None  # a line a thread; no state column
    top = {p.pid: p for p in read(fixture("top_b.txt"))}
    assert AGENT not in top and top[WORKER].role == "child"  # pt_elastic, pt_data_worker
    picked = {p.pid: p for p in read(fixture("ps_o_state.txt"))}
    assert state(picked[RANK1]) == ("S", "poll_s")


def test_a_process_in_state_d_named_by_a_header() -> None:
    """The real D line (a vfork parent): not a Python process, so only where a header names
    it."""
    (held,) = [
        p for p in read(f"--- node1 pid {HELD} ---\n" + fixture("ps_eo_wchan.txt")) if p.pid == HELD
    ]
    assert held.node == "node1" and state(held) == ("D", "kernel_clone")
    assert waiting_on("kernel_clone", "D") == "in uninterruptible I/O"


def test_a_stack_takes_its_state_from_a_table() -> None:
    found = read(fixture("pyspy_rank0_allreduce.txt") + fixture("ps_eo_wchan.txt"))
    assert [p.pid for p in found] == [RANK0, RANK1, RANK2, WORKER]  # the job's command line
    rank0 = found[0]
    assert rank0.threads and state(rank0) == ("S", "futex_do_wait")


def test_one_process_dumped_twice() -> None:
    (rank,) = read(fixture("pyspy_rank0_allreduce.txt") + fixture("pyspy_rank0_native.txt"))
    assert rank.threads_before is not None and len(rank.threads[0].frames) == 11
    assert moved(rank) is None  # the same lines


def test_pdsh_hosts() -> None:
    node1, node2 = read(fixture("pdsh_pyspy.txt") + fixture("pdsh_ps.txt"))
    assert (node1.node, node1.pid, node2.node, node2.pid) == ("node1", RANK0, "node2", RANK1)
    assert (where(node1), where(node2)) == (IN_ALLREDUCE, IN_LOADER)
    assert state(node1) == ("S", "futex_do_wait")
    assert state(node2) == ("S", "poll_schedule_timeout.constprop.")
    stacks = {p.node: p for p in read(fixture("pdsh_pystack.txt"))}
    assert {n: (p.pid, where(p)) for n, p in stacks.items()} == {
        "node1": (RANK0, IN_ALLREDUCE),
        "node2": (RANK1, IN_LOADER),
    }


def test_pdsh_json() -> None:
    text = "".join(f"node2: {line}\n" for line in fixture("pyspy_rank1.json").splitlines())
    (rank,) = read(text)
    assert (rank.node, rank.pid, where(rank)) == ("node2", RANK1, IN_LOADER)


def test_faulthandler_thread_names() -> None:
    """Python 3.14 names the thread after its id (Python/traceback.c write_thread_name): the
    capture with the name put in as that version writes it."""
    text = fixture("faulthandler_later_rank2.txt").replace(" (most", " [pt_main_thread] (most")
    (rank,) = read(text)
    assert rank.threads[0].name == "pt_main_thread" and where(rank) == IN_ALLREDUCE


def test_quoted_in_a_reply() -> None:
    text = "".join(f"> {line}\n" for line in fixture("pdsh_pyspy.txt").splitlines())
    assert [(p.node, where(p)) for p in read(text)] == [
        ("node1", IN_ALLREDUCE),
        ("node2", IN_LOADER),
    ]


def test_ps_forest() -> None:
    """`ps --forest` draws the tree before the command (captured by hand: a Python process
    that forked, as a DataLoader does)."""
    parent, child = read(fixture("ps_forest.txt"))
    assert (parent.pid, parent.role, child.pid, child.role, child.parent) == (
        29881,
        "rank",
        29942,
        "child",
        29881,
    )
    assert child.argv[:2] == ("/root/.pyenv/versions/3.11.7/bin/python3", "-c")


def test_srun_labels_before_indented_frames() -> None:
    text = "".join(f"3: {line}\n" for line in fixture("pyspy_rank0_allreduce.txt").splitlines())
    (rank,) = read(text)
    assert rank.rank == 3 and where(rank) == IN_ALLREDUCE


def test_headers_users_write() -> None:
    paste = "\n".join(
        [
            "==> node3/rank5.txt <==",
            fixture("pyspy_rank0_allreduce.txt"),
            "=== node2 rank 1 (local_rank 1, world size 4) ===",
            fixture("pyspy_rank1_subprocesses.txt"),
            "rank 2:",
            fixture("faulthandler_later_rank2.txt"),
            "[node4] $ pystack remote 13133",
            fixture("pystack_rank0.txt").replace(str(RANK0), str(RANK2)),
            "user@node5:~$ py-spy dump --pid 777",
            fixture("faulthandler_abort_rank2.txt"),
        ]
    )
    found = [(p.node, p.pid, p.role, p.parent, p.env) for p in read(paste)]
    assert found == [
        ("node3", RANK0, "rank", None, {"RANK": "5"}),
        ("node2", RANK1, "rank", None, {"RANK": "1", "LOCAL_RANK": "1", "WORLD_SIZE": "4"}),
        ("node2", WORKER, "child", RANK1, {"RANK": "1", "LOCAL_RANK": "1", "WORLD_SIZE": "4"}),
        ("", 0, "rank", None, {"RANK": "2"}),
        ("node4", RANK2, "rank", None, {}),
        ("node5", 777, "rank", None, {}),
    ]


def test_command_line_ranks() -> None:
    text = fixture("pyspy_rank0_allreduce.txt").replace(
        "-u ", "-u RANK=6 WORLD_SIZE=8 --local_rank=2 ", 1
    )
    (rank,) = read(text)
    assert rank.env == {"RANK": "6", "LOCAL_RANK": "2", "WORLD_SIZE": "8"}


DUMPS = [
    "pyspy_rank0_allreduce.txt",
    "pyspy_rank1_subprocesses.txt",
    "pyspy_rank2_locals.txt",
    "pyspy_rank0_native.txt",
    "pyspy_rank1.json",
    "pystack_rank1_native.txt",
    "pystack_core_rank2.txt",
    "pyspy_core_rank2.txt",
    "faulthandler_usr1.txt",
    "faulthandler_abort_rank2.txt",
    "traceback_sigint_rank1.txt",
    "ps_o_state.txt",
    "gdb_pybt_rank1.txt",
]
# Lines of the job's own console and of other programs (real ones from the captures, and
# hypothesis's): neither a dump's line nor a header's.
REAL_FOREIGN = [
    line
    for line in fixture("traceback_sigint_rank1.txt").splitlines()
    if line.startswith(("W1127", "E1127", "  time", "  exitcode", "  host", "  traceback :"))
] + ["rank 0: 3 steps done, mode fifo", "NCCL INFO Bootstrap : Using eth0:10.0.0.2<0>"]
foreign_line = st.one_of(
    st.sampled_from(REAL_FOREIGN),
    st.text(st.characters(codec="utf-8", exclude_categories=("Cs", "Cc")), min_size=1).filter(
        lambda t: (
            t.strip() and not any(k in t for k in KEYWORDS) and not any(c in t for c in "=#$:()")
        )
    ),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.permutations(DUMPS),
    st.lists(st.lists(foreign_line, max_size=3), min_size=len(DUMPS) + 1, max_size=len(DUMPS) + 1),
)
def test_foreign_lines_between_dumps_change_nothing(
    order: list[str], foreign: list[list[str]]
) -> None:
    plain = read("".join(fixture(name) for name in order))
    mixed = "".join(
        "".join(f"{line}\n" for line in foreign[i]) + fixture(name) for i, name in enumerate(order)
    ) + "".join(f"{line}\n" for line in foreign[-1])
    assert read(mixed) == plain


@settings(max_examples=60, deadline=None)
@given(st.lists(st.booleans(), min_size=60, max_size=60))
def test_pdsh_interleaving_keeps_hosts_apart(turns: list[bool]) -> None:
    """Two hosts' lines in any interleaving read as each host's alone."""
    hosts = {
        "node1": fixture("pyspy_rank0_native.txt").splitlines(),
        "node2": fixture("pystack_rank1_native.txt").splitlines(),
    }
    alone = [
        p for host, lines in hosts.items() for p in read("".join(f"{host}: {x}\n" for x in lines))
    ]
    queues = {host: [f"{host}: {x}" for x in lines] for host, lines in hosts.items()}
    mixed = []
    for turn in turns + [True] * 200 + [False] * 200:
        queue = queues["node1" if turn else "node2"]
        if queue:
            mixed.append(queue.pop(0))
    assert sorted(read("\n".join(mixed)), key=lambda p: p.node) == alone


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(DUMPS), st.data())
def test_truncated_pastes_never_raise(name: str, data: st.DataObject) -> None:
    text = fixture(name)
    cut = data.draw(st.integers(0, len(text)))
    start = data.draw(st.integers(0, cut))
    found = read(text[start:cut])
    assert all(isinstance(p, JobProcess) for p in found)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.text(max_size=200),
            st.sampled_from([line for name in DUMPS for line in fixture(name).splitlines()[:40]]),
        ),
        max_size=60,
    )
)
def test_garbage_never_raises(lines: list[str]) -> None:
    read("\n".join(lines))


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.sampled_from(
            [line for name in DUMPS for line in fixture(name).splitlines()[:60]]
            + ["", "x", "rank 3:"]
        ),
        max_size=80,
    )
)
def test_keywords_are_in_whatever_is_read(lines: list[str]) -> None:
    """The caller's pre-filter: text without any keyword is never read into a process."""
    text = "\n".join(lines)
    if not any(k in text for k in KEYWORDS):
        assert read(text) == []


@pytest.mark.parametrize(
    "name", [p.name for p in sorted(FIXTURES.iterdir()) if p.suffix not in (".md", ".jsonl")]
)
def test_every_capture_holds_a_keyword(name: str) -> None:
    assert read(fixture(name))
    assert any(k in fixture(name) for k in KEYWORDS)


def test_long_lines_are_read_in_time() -> None:
    """A frame's name may hold parentheses (C++); a line past 64 KB is no frame."""
    line = "f (" * 20000 + "x.py:1)"
    text = f'Thread 1 (idle): "MainThread"\n{line}\n' + "a (b.so) " * 20000 + "\n"
    began = time.monotonic()
    (process,) = read(text * 20)
    assert time.monotonic() - began < 5
    assert [f.file for f in process.threads[0].frames] == ["x.py"]


def test_deeply_nested_json_never_raises() -> None:
    assert read("[\n" * 100_000 + "]\n" * 100_000) == []


def test_a_deep_stack_keeps_its_innermost_frames() -> None:
    """Bounded: a thread keeps 512 frames, the innermost (and a traceback's outermost)."""
    frames = "".join(f'  File "x.py", line {i}, in f{i}\n' for i in range(1, 2001))
    (process,) = read(f"Traceback (most recent call last):\n{frames}KeyboardInterrupt\n")
    kept = process.threads[0].frames
    assert len(kept) == 512 and kept[0].line == 2000 and kept[-1].line == 1
    spy = "".join(f"f{i} (x.py:{i})\n" for i in range(2000, 0, -1))
    (process,) = read(f'Thread 7 (active): "MainThread"\n{spy}')
    assert [f.line for f in process.threads[0].frames][:2] == [2000, 1999]
    assert len(process.threads[0].frames) == 512


@pytest.mark.parametrize(
    ("exception", "waited"),
    [
        ("KeyboardInterrupt", True),
        (
            "torch.distributed.elastic.multiprocessing.api.SignalException: "
            "Process 7 got signal: 15",
            True,
        ),
        (
            "RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:598] "
            "Connection closed by peer [10.0.0.3]:51234",
            True,
        ),
        ("torch.distributed.DistStoreError: Socket Timeout", True),
        (
            "torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1970, "
            "unhandled system error (run with NCCL_DEBUG=INFO for details), NCCL version 2.19.3",
            False,
        ),
        ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB", False),
        ("ValueError: bad shape", False),
    ],
)
def test_a_traceback_is_where_a_process_waited_only_if_its_exception_ended_a_wait(
    exception: str, waited: bool
) -> None:
    """A process stopped from outside, timed out or left by its peer shows where it waited; one
    that raised an error was not stuck there (a crash: the failure readers name it)."""
    frames = '  File "train.py", line 88, in main\n    model = DDP(model)\n'
    found = read(f"Traceback (most recent call last):\n{frames}{exception}\n")
    assert len(found) == (1 if waited else 0)
