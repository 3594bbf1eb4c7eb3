"""What every report command shares: its output options, the global quiet/verbose switches, and
one ``emit`` that writes the report in each asked-for format (redacted alike in all of them)."""

from __future__ import annotations

import enum
import json
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import IO, TYPE_CHECKING, Annotated, Any

from rich.console import Console, ConsoleOptions, RenderableType
from rich.segment import Segment
from rich.text import Text

from doctor.core.errors import EXIT_INTERRUPTED, UsageError
from doctor.core.files import write_whole
from doctor.core.flag import flag
from doctor.core.model import Severity
from doctor.core.printable import UNSAFE, printable

if TYPE_CHECKING:
    from doctor.judge.report import Report
    from doctor.render.terminal import Detail


class Format(str, enum.Enum):
    text = "text"
    json = "json"


# One declaration for every command that prints a report or a document.
FormatField = Annotated[Format, flag("--format", "-f", help="Report format on stdout.")]


@dataclass(frozen=True)
class Formatting:
    """Commands that print one document and write no report files (explain, checks list)."""

    fmt: FormatField = Format.text


class TopoFormat(str, enum.Enum):
    text = "text"  # the rich matrix, legend and NIC affinity
    json = "json"
    plain = "plain"  # `nvidia-smi topo -m` layout, readable by --input


@dataclass(frozen=True)
class OutputOptions:
    """Where every report command writes its report, and what makes it exit 1."""

    fmt: FormatField = Format.text
    json_file: Annotated[
        Path | None, flag("--json", help="Also write the JSON report to this file.")
    ] = None
    junit_file: Annotated[
        Path | None,
        flag("--junit", help="Also write a JUnit XML report (Jenkins, GitLab) to this file."),
    ] = None
    markdown_file: Annotated[
        Path | None,
        flag("--markdown", help="Also write a Markdown report (for bug reports) here."),
    ] = None
    html_file: Annotated[
        Path | None,
        flag("--html", help="Also write a self-contained HTML report with pictures here."),
    ] = None
    redact: Annotated[
        bool,
        flag(
            "--redact",
            help="Mask hostnames, addresses and user names in every output, consistently.",
        ),
    ] = False
    fail_on: Annotated[
        str, flag("--fail-on", help="Exit 1 on findings at or above: warn or fail.")
    ] = "fail"

    def __post_init__(self) -> None:
        parse_fail_on(self.fail_on)  # a bad value is a usage error before any node is probed

    @property
    def threshold(self) -> Severity:
        return parse_fail_on(self.fail_on)


@dataclass(frozen=True)
class Ui:
    """The global switches (``doctor --quiet ...``), set once per run by the root callback."""

    quiet: Annotated[
        bool, flag("--quiet", "-q", help="Print only what needs action; no progress.")
    ] = False
    verbose: Annotated[
        bool,
        flag("--verbose", "-v", help="Every check on every node, and every node's probe."),
    ] = False

    def __post_init__(self) -> None:
        if self.quiet and self.verbose:
            raise UsageError("--quiet and --verbose exclude each other")

    @property
    def detail(self) -> Detail:
        return "quiet" if self.quiet else "verbose" if self.verbose else "normal"


# Module state rather than the click context: typer gives commands no public way to reach the
# root context without threading a ctx parameter through every command.
_ui = Ui()


def set_ui(settings: Ui) -> None:
    global _ui
    _ui = settings


def ui() -> Ui:
    return _ui


class SafeConsole(Console):
    """A console that shows text from outside and never obeys it: every segment's text passes
    through the one sanitiser (doctor/core/printable.py) before rich adds its own styles, and no
    console markup is read (a log line's ``[link=...]`` would be a hyperlink, its ``[/x]`` an
    error). Rich's own control segments (cursor moves of the progress display) pass as they are.
    A plain string is escaped before rich reads it, since rich drops BEL, BS, VT, FF and CR from
    the text it styles (not emitted; escaped, they are shown)."""

    def render_str(self, text: str, **settings: Any) -> Text:
        return super().render_str(printable(text), **settings)

    def render(
        self, renderable: RenderableType, options: ConsoleOptions | None = None
    ) -> Iterable[Segment]:
        for segment in super().render(renderable, options):
            if segment.control is None and UNSAFE.search(segment.text):
                yield Segment(printable(segment.text), segment.style)
            else:
                yield segment


def safe_console(file: IO[str], **settings: Any) -> Console:
    # Rich already honours NO_COLOR (and FORCE_COLOR) from the environment. No emoji codes:
    # text from users and nodes is printed as it is (`-H a:b:c` is not a:bold-B:c).
    return SafeConsole(
        file=file, highlight=False, soft_wrap=True, emoji=False, markup=False, **settings
    )


def stdout_console() -> Console:
    return safe_console(sys.stdout)


def stderr_console() -> Console:
    return safe_console(sys.stderr)


def parse_fail_on(text: str) -> Severity:
    try:
        severity = Severity.parse(text)
    except ValueError as exc:
        raise UsageError(f"--fail-on: {exc}") from None
    if severity is Severity.INFO:
        raise UsageError("--fail-on: expected warn or fail")
    return severity


def _write(flag: str, path: Path, text: str) -> None:
    try:
        write_whole(path, text)  # UTF-8, as the XML declares (locales vary); whole or absent
    except OSError as exc:
        raise UsageError(f"{flag} {path}: {exc.strerror}") from None


def emit(report: Report, opts: OutputOptions, text: bool = True) -> int:
    """Write the report to stdout and every named file; the exit code it calls for.
    ``text`` False: no text report on stdout (`doctor run` after its job: the job's output and
    its own lines are the terminal's)."""
    # The renderers (rich tables, XML) load here, each only when its output is asked for:
    # commands that write no report never pay them.
    from doctor.render.json_report import render_json
    from doctor.render.redact import Redactor
    from doctor.render.terminal import render_text

    threshold = opts.threshold
    redactor = Redactor.for_report(report) if opts.redact else None
    redact = redactor.text if redactor else str

    @cache  # built once for --json, --html and stdout alike
    def document() -> dict[str, Any]:
        doc = report.to_json()
        return redactor.value(doc) if redactor else doc

    def as_json() -> str:
        if redactor is None:
            return render_json(report)
        return json.dumps(document(), indent=2) + "\n"

    if opts.json_file is not None:
        _write("--json", opts.json_file, as_json())
    if opts.junit_file is not None:
        from doctor.render.junit import render_junit

        _write("--junit", opts.junit_file, render_junit(report, threshold, redact))
    if opts.markdown_file is not None:
        from doctor.render.markdown import render_markdown

        _write("--markdown", opts.markdown_file, redact(render_markdown(report)))
    if opts.html_file is not None:
        # Drawn from the (redacted) document alone: nothing unredacted can reach the page.
        from doctor.render.html import render_html

        _write("--html", opts.html_file, render_html(document()))
    if opts.fmt is Format.json:
        sys.stdout.write(as_json())
    elif text:
        console = stdout_console()
        with console.capture() as captured:
            render_text(report, console, ui().detail)
        sys.stdout.write(redact(captured.get()))
    # Ctrl-C during the allreduce: its report is written, then the run says it was interrupted.
    return EXIT_INTERRUPTED if report.interrupted else report.exit_code(threshold)
