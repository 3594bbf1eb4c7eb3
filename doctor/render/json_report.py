"""The JSON report and the shipped schemas (doctor/schema/<name>.schema.json)."""

from __future__ import annotations

import json
from functools import cache
from importlib.resources import files
from typing import Any

from doctor.judge.report import Report


@cache
def schema(name: str = "report") -> dict[str, Any]:
    """A shipped JSON Schema: "report" (every report) or "explain" (doctor explain's document)."""
    loaded: dict[str, Any] = json.loads(
        files("doctor").joinpath(f"schema/{name}.schema.json").read_text()
    )
    return loaded


def render_json(report: Report) -> str:
    return json.dumps(report.to_json(), indent=2, sort_keys=False) + "\n"


def validate(document: dict[str, Any]) -> None:
    """Raise jsonschema.ValidationError when a report document breaks the shipped schema."""
    import jsonschema

    jsonschema.validate(document, schema())
