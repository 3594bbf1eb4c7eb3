"""Passwordless SSH from every node to every other node, as mpirun, pdsh and horovodrun need it."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator

from checks.stage import not_run
from doctor.facts.cluster import ClusterFacts
from doctor.facts.mesh import OK, MeshLink
from doctor.model import Finding, Fix, Severity
from doctor.nodeset import compact
from doctor.plugin import Skip, cluster_check, need

# status -> (what it means, fix text, fix commands); {src} and {dst} are filled in.
_MEANING: dict[str, tuple[str, str, tuple[str, ...]]] = {
    "publickey_denied": (
        "{dst} does not accept {src}'s key (Permission denied (publickey))",
        "Authorize {src}'s public key on {dst}.",
        ("ssh {src} 'cat ~/.ssh/id_*.pub' | ssh {dst} 'cat >> ~/.ssh/authorized_keys'",),
    ),
    "host_key_unknown": (
        "{src} does not know {dst}'s host key (Host key verification failed)",
        "Record {dst}'s host key on {src} after checking its fingerprint.",
        ("ssh {src} 'ssh-keyscan -H {dst} >> ~/.ssh/known_hosts'",),
    ),
    "host_key_changed": (
        "{dst}'s host key differs from the one {src} recorded",
        "If {dst} was reinstalled, drop the old key on {src}; otherwise investigate.",
        ("ssh {src} 'ssh-keygen -R {dst}'",),
    ),
    "refused": (
        "nothing listens on {dst}'s SSH port (Connection refused)",
        "Start sshd on {dst} (or use the port it listens on).",
        ("ssh {dst} 'sudo systemctl start ssh'",),
    ),
    "timeout": (
        "{dst}'s SSH port does not answer {src} (timed out)",
        "A firewall, route or down link between {src} and {dst} drops the connection.",
        ("ssh {src} 'nc -vz -w3 {dst} 22'",),
    ),
    "unresolvable": (
        "{src} cannot resolve {dst}",
        "Add {dst} to DNS or to /etc/hosts on {src}.",
        ("ssh {src} 'getent hosts {dst}'",),
    ),
    "unreachable": (
        "{src} has no route to {dst}",
        "Check the routes and links between {src} and {dst}.",
        ("ssh {src} 'ip route get $(getent hosts {dst} | cut -d\" \" -f1)'",),
    ),
    "dropped": (
        "{dst}'s sshd closed the connection before authentication (MaxStartups, "
        "tcp_wrappers or a firewall)",
        "Raise MaxStartups in {dst}'s sshd_config, or allow {src} there.",
        ("ssh {dst} 'sudo sshd -T | grep -i maxstartups'",),
    ),
    "no_ssh_client": (
        "{src} has no ssh client",
        "Install the OpenSSH client on {src}.",
        ("ssh {src} 'sudo apt-get install -y openssh-client'",),
    ),
    "failed": (
        "ssh from {src} to {dst} failed",
        "Run the same command by hand on {src} to see why.",
        ("ssh {src} 'ssh -o BatchMode=yes {dst} true'",),
    ),
}

CODES = {
    f"mesh.{status}": meaning.format(src="a node", dst="its peer")
    for status, (meaning, _, _) in _MEANING.items()
}
CODES["mesh.not_run"] = "the mesh test could not run on a reachable node"


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
    status = {(x.source, x.target): x.status for x in mesh.links}
    groups: dict[tuple[str, str], list[MeshLink]] = defaultdict(list)
    for link in mesh.failed():
        groups[(link.status, link.target)].append(link)
    for (kind, dst), links in groups.items():
        sources = [x.source for x in links]
        src = compact(sources)
        meaning, fix_text, commands = _MEANING.get(kind, _MEANING["failed"])
        back = [s for s in sources if status.get((dst, s)) == OK]
        direction = f"; {dst} → {compact(back)} works (one way only)" if back else ""
        yield Finding(
            f"mesh.{kind}" if kind in _MEANING else "mesh.failed",
            Severity.FAIL,
            f"SSH {src} → {dst} fails: {meaning.format(src=src, dst=dst)}{direction}",
            nodes=(*sources, dst),
            evidence=tuple(f"{x.source} → {x.target}: {x.message}" for x in links),
            fix=Fix(
                fix_text.format(src=src, dst=dst),
                tuple(c.format(src=s, dst=dst) for s in sources[:3] for c in commands),
            ),
            data={"sources": sources, "target": dst, "status": kind},
        )
    yield from not_run("mesh.not_run", "the SSH mesh could not be tested", mesh.not_run)


CHECKS = [ssh_mesh]
