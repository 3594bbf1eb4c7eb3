"""The passwordless-SSH mesh: what each node's OpenSSH client said when asked to reach each peer."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from doctor.facts.coverage import Coverage

# OpenSSH client messages (ssh.c, sshconnect.c, sshconnect2.c) and what they mean, first match wins.
_PATTERNS: tuple[tuple[str, str], ...] = (
    ("REMOTE HOST IDENTIFICATION HAS CHANGED", "host_key_changed"),
    ("Host key verification failed", "host_key_unknown"),
    ("Permission denied", "publickey_denied"),
    ("Could not resolve hostname", "unresolvable"),
    ("Connection refused", "refused"),
    ("timed out", "timeout"),
    ("No route to host", "unreachable"),
    ("Network is unreachable", "unreachable"),
    ("Invalid argument", "unreachable"),  # connect() through a local blackhole route
    ("kex_exchange_identification", "dropped"),
    ("Connection closed by", "dropped"),
    ("Connection reset by", "dropped"),
)

OK = "ok"


@dataclass(frozen=True)
class MeshLink:
    """One attempt ``source -> target``; ``status`` is ``ok`` or the kind of failure."""

    source: str
    target: str
    status: str
    message: str = ""  # the client's last stderr line, or why there was no attempt
    seconds: float | None = None


@dataclass(frozen=True)
class SshMesh:
    """Every attempted link; sources that could not run the attempts are in ``not_run``. A link
    that failed was tried once more, alone, after the stage: ``retried`` holds those attempts."""

    nodes: tuple[str, ...]
    links: tuple[MeshLink, ...]
    not_run: dict[str, str] = field(default_factory=dict)
    coverage: Coverage | None = None  # which pairs were tried (None: all)
    retried: tuple[MeshLink, ...] = ()

    def retry_of(self, link: MeshLink) -> MeshLink | None:
        return next(
            (x for x in self.retried if (x.source, x.target) == (link.source, link.target)), None
        )

    def failed(self) -> list[MeshLink]:
        """The failures that were not undone by the second attempt (or had none)."""
        return [
            link
            for link in self.links
            if link.status != OK and getattr(self.retry_of(link), "status", None) != OK
        ]

    def passed_alone(self) -> list[tuple[MeshLink, MeshLink]]:
        """Failures the second attempt, alone, did not repeat: (first, second)."""
        out = []
        for link in self.links:
            again = self.retry_of(link) if link.status != OK else None
            if again is not None and again.status == OK:
                out.append((link, again))
        return out

    def status(self, source: str, target: str) -> str | None:
        """The pair's verdict: the second attempt's where there was one."""
        first = next((x for x in self.links if (x.source, x.target) == (source, target)), None)
        if first is None:
            return None
        again = self.retry_of(first) if first.status != OK else None
        return (again or first).status

    def to_section(self) -> dict[str, Any]:
        """The report's ``ssh_mesh``: nodes, a row per source (target -> status), and failures."""
        matrix: dict[str, dict[str, str]] = {s: {} for s in self.nodes}
        for link in self.links:
            matrix[link.source][link.target] = self.status(link.source, link.target) or ""
        return {
            "nodes": list(self.nodes),
            "matrix": matrix,
            "failures": [
                {"source": x.source, "target": x.target, "status": x.status, "message": x.message}
                for x in self.failed()
            ],
            "retried": [
                {
                    "source": x.source,
                    "target": x.target,
                    "status": x.status,
                    "message": x.message,
                    "seconds": x.seconds,
                }
                for x in self.retried
            ],
            "not_run": dict(self.not_run),
            "coverage": self.coverage.to_json() if self.coverage else None,
        }


def classify(rc: int, stderr: str) -> tuple[str, str]:
    """An ``ssh ... true`` attempt's status and the line that explains it."""
    lines = [ln.strip() for ln in stderr.replace("\r", "").splitlines() if ln.strip()]
    if rc == 0:
        return OK, ""
    for needle, status in _PATTERNS:
        for line in lines:
            if needle in line:
                return status, line
    return "failed", lines[-1] if lines else f"ssh exit status {rc}"


def link_of(source: str, entry: dict[str, Any]) -> MeshLink | None:
    """One attempt as the mesh agent reported it, classified; None if the report is malformed."""
    target, rc, error = entry.get("target"), entry.get("rc"), entry.get("error")
    seconds = entry.get("seconds")
    seconds = float(seconds) if isinstance(seconds, (int, float)) else None
    if not isinstance(target, str):
        return None
    if isinstance(error, dict):
        status = "timeout" if error.get("kind") == "timeout" else "no_ssh_client"
        return MeshLink(source, target, status, str(error.get("detail", "")), seconds)
    if not isinstance(rc, int):
        return None
    status, message = classify(rc, str(entry.get("stderr", "")))
    return MeshLink(source, target, status, message, seconds)
