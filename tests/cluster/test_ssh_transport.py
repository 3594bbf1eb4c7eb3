"""The SSH transport against real sshd in network namespaces: success and every failure kind."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from dataclasses import replace
from pathlib import Path

import pytest

from doctor.core.model import NodeFailure
from doctor.nodes.inventory import Node, build_inventory
from doctor.nodes.transport import ExecResult, SshOptions
from doctor.nodes.transport.ssh import SshTransport
from doctor.stages.collect import gather

pytestmark = pytest.mark.cluster

SPEC = {"deadline": 10.0}


def nodes_of(c, names=None) -> list[Node]:
    return build_inventory(hosts=",".join(names or c.names), ssh_config=c.ssh_config)


def test_probe_runs_on_every_node_over_ssh(new_cluster):
    c = new_cluster(3)
    with SshTransport() as t:
        results = gather(nodes_of(c), t, SPEC)
    assert list(results) == ["node1", "node2", "node3"]
    for name, cap in results.items():
        assert not isinstance(cap, NodeFailure), cap
        assert cap.value("hostname") == name  # each node's own UTS namespace
        # Its clock reading lies inside the span the controller kept (one clock here).
        assert cap.asked is not None and cap.asked[0] <= cap.value("time") <= cap.asked[1]


def test_failures_are_classified_and_others_still_probed(new_cluster):
    c = new_cluster(4)
    c.stop_sshd("node2")
    c.blackhole("node3")
    c.deauthorize_controller("node4")
    started = time.monotonic()
    with SshTransport(SshOptions(connect_timeout=2)) as t:
        results = gather(nodes_of(c), t, SPEC)
    assert time.monotonic() - started < 8
    assert not isinstance(results["node1"], NodeFailure)
    codes = {n: r.code for n, r in results.items() if isinstance(r, NodeFailure)}
    assert codes == {"node2": "ssh.refused", "node3": "ssh.timeout", "node4": "ssh.auth_failed"}


def test_unresolvable_name():
    node = Node("ghost", "ghost.invalid")
    with SshTransport(SshOptions(connect_timeout=2)) as t:
        result = t.execute(node, ["true"], b"", 5)
    assert isinstance(result, NodeFailure) and result.code == "ssh.unresolvable"


def test_host_keys_unknown_refused_accept_new_records_changed_refused(new_cluster, tmp_path):
    c = new_cluster(1)
    [node] = nodes_of(c)
    empty = tmp_path / "kh"
    empty.write_text("")
    plain = Node(
        node.name, node.address, identity_files=node.identity_files, known_hosts=(str(empty),)
    )
    with SshTransport() as t:
        refused = t.execute(plain, ["true"], b"", 5)
    assert isinstance(refused, NodeFailure) and refused.code == "ssh.host_key_unknown"
    assert empty.read_text() == ""
    with SshTransport(SshOptions(accept_new_host_keys=True)) as t:
        ok = t.execute(plain, ["true"], b"", 5)
    assert isinstance(ok, ExecResult) and ok.rc == 0
    recorded = empty.read_text()
    assert recorded.startswith(f"{node.address} ssh-ed25519 ")
    # Now the node gets a new host key: refused even with accept-new.
    c.replace_host_key("node1")
    with SshTransport(SshOptions(accept_new_host_keys=True)) as t:
        changed = t.execute(plain, ["true"], b"", 5)
    assert isinstance(changed, NodeFailure) and changed.code == "ssh.host_key_changed"
    assert empty.read_text() == recorded


def test_command_past_deadline_is_killed_on_the_node(new_cluster):
    c = new_cluster(1)
    [node] = nodes_of(c)
    with SshTransport() as t:
        started = time.monotonic()
        result = t.execute(node, ["sh", "-c", "sleep 60 & sleep 61; wait"], b"", 1.5)
        assert time.monotonic() - started < 5
        assert isinstance(result, NodeFailure) and result.code == "node.timeout"
    deadline = time.monotonic() + 5
    while c.node_processes("node1", "sleep") and time.monotonic() < deadline:
        time.sleep(0.1)
    assert c.node_processes("node1", "sleep") == []


def test_missing_interpreter_is_no_python(new_cluster):
    c = new_cluster(1)
    with SshTransport() as t:
        result = gather(nodes_of(c), t, SPEC, python="/nonexistent/python3")["node1"]
    assert isinstance(result, NodeFailure) and result.code == "node.no_python"


def test_stdout_and_stdin_round_trip_exactly(new_cluster):
    c = new_cluster(1)
    [node] = nodes_of(c)
    payload = bytes(range(256)) * 2000
    with SshTransport() as t:
        result = t.execute(node, ["cat"], payload, 10)
    assert isinstance(result, ExecResult) and result.rc == 0
    assert result.stdout == payload and result.stderr == b""


def test_known_hosts_path_from_ssh_config_is_used(new_cluster):
    c = new_cluster(1)
    [node] = nodes_of(c)
    assert node.known_hosts == (str(c.known_hosts),)
    assert node.identity_files == (str(c.client_key),)
    assert Path(node.known_hosts[0]).is_file()


def test_a_command_that_exits_without_reading_its_stdin_still_reports_its_status(new_cluster):
    # Far more stdin than the SSH window holds: the command is gone (and the channel closed)
    # long before the write ends, every time, which is the race a missing interpreter hits.
    c = new_cluster(1)
    [node] = nodes_of(c)
    with SshTransport() as t:
        result = t.execute(node, ["sh", "-c", "echo gone >&2; exit 7"], b"x" * (32 << 20), 10)
        assert isinstance(result, ExecResult), result
        assert (result.rc, result.stderr) == (7, b"gone\n")
        after = t.execute(node, ["true"], b"", 5)  # and the cached connection still works
    assert isinstance(after, ExecResult) and after.rc == 0


def test_a_login_nodes_known_hosts_hashed_long_and_with_a_broken_line(new_cluster, tmp_path):
    # Thousands of other hosts, names hashed by OpenSSH's ssh-keygen -H, and one line whose key
    # does not decode (paramiko's own load raised on it): every node is still found and probed.
    c = new_cluster(3)
    ours = c.known_hosts.read_text()
    key = ours.splitlines()[0].split(maxsplit=1)[1]
    kh = tmp_path / "known_hosts"
    kh.write_text("".join(f"other{i}.example.com {key}\n" for i in range(3000)) + ours)
    subprocess.run(["ssh-keygen", "-H", "-f", str(kh)], check=True, capture_output=True)
    assert all(line.startswith("|1|") for line in kh.read_text().splitlines())
    kh.write_text("node1 ssh-ed25519 AAAA!broken\n" + kh.read_text())
    nodes = [replace(n, known_hosts=(str(kh),)) for n in nodes_of(c)]
    with SshTransport() as t:
        results = gather(nodes, t, SPEC)
    assert not any(isinstance(r, NodeFailure) for r in results.values()), results


def sshd_peers(c, name: str) -> int:
    """How many SSH connections the node's sshd holds open now."""
    out = c.node(name).run(["ss", "-Htn", "state", "established", "( sport = :22 )"]).stdout
    return len(out.splitlines())


