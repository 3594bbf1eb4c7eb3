"""What a paste showed, as the processes the live look builds: each dump a process (its main
thread first, a launcher's dropped, a DataLoader worker a child), one process dumped twice one
process (the earlier stack as ``threads_before``, as ``doctor stacks --twice`` takes it), and its
state from a process table's line for its pid. A process known only from such a line is one too
where it is the job's: named by a header, or a Python process with the command line of a dumped
one (any Python process where nothing was dumped); launchers and the tools themselves are not.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace

from doctor.explain.hang.pasted_headers import Said, argv_env
from doctor.explain.hang.pasted_paths import full_paths
from doctor.explain.hang.pasted_ps import Row
from doctor.facts.hang.stacks import JobProcess, Sample, Thread


@dataclass
class Dump:
    """One process's dump as read: the tool, the header above it, what the dump itself says."""

    tool: str  # "py-spy", "json", "pystack", "faulthandler", "traceback", "py-bt" (gdb's)
    said: Said
    began: int  # the paste's line where it began
    pid: int = 0
    argv: tuple[str, ...] = ()
    parent: int | None = None
    python: tuple[str, str] | None = None  # py-spy's "Python vX.Y (EXE)": version, executable
    threads: list[Thread] = field(default_factory=list)
    current: bool = False  # faulthandler's "Current thread" was seen
    crash: str = ""  # faulthandler's fatal signal above the dump ("Segmentation fault")


Rows = list[tuple[str, Row]]  # (host, row), in the order read

# A launcher's own stack or command line: torchrun's agent, torch.distributed.launch,
# DeepSpeed's and Accelerate's launchers (the live look drops a launcher above its ranks).
LAUNCHER_FILES = (
    "torch/distributed/run.py",
    "torch/distributed/launch.py",
    "torch/distributed/launcher/api.py",
    "torch/distributed/elastic/agent/server/api.py",
    "deepspeed/launcher/launch.py",
    "deepspeed/launcher/runner.py",
    "accelerate/commands/launch.py",
)
LAUNCHER_ARGS = re.compile(
    r"(?:^|[\s/])(?:torchrun|mpirun|mpiexec|srun|horovodrun|pt_elastic|accelerate launch)(?:\s|$)"
    r"|(?:torch\.distributed\.(?:run|launch)|deepspeed\.launcher\.\w+)(?:\s|$)"
)
TOOLS = re.compile(r"(?:^|/)(?:py-spy|pystack|gdb|pdsh|top|ps|grep)(?:\s|$)")
WORKER = "torch/utils/data/_utils/worker.py"
PYTHON = re.compile(r"(?:.*/)?(?:python[0-9.]*|pypy[0-9.]*|pt_main_thread|pt_data_worker)")
PID_MAX = 1 << 22  # Linux's largest pid: a larger thread id is no OS thread's


def processes(
    dumps: list[Dump], rows: Rows, named: set[tuple[str, int]], source: str
) -> list[JobProcess]:
    found: dict[tuple[str, int] | int, tuple[str, JobProcess]] = {}
    for i, dump in enumerate(dumps):
        process = _from_dump(dump)
        if process is None:
            continue
        key: tuple[str, int] | int = (process.node, process.pid) if process.pid else -1 - i
        seen = found.get(key)
        found[key] = (dump.tool, _again(seen, dump.tool, process) if seen else process)
    shown = [p for _, p in found.values()]
    table = _by_process(rows)
    left = dict(table)
    out = [_stated(p, left.pop(_row_key(table, p), [])) for p in shown]
    commands = {p.argv for p in shown if p.argv}
    for (host, pid), lines in left.items():
        argv = lines[-1].argv
        if (host, pid) in named or (
            not LAUNCHER_ARGS.search(" ".join(argv)) and _job(argv, commands)
        ):
            out.append(_listed(host, pid, lines, table, source))
    return out


def _from_dump(dump: Dump) -> JobProcess | None:
    threads = tuple(dump.threads)
    if dump.tool == "py-spy":
        threads = full_paths(threads, dump.argv, dump.python)
    pid = dump.pid or dump.said.pid or _main_tid(dump.tool, threads)
    threads = _main_first(threads, pid)
    main = threads[0].python() if threads else ()
    if LAUNCHER_ARGS.search(" ".join(dump.argv)) or any(
        f.file.endswith(LAUNCHER_FILES) for f in main
    ):
        return None
    worker = any(f.file.endswith(WORKER) for f in main) or any(
        t.name == "pt_data_worker" for t in threads
    )
    return JobProcess(
        node=dump.said.host,
        pid=pid,
        role="child" if dump.parent is not None or worker else "rank",
        argv=dump.argv,
        env={**argv_env(dump.argv), **dump.said.env()},
        parent=dump.parent,
        threads=threads,
        crash=dump.crash,
    )


