"""The JSON report and its shipped schema."""

from __future__ import annotations

import json
from functools import cache
from importlib.resources import files
from typing import Any

from doctor.report import Report


@cache
def schema() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(
        files("doctor").joinpath("schema/report.schema.json").read_text()
    )
    return loaded


def render_json(report: Report) -> str:
    return json.dumps(report.to_json(), indent=2, sort_keys=False) + "\n"


def validate(document: dict[str, Any]) -> None:
    """Raise jsonschema.ValidationError when a report document breaks the shipped schema."""
    import jsonschema

    jsonschema.validate(document, schema())
