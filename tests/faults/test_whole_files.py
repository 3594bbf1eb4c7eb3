"""Report files and captures appear whole or not at all, on a full or read-only disk (the fault
matrix found an empty report.json on a full disk, and collect's internal error on a read-only
folder). Real tmpfs mounts: root is required, as for every test bed test."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from doctor.cli.main import main
from doctor.core.files import write_whole

REPORT = '{"schema_version": "1.1", "nodes": {}}\n' * 400  # 16 KB: more than the disk holds


@pytest.fixture(params=["full", "read-only"])
def bad_folder(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Path]:
    folder = tmp_path / "out"
    folder.mkdir()
    options = "size=8k" + (",ro" if request.param == "read-only" else "")
    subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(folder)], check=True)
    try:
        if request.param == "full":
            subprocess.run(f"dd if=/dev/zero of={folder}/fill bs=1k 2>/dev/null", shell=True)
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=True)


def test_nothing_partial_is_left(bad_folder: Path) -> None:
    before = sorted(p.name for p in bad_folder.iterdir())
    with pytest.raises(OSError):
        write_whole(bad_folder / "report.json", REPORT)
    assert sorted(p.name for p in bad_folder.iterdir()) == before


def test_a_whole_file_replaces_the_old_one(tmp_path: Path) -> None:
    path = tmp_path / "report.json"
    path.write_text("old")
    write_whole(path, REPORT)
    assert path.read_text() == REPORT
    assert [p.name for p in tmp_path.iterdir()] == ["report.json"]


def test_report_files_on_a_bad_disk_are_a_usage_error_and_absent(
    bad_folder: Path, tmp_path: Path, local_raw: dict, capsys: pytest.CaptureFixture[str]
) -> None:
    captures = tmp_path / "captures"
    captures.mkdir()
    (captures / "node1.json").write_text(json.dumps(local_raw))
    rc = main(
        ["analyze", str(captures), "--json", str(bad_folder / "r.json"),
         "--junit", str(bad_folder / "r.xml")]
    )  # fmt: skip
    assert rc == 2
    assert capsys.readouterr().err.startswith(f"doctor: error: --json {bad_folder}/r.json: ")
    assert not (bad_folder / "r.json").exists() and not (bad_folder / "r.xml").exists()


def test_a_planted_link_is_not_followed(tmp_path: Path) -> None:
    """A report in a shared folder (/tmp): a link planted at the name aside, or at the report's
    own name, must not make the doctor, as root, write the file it names."""
    victim = tmp_path / "passwd"
    victim.write_text("root:x:0:0\n")
    shared = tmp_path / "shared"
    shared.mkdir()
    (shared / ".report.json.part").symlink_to(victim)
    (shared / "report.json").symlink_to(victim)
    write_whole(shared / "report.json", REPORT)
    assert victim.read_text() == "root:x:0:0\n"
    assert (
        not (shared / "report.json").is_symlink() and (shared / "report.json").read_text() == REPORT
    )
    assert oct((shared / "report.json").stat().st_mode & 0o777) == "0o644"
