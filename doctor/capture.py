"""Typed access to a probe's raw capture: every lookup is a value or a Missing with the reason."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from doctor.model import Missing, MissingKind

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
    err = entry.get("error") or {}
    kind = _KINDS.get(str(err.get("kind")), "failed")
    return Missing(f"{what}: {err.get('detail', 'no detail')}", kind)


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
        return int(self.raw["probe"].get("version", 0))

    def file(self, path: str) -> str | Missing:
        entry = self.raw.get("files", {}).get(path)
        if entry is None:
            return Missing(f"{path} was not captured", "unsupported")
        return entry["text"] if "text" in entry else _missing(entry, path)

    def dir(self, path: str) -> list[str] | Missing:
        entry = self.raw.get("dirs", {}).get(path)
        if entry is None:
            return Missing(f"{path} was not listed", "unsupported")
        return list(entry["entries"]) if "entries" in entry else _missing(entry, path)

    def link(self, path: str) -> str | Missing:
        entry = self.raw.get("links", {}).get(path)
        if entry is None:
            return Missing(f"{path} was not read", "unsupported")
        return entry["target"] if "target" in entry else _missing(entry, path)

    def command(self, name: str) -> CommandResult | Missing:
        """A command that ran (any exit code), or Missing when it could not run or timed out."""
        entry = self.raw.get("commands", {}).get(name)
        if entry is None:
            return Missing(f"command {name!r} was not run", "unsupported")
        if "rc" not in entry:
            argv0 = (entry.get("argv") or [name])[0]
            return _missing(entry, argv0)
        return CommandResult(
            tuple(entry.get("argv", ())),
            int(entry["rc"]),
            str(entry.get("stdout", "")),
            str(entry.get("stderr", "")),
            float(entry.get("seconds", 0.0)),
        )

    def value(self, name: str) -> Any:
        """An in-process value (None is a legitimate value), or Missing."""
        entry = self.raw.get("values", {}).get(name)
        if entry is None:
            return Missing(f"{name} was not captured", "unsupported")
        return entry["value"] if "value" in entry else _missing(entry, name)

    def paths(self, kind: str, prefix: str) -> list[str]:
        """Every captured path of one kind ("files", "dirs", "links") under a prefix, sorted."""
        return sorted(p for p in self.raw.get(kind, {}) if p.startswith(prefix))
