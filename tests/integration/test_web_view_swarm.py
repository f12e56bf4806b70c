"""The web view in a real browser on a real swarm: a node dies, the page follows.

Headless Chromium from Debian's packages, driven by Selenium through Debian's matching
chromedriver. The page is opened once; the test then kills a node and waits for the page
to show it down and its task on another node, and checks the page never reloaded (a
marker set in the page's window would be gone).
"""

from __future__ import annotations

import os
import shutil
import socket
from collections.abc import Iterator
from pathlib import Path

import docker
import pytest
from selenium import webdriver
from selenium.common.exceptions import (
    ElementNotInteractableException,
    StaleElementReferenceException,
    WebDriverException,
)
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support.ui import Select, WebDriverWait

from tests.browser import chromium
from tests.integration.support import ControllerThread, clean_client, running_by_node, wait_until

pytestmark = [pytest.mark.swarm, pytest.mark.slow]

POLICY = """\
apiVersion: placement/v1
nodes:
  fault-domains: {rack: rack}
controller: {resync-interval: 1s, move-cooldown: 2s}
"""


@pytest.fixture
def client(swarm) -> Iterator[docker.DockerClient]:  # type: ignore[no-untyped-def]
    # Also brings node-3 back if the test fails with it down.
    with clean_client(swarm) as c:
        yield c


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[webdriver.Chrome]:
    with chromium(tmp_path / "profile") as driver:
        yield driver


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _node_card(driver: webdriver.Chrome, host: str):  # type: ignore[no-untyped-def]
    return driver.find_element(By.CSS_SELECTOR, f'article[data-node="{host}"]')


def _hosts_of(driver: webdriver.Chrome, service: str) -> set[str]:
    chips = driver.find_elements(By.CSS_SELECTOR, f'article[data-node] [data-service="{service}"]')
    found = set()
    for chip in chips:
        try:
            found.add(chip.find_element(By.XPATH, "ancestor::article").get_attribute("data-node"))
        except WebDriverException:  # re-rendered under us: the next poll reads it again
            continue
    return found  # type: ignore[return-value]


def _filter_decisions(driver: webdriver.Chrome, service: str) -> bool:
    Select(driver.find_element(By.ID, "f-service")).select_by_value(service)
    return True


def _decision_rows_all_about(driver: webdriver.Chrome, service: str) -> bool:
    rows = driver.find_elements(By.CSS_SELECTOR, "#decisions tbody tr")
    return bool(rows) and all(f"service {service}" in r.text for r in rows)


def _open_explanation(driver: webdriver.Chrome, service: str) -> bool:
    driver.find_element(
        By.CSS_SELECTOR, f'#services tr[data-service="{service}"] button'
    ).send_keys(Keys.ENTER)
    return True


def test_the_page_shows_a_node_going_down_and_its_task_moving_without_a_reload(
    swarm,
    client: docker.DockerClient,
    browser: webdriver.Chrome,
    tmp_path: Path,  # type: ignore[no-untyped-def]
) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text(POLICY)
    db = "uidb"
    swarm.create_service(
        db,
        labels={
            "placement.managed": "true",
            "placement.preferred-nodes": "node-3,node-2",
            "placement.failback": "never",
        },
    )
    swarm.create_service(
        "uiweb", replicas=3, labels={"placement.managed": "true", "placement.spread": "rack"}
    )
    port = _free_port()
    token = "web-view-token"
    with ControllerThread(
        swarm.manager_host, policy=policy, http=("127.0.0.1", port), ui_token=token
    ) as ctl:
        wait_until(lambda: running_by_node(client, db) == {"node-3": 1}, 60, "db on node-3")
        # A token in a URL no longer logs in: the one-time code the controller prints does.
        assert ctl.controller.view is not None
        code = ctl.controller.view.access.login_code()
        browser.get(f"http://127.0.0.1:{port}/ui/login?code={code}")  # on to /ui
        # The page re-renders on every pushed cycle: an element read mid-render is gone,
        # or there but not laid out yet (not interactable).
        wait = WebDriverWait(
            browser,
            60,
            poll_frequency=0.25,
            ignored_exceptions=(StaleElementReferenceException, ElementNotInteractableException),
        )
        wait.until(lambda d: _hosts_of(d, db) == {"node-3"})
        assert "live" in browser.find_element(By.ID, "status").text
        browser.execute_script("window.stillTheSamePage = true;")

        swarm.fail("node-3", "crash")
        try:
            wait.until(lambda d: _node_card(d, "node-3").get_attribute("data-state") == "down")
            wait.until(lambda d: _hosts_of(d, db) and "node-3" not in _hosts_of(d, db))
            assert browser.execute_script("return window.stillTheSamePage === true;")
            # Every read below may meet an element replaced by the next pushed cycle: each
            # is a wait, so a stale element is read again rather than failing the test.
            wait.until(lambda d: "down" in _node_card(d, "node-3").text)

            # The decisions say why, filterable by service; the service's explanation opens
            # from the keyboard.
            wait.until(lambda d: _filter_decisions(d, db))
            wait.until(lambda d: _decision_rows_all_about(d, db))
            wait.until(lambda d: _open_explanation(d, db))
            wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "#detail h3"))
            wait.until(lambda d: "preferred-nodes" in d.find_element(By.ID, "detail").text)

            shot = tmp_path / "web-view.png"
            browser.save_screenshot(str(shot))
            assert shot.stat().st_size > 10_000
            keep = os.environ.get("PLACEMENT_SCREENSHOT")
            if keep:
                shutil.copyfile(shot, keep)
        finally:
            swarm.restore("node-3")
        print(ctl.out.getvalue())
