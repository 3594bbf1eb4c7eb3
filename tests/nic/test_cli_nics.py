"""`doctor nics` as users run it, inside a namespace with a known layout."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator

import pytest

from doctor.render.json_report import validate
from tests.cluster.netns import Netns, netns
from tests.nic.scenarios import no_dad, scenario_env

pytestmark = pytest.mark.cluster


@pytest.fixture(scope="module")
def node() -> Iterator[Netns]:
    with netns("nicl") as ns:
        no_dad(ns)
        ns.add_veth_pair("vethA", "vethB")
        ns.add_nic("eth0", "198.18.1.1/24")
        yield ns


def doctor(ns: Netns, *args: str, **variables: str) -> subprocess.CompletedProcess[str]:
    return ns.run(
        [sys.executable, "-m", "doctor", *args],
        env=scenario_env(NO_COLOR="1", **variables),
        timeout=120,
    )


def test_export_evals_in_a_shell(node: Netns) -> None:
    proc = doctor(node, "nics", "--export")
    assert proc.returncode == 0, proc.stderr
    script = proc.stdout + 'printf "%s|%s|%s" "$NCCL_SOCKET_IFNAME" "$GLOO_SOCKET_IFNAME" '
    script += '"$OMPI_MCA_btl_tcp_if_include"\n'
    shell = subprocess.run(["bash", "-c", script], capture_output=True, text=True, check=True)
    assert shell.stdout == "=eth0|eth0|eth0"
    assert "# horovodrun --network-interfaces eth0" in proc.stdout
    assert "--mca btl_tcp_if_include eth0" in proc.stdout


def test_json_carries_prediction_library_and_recommendation(node: Netns) -> None:
    proc = doctor(node, "nics", "--format", "json")
    assert proc.returncode in (0, 1), proc.stderr
    document = json.loads(proc.stdout)
    validate(document)
    (entry,) = document["nics"]["nodes"].values()
    assert entry["nccl"]["bootstrap"]["interface"] == "eth0"
    assert entry["nccl"]["bootstrap"]["address"] == "198.18.1.1"
    assert entry["nccl"]["library"]["bootstrap"]["interface"] == "eth0"
    assert entry["nccl"]["library"]["agrees"] is True
    assert entry["gloo"]["interface"] is not None
    assert entry["recommendation"]["NCCL_SOCKET_IFNAME"] == "=eth0"
    assert {f["code"] for f in document["findings"]} >= {"nccl.socket.link_local"}


def test_text_table_marks_the_users(node: Netns) -> None:
    proc = doctor(node, "nics")
    assert proc.returncode in (0, 1), proc.stderr
    eth0 = next(line for line in proc.stdout.splitlines() if line.strip().startswith("eth0"))
    assert "NCCL" in eth0 and "*recommended" in eth0 and "198.18.1.1/24" in eth0
    assert "export NCCL_SOCKET_IFNAME==eth0" in proc.stdout


def test_malformed_variables_are_findings_not_crashes(node: Netns) -> None:
    proc = doctor(
        node,
        "nics",
        "-f",
        "json",
        NCCL_SOCKET_IFNAME="=^eth0",
        GLOO_SOCKET_IFNAME=",,",
        TP_SOCKET_IFNAME="nope",
    )
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    codes = {f["code"] for f in json.loads(proc.stdout)["findings"]}
    assert {"nccl.env.malformed", "gloo.env.malformed", "tp.env.no_match"} <= codes


def test_preflight_report_has_the_nics_section(node: Netns) -> None:
    proc = doctor(node, "preflight", "-f", "json")
    assert proc.returncode in (0, 1), proc.stderr
    nics = json.loads(proc.stdout)["nics"]
    assert nics["recommendation"]["GLOO_SOCKET_IFNAME"] == "eth0"
