"""Logging in to the web view, and being refused, in headless Chromium (no swarm).

A person opens the view, is sent to the login form, is refused a wrong token and let in
with the right one; the session is an HttpOnly, SameSite=Strict cookie no script reads.
A page of another name that resolves to the controller (DNS rebinding, mapped here by
Chromium's host resolver rules) gets a 421 and no data. A session that ends sends the
open page back to the login.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio.from_thread
import pytest
from selenium.common.exceptions import StaleElementReferenceException
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from controller.runtime.http_app import make_app
from controller.runtime.http_server import HttpServer
from controller.runtime.ui_access import COOKIE, SESSION_SECONDS, UiAccess
from controller.runtime.web_view import WebView
from tests.browser import chromium
from tests.runtime.test_web_view import POLICY, _cycle

TOKEN = "a-token-for-the-browser"
REBOUND = "rebound.example"


class Clock:
    now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


@dataclass
class Site:
    driver: Any
    port: int
    clock: Clock
    view: WebView
    portal: Any

    def url(self, path: str, host: str = "127.0.0.1") -> str:
        return f"http://{host}:{self.port}{path}"

    def wait(self) -> WebDriverWait[Any]:
        # A form post loads a new page: an element found on the old one may be gone by
        # the time it is read, which is a reason to read again, not a failure.
        stale = (StaleElementReferenceException,)
        return WebDriverWait(self.driver, 30, poll_frequency=0.2, ignored_exceptions=stale)


@pytest.fixture
def site(tmp_path: Path) -> Iterator[Site]:
    clock = Clock()
    view = WebView(UiAccess(token=TOKEN, clock=clock))
    server = HttpServer([("127.0.0.1", 0)], make_app(view.routes(), home="/ui"), on_stop=view.close)
    with anyio.from_thread.start_blocking_portal() as portal:
        serving = portal.start_task_soon(server.run)
        portal.call(view.update, _cycle(), POLICY, "leader")
        try:
            # The other name resolves to this machine, as a rebinding attacker makes it.
            rules = f"--host-resolver-rules=MAP {REBOUND} 127.0.0.1"
            with chromium(tmp_path / "profile", rules) as driver:
                yield Site(driver, server.port, clock, view, portal)
        finally:
            serving.cancel()


def _logged_in(driver: Any) -> bool:
    return bool(driver.find_elements(By.CSS_SELECTOR, 'article[data-node="node-3"]'))


def test_a_person_logs_in_with_the_token_and_a_wrong_one_is_refused(site: Site) -> None:
    driver = site.driver
    driver.get(site.url("/"))
    site.wait().until(lambda d: d.find_elements(By.ID, "token"))
    assert driver.current_url == site.url("/ui/login")
    assert not _logged_in(driver)

    driver.find_element(By.ID, "token").send_keys("not-the-token")
    driver.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    site.wait().until(lambda d: "Wrong token" in d.find_element(By.ID, "login-message").text)
    assert not _logged_in(driver) and "node-3" not in driver.page_source

    driver.find_element(By.ID, "token").send_keys(TOKEN)
    driver.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    site.wait().until(_logged_in)
    assert driver.current_url == site.url("/ui")
    [cookie] = [c for c in driver.get_cookies() if c["name"] == COOKIE]
    assert cookie["httpOnly"] is True and cookie["sameSite"] == "Strict"
    assert TOKEN not in cookie["value"]
    assert driver.execute_script("return document.cookie") == "", "no script reads the session"
    errors = [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]
    assert all("/ui/login" in e["message"] for e in errors), errors  # the refused form post


def test_the_login_link_lets_a_person_in_and_the_view_follows(site: Site) -> None:
    site.driver.get(site.url(f"/ui/login?code={site.view.access.login_code()}"))
    site.wait().until(_logged_in)
    assert site.driver.current_url == site.url("/ui")


def test_a_rebound_name_gets_a_421_and_no_data(site: Site) -> None:
    driver = site.driver
    driver.get(
        site.url(f"/ui/login?code={site.view.access.login_code()}")
    )  # logged in by its address
    site.wait().until(_logged_in)

    driver.get(site.url("/ui", host=REBOUND))
    body = driver.find_element(By.TAG_NAME, "body").text
    assert "does not answer to the name" in body and "node-3" not in driver.page_source
    # A script of the rebound page asking for the state, as an attacker's page would.
    status = driver.execute_async_script(
        "const done = arguments[arguments.length - 1];"
        "fetch('/ui/state', {credentials: 'include'}).then((r) => done(r.status));"
    )
    assert status == 421
    driver.get(site.url(f"/ui/login?code={site.view.access.login_code()}", host=REBOUND))
    assert "does not answer to the name" in driver.find_element(By.TAG_NAME, "body").text
    assert not [c for c in driver.get_cookies() if c["name"] == COOKIE]


def test_a_session_that_ends_sends_the_open_page_back_to_the_login(site: Site) -> None:
    site.driver.get(site.url(f"/ui/login?code={site.view.access.login_code()}"))
    site.wait().until(_logged_in)
    site.clock.now += SESSION_SECONDS + 1
    site.portal.call(site.view.close)  # the stream ends; the page's reconnect is refused
    site.wait().until(lambda d: d.find_elements(By.ID, "token"))
    assert site.driver.current_url == site.url("/ui/login")
