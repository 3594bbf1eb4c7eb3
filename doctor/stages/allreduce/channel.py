"""How an allreduce rank and the controller talk: the rank's event lines and its lifeline.

Shipped first, above measure.py and worker.py (run.py's ``worker_source``): standard library only,
valid on Python 3.8.

Every step is one JSON line on the event channel (the worker's stdout, moved off fd 1 by
``events_apart``), so the controller always knows where each rank is.

The lifeline: stdin's first line is the controller's word to go; when stdin reaches EOF (the
controller gave up, was interrupted, or its SSH channel died) the rank kills its own process group,
so no rank is ever left behind on a node.
"""

import contextlib
import json
import os
import signal
import sys
import threading
import time

STARTED = time.monotonic()
EVENTS = sys.stdout  # the controller's channel; events_apart moves it off fd 1


def emit(ev, **fields):
    fields["ev"] = ev
    fields["t"] = round(time.monotonic() - STARTED, 6)
    EVENTS.write(json.dumps(fields, sort_keys=True) + "\n")
    EVENTS.flush()


def events_apart():
    """Keep the events on a copy of stdout and point fd 1 at stderr: NCCL writes its INFO lines
    to fd 1 (NCCL_DEBUG_FILE unset), and the controller reads the logs from stderr, where they
    would otherwise be missing (and the event channel strewn with them)."""
    global EVENTS
    EVENTS = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)


def own_process_group():
    """Make sure the group we kill on exit holds only this worker (never our parent's group)."""
    # Fails only for a group leader: then the launcher already gave us our own group.
    with contextlib.suppress(OSError):
        os.setsid()


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
    not keep a finished rank alive."""
    for stream in (EVENTS, sys.stdout, sys.stderr):
        stream.flush()
    os._exit(code)
