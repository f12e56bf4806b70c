"""The web view in headless Chromium, fed a made-up cycle (no swarm): it renders without
script errors, works from the keyboard, filters decisions and keeps text readable.

The real-swarm browser test (tests/integration/test_web_view_swarm.py) shows it follow a
node failure live; this one checks the page itself, quickly.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

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

# The viewer's time zone, not the machine's: half an hour off every whole-hour zone, so a
# time shown unconverted (or converted by whole hours only) cannot pass for a local one.
VIEWER_ZONE = "Asia/Kolkata"
EPOCH_LIKE = re.compile(r"(?<![\w.])\d{9,}(?:\.\d+)?(?![\w.])")

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
                driver.execute_cdp_cmd("Emulation.setTimezoneOverride", {"timezoneId": VIEWER_ZONE})
                driver.get(
                    f"http://127.0.0.1:{server.port}/ui/login?code={view.access.login_code()}"
                )
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


def test_times_show_in_the_viewers_time_zone_and_never_as_epoch_seconds(page: Any) -> None:
    cell = page.find_element(By.CSS_SELECTOR, "#decisions tbody tr time")
    utc = datetime.fromisoformat(cell.get_attribute("datetime"))
    local = utc.astimezone(ZoneInfo(VIEWER_ZONE)).strftime("%Y-%m-%d %H:%M:%S")
    assert cell.text == local
    assert cell.get_attribute("title") == cell.get_attribute("datetime")
    status = page.find_element(By.ID, "status").text
    assert re.search(r"last cycle \d{4}-\d\d-\d\d \d\d:\d\d:\d\d \(local time\)", status), status
    text = page.find_element(By.TAG_NAME, "body").text
    assert not EPOCH_LIKE.search(text), EPOCH_LIKE.findall(text)


def test_a_service_whose_possible_owners_are_not_yet_enforced_says_so_and_why(
    page: Any, tmp_path: Path
) -> None:
    gap = page.find_element(By.CSS_SELECTOR, '#services [data-gap="api"]')
    assert gap.text == "⚠ not yet enforced: 1 task(s) on node-1"
    assert page.find_elements(By.CSS_SELECTOR, '#services [data-gap="web"]') == []
    page.find_element(By.CSS_SELECTOR, '#services tr[data-service="api"] button').click()
    note = page.find_element(By.CSS_SELECTOR, '#detail p.gap[role="note"]')
    assert note.text.startswith("Possible owners not yet enforced: 1 task(s) on node-1. Why: ")
    assert "its data is local to its node (volume api-data)" in note.text
    replicas = page.find_element(By.CSS_SELECTOR, "#detail table").text
    assert "its data is on this node (volume api-data; placement.data auto" in replicas
    worst = page.execute_script(CONTRAST)
    assert all(ratio >= 4.5 for ratio, _ in worst), worst
    page.save_screenshot(str(tmp_path / "gap.png"))
