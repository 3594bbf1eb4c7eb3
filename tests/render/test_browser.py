"""The HTML report in a real browser (Debian's headless Chromium): what renders, not the markup.

The cluster tests produce each report the way a user does, ``python -m doctor preflight -H ...
-f json`` against the test bed (real sshd, real TCP, a real Gloo allreduce), render it, open it,
and assert on the page: the failing mesh cell is there, visible and red; the slow node is marked
on the plot; the console holds no error (a script error, or anything the page tried to fetch,
which its Content-Security-Policy refuses). Each leaves its HTML and a full-page PNG in the
artifacts folder ($CLUSTER_DOCTOR_ARTIFACTS, default test-artifacts/).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.remote.webelement import WebElement
from selenium.webdriver.support.wait import WebDriverWait

from doctor.render.html import render_html
from render.browser import chromium, console_errors, open_report, screenshot
from render.reports import SCENARIOS, large, preflight
from tests.cluster.harness import make_cluster

RED = "rgb(198, 40, 40)"  # --fail in report.css


@pytest.fixture(scope="module")
def browser() -> Iterator[WebDriver]:
    with chromium() as driver:
        yield driver


def css(driver: WebDriver | WebElement, selector: str) -> list[WebElement]:
    return driver.find_elements(By.CSS_SELECTOR, selector)


def style(driver: WebDriver, element: WebElement, prop: str) -> str:
    return str(driver.execute_script(f"return getComputedStyle(arguments[0]).{prop}", element))


def shown(element: WebElement) -> bool:
    """Displayed and drawn with a size (is_displayed alone does not measure an SVG element's
    box; a horizontal line's box has no height)."""
    size = element.size
    return element.is_displayed() and max(size["width"], size["height"]) > 0


def assert_page_is_sound(driver: WebDriver) -> None:
    assert console_errors(driver) == []
    width = driver.execute_script("return document.documentElement.scrollWidth")
    assert width <= driver.execute_script("return window.innerWidth"), "the page scrolls sideways"
    assert driver.find_element(By.ID, "summary").is_displayed()


def test_128_nodes_in_the_browser(browser: WebDriver) -> None:
    open_report(browser, render_html(large(128)), "report-128-nodes")
    assert_page_is_sound(browser)
    grid = browser.find_element(By.ID, "ssh-mesh-grid")
    assert grid.size["width"] <= 700
    (cell,) = css(grid, "rect.fail")
    assert shown(cell) and style(browser, cell, "fill") == RED
    assert cell.get_attribute("data-source") == "gpu007"
    hatch = css(browser, "#reachability-grid rect.untested")[0]
    assert style(browser, hatch, "fill").startswith("url(")
    # Folded lists open on a click.
    nodes = browser.find_element(
        By.CSS_SELECTOR, "article[data-code='gloo.iface.loopback'] details"
    )
    assert not nodes.find_element(By.TAG_NAME, "p").is_displayed()
    nodes.find_element(By.TAG_NAME, "summary").click()
    assert "gpu100" in nodes.find_element(By.TAG_NAME, "p").text
    # The copy button works offline: the clipboard, or the command left selected.
    button = css(browser, "button.copy")[0]
    button.click()
    WebDriverWait(browser, 10).until(lambda _: button.get_attribute("data-state"))
    assert button.get_attribute("data-state") in ("copied", "selected")
    assert console_errors(browser) == []
    screenshot(browser, "report-128-nodes")


def real_run(scenario: str, workdir: Path) -> dict[str, Any]:
    """The report of ``doctor preflight`` on a fresh 3-node test bed broken as ``scenario``."""
    with make_cluster(3, workdir) as c:
        SCENARIOS[scenario](c)
        return preflight(c)


@pytest.mark.cluster
def test_healthy_cluster_report(browser: WebDriver, tmp_path: Path) -> None:
    document = real_run("healthy", tmp_path)
    open_report(browser, render_html(document), "report-healthy")
    assert_page_is_sound(browser)
    assert browser.find_element(By.CSS_SELECTOR, "#findings .clean").is_displayed()
    ok = css(browser, "#ssh-mesh-grid rect.ok")
    assert ok and all(style(browser, r, "fill") == "rgb(102, 187, 106)" for r in ok)
    assert css(browser, "#ssh-mesh-grid rect.fail") == []
    assert browser.find_element(By.ID, "sweep-plot").is_displayed()
    assert css(browser, "#sweep-plot .slow-node") == []
    screenshot(browser, "report-healthy")


@pytest.mark.cluster
def test_one_way_ssh_report(browser: WebDriver, tmp_path: Path) -> None:
    document = real_run("one-way-ssh", tmp_path)
    open_report(browser, render_html(document), "report-one-way-ssh")
    assert_page_is_sound(browser)
    (cell,) = css(browser, "#ssh-mesh-grid rect.fail")
    assert (cell.get_attribute("data-source"), cell.get_attribute("data-target")) == (
        "node2",
        "node3",
    )
    assert cell.get_attribute("data-status") == "publickey_denied"
    assert shown(cell) and style(browser, cell, "fill") == RED
    (mark,) = css(browser, "#ssh-mesh-grid text.mark")
    assert mark.text == "K" and shown(mark)
    (label,) = css(browser, "#ssh-mesh-grid text.rowlabel.fail")
    assert label.text == "node2" and style(browser, label, "fill") == RED
    card = browser.find_element(By.CSS_SELECTOR, "article[data-code='mesh.publickey_denied']")
    assert card.find_element(By.TAG_NAME, "h3").text.startswith("SSH node2 → node3 fails")
    assert card.find_element(By.CSS_SELECTOR, "button.copy").is_displayed()
    screenshot(browser, "report-one-way-ssh")


@pytest.mark.cluster
def test_slow_link_report(browser: WebDriver, tmp_path: Path) -> None:
    document = real_run("slow-link", tmp_path)
    assert document["allreduce"]["runs"][-1]["slow_node"] == "node3", document["allreduce"]
    open_report(browser, render_html(document), "report-slow-link")
    assert_page_is_sound(browser)
    plot = browser.find_element(By.ID, "sweep-plot")
    assert plot.get_attribute("data-slow-node") == "node3" and shown(plot)
    (slow,) = css(plot, "g.slow-node")
    assert slow.get_attribute("data-node") == "node3"
    line = slow.find_element(By.CSS_SELECTOR, "line")
    assert shown(line) and style(browser, line, "stroke") == RED
    assert "slow node node3" in slow.find_element(By.CSS_SELECTOR, "text").text
    # A size is ringed where its slowest rank ran on node3. In a ring allreduce every rank waits
    # for the slow link, so which rank is slowest at a size is up to the timers: the rings are
    # checked against the run's own rows, not assumed.
    slowest_on_node3 = [
        row
        for run in document["allreduce"]["runs"]
        for row in run.get("sweep") or []
        if row.get("slowest_node") == "node3" and row.get("busbw_gbps") and row.get("bytes")
    ]
    ringed = css(plot, "circle.slow")
    assert len(ringed) == len(slowest_on_node3), document["allreduce"]
    assert all(style(browser, p, "stroke") == RED for p in ringed)
    assert "node3" in browser.find_element(By.CSS_SELECTOR, "p.slow-callout").text
    screenshot(browser, "report-slow-link")


def test_rdma_ports_and_gpus_in_the_browser(browser: WebDriver) -> None:
    """Pasted GPU-node outputs (written from their tools' formats) of two nodes: each HCA port's
    rate, width and error counters, and each GPU's temperature, margin and firmware, in rows
    that nodes alike share."""
    from doctor.facts.cluster import ClusterFacts
    from doctor.facts.node import parse_node
    from doctor.judge.registry import load_checks
    from doctor.judge.report import Report
    from doctor.judge.runner import run_checks
    from tests.paste.pastekit import pasted, read_text

    fixtures = Path(__file__).parent.parent / "fixtures"
    healthy = pasted("written-ibv_devinfo-v-ndr.txt").replace(
        "\t\t\tactive_width:\t\t2X (16)", "\t\t\tactive_width:\t\t4X (2)"
    )
    nodes = {
        "gpu1": healthy + (fixtures / "nvidia" / "smi-q-vitals-healthy.txt").read_text(),
        "gpu2": pasted("written-ibv_devinfo-v-ndr.txt")
        + (fixtures / "nvidia" / "smi-q-vitals-degraded.txt").read_text(),
    }
    facts = {n: parse_node(n, read_text(t, n)) for n, t in nodes.items()}
    cluster = ClusterFacts(nodes=facts)
    document = Report.build("analyze", cluster, run_checks(load_checks(), cluster)).to_json()
    open_report(browser, render_html(document), "report-devices")
    assert_page_is_sound(browser)
    section = browser.find_element(By.ID, "devices")
    assert section.is_displayed()
    ports, gpus = css(section, "table.devices")
    rows = [[td.text for td in css(tr, "td")] for tr in css(ports, "tr")[1:]]
    assert [
        "gpu[1-2]",
        "mlx5_0 port 1",
        "MT4129",
        "ACTIVE",
        "InfiniBand",
        "400 Gb/s (4X NDR)",
        "-",
        "28.39.1002",
    ] in rows
    assert [
        "gpu2",
        "mlx5_3 port 1",
        "MT4129",
        "ACTIVE",
        "InfiniBand",
        "200 Gb/s (2X NDR)",
        "-",
        "28.39.1002",
    ] in rows
    gpu_rows = [[td.text for td in css(tr, "td")] for tr in css(gpus, "tr")[1:]]
    assert [
        "gpu2",
        "GPU1 NVIDIA H100 80GB HBM3",
        "91 °C",
        "-1 °C",
        "700 W of 700 W",
        "96.00.74.00.01",
        "535.161.08",
    ] in gpu_rows
    assert [
        "gpu1",
        "GPU0 NVIDIA H100 80GB HBM3",
        "32 °C",
        "57 °C",
        "700 W of 700 W",
        "96.00.74.00.01",
        "535.161.08",
    ] in gpu_rows
    screenshot(browser, "report-devices")
