"""docs/checks.md is generated from the check registry; this fails while it is stale."""

from __future__ import annotations

from pathlib import Path

import pytest

from doctor.cli.main import main
from doctor.judge.registry import NO_AUTOLOAD, load_checks
from doctor.render.reference import REGENERATE, render_reference

DOC = Path(__file__).parent.parent / "docs" / "checks.md"


@pytest.fixture
def builtin_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(NO_AUTOLOAD, "1")


def test_committed_reference_is_current(builtin_only: None) -> None:
    assert DOC.read_text() == render_reference(load_checks()), (
        f"docs/checks.md is stale; regenerate it with: {REGENERATE}"
    )


def test_reference_lists_every_code_with_its_meaning_and_fix(builtin_only: None) -> None:
    text = render_reference(load_checks())
    for spec in load_checks():
        assert f"## {spec.id}\n" in text
        for code, meaning in spec.codes.items():
            section = text.split(f"### `{code}`\n", 1)[1].split("\n### ", 1)[0]
            assert meaning[1:] + "." in section
            fix = spec.fixes.get(code)
            if fix is not None:
                assert fix.text in section and all(c in section for c in fix.commands)


def test_cli_prints_the_reference(builtin_only: None, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["checks", "reference"]) == 0
    assert capsys.readouterr().out == DOC.read_text()
