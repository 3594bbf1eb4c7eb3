"""Passwordless SSH from every node to every other node, as mpirun, pdsh and horovodrun need it."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from statistics import median

from checks.stage import not_run, whole_nodes
from doctor.core.model import Finding, Fix, Severity
from doctor.core.nodeset import compact
from doctor.core.shell import Command, command, over_ssh
from doctor.facts.cluster import ClusterFacts
from doctor.facts.network.mesh import OK, MeshLink, SshMesh
from doctor.plugin import Skip, cluster_check, need

# A node's logins are slow at this many times the cluster's median login (plus a second).
SLOW_NODE = 3.0

Commands = Callable[[str, str], tuple[Command, ...]]

# status -> (what it means, fix text, the fix's commands from (src, dst)); {src} and {dst} are
# filled in.
_MEANING: dict[str, tuple[str, str, Commands]] = {
    "publickey_denied": (
        "{dst} does not accept {src}'s key (Permission denied (publickey))",
        "Authorize {src}'s public key on {dst}.",
        lambda src, dst: (
            command(
                "ssh {} 'cat ~/.ssh/id_*.pub' | ssh {} 'cat >> ~/.ssh/authorized_keys'", src, dst
            ),
        ),
    ),
    "host_key_unknown": (
        "{src} does not know {dst}'s host key (Host key verification failed)",
        "Record {dst}'s host key on {src} after checking its fingerprint.",
        lambda src, dst: (over_ssh(src, "ssh-keyscan -H {} >> ~/.ssh/known_hosts", dst),),
    ),
    "host_key_changed": (
        "{dst}'s host key differs from the one {src} recorded",
        "If {dst} was reinstalled, drop the old key on {src}; otherwise investigate.",
        lambda src, dst: (over_ssh(src, "ssh-keygen -R {}", dst),),
    ),
    "refused": (
        "nothing listens on {dst}'s SSH port (Connection refused)",
        "Start sshd on {dst} (or use the port it listens on).",
        lambda src, dst: (command("ssh {} 'sudo systemctl start ssh'", dst),),
    ),
    "timeout": (
        "{dst}'s SSH port does not answer {src} (timed out)",
        "A firewall, route or down link between {src} and {dst} drops the connection.",
        lambda src, dst: (over_ssh(src, "nc -vz -w3 {} 22", dst),),
    ),
    "unresolvable": (
        "{src} cannot resolve {dst}",
        "Add {dst} to DNS or to /etc/hosts on {src}.",
        lambda src, dst: (over_ssh(src, "getent hosts {}", dst),),
    ),
    "unreachable": (
        "{src} has no route to {dst}",
        "Check the routes and links between {src} and {dst}.",
        lambda src, dst: (over_ssh(src, "ip route get $(getent hosts {} | cut -d' ' -f1)", dst),),
    ),
    "dropped": (
        "{dst}'s sshd closed the connection before authentication (MaxStartups, "
        "tcp_wrappers or a firewall)",
        "Raise MaxStartups in {dst}'s sshd_config, or allow {src} there.",
        lambda src, dst: (command("ssh {} 'sudo sshd -T | grep -i maxstartups'", dst),),
    ),
    "no_ssh_client": (
        "{src} has no ssh client",
        "Install the OpenSSH client on {src}.",
        lambda src, dst: (command("ssh {} 'sudo apt-get install -y openssh-client'", src),),
    ),
    "failed": (
        "ssh from {src} to {dst} failed",
        "Run the same command by hand on {src} to see why.",
        lambda src, dst: (over_ssh(src, "ssh -o BatchMode=yes -- {} true", dst),),
    ),
}

CODES = {
    f"mesh.{status}": meaning.format(src="a node", dst="its peer")
    for status, (meaning, _, _) in _MEANING.items()
}
CODES["mesh.not_run"] = "the mesh test could not run on a reachable node"
CODES["mesh.slow_login"] = (
    "logins into a node are slow (one timed out and passed alone, or they take several times "
    "the cluster's usual login) while other logins into it succeed"
)
CODES["mesh.transient"] = "a login failed once and succeeded when tried again alone"


@cluster_check(
    "ssh.mesh",
    "Every node reaches every other node with passwordless SSH",
    needs=("ssh_mesh",),
    codes=CODES,
)
def ssh_mesh(cluster: ClusterFacts) -> Iterator[Finding]:
    mesh = need(cluster.ssh_mesh)
    if not mesh.links and not mesh.not_run:
        raise Skip("one node: no peers")
    failed = mesh.failed()
    bad = {(x.source, x.target) for x in failed}
    targets, sources = whole_nodes(
        {(x.source, x.target): (x.source, x.target) in bad for x in mesh.links}
    )
    for dst in targets:
        yield _one_end(mesh, [x for x in failed if x.target == dst], dst, into=True)
    for src in sources:
        links = [x for x in failed if x.source == src and x.target not in targets]
        if links:
            yield _one_end(mesh, links, src, into=False)
    groups: dict[tuple[str, str], list[MeshLink]] = defaultdict(list)
    for link in failed:
        if link.target not in targets and link.source not in sources:
            groups[(link.status, link.target)].append(link)
    for (kind, dst), links in groups.items():
        sources_ = [x.source for x in links]
        src = compact(sources_)
        meaning, fix_text, commands = _MEANING.get(kind, _MEANING["failed"])
        back = [s for s in sources_ if mesh.status(dst, s) == OK]
        direction = f"; {dst} → {compact(back)} works (one way only)" if back else ""
        yield Finding(
            _code(kind),
            Severity.FAIL,
            f"SSH {src} → {dst} fails: {meaning.format(src=src, dst=dst)}{direction}",
            nodes=(*sources_, dst),
            evidence=tuple(_attempts(mesh, x) for x in links),
            fix=Fix(
                fix_text.format(src=src, dst=dst),
                tuple(c for s in sources_[:3] for c in commands(s, dst)),
            ),
            data={"sources": sources_, "target": dst, "status": kind},
        )
    yield from _slow_or_transient(mesh)
    yield from not_run("mesh.not_run", "the SSH mesh could not be tested", mesh.not_run)


def _code(kind: str) -> str:
    return f"mesh.{kind}" if kind in _MEANING else "mesh.failed"


def _attempts(mesh: SshMesh, link: MeshLink) -> str:
    """Both attempts of a failed login: the stage's and the one alone after it."""
    first = f"{link.source} → {link.target}: {link.message}{_took(link)}"
    again = mesh.retry_of(link)
    if again is None:
        return first + " (not tried again)"
    return f"{first}; confirmed alone: {again.message or again.status}{_took(again)}"


