"""`doctor topo`: --input files, formats, exit codes, and a local run on this GPU-less machine."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from doctor.cli.main import main
from doctor.facts.topo.smi_text import parse_topo_text
from tests.topo.sysfs_tree import FIXTURES, tree_capture

SMI = FIXTURES / "smi"


def doctor(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def test_json_from_saved_output(capsys: pytest.CaptureFixture[str]) -> None:
    path = SMI / "hgx-h100-nvswitch-nic-legend.txt"
    rc, out, _ = doctor(capsys, "topo", "--input", str(path), "--format", "json")
    assert rc == 0
    report = json.loads(out)
    assert report["gpus"] == 8
    assert report["nics"] == [f"mlx5_{i}" for i in range(10)]
    assert report["links"]["GPU0-GPU1"] == "NV18"
    assert report["links"]["GPU0-mlx5_0"] == "PIX"
    assert report["links"]["GPU7-mlx5_0"] == "SYS"
    assert len(report["links"]) == 18 * 17 // 2
    assert report["closest_nic"]["GPU3"] == {
        "nics": ["mlx5_3"],
        "label": "PIX",
        "nccl_path": "PIX",
        "rdma": True,
        "gdr": True,
    }


def test_text_report_matches_stored_output(capsys: pytest.CaptureFixture[str]) -> None:
    path = SMI / "dual-socket-pcie-4gpu-nic-legend.txt"
    rc, out, _ = doctor(capsys, "topo", "-i", str(path))
    assert rc == 0
    expected = (FIXTURES / "expected" / "dual-socket-pcie-4gpu.txt").read_text()
    assert out.replace(str(path), "<FILE>") == expected


def test_plain_export_reads_back(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = SMI / "dgx1-v100-cube-mesh-old-driver-spaces.txt"
    rc, out, _ = doctor(capsys, "topo", "-i", str(path), "-f", "plain")
    assert rc == 0
    assert parse_topo_text(out) == parse_topo_text(path.read_text())
    saved = tmp_path / "export.txt"
    saved.write_text(out)
    rc, again, _ = doctor(capsys, "topo", "-i", str(saved), "-f", "json")
    rc0, first, _ = doctor(capsys, "topo", "-i", str(path), "-f", "json")
    assert (rc, rc0) == (0, 0)
    assert json.loads(again)["links"] == json.loads(first)["links"]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("hello\n", "no topology matrix found"),
        ("\tGPU0\tGPU1\nGPU0\t X \tZZZ\nGPU1\tZZZ\t X \n", "'ZZZ' is not a topology label"),
    ],
)
def test_garbage_input_is_one_line_exit_2(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, content: str, message: str
) -> None:
    path = tmp_path / "topo.txt"
    path.write_text(content)
    rc, out, err = doctor(capsys, "topo", "--input", str(path))
    assert rc == 2
    assert out == ""
    assert err.count("\n") == 1 and message in err
    assert "Traceback" not in err


def test_unreadable_input_is_exit_2(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    rc, _, err = doctor(capsys, "topo", "--input", str(tmp_path / "nope.txt"))
    assert rc == 2
    assert "No such file or directory" in err
    rc, _, err = doctor(capsys, "topo", "--input", str(tmp_path))
    assert rc == 2


def test_local_node_without_gpu(capsys: pytest.CaptureFixture[str]) -> None:
    # This machine has no NVIDIA GPU (and CI's has none either): a clear report, exit 0.
    rc, out, err = doctor(capsys, "topo", "--deadline", "10")
    assert rc == 0, err
    assert "no NVIDIA GPU on" in out
    rc, out, _ = doctor(capsys, "topo", "-f", "json", "--deadline", "10")
    report = json.loads(out)
    assert (rc, report["gpus"], report["links"]) == (0, 0, {})
    assert report["source"] == "sysfs"
    rc, _, err = doctor(capsys, "topo", "-f", "plain", "--deadline", "10")
    assert rc == 2 and "no NVIDIA GPU" in err


def test_wide_matrix_is_never_squeezed(capsys: pytest.CaptureFixture[str]) -> None:
    path = SMI / "hgx-h100-nvswitch-nic-legend.txt"
    rc, out, _ = doctor(capsys, "topo", "-i", str(path))
    assert rc == 0
    assert "…" not in out
    assert out.count("NV18") == 8 * 7
    assert "GPU NUMA ID" in out


def test_input_may_be_a_collected_capture(capsys: pytest.CaptureFixture[str]) -> None:
    path = FIXTURES / "sysfs" / "vm-virtio.capture.json"
    rc, out, _ = doctor(capsys, "topo", "--input", str(path), "-f", "json")
    report = json.loads(out)
    assert (rc, report["node"], report["gpus"], report["nics"]) == (
        0,
        "vm-virtio.capture",
        0,
        ["eth0"],
    )


def test_broken_capture_is_exit_2(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    for content in ('{"probe": 3', '{"files": {}}'):
        path = tmp_path / "node.json"
        path.write_text(content)
        rc, _, err = doctor(capsys, "topo", "--input", str(path))
        assert rc == 2 and "not a probe capture" in err and "Traceback" not in err


def test_a_capture_shows_its_ports_rates_counters_and_gpu_vitals(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A saved capture: the written HGX tree's HCAs (one port trained at 2X, with link-downed
    events) and the real H100 capture's `nvidia-smi -q -x` as the node's GPU report."""
    raw = tree_capture("hgx-8gpu-nvswitch.tree")
    hca = raw["dirs"]["/sys/class/infiniband"]["entries"][1]
    port = f"/sys/class/infiniband/{hca}/ports/1"
    raw["files"][f"{port}/rate"] = {"text": "200 Gb/sec (2X NDR)\n"}
    raw["dirs"][f"{port}/counters"] = {"entries": ["link_downed", "symbol_error"]}
    raw["files"][f"{port}/counters/link_downed"] = {"text": "14\n"}
    raw["files"][f"{port}/counters/symbol_error"] = {"text": "0\n"}
    xml = (FIXTURES.parent / "gpu" / "h100" / "nvidia-smi-q.xml").read_text()
    raw["commands"]["nvidia-smi:xml"] = {"argv": ["nvidia-smi", "-q", "-x"], "rc": 0, "stdout": xml}
    path = tmp_path / "gpu1.json"
    path.write_text(json.dumps(raw))
    rc, out, _ = doctor(capsys, "topo", "-i", str(path))
    assert rc == 0
    lines = out.splitlines()
    shown = next(line for line in lines if line.strip().startswith(f"{hca}/1"))
    assert "200 Gb/s (2X NDR)" in shown and "link_downed 14" in shown
    assert "symbol_error" not in shown  # zero: not an error
    gpu = lines[lines.index("GPUs (temperature, margin to slowdown, power cap, firmware):") + 1]
    assert "32 °C, 57 °C to slowdown, 700 W of 700 W" in gpu and "GSP 580.159.04" in gpu
    rc, out, _ = doctor(capsys, "topo", "-i", str(path), "-f", "json")
    report = json.loads(out)
    degraded = next(p for p in report["ports"] if p["port"] == f"{hca}/1")
    assert (degraded["width"], degraded["speed"], degraded["errors"]) == (
        2,
        "NDR",
        {"link_downed": 14},
    )
    assert report["gpu_vitals"][0]["slowdown_margin"] == 57
