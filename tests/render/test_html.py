"""The HTML report's markup, from real test-bed reports and a 128-node document built from one.

What a browser makes of it is tested in test_browser.py; here the markup itself: the pictures'
elements are there and marked, it is self-contained, it escapes what it quotes, and it stays small
and readable at 128 nodes.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from doctor.render.html import render_html
from doctor.render.redact import Redactor
from render.dom import Element, parse
from render.reports import FIXTURES, REPORTS, large, load, renamed

SUMMARY = re.compile(r"^\d+ fail, \d+ warn, \d+ pass, \d+ skip")


def page(document: dict[str, Any]) -> Element:
    return parse(render_html(document))


@pytest.fixture(scope="module")
def big() -> tuple[dict[str, Any], str]:
    document = large(128)
    return document, render_html(document)


@pytest.mark.parametrize("name", REPORTS)
def test_a_real_report_is_one_self_contained_file(name: str) -> None:
    html = render_html(load(name))
    root = parse(html)
    # Nothing is fetched: no external element, no URL anywhere, and the policy forbids it.
    assert not root.find_all("link") and not root.find_all("img") and not root.find_all("iframe")
    assert all("src" not in e.attrs for e in root.iter())
    assert not re.search(r"(https?:)?//[a-z0-9.-]+\.[a-z]{2,}", html, re.I)
    policy = root.one("meta", http_equiv="Content-Security-Policy").attrs["content"]
    assert policy.startswith("default-src 'none'")
    (script,) = root.find_all("script")
    assert "navigator.clipboard" in script.text
    footer = root.by_id("summary").text
    assert SUMMARY.match(footer) and f"{load(name)['summary']['skip']} skip" in footer


def test_the_one_way_ssh_cell_is_drawn_failed_and_the_reverse_ok() -> None:
    root = page(load("one-way-ssh"))
    mesh = root.by_id("ssh-mesh-grid")
    (cell,) = mesh.find_all("rect", cls="fail")
    assert (cell.attrs["data-source"], cell.attrs["data-target"]) == ("node2", "node3")
    assert cell.attrs["data-status"] == "publickey_denied"
    assert "Permission denied (publickey)" in cell.one("title").text
    back = [r for r in mesh.find_all("rect", cls="ok") if r.one("title").text.startswith("node3")]
    assert [r.one("title").text for r in back] == ["node3 → node1, node2: ok"]
    assert mesh.find_all("text", cls="mark")[0].text == "K"  # the terminal's letter
    row = [t for t in mesh.find_all("text", cls="rowlabel") if "fail" in t.classes]
    assert [t.own_text for t in row] == ["node2"]
    assert "All 6 pairs tested." in root.by_id("ssh-mesh-figure").text


def test_the_copy_button_carries_the_exact_command() -> None:
    document = load("one-way-ssh")
    (finding,) = document["findings"]
    root = page(document)
    card = root.one("article", data_code="mesh.publickey_denied")
    buttons = card.find_all("button", cls="copy")
    assert [b.attrs["data-copy"] for b in buttons] == finding["fix"]["commands"]
    assert [c.text for c in card.find_all("code") if c.text.startswith("ssh ")] == [
        "ssh node2 'cat ~/.ssh/id_*.pub' | ssh node3 'cat >> ~/.ssh/authorized_keys'"
    ]


def test_the_slow_node_is_marked_on_the_plot() -> None:
    root = page(load("slow-link"))
    plot = root.by_id("sweep-plot")
    assert plot.attrs["data-slow-node"] == "node3"
    slow = plot.one("g", cls="slow-node")
    assert slow.attrs["data-node"] == "node3" and "slow node node3" in slow.text
    assert plot.find_all("circle", cls="slow")  # sizes whose slowest rank was node3
    runs = [g.attrs["data-label"] for g in plot.find_all("g", cls="run")]
    assert runs == ["as configured"]  # the configuration worked: no recommended run
    assert root.one("p", cls="slow-callout").attrs["data-node"] == "node3"
    # veth reports no speed: the line is the measured links', and the page says why.
    assert "link speed unknown" in root.by_id("sweep-figure").text
    assert plot.find_all("g", cls="typical")


def test_a_run_that_failed_as_configured_beside_the_one_that_passed() -> None:
    # node2's hostname maps to 127.0.1.1: Gloo fails as configured, passes with the interface.
    root = page(load("gloo-loopback"))
    runs = root.one("table", cls="runs")
    labels = [th.text for th in runs.find_all("tr")[0].find_all("th")[1:]]
    assert labels == ["as configured", "as recommended GLOO_SOCKET_IFNAME=eth0"]
    assert [b.text for b in runs.find_all("span", cls="badge")] == ["failed", "passed"]
    ranks = root.one("details", cls="ranks")
    assert "open" in ranks.attrs and "did not finish every run" in ranks.one("summary").text
    assert "connectFullMesh" in ranks.text
    plot = root.by_id("sweep-plot")  # only the run that passed has a sweep
    assert [g.attrs["data-label"] for g in plot.find_all("g", cls="run")] == ["as recommended"]
    choice = root.one("table", cls="nic-choice")
    flagged = {
        r.attrs["data-nodes"]: len(r.find_all("td", cls="flagged"))
        for r in choice.find_all("tr")[1:]
    }
    assert flagged == {"node[1,3]": 0, "node2": 2}  # Gloo and TensorPipe on 127.0.1.1
    assert root.one("article", data_code="allreduce.failed").find_all("button", cls="copy")


def test_a_node_that_did_not_answer_heads_the_page() -> None:
    root = page(load("sshd-down"))  # node3's sshd stopped
    (row,) = root.by_id("unreachable").find_all("tr", cls="failed-node")
    assert row.attrs["data-node"] == "node3" and "ssh.refused" in row.text
    assert "port 22 refused" in row.text
    assert root.by_id("summary").text.endswith("; 1 of 3 nodes unreachable")
    html = render_html(load("sshd-down"))
    assert html.index('id="unreachable"') < html.index('id="findings"')
    # The stages ran between the nodes that answered.
    assert {t.own_text for t in root.by_id("ssh-mesh-grid").find_all("text", cls="rowlabel")} == {
        "node1",
        "node2",
    }


def test_a_known_link_speed_is_drawn_as_a_line() -> None:
    document = load("slow-link")
    for plan in document["nics"]["nodes"].values():
        for iface in plan["interfaces"]:
            if iface["name"] == "eth0":
                iface["speed_mbps"] = 10000
    plot = page(document).by_id("sweep-plot")
    assert "link speed 10 Gb/s (eth0 on node[1-3])" in plot.one("g", cls="speed").text


def test_a_healthy_report_says_so_and_has_no_failed_cell() -> None:
    root = page(load("healthy"))
    assert root.one("p", cls="clean").text.startswith("No findings")
    assert not root.find_all("rect", cls="fail") and not root.find_all("g", cls="slow-node")
    assert "top" in root.by_id("top").attrs["id"] and "verdict-pass" in root.by_id("top").classes
    skipped = root.find_all("details", cls="skipped")
    assert skipped[0].one("summary").text.startswith("skip 5 checks skipped: no NVIDIA GPU")
    assert len(skipped[0].find_all("li")) == 5


def test_findings_come_before_the_pictures_and_the_checks() -> None:
    html = render_html(load("one-way-ssh"))
    order = [html.index(f'id="{s}"') for s in ("findings", "ssh-mesh", "allreduce", "checks")]
    assert order == sorted(order)


def test_what_the_report_quotes_is_escaped() -> None:
    document = load("one-way-ssh")
    hostile = '<script>alert("x")</script><img src=x onerror=alert(1)>'
    document["findings"][0]["summary"] = hostile
    document["findings"][0]["evidence"] = [hostile]
    document["findings"][0]["fix"]["commands"] = [f"echo '{hostile}' \"q\""]
    document["ssh_mesh"]["failures"][0]["message"] = hostile
    html = render_html(document)
    root = parse(html)
    assert len(root.find_all("script")) == 1 and not root.find_all("img")
    assert root.find_all("button", cls="copy")[0].attrs["data-copy"] == f"echo '{hostile}' \"q\""
    assert hostile in root.one("article").one("h3").text


def test_redacted_document_leaks_no_name_or_address() -> None:
    document = load("one-way-ssh")
    names = list(document["nodes"])
    redactor = Redactor([[n] for n in names], ["root"])
    redactor.text(json.dumps(document))  # number the addresses in document order
    html = render_html(redactor.value(document))
    for secret in [*names, "198.18."]:
        assert secret not in html
    assert (
        parse(html).by_id("ssh-mesh-grid").one("rect", cls="fail").attrs["data-source"] == "host2"
    )


def test_128_nodes_stay_small_and_readable(big: tuple[dict[str, Any], str]) -> None:
    _, html = big
    assert len(html) < 1_000_000
    root = parse(html)
    mesh = root.by_id("ssh-mesh-grid")
    assert "dense" in mesh.classes and float(mesh.attrs["width"]) <= 700
    rects = mesh.find_all("rect", cls="cell")
    assert len(rects) < 800  # neighbours merged: not 128 × 128
    labels = {t.own_text: t.classes for t in mesh.find_all("text", cls="rowlabel")}
    assert 10 < len(labels) < 64  # sparse
    assert "fail" in labels["gpu007"] and "notrun" in labels["gpu100"]
    columns = {t.own_text for t in mesh.find_all("text", cls="collabel") if "fail" in t.classes}
    assert columns == {"gpu042"}
    (cell,) = mesh.find_all("rect", cls="fail")
    assert (cell.attrs["data-source"], cell.attrs["data-target"]) == ("gpu007", "gpu042")
    caption = root.by_id("ssh-mesh-figure").one("figcaption").text
    assert "16129 of 16256 pairs tested; grey rows did not run." in caption
    assert "hatched" not in caption and "--seed" not in caption  # every pair was to be tested


def test_sampled_pairs_are_drawn_not_tested(big: tuple[dict[str, Any], str]) -> None:
    document, html = big
    root = parse(html)
    reach = root.by_id("reachability-grid")
    untested = reach.find_all("rect", cls="untested")
    assert untested and all(r.attrs["fill"] == "url(#reachability-hatch)" for r in untested)
    assert all(r.one("title").text.endswith(": not sampled") for r in untested)
    tested = document["reachability"]["coverage"]["pairs_tested"]
    assert tested == 128 * 5  # the ring both ways and three random peers
    figure = root.by_id("reachability-figure").text
    assert f"{tested} of 16256 pairs tested; hatched pairs were not tested" in figure
    assert "--seed 18 tests the same pairs again" in figure
    (timeout,) = reach.find_all("rect", cls="fail")
    assert timeout.attrs["data-status"] == "timeout"


def test_a_pair_left_untested_is_hatched_with_why() -> None:
    # Every pair was to be tested; node3 could not listen, and one pair has no result at all.
    document = load("healthy")
    reach = document["reachability"]
    why = "node3 could not listen there: address in use"
    for link in reach["links"]:
        if link["target"] == "node3":
            link.update(status="not_tested", message=why)
            reach["matrix"][link["source"]]["node3"] = "not_tested"
    del reach["matrix"]["node2"]["node1"]
    grid = page(document).by_id("reachability-grid")
    titles = sorted(r.one("title").text for r in grid.find_all("rect", cls="untested"))
    told = f"not tested — eth0 {reach['interfaces']['node3']['eth0']}: not_tested ({why})"
    assert titles == [
        f"node1 → node3: {told}",
        "node2 → node1: not tested",
        f"node2 → node3: {told}",
    ]
    assert not grid.find_all("rect", cls="fail")
    assert "--seed" not in page(document).by_id("reachability-figure").text


def test_long_lists_fold_at_128_nodes(big: tuple[dict[str, Any], str]) -> None:
    root = parse(big[1])
    card = root.one("article", data_code="gloo.iface.loopback")
    assert "on gpu[001-100]" in card.one("p", cls="meta").text
    assert card.one("details", cls="nodes").one("summary").text == "all 100 nodes"
    assert len(card.find_all("ul", cls="evidence")[0].find_all("li")) == 3
    assert card.one("details", cls="more-evidence").one("summary").text.startswith("17 more lines")
    ranks = root.one("details", cls="ranks")
    assert ranks.one("summary").text == "128 ranks" and "open" not in ranks.attrs
    rows = root.one("table", cls="nic-choice").find_all("tr")[1:]
    assert [r.attrs["data-nodes"] for r in rows] == ["gpu[001-100]", "gpu[101-128]"]
    flagged = rows[0].one("td", cls="flagged")
    assert "lo 127.0.1.1" in flagged.text and "GLOO_SOCKET_IFNAME unset" in flagged.text


def test_each_distinct_topology_is_drawn_once(big: tuple[dict[str, Any], str]) -> None:
    root = parse(big[1])
    section = root.by_id("topology")
    headings = [h.text for h in section.find_all("h3")]
    assert headings == [
        "gpu[001-096]: 8 GPUs, 10 NICs (from nvidia-smi)",
        "gpu[097-128]: 4 GPUs, 2 NICs (from nvidia-smi)",
    ]
    hgx, pcie = section.find_all("svg", cls="topo")
    assert len(hgx.find_all("g", cls="gpu")) == 8 and len(hgx.find_all("g", cls="nic")) == 10
    assert [p.one("title").text for p in hgx.find_all("path", cls="nvlink")] == [
        "NV18 between every pair of GPUs (an NVSwitch fabric)"
    ]
    assert len(hgx.find_all("path", cls="near")) == 8  # each GPU to its PIX NIC
    assert len(pcie.find_all("rect", cls="socket")) == 2
    assert {p.one("title").text for p in pcie.find_all("path", cls="near")} == {
        "GPU0 → mlx5_0: PXB", "GPU1 → mlx5_0: PXB", "GPU2 → mlx5_1: PXB", "GPU3 → mlx5_1: PXB"
    }  # fmt: skip


def test_nvlink_pairs_that_differ_are_drawn_one_by_one() -> None:
    from render.reports import topology

    document = load("healthy")
    document["nodes"]["node1"]["facts"]["topo"]["topology"] = topology(
        "dgx1-v100-cube-mesh-old-driver-spaces"
    )
    svg = page(document).by_id("topology").one("svg")
    arcs = {p.one("title").text for p in svg.find_all("path", cls="nvlink")}
    assert "GPU0-GPU1: NV1" in arcs and "GPU0-GPU3: NV2" in arcs
    assert not any("every pair" in a for a in arcs)


def test_a_document_that_is_not_a_report_is_one_clear_error() -> None:
    with pytest.raises(ValueError, match=r"^not a cluster-doctor report: the top level: "):
        render_html({"hello": "world"})
    broken = load("healthy")
    broken["findings"] = [{"code": 3}]
    with pytest.raises(ValueError, match=r"^not a cluster-doctor report: findings/0: ") as info:
        render_html(broken)
    assert "\n" not in str(info.value)


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=20,
)
PART = st.sampled_from(["nics", "allreduce", "topo", "run", "nics-node"])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(part=PART, junk=JSON)
def test_parts_the_schema_leaves_open_may_hold_anything(part: str, junk: Any) -> None:
    document = load("slow-link")
    if part == "topo":
        document["nodes"]["node1"]["facts"]["topo"] = {"topology": junk, "nics": junk}
    elif part == "run":
        document["allreduce"]["runs"][0] = junk
    elif part == "nics-node":
        document["nics"]["nodes"]["node2"] = junk
    else:
        document[part] = junk
    assert "</html>" in render_html(document)


def test_importing_the_renderer_does_not_import_jinja2() -> None:
    code = "import sys, doctor.render.html; print('jinja2' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_renamed_reports_keep_their_findings() -> None:
    # The 128-node document's helper renames whole words only (node1 is not in node10).
    assert renamed({"node1": ["node1", "node10"]}, {"node1": "a"}) == {"a": ["a", "node10"]}


def test_where_each_rank_is_is_a_table_per_job() -> None:
    """`doctor stacks` on the H200's broadcast-against-allreduce hang, its real report: rank 1
    waits in its broadcast; rank 0's host thread is past its allreduce, in .item()."""
    doc = json.loads((FIXTURES / "gpu" / "h200" / "doctor" / "stacks-op.json").read_text())
    page = render_html(doc)
    assert '<a href="#stacks">Stacks</a>' in page and '<section id="stacks">' in page
    assert page.count('<tr class="waits"') == 1 and page.count('<tr class="odd"') == 1
    assert "broadcast called at job.py:92 &lt;module&gt;</td><td>1 on vm" in page
    assert page.index('id="findings"') < page.index('id="stacks"')
