"""The verdicts of hang-diagnosis tools read from what they printed: NCCL RAS's reports (real ones
from an H200, and NCCL 2.24's and 2.29's layouts written from its source), PyTorch's Flight
Recorder analyzer (run here on real Gloo and NCCL dumps; torch 2.4 and 2.5 wordings written from
their source) and Horovod's stall warning (every version's wording, written from its source):
as printed, unwrapped, wrapped, with foreign lines among them, cut short, or garbage.
tests/fixtures/logs/hang/tools/README.md says where each fixture comes from."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from doctor.core.logline import strip_prefixes
from doctor.explain.hang.verdicts import (
    KEYWORDS,
    Absent,
    find_ras,
    read_frtrace,
    read_horovod,
)
from doctor.facts.hang.ras import RasView, read_ras

FIXTURES = Path(__file__).parents[2] / "fixtures"
TOOLS = FIXTURES / "logs" / "hang" / "tools"
H200 = FIXTURES / "gpu" / "h200"
# Real lines that are no part of any verdict: NCCL's INFO lines (one names the NCCL version),
# torch's warnings, a traceback, from the H200's ranks.
FOREIGN = [
    x
    for x in (H200 / "hang-sleep" / "rank0.log").read_text().splitlines()
    + (H200 / "hang-kill" / "rank0.log").read_text().splitlines()
    if x.strip()
][:200]
WRAPPINGS = ["[pod/train-0/main] ", "[1,0]<stderr>:", "2024-11-22T04:08:11.003Z ", "[rank0]:"]


def lines_of(path: Path) -> list[str]:
    return path.read_text().splitlines()


def ras_views(lines: list[str]) -> list[RasView]:
    views = [read_ras(answer) for _, answer in find_ras(lines)]
    return [v for v in views if v is not None]


def summary(view: RasView) -> tuple[object, ...]:
    """What a report says, comparable across its forms (text or JSON, wrapped or not)."""
    return (
        sorted((x.rank.rank, x.op, x.count, x.most) for x in view.lags),
        sorted(m.rank for m in view.missing),
        sorted((r.rank, e.lower()) for r, e in view.errors),
    )


def said(found: list[Absent]) -> list[tuple[object, ...]]:
    return [(a.ranks, a.collective, a.detail, a.expected) for a in found]


# NCCL RAS -------------------------------------------------------------------------------------

RAS_SAYS = {  # the H200's hangs, as RAS saw them: lags, missing ranks, errors
    "sleep": ([(1, "AllReduce", 3, 4)], [], []),
    "op": ([(0, "Broadcast", 0, 1), (1, "AllReduce", 3, 4)], [], []),
    "size": ([], [], []),  # RAS cannot see sizes: a healthy report
    "kill": ([], [1], [(0, "remote process error")]),
}


@pytest.mark.parametrize("mode", sorted(RAS_SAYS))
@pytest.mark.parametrize("name", ["ras-status.txt", "ras-verbose.txt", "ras-status.json"])
def test_real_ras_reports_are_found_and_read(mode: str, name: str) -> None:
    lines = lines_of(H200 / f"hang-{mode}" / name)  # the client's handshake lines above "----"
    found = find_ras(lines)
    assert len(found) == 1
    line_no, answer = found[0]
    assert answer["format"] == ("json" if name.endswith(".json") else "text")
    assert lines[line_no - 1].strip() in ("{", "NCCL version 2.28.9 compiled with CUDA 13.0")
    view = read_ras(answer)
    assert view is not None and view.version == "2.28.9"
    assert summary(view) == RAS_SAYS[mode]


@pytest.mark.parametrize("name", ["ras-status.txt", "ras-verbose.txt", "ras-status.json"])
def test_a_healthy_ras_report_has_nothing_to_complain_about(name: str) -> None:
    """Every count equal, nothing missing, no error: no lag, no missing rank, no error."""
    (view,) = ras_views(lines_of(H200 / "hang-size" / name))
    assert view.version == "2.28.9"  # read, not skipped
    assert (view.lags, view.missing, view.errors) == ([], [], [])


@pytest.mark.parametrize("mode", sorted(RAS_SAYS))
@pytest.mark.parametrize("name", ["ras-status.txt", "ras-status.json"])
@pytest.mark.parametrize("wrap", WRAPPINGS)
def test_a_ras_report_reads_the_same_wrapped_and_unwrapped(mode: str, name: str, wrap: str) -> None:
    lines = lines_of(H200 / f"hang-{mode}" / name)
    wrapped = [wrap + x for x in lines]
    unwrapped = [strip_prefixes(x)[0] for x in wrapped]  # indentation gone too
    for form in (wrapped, unwrapped):
        assert [summary(v) for v in ras_views(form)] == [RAS_SAYS[mode]]


def test_ranks_counted_in_groups_are_read_nccl_2_29() -> None:
    """The many that agree are only counted; the outliers are listed under their group."""
    (view,) = ras_views(lines_of(TOOLS / "ras" / "written-2.29-groups.txt"))
    assert summary(view) == (
        [(3, "AllReduce", 1206, 1207), (4, "Broadcast", 0, 2), (5, "AllReduce", 1206, 1207)],
        [7],
        [(2, "remote process error"), (6, "remote process error")],
    )
    places = {x.rank.rank: (x.rank.host, x.rank.pid) for x in view.lags}
    assert places[5] == ("10.1.0.12", 30530)  # "GPU 1 (NVML 5)"
    assert (view.missing[0].host, view.missing[0].pid) == ("?", None)  # no process information


def test_one_count_for_all_collectives_and_a_list_of_missing_ranks_nccl_2_24() -> None:
    (view,) = ras_views(lines_of(TOOLS / "ras" / "written-2.24.txt"))
    assert view.version == "2.24.3"
    assert summary(view) == ([(1, "collective", 4409, 4410)], [3, 6], [])


def test_a_text_report_and_a_json_one_in_one_paste() -> None:
    text = lines_of(H200 / "hang-sleep" / "ras-status.txt")
    doc = lines_of(H200 / "hang-kill" / "ras-status.json")
    found = find_ras([*FOREIGN[:5], *text, *FOREIGN[5:9], *doc])
    assert [a["format"] for _, a in found] == ["text", "json"]
    views = [read_ras(a) for _, a in found]
    assert [summary(v) for v in views if v] == [RAS_SAYS["sleep"], RAS_SAYS["kill"]]


def test_a_json_report_cut_short_gives_what_it_had() -> None:
    lines = lines_of(H200 / "hang-sleep" / "ras-status.json")
    full = summary(ras_views(lines)[0])
    for end in range(len(lines) + 1):
        for cut in (lines[:end], [*lines[:end], lines[end][:7]] if end < len(lines) else []):
            for view in ras_views(cut):
                lags, missing, errors = summary(view)
                assert set(lags) <= set(full[0]) and not missing and not errors  # type: ignore[arg-type]
    # Its ranks' counts both there: the lag is seen though the document never closes.
    assert summary(ras_views(lines[:60])[0]) == full


def test_an_nccl_log_is_not_a_ras_report() -> None:
    """NCCL's INFO banner names its version too; no report is made of it."""
    assert find_ras(FOREIGN) == []


