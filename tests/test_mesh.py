"""SSH mesh: classifying real OpenSSH client output, the check's findings, the report section."""

from __future__ import annotations

import json
from pathlib import Path

from checks.mesh import ssh_mesh
from doctor.facts.cluster import ClusterFacts
from doctor.facts.mesh import MeshLink, SshMesh, classify, parse_agent_output
from doctor.inventory import Node
from doctor.stages.mesh import GRACE, mesh_spec, stage_deadline

FIXTURE = Path(__file__).parent / "fixtures" / "mesh" / "node1_agent.json"


def test_real_openssh_failures_are_classified():
    # Recorded on the harness: see the fixture's "recorded" note for what each peer had wrong.
    links = parse_agent_output("node1", FIXTURE.read_text())
    assert isinstance(links, list)
    got = {x.target: (x.status, x.message) for x in links}
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
    assert isinstance(parse_agent_output("n1", "Traceback ..."), str)
    assert isinstance(parse_agent_output("n1", '{"results": 3}'), str)
    doc = {
        "results": [{"target": "n2", "error": {"kind": "timeout", "detail": "late"}, "seconds": 9}]
    }
    [link] = parse_agent_output("n1", json.dumps(doc))  # type: ignore[misc]
    assert (link.status, link.message) == ("timeout", "late")


def test_mesh_spec_rotates_peers_and_keeps_explicit_port_and_user():
    nodes = [Node("a", "a"), Node("b", "b", port=2222, user="u"), Node("c", "c")]
    spec = mesh_spec(nodes[2], nodes, 5)
    assert [t["name"] for t in spec["targets"]] == ["a", "b"]  # type: ignore[index]
    assert spec["targets"][1] == {"name": "b", "host": "b", "port": 2222, "user": "u"}  # type: ignore[index]
    assert [t["name"] for t in mesh_spec(nodes[0], nodes, 5)["targets"]] == ["b", "c"]  # type: ignore[index]
    assert stage_deadline(15, 5) == 2 * (5 + GRACE) + GRACE  # 8 at a time: 2 rounds


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
