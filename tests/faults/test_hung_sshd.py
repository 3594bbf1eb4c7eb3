"""A node whose sshd accepts TCP and never speaks (SIGSTOPped, overloaded): the fault matrix found
paramiko's traceback on the doctor's stderr and the reason "No existing session". A listening
socket that never accepts is the same thing to a client: the kernel completes the handshake."""

from __future__ import annotations

import socket
import time

from doctor.core.model import NodeFailure
from doctor.nodes.inventory import Node
from doctor.nodes.transport import SshOptions
from doctor.nodes.transport.ssh import SshTransport


def test_silent_sshd_is_a_timeout_in_one_line(capfd) -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        node = Node("silent", "127.0.0.1", listener.getsockname()[1])
        started = time.monotonic()
        with SshTransport(SshOptions(connect_timeout=1.0)) as t:
            result = t.execute(node, ["true"], b"", 5)
        elapsed = time.monotonic() - started
    assert isinstance(result, NodeFailure)
    assert result.code == "ssh.timeout", result
    assert "handshake timed out" in result.summary
    assert elapsed < 4, elapsed
    time.sleep(0.2)  # paramiko's transport thread logs as it ends
    err = capfd.readouterr().err
    assert "Traceback" not in err and "Exception" not in err, err