# torchfrtrace ---------------------------------------------------------------------------------

ALLREDUCE_4 = "all_reduce #4 of process group 0 (default_pg)"
TYPE = (
    "Culprit rank 1; Error type: COLLECTIVE_TYPE_MISMATCH, Expected collective type: "
    "'all_reduce' does not match found collective type: 'broadcast'"
)
SIZES = (
    "Culprit rank 1; Error type: SIZE_OR_SYNTAX_MISMATCH, Expected input sizes: '[[1024]]' "
    "does not match found input sizes: '[[2048]]'"
)
NO_DUMP = "no Flight Recorder dump from these ranks"
FRTRACE_SAYS = {
    "h200-sleep": [((1,), ALLREDUCE_4, "", 2)],
    "h200-op": [((1,), ALLREDUCE_4, TYPE, 2)],
    "h200-size": [((1,), ALLREDUCE_4, SIZES, 2)],
    "h200-kill": [((1,), "", NO_DUMP, None)],
    "h200-kill-incomplete": [((1,), "", NO_DUMP, None)],  # said once per entry: kept once
    "gloo-skip": [((2,), ALLREDUCE_4, "", 3)],
    "gloo-op": [((1,), ALLREDUCE_4, TYPE, 3)],
    "gloo-skip-raw": [],  # torch 2.13 on Gloo's dumps as written: a KeyError, no verdict
    "gloo-op-raw": [],
    "written-2.5-sleep": [((1,), ALLREDUCE_4, "", 2)],
    "written-2.5-op": [((1,), ALLREDUCE_4, TYPE, 2)],
    "written-2.4-sleep": [((1,), "all_reduce of process group 0 (default_pg)", "", 2)],
    "written-2.4-op": [
        ((1,), "all_reduce of process group 0 (default_pg)",
         "Error rank 1, MatchState.COLLECTIVE_TYPE_MISMATCH", 2)
    ],
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(FRTRACE_SAYS))
def test_the_flight_recorder_analyzers_verdicts(name: str) -> None:
    lines = lines_of(TOOLS / "frtrace" / f"{name}.txt")
    found = read_frtrace(lines)
    assert said(found) == FRTRACE_SAYS[name]
    assert all(a.tool == "torchfrtrace" for a in found)
    for a in found:  # the line that says it
        assert (
            "joining collective" in lines[a.line_no - 1]
            or "rror" in lines[a.line_no - 1]
            or ("dump" in lines[a.line_no - 1])
        )


