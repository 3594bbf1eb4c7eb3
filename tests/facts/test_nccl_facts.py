"""NCCL facts from real captures and from the probe run live against the real libnccl."""

from __future__ import annotations

import ctypes
import json
import subprocess
import sys
from pathlib import Path

from capturekit import raw_capture

from doctor.core.capture import Capture, CommandResult
from doctor.core.model import Missing
from doctor.facts.nccl.libraries import MARK, decode_version, parse_call, parse_conf, parse_nccl
from doctor.stages import probe

WHEEL_NCCL = (
    "/root/.pyenv/versions/3.11.7/lib/python3.11/site-packages/nvidia/nccl/lib/libnccl.so.2"
)


def load(name: str) -> Capture:
    return Capture(raw_capture(name))


def wheel_libnccl() -> Path:
    """The libnccl.so.2 of the nvidia-nccl-cu12 wheel installed for this interpreter."""
    import nvidia.nccl  # the wheel is a test dependency (pyproject [test])

    for folder in nvidia.nccl.__path__:
        lib = Path(folder) / "lib" / "libnccl.so.2"
        if lib.is_file():
            return lib
    raise AssertionError("nvidia-nccl-cu12 is installed but has no lib/libnccl.so.2")


def test_decode_version_both_encodings() -> None:
    assert decode_version(23203) == "2.32.3"
    assert decode_version(21903) == "2.19.3"
    assert decode_version(2804) == "2.8.4"  # before 2.9: X*1000 + Y*100 + Z


def test_real_capture_finds_the_wheel_library() -> None:
    facts = parse_nccl(load("cpu-torch-wheel"))
    assert [lib.path for lib in facts.libraries] == [WHEEL_NCCL]
    lib = facts.libraries[0]
    assert lib.sources == ("wheel",)
    assert lib.version == "2.32.3"
    assert lib.cuda == "12.9"
    assert isinstance(lib.unique_id_hex, str) and len(lib.unique_id_hex) == 256
    assert "NCCL INFO Bootstrap: Using" in lib.debug_log
    assert MARK not in lib.debug_log
    # torch 2.13.0+cpu: no NCCL at all; no LD_LIBRARY_PATH and no ld.so cache entry.
    assert facts.torch_pick is None
    assert facts.loader_pick is None
    assert facts.net_plugins == ()
    assert facts.conf_files == ()


def test_real_capture_with_ld_library_path_plugin_and_conf_file() -> None:
    facts = parse_nccl(load("cpu-ld-library-path-conf"))
    (lib,) = facts.libraries  # found twice, one real file
    assert lib.sources == ("LD_LIBRARY_PATH", "wheel")
    assert facts.loader_pick == WHEEL_NCCL
    assert facts.net_plugins == ("/tmp/doctor-fixture/plugins/libnccl-net-fixture.so",)
    # NCCL reads $NCCL_CONF_FILE instead of ~/.nccl.conf, then /etc/nccl.conf (absent here).
    (conf,) = facts.conf_files
    assert conf.role == "NCCL_CONF_FILE"
    assert conf.settings == (("NCCL_SOCKET_IFNAME", "eth0"), ("NCCL_IB_DISABLE", "1"))
    assert "NCCL_SOCKET_IFNAME set by environment to eth0" in lib.debug_log


def test_live_probe_reports_what_ncclGetVersion_says() -> None:
    lib = wheel_libnccl()
    code = ctypes.c_int(0)
    assert ctypes.CDLL(str(lib)).ncclGetVersion(ctypes.byref(code)) == 0
    facts = live_nccl()
    found = facts.library(str(lib.resolve()))
    assert found is not None, [x.path for x in facts.libraries]
    assert found.version == decode_version(code.value)
    assert isinstance(found.unique_id_hex, str)
    assert bytes.fromhex(found.unique_id_hex)[8:10] == b"\x02\x00"  # AF_INET, little-endian


def test_probe_survives_a_library_that_is_not_one(tmp_path: Path, monkeypatch) -> None:
    (tmp_path / "libnccl.so.2").write_text("not an ELF file\n")
    monkeypatch.setenv("LD_LIBRARY_PATH", str(tmp_path))
    facts = live_nccl()
    bad = facts.library(str(tmp_path / "libnccl.so.2"))
    assert bad is not None
    assert isinstance(bad.version, Missing) and "OSError" in bad.version.reason
    assert isinstance(bad.unique_id_hex, Missing)
    assert facts.loader_pick == str(tmp_path / "libnccl.so.2")


def live_nccl():
    """Run the probe's env and NCCL sections here, now, and parse them."""
    p = probe.Probe(dict(probe.DEFAULT_SPEC))
    probe.collect_env(p)  # LD_LIBRARY_PATH comes from the env section
    probe.collect_nccl(p)
    return parse_nccl(Capture(p.to_json()))


def _child(stdout: str, rc: int = 0, stderr: str = "") -> CommandResult:
    return CommandResult(("python",), rc, stdout, stderr, 0.1)


def test_parse_call_child_that_died_names_the_reason() -> None:
    call = parse_call(_child("NCCL INFO something\n", 139, "Segmentation fault\n"), "/x.so")
    assert isinstance(call.version, Missing) and "Segmentation fault" in call.version.reason
    assert call.debug_log == "NCCL INFO something"


def test_parse_call_falls_back_to_the_banner() -> None:
    out = MARK + json.dumps({"banner": "NCCL version 2.18.1+cuda12.1", "error": "OSError: x"})
    call = parse_call(_child(out), "/x.so")
    assert (call.version, call.cuda) == ("2.18.1", "12.1")
    assert isinstance(call.unique_id_hex, Missing)


def test_parse_call_timeout_is_missing() -> None:
    call = parse_call(Missing("python: no answer within 4.0s", "timeout"), "/x.so")
    assert isinstance(call.version, Missing) and call.version.kind == "timeout"


def test_parse_conf_skips_comments_and_junk() -> None:
    text = "# c\n\nNCCL_IB_HCA = mlx5_0\nnot a setting\n=x\nNCCL_P2P_LEVEL=NVL\n"
    assert parse_conf(text) == (("NCCL_IB_HCA", "mlx5_0"), ("NCCL_P2P_LEVEL", "NVL"))


def test_snippet_runs_on_its_own() -> None:
    """The child program is valid Python and prints exactly one marker line."""
    out = subprocess.run(
        [sys.executable, "-I", "-S", "-c", probe.NCCL_SNIPPET, str(wheel_libnccl()), MARK],
        capture_output=True,
        text=True,
        timeout=20,
        check=True,
    ).stdout
    assert sum(line.startswith(MARK) for line in out.splitlines()) == 1


def test_parse_call_cut_short_marker_line_is_a_dead_child() -> None:
    out = "NCCL INFO Bootstrap: Using eth0:10.0.0.1<0>\n" + MARK + '{"banner": "NCCL vers'
    call = parse_call(_child(out, -9), "/x.so")
    assert isinstance(call.version, Missing) and "exit code -9" in call.version.reason
    assert call.debug_log == "NCCL INFO Bootstrap: Using eth0:10.0.0.1<0>"


def test_real_netns_without_interfaces_fails_the_unique_id() -> None:
    """unshare -n: NCCL's own bootstrap finds no interface, and the log says so."""
    (lib,) = parse_nccl(load("netns-no-interface")).libraries
    assert lib.version == "2.32.3"
    assert isinstance(lib.unique_id_hex, Missing)
    assert lib.unique_id_hex.reason.endswith("ncclGetUniqueId returned 5 (ncclInvalidUsage)")
    assert "NCCL WARN Bootstrap : no socket interface found" in lib.debug_log
