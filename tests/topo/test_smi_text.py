"""The `nvidia-smi topo -m` reader on many machine shapes, its errors, and the export round trip."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from doctor.facts.topo.matrix import KNOWN_COLUMNS, Topology
from doctor.facts.topo.smi_text import TopoParseError, export_topo_text, parse_topo_text
from tests.topo.sysfs_tree import smi_text

# fixture → (GPU count, NICs, a few cells, columns, GPU0's affinity values, NIC legend used)
EXPECTED = {
    "hgx-h100-nvswitch-nic-legend.txt": (
        8,
        tuple(f"mlx5_{i}" for i in range(10)),
        {"GPU0-GPU7": "NV18", "GPU0-mlx5_0": "PIX", "GPU0-mlx5_1": "NODE", "GPU0-mlx5_4": "SYS"},
        KNOWN_COLUMNS,
        ("0-55,112-167", "0", "N/A"),
        True,
    ),
    "dgx1-v100-cube-mesh-old-driver-spaces.txt": (
        8,
        ("mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3"),
        {"GPU0-GPU3": "NV2", "GPU0-GPU1": "NV1", "GPU0-GPU5": "SYS", "GPU7-mlx5_3": "PIX"},
        ("CPU Affinity",),
        ("0-21,44-65",),
        False,
    ),
    "dual-socket-pcie-4gpu-nic-legend.txt": (
        4,
        ("mlx5_0", "mlx5_1"),
        {"GPU0-GPU1": "PIX", "GPU1-GPU2": "SYS", "GPU0-mlx5_0": "PXB", "mlx5_0-mlx5_1": "SYS"},
        ("CPU Affinity", "NUMA Affinity"),
        ("0-31,64-95", "0"),
        True,
    ),
    "workstation-2gpu-phb.txt": (
        2,
        (),
        {"GPU0-GPU1": "PHB"},
        KNOWN_COLUMNS,
        ("0-23", "0", "N/A"),
        False,
    ),
    "workstation-1gpu-cpu-affinity-only.txt": (1, (), {}, ("CPU Affinity",), ("0-15",), False),
    "gh200-gpu-numa-id.txt": (
        1,
        ("mlx5_0",),
        {"GPU0-mlx5_0": "NODE"},
        KNOWN_COLUMNS,
        ("0-71", "0", "1"),
        True,
    ),
    "k80-old-driver-soc.txt": (
        4,
        ("mlx4_0",),
        {"GPU0-GPU1": "PIX", "GPU0-GPU2": "SYS", "GPU3-mlx4_0": "SYS", "GPU1-mlx4_0": "PHB"},
        ("CPU Affinity",),
        ("0-11,24-35",),
        False,
    ),
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_parses_each_machine_shape(name: str) -> None:
    gpus, nics, cells, columns, gpu0, legend = EXPECTED[name]
    topo = parse_topo_text(smi_text(name))
    assert len(topo.gpus) == gpus
    assert topo.nics == nics
    links = topo.links()
    for pair, label in cells.items():
        assert links[pair] == label, pair
    assert topo.columns == columns
    assert tuple(topo.affinity_of("GPU0").values()) == gpu0
    assert topo.nic_legend is legend
    assert all(not topo.affinity_of(n) for n in nics)  # NIC rows carry no affinity


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_matrix_is_symmetric_in_every_fixture(name: str) -> None:
    topo = parse_topo_text(smi_text(name))
    for a in topo.devices:
        for b in topo.devices:
            assert topo.label(a, b) == topo.label(b, a)


def test_old_soc_label_reads_as_sys() -> None:
    topo = parse_topo_text(smi_text("k80-old-driver-soc.txt"))
    assert "SOC" not in topo.links().values()
    assert topo.label("GPU0", "GPU3") == "SYS"


def test_tabs_and_spaces_read_the_same() -> None:
    tabs = smi_text("dual-socket-pcie-4gpu-nic-legend.txt")
    spaces = "\n".join(line.replace("\t", "    ") for line in tabs.splitlines())
    assert parse_topo_text(spaces) == parse_topo_text(tabs)


def test_crlf_and_carriage_returns_are_tolerated() -> None:
    text = smi_text("workstation-2gpu-phb.txt")
    assert parse_topo_text(text.replace("\n", "\r\n")) == parse_topo_text(text)


GARBAGE = {
    "empty": ("", "no topology matrix found"),
    "prose": ("NVIDIA-SMI has failed because it couldn't communicate\n", "no topology matrix"),
    "json": ('{"gpus": 8}\n', "no topology matrix"),
    "bad label": (
        "\tGPU0\tGPU1\nGPU0\t X \tFOO\nGPU1\tFOO\t X \n",
        "'FOO' is not a topology label",
    ),
    "missing row": ("\tGPU0\tGPU1\nGPU0\t X \tPHB\n", "no row for GPU1"),
    "short row": ("\tGPU0\tGPU1\nGPU0\t X\nGPU1\tPHB\t X \n", "row GPU0 has 1 cells for 2 devices"),
    "no diagonal": ("\tGPU0\tGPU1\nGPU0\tPHB\tX\nGPU1\tPHB\t X \n", "row GPU0"),
    "unknown row": ("\tGPU0\nGPU0\t X \nGPU9\t X \n", "row 'GPU9' names no device"),
    "too many values": ("\tGPU0\tCPU Affinity\nGPU0\t X \t0-3\t7\n", "more values than"),
    "duplicate device": ("\tGPU0\tGPU0\nGPU0\t X \t X \n", "named twice"),
    "duplicate row": ("\tGPU0\nGPU0\t X \nGPU0\t X \n", "two rows for GPU0"),
    "binary": ("\x00\x01\x02GPU0\xff\n", "no topology matrix"),
}


@pytest.mark.parametrize("case", sorted(GARBAGE))
def test_garbage_is_one_clear_error(case: str) -> None:
    text, message = GARBAGE[case]
    with pytest.raises(TopoParseError, match=message) as info:
        parse_topo_text(text)
    assert "\n" not in str(info.value)


def test_legend_only_renames_nics_it_lists() -> None:
    text = (
        "\tGPU0\tNIC0\tNIC1\nGPU0\t X \tPIX\tSYS\nNIC0\tPIX\t X \tSYS\nNIC1\tSYS\tSYS\t X \n"
        "\nNIC Legend:\n\n  NIC0: mlx5_0\n  NIC1: mlx5_bond_0\n"
    )
    topo = parse_topo_text(text)
    assert topo.links() == {
        "GPU0-mlx5_0": "PIX",
        "GPU0-mlx5_bond_0": "SYS",
        "mlx5_0-mlx5_bond_0": "SYS",
    }


# -- round trip: export then parse is the identity -----------------------------------------

LABELS = st.one_of(
    st.sampled_from(["PIX", "PXB", "PHB", "NODE", "SYS"]),
    st.integers(1, 18).map(lambda n: f"NV{n}"),
)
NIC_NAMES = st.from_regex(r"(mlx5_|mlx4_|bnxt_re|rocep|irdma|eth|ib)[0-9a-z_]{0,6}", fullmatch=True)
VALUES = st.from_regex(
    r"(N/A|[0-9]{1,3}(-[0-9]{1,3})?(,[0-9]{1,3}(-[0-9]{1,3})?){0,3})", fullmatch=True
)


@st.composite
def topologies(draw: st.DrawFn) -> Topology:
    gpus = [f"GPU{i}" for i in range(draw(st.integers(1, 8)))]
    nics = draw(st.lists(NIC_NAMES, max_size=6, unique=True))
    devices = [*gpus, *nics]
    n = len(devices)
    upper = {(i, j): draw(LABELS) for i in range(n) for j in range(i + 1, n)}
    cells = tuple(
        tuple("X" if i == j else upper[(min(i, j), max(i, j))] for j in range(n)) for i in range(n)
    )
    columns = tuple(c for c in KNOWN_COLUMNS if draw(st.booleans()))
    affinity = tuple(tuple(draw(VALUES) for _ in columns) if d in gpus else () for d in devices)
    return Topology(
        tuple(devices), cells, columns, affinity, nic_legend=bool(nics) and draw(st.booleans())
    )


@settings(max_examples=60, deadline=None)
@given(topologies())
def test_export_then_parse_is_identity(topo: Topology) -> None:
    assert parse_topo_text(export_topo_text(topo)) == topo


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_fixture_survives_export(name: str) -> None:
    topo = parse_topo_text(smi_text(name))
    assert parse_topo_text(export_topo_text(topo)) == topo


FIXTURE_LINES = [line for name in EXPECTED for line in smi_text(name).splitlines()]


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.one_of(st.sampled_from(FIXTURE_LINES), st.text(max_size=40)),
        max_size=25,
    )
)
def test_any_text_parses_or_fails_cleanly(lines: list[str]) -> None:
    # Shuffled real-shaped lines and junk: a Topology or one TopoParseError line, nothing else.
    try:
        topo = parse_topo_text("\n".join(lines))
    except TopoParseError as exc:
        assert "\n" not in str(exc)
    else:
        assert topo.gpus
        assert all(len(row) == len(topo.devices) for row in topo.cells)