@pytest.mark.parametrize("name", sorted(FRTRACE_SAYS))
@pytest.mark.parametrize("wrap", WRAPPINGS)
def test_the_analyzers_verdicts_wrapped_and_unwrapped(name: str, wrap: str) -> None:
    wrapped = [wrap + x for x in lines_of(TOOLS / "frtrace" / f"{name}.txt")]
    assert said(read_frtrace(wrapped)) == FRTRACE_SAYS[name]
    # Behind a time stamp, prefix.py takes "missing ranks: " for journald's "host prog: ", and
    # "group info: ", "expected ranks: " too: the ranks and the culprits are kept.
    unwrapped = read_frtrace([strip_prefixes(x)[0] for x in wrapped])
    if wrap[0].isdigit():
        assert [(a.ranks, a.detail) for a in unwrapped] == [
            (ranks, detail) for ranks, _, detail, _ in FRTRACE_SAYS[name]
        ]
    else:
        assert said(unwrapped) == FRTRACE_SAYS[name]


# Horovod --------------------------------------------------------------------------------------

GRADS = ", ".join(
    f"DistributedAdam_Allreduce/cond_{i}/HorovodAllreduce_grads_{i}_0" for i in (12, 13, 14)
)
DENSE = "DistributedOptimizer_Allreduce/HorovodAllreduce_gradients_dense_1_"
SHUTDOWN = "marked '!' (rank 2): stalled past the shutdown time (120 s); Horovod shuts down"
HOROVOD_SAYS = {
    "v0.28-missing-ranks": [
        ((2, 3), f"{GRADS} and 3 more (and others not listed)", "", None),
        ((2,), "DistributedAdam_Allreduce/cond_12/HorovodAllreduce_grads_12_0", SHUTDOWN, None),
        ((3,), "allreduce.noname.2107", "", None),
    ],
    "v0.19-stalled-ranks": [((1,), "allreduce.fc2.weight, allreduce.fc2.bias", "", None)],
    "v0.16-stalled-ops": [((1,), "allreduce.noname.117, allreduce.noname.118", "", None)],
    "v0.14-stalled-ops": [
        ((1,), f"{DENSE}MatMul_grad_MatMul_1_0", "", None),
        ((3,), f"{DENSE}MatMul_grad_MatMul_1_0, {DENSE}BiasAdd_grad_BiasAddGrad_0", "", None),
    ],
    "v0.11-ready-ranks": [
        ((3,), "DistributedSGD_Allreduce/HorovodAllreduce_gradients_2",
         "Horovod named the ready ranks only: one that submitted nothing is unseen", None)
    ],
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(HOROVOD_SAYS))
def test_horovods_stall_warning_in_every_versions_wording(name: str) -> None:
    lines = lines_of(TOOLS / "horovod" / f"{name}.log")
    found = read_horovod(lines)
    assert said(found) == HOROVOD_SAYS[name]
    assert all(a.tool == "Horovod's stall inspector" for a in found)
    assert all("One or more tensors" in lines[a.line_no - 1] for a in found)


def test_a_horovod_rank_line_keeps_its_rank_only_as_printed() -> None:
    """``2: [...]`` is peeled like an ``srun -l`` label when unwrapped: the rank is lost (the
    module says so); ``2!: [...]`` is not a label and keeps it."""
    lines = lines_of(TOOLS / "horovod" / "v0.28-missing-ranks.log")
    unwrapped = read_horovod([strip_prefixes(x)[0] for x in lines])
    assert said(unwrapped) == [HOROVOD_SAYS["v0.28-missing-ranks"][1]]


@pytest.mark.parametrize("name", ["v0.16-stalled-ops", "v0.14-stalled-ops", "v0.11-ready-ranks"])
def test_horovods_older_wordings_read_unwrapped_too(name: str) -> None:
    lines = lines_of(TOOLS / "horovod" / f"{name}.log")
    assert said(read_horovod([strip_prefixes(x)[0] for x in lines])) == HOROVOD_SAYS[name]


