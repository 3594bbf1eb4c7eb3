"""Node basics: every node answered, and /dev/shm is big enough for NCCL."""

from __future__ import annotations

from collections.abc import Iterator

from doctor.core.model import Finding, Fix, NodeFailure, Severity
from doctor.core.shell import Words, command, commands, words
from doctor.core.units import human_bytes
from doctor.facts.cluster import ClusterFacts
from doctor.facts.node import NodeFacts
from doctor.nodes.inventory import Node
from doctor.plugin import cluster_check, need, node_check

GIB = 1 << 30
# NCCL's SHM transport allocates a few to ~10 MB per connection; 8 GPUs with several channels
# exhaust Docker's 64 MB default. The NCCL docs recommend --shm-size=1g.
SHM_WARN = 1 * GIB
SHM_FAIL = 256 << 20

SHM_FIX = Fix(
    "Give the container a bigger /dev/shm (or share the host's IPC namespace); in Kubernetes "
    "mount a memory-backed emptyDir at /dev/shm.",
    commands(
        "docker run --shm-size=1g --ulimit memlock=-1 ...",
        "docker run --ipc=host --ulimit memlock=-1 ...",
        "volumes: [{name: dshm, emptyDir: {medium: Memory}}]  # mounted at /dev/shm",
    ),
)


@node_check(
    "shm.size",
    "/dev/shm is large enough for NCCL's shared-memory buffers",
    needs=("limits",),
    codes={
        "shm.too_small": "/dev/shm is under 256 MiB: NCCL fails with 'failed to extend /dev/shm'",
        "shm.small": "/dev/shm is under 1 GiB: NCCL may run out of it with many GPUs or channels",
    },
    fixes={"shm.too_small": SHM_FIX, "shm.small": SHM_FIX},
)
def shm_size(facts: NodeFacts) -> Iterator[Finding]:
    limits = need(facts.limits)
    size = need(limits.shm_size, "/dev/shm")
    if size < SHM_FAIL:
        code, severity = "shm.too_small", Severity.FAIL
    elif size < SHM_WARN:
        code, severity = "shm.small", Severity.WARN
    else:
        return
    yield Finding(
        code,
        severity,
        f"/dev/shm is only {human_bytes(size)} (NCCL needs about 1 GiB with several GPUs)",
        evidence=(f"statvfs(/dev/shm): {size} bytes, {need(limits.shm_free)} free",),
        data={"size": size},
    )


@cluster_check(
    "node.reach",
    "Every node answered the probe",
    codes={
        "node.timeout": "the node did not answer within the deadline",
        "node.no_python": "no usable Python interpreter on the node to run the probe",
        "node.probe_failed": "the probe ran but failed on the node",
        "node.bad_capture": "the node answered with something that is not a probe capture",
        "node.launch_failed": "the launcher (srun) could not start the probe on the node",
        "ssh.refused": "nothing listens on the node's SSH port (sshd down or another port)",
        "ssh.timeout": "the node's SSH port did not answer in time (down, firewalled, routed away)",
        "ssh.unreachable": "the network reports the node unreachable (no route, link down)",
        "ssh.unresolvable": "the node's name does not resolve on the controller",
        "ssh.auth_failed": "sshd refused every key the controller offered",
        "ssh.host_key_unknown": "the node's host key is not in known_hosts",
        "ssh.host_key_changed": "the node's host key differs from the one in known_hosts",
        "ssh.error": "the SSH connection failed for another reason",
    },
)
def node_reach(cluster: ClusterFacts) -> Iterator[Finding]:
    for name, failure in cluster.failures.items():
        node = cluster.inventory.get(name, Node(name, name))
        yield Finding(
            failure.code,
            Severity.FAIL,
            failure.summary,
            nodes=(name,),
            evidence=(failure.detail,) if failure.detail else (),
            fix=reach_fix(failure, node),
        )


def _target(node: Node) -> Words:
    port = ("-p", node.port) if node.port != 22 else ()
    user = f"{node.user}@" if node.user else ""
    return words(*port, f"{user}{node.address or node.name}")


def reach_fix(failure: NodeFailure, node: Node) -> Fix | None:
    """What to do about a node the controller could not probe."""
    host = node.address or node.name
    target = _target(node)
    fixes = {
        "ssh.refused": Fix(
            f"Start sshd on {node.name}, or point the inventory at the port it listens on.",
            (
                command("ssh {} sudo systemctl start ssh  # from a console", node.name),
                command("--ssh-port PORT"),
            ),
        ),
        "ssh.timeout": Fix(
            f"Check that {node.name} is up and that no firewall or route drops port {node.port}.",
            (command("ping -c1 {}", host), command("nc -vz -w3 {} {}", host, node.port)),
        ),
        "ssh.unreachable": Fix(
            f"Check the route and link to {host} from this machine.",
            (command("ip route get {}", host),),
        ),
        "ssh.unresolvable": Fix(
            f"Add {host} to DNS or /etc/hosts, or give its address in the hostfile or ssh_config.",
            (command("getent hosts {}", host),),
        ),
        "ssh.auth_failed": Fix(
            f"Install your public key on {node.name} (or name the right key with IdentityFile).",
            (command("ssh-copy-id {}", target),),
        ),
        "ssh.host_key_unknown": Fix(
            "Record the host key after checking its fingerprint, or let the doctor trust it on "
            "first use.",
            (
                command("ssh {} true  # check the fingerprint, answer yes", target),
                command("doctor preflight --accept-new-host-keys ..."),
            ),
        ),
        "ssh.host_key_changed": Fix(
            f"The host key of {host} changed: if {node.name} was reinstalled, remove the old key; "
            "otherwise treat it as a possible attack.",
            (command("ssh-keygen -R {}", host if node.port == 22 else f"[{host}]:{node.port}"),),
        ),
        "node.no_python": Fix(
            f"Install Python 3.8 or newer on {node.name}, or name it with --python.",
            commands(
                "apt-get install -y python3", "doctor preflight --python /path/to/python3 ..."
            ),
        ),
        "node.timeout": Fix(
            f"Something on {node.name} hangs (a stuck NFS mount, a driver call); raise --deadline "
            "to wait longer, or run 'doctor probe' there to see which part hangs.",
        ),
    }
    return fixes.get(failure.code)


CHECKS = [node_reach, shm_size]
