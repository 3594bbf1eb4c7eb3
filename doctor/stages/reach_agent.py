"""Runs on one node: listen on each candidate address, connect to each peer's, report what arrived.

Horovod's interface test: a connection proves an interface only if the peer saw it arrive from
the address the sender used (NAT and docker paths change it) and it reached the intended node
(an address that exists on several nodes, like docker0's, is answered by the sender itself).
Every connection carries ``<source> <target> <address>`` so the listener can tell.

Shipped like the probe (source piped into ``python3``): stdlib only, valid on Python 3.8.
Spec (JSON argument): port, listen (addresses), targets [{node, iface, address}], source,
expect (connections this node should receive), connect_timeout, deadline.
"""

import errno
import json
import select
import socket
import sys
import threading
import time

RETRY_REFUSED = 3.0  # seconds: a peer's listener may start a moment after our first try
# After our own connects are done, stop listening once nothing has arrived for this long: a
# connection meant for us may never come (it went to an address the sender also holds).
QUIET = 2.0


def _family(address):
    return socket.AF_INET6 if ":" in address else socket.AF_INET


def listen(spec, out, stop):
    socks = []
    for address in spec["listen"]:
        try:
            sock = socket.socket(_family(address), socket.SOCK_STREAM)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((address, spec["port"]))
            sock.listen(64)
            sock.setblocking(False)
            socks.append(sock)
            out["listen"][address] = "ok"
        except OSError as exc:
            name = errno.errorcode.get(exc.errno or 0, "?")
            out["listen"][address] = "%s: %s" % (name, exc.strerror)
    ready.set()
    end = time.monotonic() + spec["deadline"]
    received = 0
    last = time.monotonic()
    while socks and time.monotonic() < end and not stop.is_set():
        if connects_done.is_set() and (
            received >= spec["expect"] or time.monotonic() - max(last, done_at[0]) > QUIET
        ):
            break
        readable, _, _ = select.select(socks, [], [], 0.05)
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
            out["accepted"].append(
                {"local": conn.getsockname()[0], "peer": peer[0], "token": token}
            )
            conn.close()
            last = time.monotonic()
            parts = token.split()
            if len(parts) == 3 and parts[1] == spec["source"] and parts[0] != spec["source"]:
                received += 1
    for sock in socks:
        sock.close()


def connect(spec, target):
    address = target["address"]
    started = time.monotonic()
    entry = {"node": target["node"], "iface": target["iface"], "address": address}
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
            entry["status"] = {
                "ECONNREFUSED": "refused",
                "EHOSTUNREACH": "unreachable",
                "ENETUNREACH": "unreachable",
                "ETIMEDOUT": "timeout",
                "EINVAL": "unreachable",  # a blackhole route on this side
            }.get(name, "failed")
            entry["error"] = "%s: %s" % (name, exc.strerror)
        sock.close()
        if entry["status"] != "refused" or time.monotonic() - started > RETRY_REFUSED:
            break
        time.sleep(0.05)
    entry["seconds"] = round(time.monotonic() - started, 4)
    return entry


ready = threading.Event()
connects_done = threading.Event()
done_at = [0.0]


def main(argv):
    spec = json.loads(argv[1])
    out = {"reach_agent": 1, "listen": {}, "accepted": [], "connects": []}
    stop = threading.Event()
    listener = threading.Thread(target=listen, args=(spec, out, stop))
    listener.start()
    ready.wait(5)
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
    listener.join(spec["deadline"] + 1)
    stop.set()
    json.dump(out, sys.stdout)
    sys.stdout.flush()


if __name__ == "__main__":
    main(sys.argv)