def wait_for(condition, seconds: float = 10.0) -> bool:
    end = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > end:
            return False
        time.sleep(0.05)
    return True


def test_connections_opened_ahead_are_made_before_any_command_and_then_used(new_cluster):
    c = new_cluster(3)
    nodes = nodes_of(c)
    with SshTransport() as t:
        t.open(nodes, window=2)
        # The first two are connected with no command sent; the third waits for its first use.
        assert wait_for(lambda: [sshd_peers(c, n) for n in c.names] == [1, 1, 0])
        time.sleep(0.3)
        assert sshd_peers(c, "node3") == 0
        results = gather(nodes, t, SPEC)
        assert all(not isinstance(r, NodeFailure) for r in results.values()), results
        # Each command ran on the connection opened for it: still one per node.
        assert [sshd_peers(c, n) for n in c.names] == [1, 1, 1]
    assert wait_for(lambda: [sshd_peers(c, n) for n in c.names] == [0, 0, 0])


def test_a_transport_closed_while_it_connects_ahead_keeps_no_connection(new_cluster):
    c = new_cluster(2)
    nodes = nodes_of(c)
    sshd = c.node("node2").sshd
    os.kill(sshd.pid, signal.SIGSTOP)  # node2's handshake cannot finish until its sshd runs
    t = SshTransport(SshOptions(connect_timeout=5))
    try:
        t.open(nodes, window=2)
        assert wait_for(lambda: sshd_peers(c, "node1") == 1)
        t.close()
        assert wait_for(lambda: sshd_peers(c, "node1") == 0)
    finally:
        # node2's handshake completes after close(): not kept. Resumed whatever happened, or
        # the teardown's SIGTERM would wait on a stopped sshd.
        os.kill(sshd.pid, signal.SIGCONT)
    assert wait_for(lambda: sshd_peers(c, "node2") == 0)
    failure = t.execute(nodes[1], ["true"], b"", 5)
    assert isinstance(failure, NodeFailure) and failure.code == "ssh.error"
