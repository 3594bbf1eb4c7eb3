"""librccl through the probe's NCCL child, for real: a stand-in librccl.so.1 (a MOCK of RCCL's
two entry points the child calls, built here with the C compiler: no ROCm here) in
$ROCM_PATH/lib is found, loaded, asked ncclGetVersion, and two nodes with different RCCLs get the
NCCL drift finding, naming RCCL."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from checks.versions import nccl_drift
from doctor.core.capture import Capture
from doctor.facts.nccl.libraries import NcclFacts
from doctor.facts.node import NodeFacts, parse_node
from doctor.judge.runner import run_checks
from tests import factkit as fk
from tests.conftest import run_probe

# RCCL's nccl.h (src/nccl.h.in): ncclResult_t ncclGetVersion(int*), ncclGetUniqueId(ncclUniqueId*)
# with a 128-byte id; the version code is NCCL's (2.21.5 → 22105), RCCL tracks NCCL's numbers.
STUB = """
#include <string.h>
const char rccl_banner[] = "RCCL version : %s";
int ncclGetVersion(int *version) { *version = %d; return 0; }
int ncclGetUniqueId(void *id) { memset(id, 0, 128); return 0; }
"""


def _node(tmp_path: Path, name: str, version: str) -> NodeFacts:
    major, minor, patch = (int(p) for p in version.split("."))
    lib = tmp_path / name / "rocm" / "lib"
    lib.mkdir(parents=True)
    source = lib / "stub.c"
    source.write_text(STUB % (version, major * 10000 + minor * 100 + patch))
    subprocess.run(
        ["cc", "-shared", "-fPIC", "-o", str(lib / "librccl.so.1"), str(source)], check=True
    )
    env = {**os.environ, "ROCM_PATH": str(lib.parent)}
    return parse_node(name, Capture(run_probe(env=env)))


def test_the_probe_asks_librccl_its_version_and_drift_names_rccl(tmp_path: Path) -> None:
    a = _node(tmp_path, "mi300x-1", "2.21.5")
    b = _node(tmp_path, "mi300x-2", "2.21.5")
    c = _node(tmp_path, "mi300x-3", "2.22.3")
    assert isinstance(a.nccl, NcclFacts)
    (lib,) = [x for x in a.nccl.libraries if x.rccl]
    assert lib.version == "2.21.5" and "rocm" in lib.sources
    (result,) = run_checks([nccl_drift], fk.cluster(a, b, c))
    findings = [f for f in result.findings if f.code == "drift.nccl"]
    assert findings and findings[0].nodes == ("mi300x-3",)
    assert "RCCL 2.22.3" in findings[0].summary
