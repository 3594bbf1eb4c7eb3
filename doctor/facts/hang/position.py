"""Where a rank is, from its stack: in a collective (which one, called from which line), waiting
on the GPU, or somewhere else (which line, doing what), and whether it moved while it was looked at.

Frames are innermost first (py-spy's order). A frame is the user's when it is not in a library
(site-packages, the standard library, a frozen module): the line people recognise and fix.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from doctor.facts.hang.stacks import Frame, JobProcess, Thread

# torch.distributed's Python entry points: the frame in this file names the collective.
C10D = ("torch/distributed/distributed_c10d.py", "torch/distributed/_functional_collectives.py")
WRAPPERS = ("torch/distributed/", "deepspeed/comm/", "accelerate/utils/operations.py")
NOT_WAITS = {"get_rank", "get_world_size", "is_initialized", "get_backend", "_get_default_group"}
LIBRARY = ("/site-packages/", "/dist-packages/", "/lib/python3", "<frozen", "/lib64/python3")
DATALOADER = "torch/utils/data/dataloader.py"
DEBUGGER = ("/pdb.py", "/bdb.py", "/pydevd", "/debugpy/")
# Bytes a rank must read or write in the window to count as moving: above what a hung job's
# background chatter costs (the TCP store's watchdog polls, NCCL RAS's keepalives: well under
# a kilobyte a second), below one collective of any real training step.
MOVED_BYTES = 64 << 10
# A host thread waiting for the GPU (NCCL's collectives run there): the native frames say so.
DEVICE_WAIT = re.compile(
    r"\b(cu|cuda|hip)(Stream|Device|Event|Ctx)Synchronize\b|\b_local_scalar_dense|\bcuEventQuery"
)
# What the kernel says a blocked main thread waits on (/proc/PID/wchan), in words.
WAITS = (
    (re.compile(r"nanosleep|hrtimer"), "sleeping"),
    (re.compile(r"wait_for_partner|fifo|pipe_read|pipe_wait"), "waiting on a pipe or FIFO"),
    (re.compile(r"rpc_wait|nfs|fuse"), "waiting on a network filesystem"),
    (re.compile(r"futex"), "waiting on a lock"),
    (re.compile(r"sk_wait|inet_csk_accept|tcp_|unix_stream"), "waiting on a socket"),
    (re.compile(r"ep_poll|do_select|poll_schedule|do_sys_poll"), "polling"),
    (re.compile(r"ptrace_stop|do_signal_stop"), "stopped"),
)


def is_library(frame: Frame) -> bool:
    return frame.native or any(m in frame.file for m in LIBRARY)


def in_c10d(frame: Frame) -> bool:
    return any(frame.file.endswith(f) for f in C10D) and frame.function not in NOT_WAITS


@dataclass(frozen=True)
class Position:
    kind: str  # "collective", "device" (waits on the GPU), "outside", "unknown"
    op: str | None = None  # the collective: all_reduce, broadcast, barrier, ...
    site: Frame | None = None  # the user's line: the call of the collective, or where it is
    inner: Frame | None = None  # the innermost frame, when it is not the site
    doing: str = ""  # in words: "sleeping", "waiting for its DataLoader worker", ...
    seq: int | None = None  # the collective's number in its process group, where known
    group: str = ""  # that process group, where known

    def key(self) -> tuple[str, str, str, int, int, str]:
        site = self.site
        return (
            self.kind,
            self.op or "",
            site.file if site else "",
            site.line if site else 0,
            -1 if self.seq is None else self.seq,
            self.group,
        )

    def describe(self) -> str:
        where = self.site.where() if self.site else "no Python frame"
        if self.kind == "collective":
            if self.site is None and self.seq is not None:  # from text: no stack, a number
                group = f" of process group {self.group}" if self.group else ""
                op = self.op if self.op not in (None, "?") else "collective"  # text said none
                return f"{op} #{self.seq}{group}"
            return f"{self.op} called at {where}"
        if self.kind == "device":
            return f"waiting on the GPU at {where}"
        inner = f" (in {self.inner.where()})" if self.inner and self.inner != self.site else ""
        doing = f", {self.doing}" if self.doing else ""
        return f"{where}{inner}{doing}"


def user_frame(frames: tuple[Frame, ...]) -> Frame | None:
    """The innermost frame of the user's own code, else the innermost Python frame."""
    python = [f for f in frames if not f.native]
    return next((f for f in python if not is_library(f)), python[0] if python else None)


def waiting_on(wchan: str, state: str) -> str:
    if state == "D":
        return "in uninterruptible I/O"
    if state == "T":
        return "stopped"
    return next((words for pattern, words in WAITS if pattern.search(wchan)), "")


def position(process: JobProcess) -> Position:
    thread = process.main_thread()
    if thread is None:
        return Position("unknown")
    frames = thread.frames
    python = thread.python()
    for i, frame in enumerate(python):
        if in_c10d(frame):
            # The public call is the outermost of torch.distributed's own frames
            # (init_process_group above _new_process_group_helper).
            while i + 1 < len(python) and any(w in python[i + 1].file for w in WRAPPERS):
                i += 1
                frame = python[i] if in_c10d(python[i]) else frame
            outer = python[i + 1 :]
            caller = next((f for f in outer if not any(w in f.file for w in WRAPPERS)), None)
            site = next((f for f in outer if not is_library(f)), caller)
            return Position("collective", frame.function, site, frame)
    site, inner = user_frame(frames), (python[0] if python else None)
    if any(DEVICE_WAIT.search(f.function) for f in frames if f.native):
        return Position("device", site=site, inner=inner)
    # What it does below its own line (a forked worker's stack also holds its parent's frames,
    # above the fork: only the frames inside the user's line say what it waits on).
    below = python[: python.index(site)] if site in python else python
    loader = next((f for f in below if f.file.endswith(DATALOADER)), None)
    if loader is not None:
        return Position("outside", site=site, inner=loader, doing="waiting for its DataLoader")
    if any(any(d in f.file for d in DEBUGGER) for f in below):
        return Position("outside", site=site, inner=inner, doing="stopped at a debugger prompt")
    wchan = process.last.wchan if process.last else ""
    state = process.last.state if process.last else ""
    return Position("outside", site=site, inner=inner, doing=waiting_on(wchan, state))


def moved(process: JobProcess) -> str | None:
    """What showed the process moving while it was looked at, if anything: its bytes read or
    written (data, sockets), or its main thread's stack. CPU time is not enough: a rank waiting
    on NCCL spins at full speed."""
    first, last = process.first, process.last
    if first and last and first.io_bytes is not None and last.io_bytes is not None:
        grown = last.io_bytes - first.io_bytes
        if grown >= MOVED_BYTES:
            return f"{grown} bytes read or written in {process.seconds:g}s"
    before = _main(process.threads_before, process.pid)
    now = process.main_thread()
    if before is not None and now is not None and _lines(before) != _lines(now):
        return "its stack moved"
    return None


def _main(threads: tuple[Thread, ...] | None, pid: int) -> Thread | None:
    if not threads:
        return None
    return next((t for t in threads if t.tid == pid or t.name == "MainThread"), threads[0])


def _lines(thread: Thread) -> list[tuple[str, int]]:
    return [(f.file, f.line) for f in thread.python()]
