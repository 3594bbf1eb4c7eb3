"""`doctor checks list` and `doctor checks reference`: every check, from the registry."""

from __future__ import annotations

import sys

from doctor.cli.common import select_checks
from doctor.core.errors import EXIT_OK
from doctor.render.output import Format, Formatting


def checks_list(formatting: Formatting) -> int:
    """Every check with its id, scope, what it needs and the codes it can emit."""
    from doctor.render.reference import check_list_json, check_list_text

    specs = select_checks()
    text = check_list_json(specs) if formatting.fmt is Format.json else check_list_text(specs)
    sys.stdout.write(text)
    return EXIT_OK


def checks_reference() -> int:
    """Every check code with its meaning and fix, as Markdown (docs/checks.md is this output)."""
    from doctor.render.reference import render_reference

    sys.stdout.write(render_reference(select_checks()))
    return EXIT_OK
