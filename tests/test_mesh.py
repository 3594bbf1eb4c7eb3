"""SSH mesh: classifying real OpenSSH client output, the check's findings, the report section."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from checks.mesh import ssh_mesh
from doctor.facts.cluster import ClusterFacts
from doctor.facts.network.mesh import MeshLink, SshMesh, classify, link_of
from doctor.nodes.inventory import Node
from doctor.nodes.transport.local import LocalTransport
from doctor.stages.mesh import (
    GRACE,
    PER_SOURCE,
    PER_TARGET,
    Scheduler,
    mesh_spec,
    run_mesh,
    stage_deadline,
)
from doctor.stages.pairs import Sampling, choose
from doctor.stages.window import Window

FIXTURE = Path(__file__).parent / "fixtures" / "mesh" / "node1_agent.json"


def test_real_openssh_failures_are_classified():
    # Recorded on the harness: see the fixture's "recorded" note for what each peer had wrong.
    links = [link_of("node1", e) for e in json.loads(FIXTURE.read_text())["results"]]
    got = {x.target: (x.status, x.message) for x in links if x is not None}
    assert got == {
        "node2": ("publickey_denied", "root@node2: Permission denied (publickey)."),
        "node3": ("host_key_unknown", "Host key verification failed."),
        "node4": ("refused", "ssh: connect to host node4 port 22: Connection refused"),
        "node5": ("timeout", "ssh: connect to host node5 port 22: Connection timed out"),
        "node6": (
            "host_key_changed",
            "@    WARNING: REMOTE HOST IDENTIFICATION HAS CHANGED!     @",
        ),
        "ghost": (
            "unresolvable",
            "ssh: Could not resolve hostname ghost: Temporary failure in name resolution",
        ),
    }


def test_classify_edge_cases():
    assert classify(0, "Warning: Permanently added 'x' to the list of known hosts.") == ("ok", "")
    assert classify(255, "") == ("failed", "ssh exit status 255")
    assert classify(1, "bash: line 1: true: command not found\n") == (
        "failed",
        "bash: line 1: true: command not found",
    )


def test_agent_output_garbage_and_errors():
    assert link_of("n1", {"results": 3}) is None
    assert link_of("n1", {"target": "n2", "rc": "255"}) is None
    link = link_of("n1", {"target": "n2", "error": {"kind": "timeout", "detail": "late"}})
    assert link is not None and (link.status, link.message) == ("timeout", "late")


def test_mesh_spec_rotates_peers_and_keeps_explicit_port_and_user():
    nodes = [Node("a", "a"), Node("b", "b", port=2222, user="u"), Node("c", "c")]
    everyone = choose([n.name for n in nodes], Sampling.full, 16, 0)
    spec = mesh_spec(nodes[2], nodes, everyone)
    assert [t["name"] for t in spec["targets"]] == ["a", "b"]  # type: ignore[index]
    assert spec["targets"][1] == {"name": "b", "host": "b", "port": 2222, "user": "u"}  # type: ignore[index]
    assert [t["name"] for t in mesh_spec(nodes[0], nodes, everyone)["targets"]] == ["b", "c"]  # type: ignore[index]
    assert stage_deadline(40, 32) == 2 * 5 + 5 + 2 * GRACE  # 32 logins at a time: 2 rounds
    assert stage_deadline(40) == 10 * 5 + 5 + 2 * GRACE  # as many as the window starts with


def _cluster(links, not_run=None):
    names = ("node1", "node2", "node3")
    return ClusterFacts(nodes={}, ssh_mesh=SshMesh(names, tuple(links), not_run or {}))


def _all_ok(except_=()):
    names = ("node1", "node2", "node3")
    return [MeshLink(s, t, "ok") for s in names for t in names if s != t and (s, t) not in except_]


def test_check_groups_sources_per_target_and_names_direction():
    links = [
        *_all_ok(except_={("node1", "node3"), ("node2", "node3")}),
        MeshLink("node1", "node3", "publickey_denied", "Permission denied (publickey)."),
        MeshLink("node2", "node3", "publickey_denied", "Permission denied (publickey)."),
    ]
    [f] = list(ssh_mesh.fn(_cluster(links)))
    assert f.code == "mesh.publickey_denied"
    assert f.summary == (
        "SSH node[1-2] → node3 fails: node3 does not accept node[1-2]'s key "
        "(Permission denied (publickey)); node3 → node[1-2] works (one way only)"
    )
    assert f.nodes == ("node1", "node2", "node3")
    assert len(f.fix.commands) == 2  # type: ignore[union-attr]


def test_check_clean_mesh_and_not_run():
    assert list(ssh_mesh.fn(_cluster(_all_ok()))) == []
    [f] = list(ssh_mesh.fn(_cluster(_all_ok(), {"node2": "mesh agent failed: boom"})))
    assert (f.code, f.nodes) == ("mesh.not_run", ("node2",))


def test_section_matrix():
    section = _cluster([MeshLink("node1", "node2", "refused", "x")]).ssh_mesh.to_section()  # type: ignore[union-attr]
    assert section["matrix"] == {"node1": {"node2": "refused"}, "node2": {}, "node3": {}}
    assert section["failures"] == [
        {"source": "node1", "target": "node2", "status": "refused", "message": "x"}
    ]


def test_the_scheduler_keeps_every_bound_and_hands_out_every_pair_once() -> None:
    nodes = [f"n{i:02d}" for i in range(40)]
    coverage = choose(nodes, Sampling.full, 40, 0)
    targets = {s: list(coverage.peers[s]) for s in nodes}
    window = Window(32)
    scheduler = Scheduler(targets, window)
    inflight: list[tuple[str, int]] = []
    handed: list[tuple[str, str]] = []
    ended: set[str] = set()

    def apply(said: dict[str, list[str]]) -> None:
        for source, lines in said.items():
            for line in lines:
                if line == "end":
                    assert source not in ended
                    ended.add(source)
                else:
                    index = int(line.split()[1])
                    inflight.append((source, index))
                    handed.append((source, targets[source][index]))
        into = Counter(targets[s][i] for s, i in inflight)
        out = Counter(s for s, _ in inflight)
        assert len(inflight) <= window.size
        assert max(into.values(), default=0) <= PER_TARGET
        assert max(out.values(), default=0) <= PER_SOURCE

    apply(scheduler.begin(nodes))
    while inflight:
        source, index = inflight.pop(len(inflight) // 2)  # links end in any order
        link = {"ev": "link", "index": index, "target": targets[source][index], "rc": 0}
        apply(scheduler.heard(source, {**link, "seconds": 0.3}))
    assert sorted(handed) == sorted((s, t) for s in nodes for t in targets[s])
    assert ended == set(nodes)


def test_a_stage_that_overruns_keeps_what_it_tested_and_blames_nobody(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Each node's ssh hangs (a stand-in that sleeps): the stage deadline comes first.
    (tmp_path / "ssh").write_text("#!/bin/sh\nsleep 60\n")
    (tmp_path / "ssh").chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    monkeypatch.setattr("doctor.stages.mesh.stage_deadline", lambda pairs, at_once=4: 3.0)
    nodes = [Node("a", "127.0.0.1"), Node("b", "127.0.0.1")]
    started = time.monotonic()
    mesh = run_mesh(nodes, LocalTransport(), python=sys.executable, workers=32)
    assert time.monotonic() - started < 15
    assert mesh.links == ()
    assert set(mesh.not_run) == {"a", "b"}
    assert all("stage deadline" in why for why in mesh.not_run.values())
    found = list(ssh_mesh.fn(ClusterFacts(nodes={}, ssh_mesh=mesh)))
    assert {(f.code, f.severity.name) for f in found} == {("mesh.not_run", "WARN")}
    # Nothing is left running: the agents and their ssh went with the stage.
    assert subprocess.run(["pgrep", "-f", str(tmp_path)], capture_output=True).stdout == b""


def test_an_agent_that_dies_gives_back_its_logins() -> None:
    # Two sources, one target each way at most 8 at once: the dead source's logins in flight
    # must not hold the target's slots, or the other source would wait for ever.
    targets = {"a": ["t"] * PER_TARGET, "b": ["t"] * PER_TARGET}
    scheduler = Scheduler(targets, Window(32, size_f=32))
    said = scheduler.begin(["a", "b"])
    assert [len(said["a"]), len(said["b"])] == [PER_TARGET // 2] * 2  # every slot into t taken
    said = scheduler.heard("a", {"ev": "ended"})
    assert len(said["b"]) == PER_TARGET // 2 and "a" not in said


def _mesh(names, first, again):
    links = [MeshLink(s, t, "ok", seconds=0.4) for s in names for t in names if s != t]
    links = [
        next((x for x in first if (x.source, x.target) == (y.source, y.target)), y) for y in links
    ]
    return ClusterFacts(
        nodes={}, ssh_mesh=SshMesh(tuple(names), tuple(links), retried=tuple(again))
    )


def test_a_login_into_a_node_that_timed_out_and_passed_alone_is_a_latency_warning():
    names = ("node1", "node2", "node3", "node4")
    late = MeshLink("node1", "node3", "timeout", "ssh still running after the deadline", 15.0)
    found = list(ssh_mesh.fn(_mesh(names, [late], [MeshLink("node1", "node3", "ok", "", 0.5)])))
    assert [(f.code, f.severity.name, f.nodes) for f in found] == [
        ("mesh.slow_login", "WARN", ("node3",))
    ]
    assert "15.0 s" in found[0].evidence[0] and "alone (0.5 s)" in found[0].evidence[0]


def test_a_repeated_failure_is_confirmed_and_a_node_nobody_logs_in_to_is_named_alone():
    names = ("node1", "node2", "node3", "node4")
    refused = [
        MeshLink(s, "node2", "refused", "Connection refused", 0.1) for s in names if s != "node2"
    ]
    [f] = list(ssh_mesh.fn(_mesh(names, refused, refused)))
    assert (f.code, f.nodes) == ("mesh.refused", ("node2",))
    assert f.summary.startswith("No node can log in to node2 over SSH")
    assert all("confirmed alone: Connection refused" in e for e in f.evidence)
    # A failure that did not repeat alone is a warning, not a failure of the pair.
    dropped = MeshLink("node1", "node2", "dropped", "Connection closed by 10.0.0.2", 0.2)
    found = list(ssh_mesh.fn(_mesh(names, [dropped], [MeshLink("node1", "node2", "ok")])))
    assert [(f.code, f.nodes) for f in found] == [("mesh.transient", ("node2",))]


def test_a_node_slow_to_log_in_to_is_warned_about_but_a_machine_slow_for_all_is_not():
    names = ("node1", "node2", "node3", "node4")
    slow = [MeshLink(s, "node3", "ok", "", 6.0) for s in names if s != "node3"]
    [f] = list(ssh_mesh.fn(_mesh(names, slow, [])))
    assert (f.code, f.severity.name, f.nodes) == ("mesh.slow_login", "WARN", ("node3",))
    assert "median 6.0 s over 3" in f.evidence[0]
    everyone = [MeshLink(s, t, "ok", "", 6.0) for s in names for t in names if s != t]
    assert list(ssh_mesh.fn(_mesh(names, everyone, []))) == []


def test_a_failed_login_is_tried_again_alone_and_only_a_repeated_failure_stays(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A stand-in ssh: into b it is refused every time; into c only the first time (from a or b:
    # the two log in at once, so "first" is mkdir's, which only one of them can win).
    (tmp_path / "ssh").write_text(
        "#!/bin/sh\n"
        "host=$(echo \"$@\" | awk '{print $(NF-1)}')\n"
        f"mark={tmp_path}/tried-$host\n"
        'if [ "$host" = b ] || { [ "$host" = c ] && mkdir "$mark" 2>/dev/null; }; then '
        'echo "ssh: connect to host $host port 22: Connection refused" >&2; exit 255; fi\n'
    )
    (tmp_path / "ssh").chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    nodes = [Node("a", "127.0.0.1"), Node("b", "127.0.0.1"), Node("c", "127.0.0.1")]
    mesh = run_mesh(nodes, LocalTransport(), python=sys.executable, workers=32)
    [once] = [x for x in mesh.links if x.target == "c" and x.status == "refused"]
    again = {(x.source, x.target): x.status for x in mesh.retried}
    assert again == {("a", "b"): "refused", ("c", "b"): "refused", (once.source, "c"): "ok"}
    assert {(x.source, x.target) for x in mesh.failed()} == {("a", "b"), ("c", "b")}
    assert mesh.status(once.source, "c") == "ok"
