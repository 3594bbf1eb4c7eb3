"""The reader: which inputs name which node, saved captures, merging, and one-line errors."""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path

import pytest

from doctor.core.errors import UsageError
from doctor.facts.mpi import MpiFacts, parse_mpi
from doctor.facts.network.net import NetFacts, parse_net
from doctor.paste import KINDS, read_inputs, reader, skipped
from tests.paste.pastekit import CAPTURES, PASTES, pasted, read_text


def write(folder: Path, name: str, text: str | bytes) -> Path:
    path = folder / name
    path.write_bytes(text.encode() if isinstance(text, str) else text)
    return path


def test_a_file_names_its_node_by_its_stem_and_node_equals_file_renames_it(
    tmp_path: Path,
) -> None:
    ip = write(tmp_path, "gpu1.txt", pasted("netns-ip-a.txt"))
    caps = read_inputs([str(ip), f"gpu7={ip}"])
    assert list(caps) == ["gpu1", "gpu7"]
    header = caps["gpu1"].raw["probe"]
    assert header["source"] == "paste" and header["inputs"] == [str(ip)]
    assert header["segments"][0]["kind"] == "ip addr"


def test_inputs_naming_one_node_merge(tmp_path: Path) -> None:
    ip = write(tmp_path, "a.txt", pasted("netns-ip-a.txt"))
    mpi = write(tmp_path, "b.txt", pasted("openmpi-mpirun-version.txt"))
    env = write(tmp_path, "c.txt", "NCCL_DEBUG=INFO\n")
    more = write(tmp_path, "d.txt", "NCCL_IB_DISABLE=1\n")
    caps = read_inputs([f"gpu1={ip}", f"gpu1={mpi}", f"gpu1={env}", f"gpu1={more}"])
    [cap] = caps.values()
    assert isinstance(parse_net(cap), NetFacts) and isinstance(parse_mpi(cap), MpiFacts)
    assert cap.value("env") == {"NCCL_DEBUG": "INFO", "NCCL_IB_DISABLE": "1"}
    assert len(cap.raw["probe"]["inputs"]) == 4


def test_a_folder_of_pastes_one_node_per_file(tmp_path: Path) -> None:
    write(tmp_path, "gpu1.log", pasted("ompi_info.txt"))
    write(tmp_path, "gpu2", pasted("mpich-mpichversion.txt"))
    write(tmp_path, ".hidden", "junk")
    caps = read_inputs([str(tmp_path)])
    versions = {n: parse_mpi(c) for n, c in caps.items()}
    assert {n: (m.implementation, m.version) for n, m in versions.items()} == {  # type: ignore[union-attr]
        "gpu1": ("Open MPI", "4.1.4"),
        "gpu2": ("MPICH", "4.0.2"),
    }


def test_a_collect_folder_is_still_read_as_captures(tmp_path: Path) -> None:
    for name in ("cpu-mpich", "cpu-intel-mpi"):
        shutil.copy(CAPTURES / f"{name}.json", tmp_path / f"{name}.json")
    caps = read_inputs([str(tmp_path)])
    assert sorted(caps) == ["cpu-intel-mpi", "cpu-mpich"]
    assert caps["cpu-mpich"].raw == json.loads((CAPTURES / "cpu-mpich.json").read_text())


def test_a_capture_and_a_paste_of_the_same_node_merge(tmp_path: Path) -> None:
    shutil.copy(CAPTURES / "cpu-mpich.json", tmp_path / "n1.json")
    env = write(tmp_path, "env.txt", "NCCL_ALGO=Ring\n")
    [cap] = read_inputs([str(tmp_path / "n1.json"), f"n1={env}"]).values()
    assert cap.value("env")["NCCL_ALGO"] == "Ring"
    assert cap.raw["probe"]["version"] == 1 and cap.raw["probe"]["source"] == "paste"


def test_stdin_takes_its_node_from_node_or_is_called_stdin() -> None:
    text = pasted("openmpi-mpirun-version.txt").encode()
    assert list(read_inputs(["-"], stdin=io.BytesIO(text))) == ["stdin"]
    assert list(read_inputs(["-"], stdin_node="gpu3", stdin=io.BytesIO(text))) == ["gpu3"]
    assert list(read_inputs(["gpu4=-"], stdin=io.BytesIO(text))) == ["gpu4"]


def error(args: list[str], stdin: bytes = b"") -> str:
    with pytest.raises(UsageError) as caught:
        read_inputs(args, stdin=io.BytesIO(stdin))
    message = str(caught.value)
    assert "\n" not in message
    return message


def test_unrecognised_text_names_the_kinds_understood() -> None:
    message = error(["-"], b"Segmentation fault (core dumped)\n")
    assert "no command output recognised" in message and "Segmentation fault" in message
    assert all(kind.name in message for kind in KINDS)
    assert "it is empty" in error(["-"], b"\n\n")


def test_bad_inputs_are_one_line_errors(tmp_path: Path) -> None:
    assert "no such file or folder" in error([str(tmp_path / "absent")])
    (tmp_path / "empty").mkdir()
    assert "no files in it" in error([str(tmp_path / "empty")])
    assert "binary data" in error(["-"], b"\x7fELF\x02\x01\x01\x00\x00\x00" * 50)
    bad = write(tmp_path, "n1.json", '{"probe": {"version": 1}, "files": [')
    assert "n1.json: corrupt capture" in error([str(bad)])
    other = write(tmp_path, "n2.json", '{"hello": "world"}')
    assert "not a cluster-doctor probe capture" in error([str(other)])
    assert "nothing to analyze" in error([])


def test_what_was_skipped_is_said(tmp_path: Path) -> None:
    text = "$ lspci\n00:00.0 Host bridge: Intel\n$ ip a\n" + pasted("netns-ip-a.txt")
    cap = read_text(text)
    [note] = skipped(cap)
    # The device line opens an `lspci -vv` segment; plain `lspci` shows no link: not read.
    assert "line 2" in note and "lspci" in note


def test_an_input_over_the_limit_is_cut_and_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(reader, "MAX_INPUT_BYTES", 2000)
    cap = read_text(pasted("netns-ip-a.txt"))
    net = parse_net(cap)
    assert isinstance(net, NetFacts) and 0 < len(net.interfaces) < 14
    assert any("only the first 2000 bytes" in note for note in skipped(cap))


def test_crlf_tabs_and_a_byte_order_mark() -> None:
    text = "\ufeff" + pasted("openmpi-mpirun-version.txt").replace("\n", "\r\n")
    mpi = parse_mpi(read_text(text.encode("utf-8")))
    assert isinstance(mpi, MpiFacts) and mpi.version == "4.1.4"


def test_every_fixture_is_recognised_whole() -> None:
    for path in sorted(PASTES.iterdir()):
        if path.suffix == ".md" or path.name in (
            "netns-probe.json",
            "netns-br-probe.json",
            "lscpu.txt",
        ):
            continue
        cap = read_text(path.read_bytes())
        kinds = [s["kind"] for s in cap.raw["probe"]["segments"]]
        assert kinds and None not in kinds, (path.name, cap.raw["probe"]["segments"])


def test_the_docs_name_every_kind() -> None:
    docs = (Path(__file__).parent.parent.parent / "docs" / "paste.md").read_text()
    assert all(f"| `{kind.name}` |" in docs for kind in KINDS)
