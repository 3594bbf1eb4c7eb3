"""Make real ssh and Open MPI launch failures against a real sshd in a network namespace.

Run by hand as root from the repository root: ``python tests/explain/capture/ssh_mpi_failures.py``.
Builds two namespaces on a bridge (198.18.11.1 runs the clients, 198.18.11.2 runs sshd with its
own host key and authorized_keys), then runs ssh and mpirun with bad keys, host keys, hosts and
PATH. Everything it made (namespaces, bridge, sshd, temp dir) is removed by name afterwards.
Output goes to tests/fixtures/logs/real/.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from tests.cluster.netns import Netns, sh, unique  # noqa: E402

OUT = Path(__file__).resolve().parents[2] / "fixtures" / "logs" / "real"
SERVER = "198.18.11.2"


def save(name: str, header: str, text: str) -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / name).write_text(f"# captured by tests/explain/capture/{Path(__file__).name}: {header}\n{text}")
    print(f"saved {name}")


class Bed:
    """Client and server namespaces, a bridge, and an sshd on the server."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.bridge = unique("cxsbr")
        self.links: list[str] = []
        self.nodes: list[Netns] = []
        self.sshd: subprocess.Popen[bytes] | None = None
        sh("ip", "link", "add", self.bridge, "type", "bridge")
        sh("ip", "link", "set", self.bridge, "up")
        for i in (1, 2):
            ns = Netns(unique(f"cxs{i}"))
            self.nodes.append(ns)
            host_end = unique(f"cxsh{i}")
            self.links.append(host_end)
            sh("ip", "link", "add", host_end, "type", "veth", "peer", "name", "eth0", "netns", ns.name)
            sh("ip", "link", "set", host_end, "master", self.bridge, "up")
            ns.ip("addr", "add", f"198.18.11.{i}/24", "dev", "eth0")
            ns.ip("link", "set", "eth0", "up")
        for key in ("hostkey", "otherhostkey", "userkey", "strangerkey"):
            sh("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(tmp / key))
        (tmp / "authorized_keys").write_text((tmp / "userkey.pub").read_text())
        (tmp / "sshd_config").write_text(
            f"ListenAddress {SERVER}\nPort 22\nHostKey {tmp / 'hostkey'}\nPidFile {tmp / 'sshd.pid'}\n"
            f"AuthorizedKeysFile {tmp / 'authorized_keys'}\nPermitRootLogin yes\n"
            "PasswordAuthentication no\nKbdInteractiveAuthentication no\nStrictModes no\nUsePAM no\n"
            # A PATH without Open MPI, as a non-interactive shell on a badly set-up node gets.
            "SetEnv PATH=/nonexistent/bin\n"
        )
        Path("/run/sshd").mkdir(exist_ok=True)
        server = self.nodes[1]
        self.sshd = subprocess.Popen(server.exec_argv(["/usr/sbin/sshd", "-D", "-e", "-f", str(tmp / "sshd_config")]),
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
        time.sleep(1.0)
        host_pub = (tmp / "hostkey.pub").read_text().split()
        other_pub = (tmp / "otherhostkey.pub").read_text().split()
        (tmp / "known_hosts").write_text(f"{SERVER} {host_pub[0]} {host_pub[1]}\n")
        (tmp / "known_hosts_changed").write_text(f"{SERVER} {other_pub[0]} {other_pub[1]}\n")
        (tmp / "known_hosts_empty").write_text("")

    def ssh_opts(self, known: str, key: str = "userkey") -> list[str]:
        return ["-o", "BatchMode=yes", "-o", "ConnectTimeout=3", "-o", "StrictHostKeyChecking=yes",
                "-o", f"UserKnownHostsFile={self.tmp / known}", "-o", "GlobalKnownHostsFile=/dev/null",
                "-i", str(self.tmp / key), "-F", "/dev/null"]  # fmt: skip

    def client(self, argv: list[str], timeout: float = 60) -> str:
        proc = self.nodes[0].run(argv, timeout=timeout)
        return proc.stdout + proc.stderr

    def close(self) -> None:
        if self.sshd is not None:
            self.sshd.send_signal(signal.SIGTERM)
            self.sshd.wait(timeout=10)
        for link in self.links:
            sh("ip", "link", "delete", link, check=False)
        for ns in self.nodes:
            ns.delete()
        sh("ip", "link", "delete", self.bridge, check=False)


def main() -> None:
    """Every scenario, in order."""
    tmp = Path(tempfile.mkdtemp(prefix="cx-ssh-"))
    bed = Bed(tmp)
    try:
        ok = bed.client(["ssh", *bed.ssh_opts("known_hosts"), f"root@{SERVER}", "echo reached"])
        assert "reached" in ok, f"the test bed's ssh does not work: {ok}"
        save("ssh-host-key-unknown.log", "ssh -o BatchMode=yes to a node missing from known_hosts",
             bed.client(["ssh", *bed.ssh_opts("known_hosts_empty"), f"root@{SERVER}", "true"]))  # fmt: skip
        save("ssh-host-key-changed.log", "ssh to a node whose known_hosts entry holds another key",
             bed.client(["ssh", *bed.ssh_opts("known_hosts_changed"), f"root@{SERVER}", "true"]))  # fmt: skip
        save("ssh-permission-denied.log", "ssh with a key the node does not authorize",
             bed.client(["ssh", *bed.ssh_opts("known_hosts", "strangerkey"), f"root@{SERVER}", "true"]))  # fmt: skip
        save("ssh-connection-refused.log", "ssh to a port where no sshd listens",
             bed.client(["ssh", *bed.ssh_opts("known_hosts"), "-p", "2222", f"root@{SERVER}", "true"]))  # fmt: skip
        save("ssh-unresolved.log", "ssh to a name that does not resolve",
             bed.client(["ssh", *bed.ssh_opts("known_hosts"), "root@nosuchnode.invalid", "true"]))  # fmt: skip
        agent = "ssh " + " ".join(bed.ssh_opts("known_hosts"))
        mpirun = ["mpirun", "--allow-run-as-root", "-np", "1", "--mca", "plm_rsh_agent", agent]
        save("mpi-unreachable-host.log", "mpirun -H 198.18.11.77 (no such host on the subnet)",
             bed.client([*mpirun, "-H", "198.18.11.77", "hostname"], timeout=120))  # fmt: skip
        save("mpi-orted-not-found.log", "mpirun to a node whose non-interactive PATH lacks orted",
             bed.client([*mpirun, "-H", SERVER, "hostname"], timeout=120))  # fmt: skip
        save("mpi-host-key-unknown.log", "mpirun with plain ssh to a node missing from known_hosts",
             bed.client(["mpirun", "--allow-run-as-root", "-np", "1", "-H", SERVER, "hostname"]))  # fmt: skip
        save("mpi-not-enough-slots.log", "mpirun -np 4 -H localhost:1",
             bed.client(["mpirun", "--allow-run-as-root", "-np", "4", "-H", "localhost:1", "hostname"]))  # fmt: skip
    finally:
        bed.close()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    os.environ.setdefault("OMPI_MCA_plm_rsh_no_tree_spawn", "1")
    main()
