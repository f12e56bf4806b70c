"""Headless Chromium from Debian's packages, driven through Debian's matching driver.

Missing, the browser tests skip with the reason; in CI (CI=true) they fail instead, so a
CI run cannot pass without having run them.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from selenium import webdriver
from selenium.webdriver.chrome.service import Service as DriverService

CHROMIUM, DRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"


@contextlib.contextmanager
def chromium(profile: Path, *flags: str) -> Iterator[webdriver.Chrome]:
    """Headless Chromium; `flags` are more command-line switches (e.g. a host mapping)."""
    if not (os.path.exists(CHROMIUM) and os.path.exists(DRIVER)):
        message = "Debian's chromium and chromium-driver are needed for the browser tests"
        if os.environ.get("CI", "").strip().lower() == "true":
            pytest.fail(message, pytrace=False)
        pytest.skip(message)
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in (
        "--headless=new",
        "--no-sandbox",  # root, in a container or VM: Chromium's own sandbox cannot start
        "--disable-dev-shm-usage",
        "--window-size=1400,1000",
        f"--user-data-dir={profile}",
        *flags,
    ):
        options.add_argument(flag)
    driver = webdriver.Chrome(options=options, service=DriverService(DRIVER))
    try:
        yield driver
    finally:
        driver.quit()
