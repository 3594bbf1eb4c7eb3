"""Debian's headless Chromium driven through selenium, for the HTML report's browser tests.

Chromium and chromedriver come from Debian (``chromium``, ``chromium-driver``: the test runner,
tests/run, installs them). Without the background-networking flags Chromium tries to reach
Google's services at start, and on a machine without internet those connections are refused.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from selenium import webdriver
from selenium.webdriver.chrome.service import Service

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--hide-scrollbars",
    "--window-size=1200,900",
)
REPO = Path(__file__).resolve().parent.parent.parent


def artifacts() -> Path:
    """Where screenshots go: $CLUSTER_DOCTOR_ARTIFACTS, else test-artifacts/ (git-ignored)."""
    folder = Path(os.environ.get("CLUSTER_DOCTOR_ARTIFACTS") or REPO / "test-artifacts")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@contextmanager
def chromium() -> Iterator[webdriver.Chrome]:
    """A fresh headless Chromium (its own profile, removed afterwards) recording the console."""
    missing = [p for p in (CHROMIUM, CHROMEDRIVER) if not Path(p).exists()]
    assert not missing, f"{missing} missing: tests/run installs Debian's chromium, chromium-driver"
    profile = tempfile.mkdtemp(prefix="doctor-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in (*FLAGS, f"--user-data-dir={profile}"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def open_report(driver: webdriver.Chrome, html: str, name: str) -> Path:
    """Write the report to the artifacts folder and load it; the page's file."""
    path = artifacts() / f"{name}.html"
    path.write_text(html, encoding="utf-8")
    driver.get_log("browser")  # start from an empty console
    driver.get(path.as_uri())
    return path


def console_errors(driver: webdriver.Chrome) -> list[str]:
    """The console's errors since the last call (script errors, policy violations, failed
    loads)."""
    return [e["message"] for e in driver.get_log("browser") if e["level"] == "SEVERE"]


def screenshot(driver: webdriver.Chrome, name: str) -> Path:
    """The whole page as one PNG in the artifacts folder."""
    height = driver.execute_script("return document.documentElement.scrollHeight")
    driver.set_window_size(1200, min(int(height) + 40, 16000))
    path = artifacts() / f"{name}.png"
    assert driver.save_screenshot(str(path)), f"no screenshot written to {path}"
    driver.set_window_size(1200, 900)
    return path
