"""Typed access to a probe's raw capture: every lookup is a value or a Missing with the reason."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from doctor.core.model import Missing, MissingKind

_KINDS: dict[str, MissingKind] = {
    "absent": "absent",
    "unreadable": "unreadable",
    "failed": "failed",
    "timeout": "timeout",
    "unsupported": "unsupported",
}


class CaptureError(ValueError):
    """The document is not a probe capture at all (corrupt file, wrong JSON)."""


@dataclass(frozen=True)
class CommandResult:
    argv: tuple[str, ...]
    rc: int
    stdout: str
    stderr: str
    seconds: float


def _missing(entry: dict[str, Any], what: str) -> Missing:
    err = entry.get("error")
    if not isinstance(err, dict):
        return Missing(f"{what}: no detail", "failed")
    kind = _KINDS.get(str(err.get("kind")), "failed")
    return Missing(f"{what}: {err.get('detail', 'no detail')}", kind)


def _corrupt(what: str) -> Missing:
    return Missing(f"{what}: corrupt entry in the capture", "failed")


class Capture:
    """One node's raw capture, as the probe wrote it."""

    def __init__(self, raw: dict[str, Any]) -> None:
        if not isinstance(raw, dict) or not isinstance(raw.get("probe"), dict):
            raise CaptureError("not a cluster-doctor probe capture (no 'probe' header)")
        for key in ("files", "dirs", "links", "commands", "values"):
            if not isinstance(raw.get(key, {}), dict):
                raise CaptureError(f"corrupt probe capture: '{key}' is not an object")
        self.raw = raw

    @property
    def probe_version(self) -> int:
        version = self.raw["probe"].get("version", 0)
        return version if isinstance(version, int) else 0

    # A hand-edited or damaged capture may hold anything where an entry should be: each lookup
    # checks the shape it relies on, so a parser sees a value of the right type or a Missing.
    def file(self, path: str) -> str | Missing:
        entry = self.raw.get("files", {}).get(path)
        if entry is None:
            return Missing(f"{path} was not captured", "unsupported")
        if not isinstance(entry, dict) or not isinstance(entry.get("text", ""), str):
            return _corrupt(path)
        return entry["text"] if "text" in entry else _missing(entry, path)

    def dir(self, path: str) -> list[str] | Missing:
        entry = self.raw.get("dirs", {}).get(path)
        if entry is None:
            return Missing(f"{path} was not listed", "unsupported")
        if not isinstance(entry, dict) or not isinstance(entry.get("entries", []), list):
            return _corrupt(path)
        if "entries" not in entry:
            return _missing(entry, path)
        return [str(e) for e in entry["entries"]]

    def link(self, path: str) -> str | Missing:
        entry = self.raw.get("links", {}).get(path)
        if entry is None:
            return Missing(f"{path} was not read", "unsupported")
        if not isinstance(entry, dict) or not isinstance(entry.get("target", ""), str):
            return _corrupt(path)
        return entry["target"] if "target" in entry else _missing(entry, path)

    def command(self, name: str) -> CommandResult | Missing:
        """A command that ran (any exit code), or Missing when it could not run or timed out."""
        entry = self.raw.get("commands", {}).get(name)
        if entry is None:
            return Missing(f"command {name!r} was not run", "unsupported")
        if not isinstance(entry, dict):
            return _corrupt(f"command {name!r}")
        argv = entry.get("argv")
        argv = tuple(str(a) for a in argv) if isinstance(argv, list) else ()
        if "rc" not in entry:
            return _missing(entry, argv[0] if argv else name)
        try:
            rc, seconds = int(entry["rc"]), float(entry.get("seconds", 0.0))
        except (TypeError, ValueError, OverflowError):
            return _corrupt(f"command {name!r}")
        return CommandResult(
            argv, rc, str(entry.get("stdout", "")), str(entry.get("stderr", "")), seconds
        )

    def value(self, name: str) -> Any:
        """An in-process value (None is a legitimate value), or Missing."""
        entry = self.raw.get("values", {}).get(name)
        if entry is None:
            return Missing(f"{name} was not captured", "unsupported")
        if not isinstance(entry, dict):
            return _corrupt(name)
        return entry["value"] if "value" in entry else _missing(entry, name)

    def mark_asked(self, sent: float, received: float) -> None:
        """Keep when the controller asked for this capture and when the answer arrived, on the
        controller's clock: a node clock read during the probe lies between the two if the
        clocks agree, however long the node took to answer."""
        self.raw["asked"] = {"sent": sent, "received": received}

    @property
    def asked(self) -> tuple[float, float] | None:
        """(sent, received) from mark_asked, kept in saved captures too; None where not kept."""
        entry = self.raw.get("asked")
        try:
            return float(entry["sent"]), float(entry["received"])  # type: ignore[index]
        except (KeyError, TypeError, ValueError):
            return None

    def paths(self, kind: str, prefix: str) -> list[str]:
        """Every captured path of one kind ("files", "dirs", "links") under a prefix, sorted."""
        return sorted(p for p in self.raw.get(kind, {}) if p.startswith(prefix))