def _took(link: MeshLink) -> str:
    return f" ({link.seconds:.1f} s)" if link.seconds is not None else ""


def _one_end(mesh: SshMesh, links: list[MeshLink], node: str, *, into: bool) -> Finding:
    """Every login into ``node`` that was tried failed (``into``), or every one out of it: the
    problem is ``node``'s, not that of N pairs."""
    kind = Counter(x.status for x in links).most_common(1)[0][0]
    meaning, fix_text, commands = _MEANING.get(kind, _MEANING["failed"])
    if into:
        peers = sorted(x.source for x in links)
        src, dst, first = compact(peers), node, peers[0]
        said = meaning.format(src="its peers", dst=node)
        summary = f"No node can log in to {node} over SSH: {said} (all {len(peers)} peers that "
        summary += f"tried: {src})"
        data: dict[str, object] = {"sources": peers, "target": node}
    else:
        src, dst, first = node, compact(x.target for x in links), links[0].target
        said = meaning.format(src=node, dst="its peers")
        summary = (
            f"{node} cannot log in to any peer over SSH: {said} (all {len(links)} it tried: {dst})"
        )
        data = {"source": node, "targets": [x.target for x in links]}
    # The commands name one pair: the first peer that tried, or the first peer tried.
    pair = (first, node) if into else (node, first)
    return Finding(
        _code(kind),
        Severity.FAIL,
        summary,
        nodes=(node,),
        evidence=tuple(_attempts(mesh, x) for x in links),
        fix=Fix(fix_text.format(src=src, dst=dst), commands(*pair)),
        data={**data, "status": kind},
    )


def _slow_or_transient(mesh: SshMesh) -> Iterator[Finding]:
    """Logins that failed in the stage and not alone: a warning on the node they went into, with
    the seconds measured (a node whose logins are slow under load is not a failed pair)."""
    slow: dict[str, list[str]] = defaultdict(list)
    transient: dict[str, list[str]] = defaultdict(list)
    for first, again in mesh.passed_alone():
        line = f"{first.source} → {first.target}: {first.message}{_took(first)}"
        kinds = slow if first.status == "timeout" else transient
        kinds[first.target].append(f"{line}; alone{_took(again)}")
    # A node whose logins take much longer than the cluster's (not a machine that is slow for
    # every node alike: that is the load, not the node).
    took: dict[str, list[float]] = defaultdict(list)
    for link in mesh.links:
        if link.status == OK and link.seconds is not None:
            took[link.target].append(link.seconds)
    if took:
        typical = median(s for times in took.values() for s in times)
        for dst, times in took.items():
            if median(times) > SLOW_NODE * typical + 1.0:
                slow[dst].append(
                    f"logins into {dst}: median {median(times):.1f} s over {len(times)}, "
                    f"against {typical:.1f} s into every node"
                )
    for dst, seen in slow.items():
        yield Finding(
            "mesh.slow_login",
            Severity.WARN,
            f"SSH logins into {dst} are slow, while other logins into it succeed",
            nodes=(dst,),
            evidence=tuple(seen),
            fix=Fix(
                f"Look for load on {dst} (sshd, CPU) or a slow DNS lookup in its sshd (UseDNS).",
                (command("ssh {} 'uptime; sudo sshd -T | grep -i usedns'", dst),),
            ),
        )
    for dst, seen in transient.items():
        yield Finding(
            "mesh.transient",
            Severity.WARN,
            f"SSH into {dst} failed once and worked when tried again alone",
            nodes=(dst,),
            evidence=tuple(seen),
        )


CHECKS = [ssh_mesh]