def _main_tid(tool: str, threads: tuple[Thread, ...]) -> int:
    """The pid a dump without one shows: its main thread's id, where the tool gives OS thread
    ids (py-spy, pystack, gdb: the main thread's is the process's)."""
    if tool not in ("py-spy", "pystack", "py-bt"):
        return 0
    main = next((t for t in threads if t.name == "MainThread"), None) or _module_thread(threads)
    return main.tid if main is not None and 0 < main.tid <= PID_MAX else 0


def _module_thread(threads: tuple[Thread, ...]) -> Thread | None:
    """The thread that runs the script: its outermost Python frame is a module's."""
    return next((t for t in threads if t.python() and t.python()[-1].function == "<module>"), None)


def _main_first(threads: tuple[Thread, ...], pid: int) -> tuple[Thread, ...]:
    """The main thread first, where neither its name nor its id says which it is (faulthandler
    lists the newest thread first; JobProcess.main_thread takes the first)."""
    if any(t.tid == pid or t.name == "MainThread" for t in threads):
        return threads
    main = _module_thread(threads)
    return threads if main is None else (main, *(t for t in threads if t is not main))


def _again(seen: tuple[str, JobProcess], tool: str, process: JobProcess) -> JobProcess:
    """One process dumped twice: by one tool, the earlier stack is the one before (a stack that
    moved is progress); by two, the first one's stack stays."""
    before_tool, before = seen
    if before.threads and process.threads and before_tool == tool:
        return replace(before, threads=process.threads, threads_before=before.threads)
    if not before.threads:
        return replace(process, argv=process.argv or before.argv, env={**before.env, **process.env})
    return replace(before, argv=before.argv or process.argv, env={**process.env, **before.env})


def _by_process(rows: Rows) -> dict[tuple[str, int], list[Row]]:
    """Each process's table lines in order (of ``ps -L``'s, the main thread's)."""
    table: dict[tuple[str, int], list[Row]] = {}
    for host, row in rows:
        table.setdefault((host, row.pid), []).append(row)
    return {k: [r for r in v if r.lwp in (None, r.pid)] or v[:1] for k, v in table.items()}


def _row_key(table: dict[tuple[str, int], list[Row]], process: JobProcess) -> tuple[str, int]:
    """The table's lines for a process: its node's, else the only host's with its pid."""
    key = (process.node, process.pid)
    if key in table or not process.pid:
        return key
    hosts = [h for h, pid in table if pid == process.pid and (not h or not process.node)]
    return (hosts[0], process.pid) if len(hosts) == 1 else key


def _sample(row: Row) -> Sample | None:
    return Sample(row.state, 0, None, row.wchan) if row.state else None


def _stated(process: JobProcess, lines: list[Row]) -> JobProcess:
    if not lines:
        return process
    parent = process.parent
    if parent is None and process.role == "child":
        parent = lines[-1].ppid
    return replace(
        process,
        argv=process.argv or lines[-1].argv,
        parent=parent,
        first=_sample(lines[0]),
        last=_sample(lines[-1]),
    )


def _job(argv: tuple[str, ...], commands: set[tuple[str, ...]]) -> bool:
    """A table's Python process is the job's: its command is a dumped one's, or nothing was
    dumped to compare with."""
    line = " ".join(argv)
    python = bool(argv) and bool(PYTHON.fullmatch(argv[0])) and not TOOLS.search(line)
    return python and (not commands or argv in commands)


def _listed(
    host: str, pid: int, lines: list[Row], table: dict[tuple[str, int], list[Row]], source: str
) -> JobProcess:
    """A process only a table shows: a DataLoader worker is a child (its parent's command line,
    forked; torch's name for its thread, where the table shows that)."""
    row = lines[-1]
    up = table.get((host, row.ppid)) if row.ppid else None
    child = (
        "--multiprocessing-fork" in row.argv
        or row.argv[:1] == ("pt_data_worker",)
        or (up is not None and up[-1].argv == row.argv)
    )
    return JobProcess(
        node=host,
        pid=pid,
        role="child" if child else "rank",
        argv=row.argv,
        env=argv_env(row.argv),
        parent=row.ppid if child else None,
        first=_sample(lines[0]),
        last=_sample(row),
        stack_error=f"no stack in {source}, only its line in a process table",
    )