# Every reader: foreign lines, cuts, garbage --------------------------------------------------


def _interleave(lines: list[str], gaps: list[int], pick: int) -> list[str]:
    """``lines`` with ``gaps[i]`` foreign lines before line i (cycling through FOREIGN)."""
    out: list[str] = []
    k = pick
    for i, line in enumerate(lines):
        for _ in range(gaps[i % len(gaps)]):
            out.append(FOREIGN[k % len(FOREIGN)])
            k += 1
        out.append(line)
    return out


SOURCES = [
    *(("ras", H200 / f"hang-{m}" / "ras-status.txt") for m in RAS_SAYS),
    *(("ras", H200 / f"hang-{m}" / "ras-status.json") for m in RAS_SAYS),
    ("ras", TOOLS / "ras" / "written-2.29-groups.txt"),
    *(("frtrace", TOOLS / "frtrace" / f"{n}.txt") for n in FRTRACE_SAYS),
    *(("horovod", TOOLS / "horovod" / f"{n}.log") for n in HOROVOD_SAYS),
]


def _read(kind: str, lines: list[str]) -> object:
    if kind == "ras":
        return [summary(v) for v in ras_views(lines)]
    return said(read_frtrace(lines) if kind == "frtrace" else read_horovod(lines))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    source=st.sampled_from(SOURCES),
    gaps=st.lists(st.integers(0, 3), min_size=1, max_size=12),
    pick=st.integers(0, 10_000),
)
def test_foreign_lines_around_and_inside_change_no_verdict(
    source: tuple[str, Path], gaps: list[int], pick: int
) -> None:
    kind, path = source
    lines = lines_of(path)
    mixed = [*FOREIGN[:3], *_interleave(lines, gaps, pick), *FOREIGN[3:6]]
    assert _read(kind, mixed) == _read(kind, lines)


@pytest.mark.parametrize("source", SOURCES, ids=lambda s: s[1].name)
def test_a_paste_cut_anywhere_never_raises(source: tuple[str, Path]) -> None:
    kind, path = source
    lines = lines_of(path)
    for end in range(len(lines) + 1):
        for cut in (lines[:end], lines[end:]):
            _read(kind, cut)
        if end < len(lines):
            for at in (1, len(lines[end]) // 2):
                _read(kind, [*lines[:end], lines[end][:at]])


@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(max_size=200), max_size=40))
def test_garbage_never_raises(lines: list[str]) -> None:
    find_ras(lines)
    read_frtrace(lines)
    read_horovod(lines)


OWN_LINES = [
    '"nccl_version": "2.28.9",', "{", "}", "[", "]", '"rank": 1,', '"collective_counts": {',
    "  Rank 1 -- GPU 0 managed by process 9 on node a", "  3 ranks have launched up to operation 5",
    "  Communicator ranks have different AllReduce operation counts", "#0-0 (00ff) MISMATCH",
    "Missing ranks:", "1: [a]", "2!: [a, b ...]", "Stalled ops:", "t [missing ranks: 1]",
    "remainder of ranks", "Not all ranks joining collective, sequence number: 4",
    "missing ranks: {1}", "error msg: Culprit rank 3", "{2}", "Collective 4 at entry 3 errors", "",
]  # fmt: skip


@settings(max_examples=150, deadline=None)
@given(st.lists(st.sampled_from(OWN_LINES), max_size=60))
def test_the_tools_own_lines_in_any_order_never_raise(lines: list[str]) -> None:
    for _, answer in find_ras(lines):
        read_ras(answer)
    read_frtrace(lines)
    read_horovod(lines)


def test_huge_inputs_stay_bounded() -> None:
    head = ['"nccl_version": "2.28.9",']
    assert len(find_ras(head + ["{"] * 300_000)[0][1]["body"]) < 3_000_000
    long_line = "Missing ranks:" + "x" * 2_000_000
    for reader in (read_frtrace, read_horovod):
        reader([long_line, "1: [" + "a, " * 500_000 + "b]"] * 3)
    many = ["Not all ranks joining collective, sequence number: 1", "missing ranks: {1}"] * 5000
    assert len(read_frtrace(many)) == 1  # one verdict, said 5000 times


def test_every_accepted_text_holds_a_keyword() -> None:
    """KEYWORDS is the callers' pre-filter: every fixture a reader finds something in holds one."""
    for kind, path in SOURCES:
        if _read(kind, lines_of(path)) not in ([], [([], [], [])]):
            assert any(k in path.read_text() for k in KEYWORDS), path
