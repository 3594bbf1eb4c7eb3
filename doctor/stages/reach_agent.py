"""Runs on one node: listen on each candidate address, connect to each peer's, report what arrived.

Horovod's interface test: a connection proves an interface only if the peer saw it arrive from
the address the sender used (NAT and docker paths change it) and it reached the intended node
(an address that exists on several nodes, like docker0's, is answered by the sender itself).
Every connection carries ``<source> <target> <address>`` so the listener can tell.

No connect is judged before its target listens. Streamed by the controller (SSH, local), the
agent says ``{"ev": "ready"}`` once its listeners are up and connects only when the controller
writes ``go``, which it does once every agent is ready; it says ``{"ev": "connected"}`` when its
own connects are done and keeps listening until the controller writes ``stop``, which it does
once every agent has said so, so a sender that runs late (a loaded node) still finds every
listener up. Its stdin is its lifeline: it ends when the controller goes away. In one srun
step (every node's agent started at once, no controller in between) a refused connect is tried
again until ``retry_refused`` seconds have passed since the agent started: long enough for every
peer's listener to come up, and a refusal that lasts longer is real.

Shipped like the probe (source piped into ``python3``): stdlib only, valid on Python 3.8.
Spec (JSON argument): port, listen (addresses), targets [{node, iface, address}], source,
expect (connections this node should receive), connect_timeout, deadline, barrier and
ready_within, or retry_refused; or {"nodes": {name: spec}} for one srun step, where each
agent finds its own.
"""

import errno
import json
import os
import select
import socket
import sys
import threading
import time

STARTED = time.monotonic()
# In one srun step (no controller to say stop), once our own connects are done, stop listening
# when nothing has arrived for this long: a connection meant for us may never come (it went to
# an address the sender also holds).
QUIET = 2.0
STATUS = {
    "ECONNREFUSED": "refused",
    "EHOSTUNREACH": "unreachable",
    "ENETUNREACH": "unreachable",
    "ETIMEDOUT": "timeout",
    "EINVAL": "unreachable",  # a blackhole route on this side
}


def emit(ev, **fields):
    fields["ev"] = ev
    sys.stdout.write(json.dumps(fields) + "\n")
    sys.stdout.flush()


def _family(address):
    return socket.AF_INET6 if ":" in address else socket.AF_INET


def bind_all(spec, out):
    socks = []
    for address in spec["listen"]:
        try:
            sock = socket.socket(_family(address), socket.SOCK_STREAM)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((address, spec["port"]))
            sock.listen(128)
            sock.setblocking(False)
            socks.append(sock)
            out["listen"][address] = "ok"
        except OSError as exc:
            name = errno.errorcode.get(exc.errno or 0, "?")
            out["listen"][address] = "%s: %s" % (name, exc.strerror)
    return socks


def listen(spec, socks, out, connects_done, done_at, stop):
    end = time.monotonic() + spec["deadline"]
    received = 0
    last = time.monotonic()
    while socks and time.monotonic() < end:
        if connects_done.is_set() and (
            received >= spec["expect"]
            or stop.is_set()
            or (not spec.get("barrier") and time.monotonic() - max(last, done_at[0]) > QUIET)
        ):
            break
        got = accept_ready(spec, socks, out, 0.05)
        if got is not None:
            received += got
            last = time.monotonic()
    # A connect completes when the kernel queues it: take what is queued before closing, or its
    # sender would be told it reached us and we would say it never arrived.
    drain_until = time.monotonic() + 1.0
    while socks and time.monotonic() < drain_until:
        if accept_ready(spec, socks, out, 0) is None:
            break
    for sock in socks:
        sock.close()


def accept_ready(spec, socks, out, wait):
    """Accept what is waiting (up to ``wait`` seconds for it); None when nothing was, else how
    many of the connections meant for this node arrived."""
    readable, _, _ = select.select(socks, [], [], wait)
    if not readable:
        return None
    received = 0
    for sock in readable:
        try:
            conn, peer = sock.accept()
        except OSError:
            continue
        conn.settimeout(2.0)
        try:
            token = conn.recv(256).decode("utf-8", "replace").strip()
        except OSError:
            token = ""
        out["accepted"].append({"local": conn.getsockname()[0], "peer": peer[0], "token": token})
        conn.close()
        parts = token.split()
        if len(parts) == 3 and parts[1] == spec["source"] and parts[0] != spec["source"]:
            received += 1
    return received


def connect(spec, target):
    address = target["address"]
    started = time.monotonic()
    entry = {"node": target["node"], "iface": target["iface"], "address": address}
    retry_until = STARTED + spec.get("retry_refused", 0)
    while True:
        sock = socket.socket(_family(address), socket.SOCK_STREAM)
        sock.settimeout(spec["connect_timeout"])
        try:
            sock.connect((address, spec["port"]))
            entry["local"] = sock.getsockname()[0]
            token = "%s %s %s\n" % (spec["source"], target["node"], address)
            sock.sendall(token.encode())
            entry["status"] = "ok"
            sock.close()
            break
        except socket.timeout:
            entry["status"] = "timeout"
        except OSError as exc:
            name = errno.errorcode.get(exc.errno or 0, "?")
            entry["status"] = STATUS.get(name, "failed")
            entry["error"] = "%s: %s" % (name, exc.strerror)
        sock.close()
        if entry["status"] != "refused" or time.monotonic() > retry_until:
            break
        time.sleep(0.1)
    entry["seconds"] = round(time.monotonic() - started, 4)
    return entry


def lifeline(go, stop):
    """The controller's word: ``go``, then ``stop``, then end of input when it leaves (then we
    leave)."""
    words = {b"go": go, b"stop": stop}
    try:
        for line in sys.stdin.buffer:
            word = words.get(line.strip())
            if word is not None:
                word.set()
    except (OSError, ValueError):
        pass
    os._exit(0)


def own_spec(spec):
    if "nodes" not in spec:
        return spec
    name = os.environ.get("SLURMD_NODENAME") or socket.gethostname()
    return spec["nodes"].get(name) or spec["nodes"].get(name.split(".")[0])


def main(argv):
    spec = own_spec(json.loads(argv[-1]))
    if spec is None:
        emit("done", error="no spec for this node", listen={}, accepted=[], connects=[])
        return
    out = {"listen": {}, "accepted": [], "connects": []}  # type: dict
    socks = bind_all(spec, out)
    go, stop = threading.Event(), threading.Event()
    if spec.get("barrier"):
        threading.Thread(target=lifeline, args=(go, stop), daemon=True).start()
        emit("ready", listen=out["listen"])
        if not go.wait(spec["ready_within"] + spec["deadline"]):
            return
    connects_done = threading.Event()
    done_at = [0.0]
    listener = threading.Thread(
        target=listen, args=(spec, socks, out, connects_done, done_at, stop)
    )
    listener.start()
    results = [None] * len(spec["targets"])

    def one(i, target):
        results[i] = connect(spec, target)

    threads = [threading.Thread(target=one, args=(i, t)) for i, t in enumerate(spec["targets"])]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    out["connects"] = results
    done_at[0] = time.monotonic()
    connects_done.set()
    if spec.get("barrier"):
        emit("connected")
    listener.join(spec["deadline"] + 1)
    emit("done", **out)


if __name__ == "__main__":
    main(sys.argv)
