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

from tests.cluster.netns import sh
from tests.explain.capture.bed import Nodes, save

SERVER = "198.18.11.2"


class Bed:
    """Client and server namespaces, a bridge, and an sshd on the server."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.cluster = Nodes("cxs", 11, 2)
        self.nodes = self.cluster.nodes
        self.sshd: subprocess.Popen[bytes] | None = None
        for key in ("hostkey", "otherhostkey", "userkey", "strangerkey"):
            sh("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(tmp / key))
        (tmp / "authorized_keys").write_text((tmp / "userkey.pub").read_text())
        (tmp / "sshd_config").write_text(
            f"ListenAddress {SERVER}\nPort 22\nHostKey {tmp / 'hostkey'}\n"
            f"PidFile {tmp / 'sshd.pid'}\n"
            f"AuthorizedKeysFile {tmp / 'authorized_keys'}\nPermitRootLogin yes\n"
            "PasswordAuthentication no\nKbdInteractiveAuthentication no\n"
            "StrictModes no\nUsePAM no\n"
            # A PATH without Open MPI, as a non-interactive shell on a badly set-up node gets.
            "SetEnv PATH=/nonexistent/bin\n"
        )
        Path("/run/sshd").mkdir(exist_ok=True)
        server = self.nodes[1]
        self.sshd = subprocess.Popen(
            server.exec_argv(["/usr/sbin/sshd", "-D", "-e", "-f", str(tmp / "sshd_config")]),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        time.sleep(1.0)
        host_pub = (tmp / "hostkey.pub").read_text().split()
        other_pub = (tmp / "otherhostkey.pub").read_text().split()
        (tmp / "known_hosts").write_text(f"{SERVER} {host_pub[0]} {host_pub[1]}\n")
        (tmp / "known_hosts_changed").write_text(f"{SERVER} {other_pub[0]} {other_pub[1]}\n")
        (tmp / "known_hosts_empty").write_text("")

    def ssh_opts(self, known: str, key: str = "userkey") -> list[str]:
        return [
            "-o",
            "BatchMode=yes",
            "-o",
            "ConnectTimeout=3",
            "-o",
            "StrictHostKeyChecking=yes",
            "-o",
            f"UserKnownHostsFile={self.tmp / known}",
            "-o",
            "GlobalKnownHostsFile=/dev/null",
            "-i",
            str(self.tmp / key),
            "-F",
            "/dev/null",
        ]

    def client(self, argv: list[str], timeout: float = 60) -> str:
        proc = self.nodes[0].run(argv, timeout=timeout)
        return proc.stdout + proc.stderr

    def close(self) -> None:
        if self.sshd is not None:
            self.sshd.send_signal(signal.SIGTERM)
            self.sshd.wait(timeout=10)
        self.cluster.close()


def main() -> None:
    """Every scenario, in order."""
    tmp = Path(tempfile.mkdtemp(prefix="cx-ssh-"))
    bed = Bed(tmp)
    try:
        ok = bed.client(["ssh", *bed.ssh_opts("known_hosts"), f"root@{SERVER}", "echo reached"])
        assert "reached" in ok, f"the test bed's ssh does not work: {ok}"
        save(
            __file__,
            "ssh-host-key-unknown.log",
            "ssh -o BatchMode=yes to a node missing from known_hosts",
            bed.client(["ssh", *bed.ssh_opts("known_hosts_empty"), f"root@{SERVER}", "true"]),
        )
        save(
            __file__,
            "ssh-host-key-changed.log",
            "ssh to a node whose known_hosts entry holds another key",
            bed.client(["ssh", *bed.ssh_opts("known_hosts_changed"), f"root@{SERVER}", "true"]),
        )
        save(
            __file__,
            "ssh-permission-denied.log",
            "ssh with a key the node does not authorize",
            bed.client(
                ["ssh", *bed.ssh_opts("known_hosts", "strangerkey"), f"root@{SERVER}", "true"]
            ),
        )
        save(
            __file__,
            "ssh-connection-refused.log",
            "ssh to a port where no sshd listens",
            bed.client(
                ["ssh", *bed.ssh_opts("known_hosts"), "-p", "2222", f"root@{SERVER}", "true"]
            ),
        )
        save(
            __file__,
            "ssh-unresolved.log",
            "ssh to a name that does not resolve",
            bed.client(["ssh", *bed.ssh_opts("known_hosts"), "root@nosuchnode.invalid", "true"]),
        )
        agent = "ssh " + " ".join(bed.ssh_opts("known_hosts"))
        mpirun = ["mpirun", "--allow-run-as-root", "-np", "1", "--mca", "plm_rsh_agent", agent]
        save(
            __file__,
            "mpi-unreachable-host.log",
            "mpirun -H 198.18.11.77 (no such host on the subnet)",
            bed.client([*mpirun, "-H", "198.18.11.77", "hostname"], timeout=120),
        )
        save(
            __file__,
            "mpi-orted-not-found.log",
            "mpirun to a node whose non-interactive PATH lacks orted",
            bed.client([*mpirun, "-H", SERVER, "hostname"], timeout=120),
        )
        save(
            __file__,
            "mpi-host-key-unknown.log",
            "mpirun with plain ssh to a node missing from known_hosts",
            bed.client(["mpirun", "--allow-run-as-root", "-np", "1", "-H", SERVER, "hostname"]),
        )
        save(
            __file__,
            "mpi-not-enough-slots.log",
            "mpirun -np 4 -H localhost:1",
            bed.client(
                ["mpirun", "--allow-run-as-root", "-np", "4", "-H", "localhost:1", "hostname"]
            ),
        )
    finally:
        bed.close()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    os.environ.setdefault("OMPI_MCA_plm_rsh_no_tree_spawn", "1")
    main()
