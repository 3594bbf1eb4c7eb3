"""Take the stored real reports again: ``python -m tests.render.capture [NAME ...]`` (root).

Each scenario of tests/render/reports.py runs on a fresh 3-node test bed, and its JSON report
replaces tests/fixtures/reports/NAME.json. Run it when the report's schema changes.
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

from tests.cluster.harness import make_cluster
from tests.render.reports import FIXTURES, SCENARIOS, preflight


def capture(name: str) -> Path:
    """Run one scenario and store its report; the file written."""
    with (
        tempfile.TemporaryDirectory(prefix="doctor-capture-") as tmp,
        make_cluster(3, Path(tmp)) as c,
    ):
        SCENARIOS[name](c)
        document = preflight(c)
    path = FIXTURES / "reports" / f"{name}.json"
    path.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
    return path


if __name__ == "__main__":
    for name in sys.argv[1:] or SCENARIOS:
        print(capture(name))
