"""The web view in headless Chromium, fed a made-up cycle (no swarm): it renders without
script errors, works from the keyboard, filters decisions and keeps text readable.

The real-swarm browser test (tests/integration/test_web_view_swarm.py) shows it follow a
node failure live; this one checks the page itself, quickly.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio.from_thread
import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support.ui import Select, WebDriverWait

from controller.runtime.http_app import make_app
from controller.runtime.http_server import HttpServer
from controller.runtime.ui_access import UiAccess
from controller.runtime.web_view import WebView
from tests.browser import chromium
from tests.runtime.test_web_view import POLICY, _cycle

# For every element with its own text: the contrast ratio (WCAG 2) of its colour against
# the first opaque background behind it.
CONTRAST = """
function lum(c) {
  const [r, g, b] = c.match(/[\\d.]+/g).slice(0, 3).map(Number).map((v) => {
    v /= 255; return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4; });
  return 0.2126 * r + 0.7152 * g + 0.0722 * b;
}
function opaque(c) { const a = c.match(/[\\d.]+/g); return a.length < 4 || Number(a[3]) > 0.99; }
const worst = [];
for (const el of document.querySelectorAll("body *")) {
  const own = [...el.childNodes].some((n) => n.nodeType === 3 && n.textContent.trim());
  if (!own || !el.offsetParent) continue;
  let bg = null;
  for (let p = el; p; p = p.parentElement) {
    const c = getComputedStyle(p).backgroundColor;
    if (opaque(c)) { bg = c; break; }
  }
  bg = bg || "rgb(255, 255, 255)";
  const [a, b] = [lum(getComputedStyle(el).color), lum(bg)].sort((x, y) => y - x);
  worst.push([(a + 0.05) / (b + 0.05), el.tagName + " " + el.textContent.slice(0, 40)]);
}
worst.sort((x, y) => x[0] - y[0]);
return worst.slice(0, 3);
"""


@pytest.fixture
def page(tmp_path: Path) -> Iterator[Any]:
    view = WebView(UiAccess(token="browser-token"))
    server = HttpServer([("127.0.0.1", 0)], make_app(view.routes(), home="/ui"), on_stop=view.close)
    with anyio.from_thread.start_blocking_portal() as portal:
        serving = portal.start_task_soon(server.run)
        portal.call(view.update, _cycle(), POLICY, "leader")
        try:
            with chromium(tmp_path / "profile") as driver:
                driver.get(f"http://127.0.0.1:{server.port}/ui/login?token=browser-token")
                driver.get(f"http://127.0.0.1:{server.port}/")  # / leads to /ui
                WebDriverWait(driver, 30).until(
                    lambda d: d.find_elements(By.CSS_SELECTOR, 'article[data-node="node-3"]')
                )
                yield driver
                errors = [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]
                assert errors == [], errors
        finally:
            serving.cancel()


def test_the_map_shows_domains_nodes_marks_and_pending_tasks(page: Any) -> None:
    domains = [h.text for h in page.find_elements(By.CSS_SELECTOR, ".domain h3")]
    assert domains == ["rack r1", "rack r2"]
    down = page.find_element(By.CSS_SELECTOR, 'article[data-node="node-3"]')
    assert down.get_attribute("data-state") == "down"
    assert "quarantined" in down.text and "denies web" in down.text
    on_two = page.find_element(By.CSS_SELECTOR, 'article[data-node="node-2"]').text
    assert "web.2 ★" in on_two and "preferred by web #1" in on_two
    pending = page.find_element(By.CSS_SELECTOR, '[data-pending="web.3"]')
    assert "no suitable node" in pending.text


def test_it_works_from_the_keyboard(page: Any) -> None:
    body = page.find_element(By.TAG_NAME, "body")
    body.send_keys(Keys.TAB)
    assert page.switch_to.active_element.text == "Skip to the placement map"
    # Tab reaches every service's button; Enter opens its explanation.
    for _ in range(30):
        page.switch_to.active_element.send_keys(Keys.TAB)
        if page.switch_to.active_element.text == "web":
            break
    assert page.switch_to.active_element.tag_name == "button"
    page.switch_to.active_element.send_keys(Keys.ENTER)
    detail = page.find_element(By.ID, "detail")
    assert "web: why its tasks run where they run" in detail.text
    assert "preferred-nodes" in detail.text and "label placement.preferred-nodes" in detail.text


def test_decisions_filter_by_service_rule_and_outcome(page: Any) -> None:
    rows = page.find_elements(By.CSS_SELECTOR, "#decisions tbody tr")
    subjects = {r.find_elements(By.TAG_NAME, "td")[2].text for r in rows}
    assert len(rows) > 1 and "service web" in subjects
    Select(page.find_element(By.ID, "f-service")).select_by_value("web")
    rows = page.find_elements(By.CSS_SELECTOR, "#decisions tbody tr")
    assert rows and {r.find_elements(By.TAG_NAME, "td")[2].text for r in rows} == {"service web"}
    page.find_element(By.ID, "f-text").send_keys("no such words anywhere")
    assert page.find_elements(By.CSS_SELECTOR, "#decisions tbody tr") == []


def test_every_text_is_readable_against_its_background(page: Any) -> None:
    page.find_element(By.CSS_SELECTOR, '#services tr[data-service="web"] button').click()
    worst = page.execute_script(CONTRAST)
    assert worst and all(ratio >= 4.5 for ratio, _ in worst), worst
