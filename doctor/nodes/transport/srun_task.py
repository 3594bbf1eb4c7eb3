"""One srun task: run a command with this task's stdin and print its result as framed lines.

srun merges every task's stdout into one stream and cuts long lines wherever its I/O buffers end,
so a node's JSON document can arrive interleaved with another node's. Each task therefore sends
its result as short, self-describing lines (the controller reassembles them per node and checks
a digest, so a cut or lost line is detected, never misread). The first line says which of the
step's node indices this node is: srun names a node it lost only by that index.

    @cd1 <node> at <SLURM_NODEID>              (first, before the command runs)
    @cd1 <node> rc <exit status> <seconds>
    @cd1 <node> out <base64 chunk of zlib(stdout)>
    @cd1 <node> err <base64 chunk of zlib(stderr)>
    @cd1 <node> end <sha256 of zlib(stdout) + zlib(stderr)>

Shipped as ``python3 -c <this source> <argv...>`` with the probe on stdin (srun --input=all), so
like the probe it is stdlib-only and valid on Python 3.8.
"""

import base64
import hashlib
import os
import socket
import subprocess
import sys
import time
import zlib

TAG = "@cd1"
# Well under the 1 KiB that Slurm's step I/O moves in one piece, so a line is never split.
CHUNK = 600


def frame(node, rc, seconds, out, err):
    """The lines that carry one command result; pure, so the controller's tests can use it."""
    packed_out = zlib.compress(out)
    packed_err = zlib.compress(err)
    lines = [f"{TAG} {node} rc {rc} {seconds:.4f}"]
    for kind, packed in (("out", packed_out), ("err", packed_err)):
        text = base64.b64encode(packed).decode("ascii")
        for i in range(0, len(text), CHUNK):
            lines.append(f"{TAG} {node} {kind} {text[i : i + CHUNK]}")
    digest = hashlib.sha256(packed_out + packed_err).hexdigest()
    lines.append(f"{TAG} {node} end {digest}")
    return lines


def main(argv):
    # SLURMD_NODENAME is the name the controller asked for; the hostname may differ from it.
    node = os.environ.get("SLURMD_NODENAME") or socket.gethostname()
    sys.stdout.write(f"{TAG} {node} at {os.environ.get('SLURM_NODEID', '-')}\n")
    sys.stdout.flush()
    source = sys.stdin.buffer.read()
    started = time.monotonic()
    try:
        proc = subprocess.run(argv, input=source, capture_output=True)
        rc, out, err = proc.returncode, proc.stdout, proc.stderr
    except OSError as exc:
        rc, out, err = 127, b"", f"cannot run {argv[0]}: {exc.strerror}".encode()
    lines = frame(node, rc, time.monotonic() - started, out, err)
    sys.stdout.write("\n".join(lines) + "\n")
    sys.stdout.flush()


if __name__ == "__main__":
    main(sys.argv[1:])
