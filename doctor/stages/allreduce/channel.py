"""How an allreduce rank and the controller talk: the rank's event lines, its pulse, its lifeline.

Shipped first, above measure.py and worker.py (run.py's ``worker_source``): standard library only,
valid on Python 3.8.

Every step is one JSON line on the event channel (the worker's stdout, moved off fd 1 by
``events_apart``), so the controller always knows where each rank is. From its first moment a
rank also beats (``{"ev": "beat"}``, every ``every`` seconds) from a child forked before anything
else: a rank still importing torch says it is there, so one whose node died while it imported is
told from one that only imports slowly (a launcher such as srun reports no exit for a task whose
node's processes all went). A child, not a thread: the thread would need the interpreter lock,
which ``import torch`` holds while it loads torch's libraries: a thread waking every 0.05 s went
8.5 and 12.4 s without it on this 2-core machine at load 58. A forked child beats whatever the
rank's main process does (stopped, in tests/allreduce/test_worker.py): 1.03 s apart at most at
load 31.

The lifeline: stdin's first line is the controller's word to go; when stdin reaches EOF (the
controller gave up, was interrupted, or its SSH channel died) the rank kills its own process group,
its pulse with it, so no rank is ever left behind on a node.
"""

import contextlib
import json
import os
import signal
import sys
import threading
import time

STARTED = time.monotonic()
EVENTS = 1  # the controller's channel (a file descriptor); events_apart moves it off fd 1
WRITING = threading.Lock()
PR_SET_PDEATHSIG = 1  # prctl(2): the signal a child gets when its parent dies


def emit(ev, **fields):
    """One event line, in one write: the pulse writes to the same channel from its own process,
    and a pipe never splits a write this small between two writers' lines."""
    fields["ev"] = ev
    fields["t"] = round(time.monotonic() - STARTED, 6)
    data = (json.dumps(fields, sort_keys=True) + "\n").encode()
    with WRITING:
        while data:
            data = data[os.write(EVENTS, data) :]


def events_apart():
    """Keep the events on a copy of stdout and point fd 1 at stderr: NCCL writes its INFO lines
    to fd 1 (NCCL_DEBUG_FILE unset), and the controller reads the logs from stderr, where they
    would otherwise be missing (and the event channel strewn with them)."""
    global EVENTS
    sys.stdout.flush()
    EVENTS = os.dup(1)
    os.dup2(2, 1)


def own_process_group():
    """Make sure the group we kill on exit holds only this worker (never our parent's group)."""
    # Fails only for a group leader: then the launcher already gave us our own group.
    with contextlib.suppress(OSError):
        os.setsid()


def beat(every, alive):
    with contextlib.suppress(OSError):  # the controller closed the channel: nobody listens
        while alive():
            emit("beat")
            time.sleep(every)


def start_pulse(every):
    """Beat every ``every`` seconds for as long as this process lives, from a forked child (in
    this process group, so the lifeline's kill takes it too; it dies with its parent). Called
    before any thread starts. Where fork fails, a thread beats instead: late at times, never
    silent for good."""
    parent = os.getpid()
    try:
        child = os.fork()
    except OSError:
        threading.Thread(target=beat, args=(every, lambda: True), daemon=True).start()
        return
    if child:
        return
    try:
        with contextlib.suppress(Exception):  # no prctl: it notices its parent gone at its beat
            import ctypes

            ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        beat(every, lambda: os.getppid() == parent)
    finally:
        os._exit(0)


class Word:
    """The controller's word to go (its first line on stdin), once it has come."""

    def __init__(self):
        self.said = threading.Event()
        self.message = {}


def lifeline(word):
    """Take the controller's word, then block until it closes our stdin and take the whole
    group down."""
    try:
        line = sys.stdin.buffer.readline()
        try:
            word.message = json.loads(line) if line else {}
        except ValueError:
            word.message = {"abort": "the controller's word to go is not JSON"}
        word.said.set()
        while sys.stdin.buffer.read(65536):
            pass
    except (OSError, ValueError):
        pass
    os.killpg(os.getpgrp(), signal.SIGKILL)


def finish(code):
    """End the rank with ``code``, its output flushed. os._exit: a wedged Gloo/NCCL thread must
    not keep a finished rank alive (its pulse dies with it)."""
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    os._exit(code)
