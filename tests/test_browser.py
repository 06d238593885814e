"""The inspector in a real browser: headless Chromium against a running `precis serve`.

Needs Debian's `chromium` and `chromium-driver`; without them the test skips and says how to
install them (CI installs them and sets REQUIRE_BROWSER_TEST, so there it fails instead).
Screenshots go to the test's own temporary directory.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from inspector_data import compacted_away_term, long_conversation, replay

from precis.core.messages import Message
from precis.stores import SQLiteStore

INSTALL = "apt-get install -y chromium chromium-driver"
KEY = "browser-test-key-0123456789"
# How long the browser may take to show what a step waits for (a bound, not a pause).
WAIT_SECONDS = 30


def _require(what: str) -> None:
    message = f"BROWSER TEST SKIPPED: {what}; install Chromium and its driver with `{INSTALL}`"
    if os.environ.get("REQUIRE_BROWSER_TEST"):
        pytest.fail(message.replace("SKIPPED", "FAILED") + " (REQUIRE_BROWSER_TEST is set)")
    pytest.skip(message)


@pytest.fixture(scope="module")
def driver() -> Iterator[Any]:
    chromium, chromedriver = shutil.which("chromium"), shutil.which("chromedriver")
    if chromium is None or chromedriver is None:
        _require("no `chromium` or `chromedriver` on PATH")
    assert chromium is not None and chromedriver is not None
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError as exc:
        _require(f"selenium is not installed ({exc}; pip install -e '.[dev]')")
    # The system's driver and browser only: Selenium Manager must not fetch anything.
    os.environ["SE_OFFLINE"] = "true"
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for argument in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--window-size=1200,1000",
    ):
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    browser = webdriver.Chrome(options=options, service=Service(executable_path=chromedriver))
    browser.set_page_load_timeout(WAIT_SECONDS)
    try:
        yield browser
    finally:
        browser.quit()


HOSTILE = '<script>window.pwned=1</script><img src=x onerror="window.pwned=1">'
SERVER_WINDOW = "8000"  # the service's; the conversations were compacted at their own 4,000


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[str, SQLiteStore]]:
    """`precis serve` (window 8,000) over a home holding a replayed real conversation (window
    4,000), a 22,500-message one, and one full of markup, with an API key."""
    home = tmp_path / "home"
    store = SQLiteStore(home / "precis.db")
    replay(store, "airline", manual_every=25)
    long_conversation(store, "long")
    store.create("hostile", system_prompt=HOSTILE)
    store.append("hostile", [Message(role="user", content=HOSTILE)])
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {k: v for k, v in os.environ.items() if not k.startswith("PRECIS_")}
    env |= {"PRECIS_HOME": str(home), "PRECIS_API_KEY": KEY, "PRECIS_CONTEXT_WINDOW": SERVER_WINDOW}
    process = subprocess.Popen(
        [sys.executable, "-m", "precis.cli", "serve", "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert process.stderr is not None
        started = [process.stderr.readline()]
        while "Uvicorn running on" not in started[-1]:
            assert started[-1], f"precis serve ended: {''.join(started)}"
            started.append(process.stderr.readline())
        yield f"http://127.0.0.1:{port}", store
    finally:
        process.terminate()
        process.wait(30)
        store.close()


def href_of(driver: Any, css: str) -> str:
    """The link now matching `css`, read in one script call: no element is held across a live
    swap, so none goes stale."""
    found = driver.execute_script(
        "var a = document.querySelector(arguments[0]); return a && a.getAttribute('href');", css
    )
    assert isinstance(found, str), css
    return found


def as_phone(driver: Any, phone: bool) -> None:
    """A 390 × 844 touch screen (or the desktop back), set through the DevTools protocol."""
    if phone:
        metrics = {"width": 390, "height": 844, "deviceScaleFactor": 2, "mobile": True}
        driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", metrics)
    else:
        driver.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})


def test_the_inspector_in_chromium(
    driver: Any, served: tuple[str, SQLiteStore], tmp_path: Path
) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as shows
    from selenium.webdriver.support.ui import WebDriverWait

    url, store = served
    wait = WebDriverWait(driver, WAIT_SECONDS)
    shots = Path(os.environ.get("PRECIS_SCREENSHOTS", str(tmp_path / "screenshots")))
    shots.mkdir(exist_ok=True)
    events = store.events("airline")

    # The page asks for the key once.
    as_phone(driver, False)
    driver.get(f"{url}/ui/c/airline")
    wait.until(shows.presence_of_element_located((By.ID, "key"))).send_keys(KEY)
    driver.find_element(By.CSS_SELECTOR, "form button[type=submit]").click()
    wait.until(shows.url_to_be(f"{url}/ui/c/airline"))

    # The chart: a band per part of the window and a marker per compaction (close ones as one).
    chart = wait.until(shows.visibility_of_element_located((By.ID, "composition")))
    assert chart.size["width"] > 600 and chart.size["height"] > 200
    assert len(driver.find_elements(By.CSS_SELECTOR, "#composition path.part")) >= 4
    counts = driver.execute_script(
        "return [...document.querySelectorAll('#composition a.marker')].map(a => +a.dataset.count)"
    )
    assert sum(counts) == len(events) >= 3
    frame = driver.find_element(By.CSS_SELECTOR, ".chart-frame")
    turns = int(frame.get_attribute("data-turns") or 0)
    assert turns == len(store.samples("airline"))
    # The conversation's own window (4,000), not the service's (8,000), and one convention.
    guides = driver.find_element(By.ID, "composition").text
    assert "window 4,000" in guides and "8,000" not in guides
    assert "of 4,000" in driver.find_element(By.ID, "context-total").text
    assert "system prompt" in driver.find_element(By.CSS_SELECTOR, ".convention").text
    driver.save_screenshot(str(shots / "conversation.png"))

    # A phone: the phone's chart, readable text, finger-wide markers, a turn's figures on tap.
    as_phone(driver, True)
    driver.refresh()
    phone = wait.until(shows.visibility_of_element_located((By.ID, "composition-phone")))
    assert not driver.find_element(By.ID, "composition").is_displayed()
    assert phone.size["width"] <= 390
    smallest = driver.execute_script(
        "var svg = document.getElementById('composition-phone');"
        "var scale = svg.getBoundingClientRect().width / svg.viewBox.baseVal.width;"
        "return Math.min(...[...svg.querySelectorAll('text')].map("
        "t => +t.getAttribute('font-size') * scale));"
    )
    assert smallest >= 9
    taps = driver.execute_script(
        "return [...document.querySelectorAll('#composition-phone rect.tap')]"
        ".map(r => r.getBoundingClientRect().width)"
    )
    assert taps and min(taps) >= 32
    assert driver.execute_script("return document.documentElement.scrollWidth") <= 390
    driver.find_element(By.CSS_SELECTOR, "#composition-phone rect.col:last-of-type").click()
    wait.until(shows.text_to_be_present_in_element((By.ID, "turn-detail"), "tokens"))
    driver.save_screenshot(str(shots / "phone.png"))
    as_phone(driver, False)
    driver.refresh()
    wait.until(shows.visibility_of_element_located((By.ID, "composition")))

    # It follows the agent live: a turn appended over the API is appended to the chart the page
    # holds (the stream sends the new sample; the chart is not fetched again).
    driver.execute_script("document.getElementById('composition').dataset.probe = 'kept'")
    points = "return document.querySelector('#composition path.part-system').getAttribute('d')"
    drawn = driver.execute_script(points).count("L")
    appended = httpx.post(
        f"{url}/v1/conversations/airline/messages",
        headers={"Authorization": f"Bearer {KEY}"},
        json={"messages": [{"role": "user", "content": "One more thing: is my seat confirmed?"}]},
        timeout=WAIT_SECONDS,
    )
    assert appended.status_code == 201
    wait.until(
        lambda d: (
            d.execute_script("return document.querySelector('.chart-frame').dataset.turns")
            == str(turns + 1)
        )
    )
    wait.until(shows.text_to_be_present_in_element((By.ID, "context"), "is my seat confirmed?"))
    probe = "return document.getElementById('composition').dataset.probe"
    assert driver.execute_script(probe) == "kept"
    assert driver.execute_script(points).count("L") == drawn + 1

    # A compaction marker opens that compaction, with its ledger and its neighbours.
    driver.get(url + href_of(driver, "#composition a.marker"))
    heading = wait.until(shows.visibility_of_element_located((By.ID, "compaction-title")))
    assert heading.text == "Compaction 1"
    assert driver.find_element(By.ID, "trigger").text == events[0].trigger
    assert driver.find_element(By.ID, "mode").text == events[0].mode
    assert driver.find_elements(By.ID, "ledger") and driver.find_elements(By.ID, "next")
    driver.save_screenshot(str(shots / "compaction.png"))

    # Recall finds an original that was compacted away, and links into the history.
    word, message_id = compacted_away_term(store, "airline")
    driver.get(f"{url}/ui/c/airline/recall?q={word}&originals=true")
    wanted = f"ol.hits a[href*='{message_id}']"
    wait.until(shows.presence_of_element_located((By.CSS_SELECTOR, wanted)))
    assert word.lower() in driver.find_element(By.CSS_SELECTOR, "ol.hits mark").text.lower()
    assert "match" in driver.find_element(By.ID, "hit-count").text
    driver.get(url + href_of(driver, wanted))
    original = wait.until(shows.visibility_of_element_located((By.ID, f"m-{message_id}")))
    assert word in original.text
    assert driver.find_elements(By.CSS_SELECTOR, f".hit #m-{message_id}")

    # 22,500 messages and 2,500 compactions: a page of bounded size, markers clustered.
    driver.get(f"{url}/ui/c/long")
    wait.until(shows.visibility_of_element_located((By.ID, "composition")))
    size = driver.execute_script("return document.documentElement.outerHTML.length")
    assert size <= 300_000
    drawn = driver.execute_script(
        "return [...document.querySelectorAll('#composition a.marker')].map(a => +a.dataset.count)"
    )
    assert sum(drawn) == 2500 and len(drawn) <= 60
    assert len(driver.find_elements(By.CSS_SELECTOR, "ol.compactions li")) <= 10

    # Markup in a conversation is shown as text, never run.
    driver.get(f"{url}/ui/c/hostile")
    wait.until(shows.presence_of_element_located((By.ID, "context")))
    assert driver.execute_script("return window.pwned === undefined")
    assert HOSTILE in driver.find_element(By.ID, "context").get_attribute("textContent")

    # A page opened before its conversation's first turn draws the chart when one arrives.
    auth = {"Authorization": f"Bearer {KEY}"}
    created = httpx.post(f"{url}/v1/conversations", headers=auth, json={"id": "fresh"})
    assert created.status_code == 201
    driver.get(f"{url}/ui/c/fresh")
    wait.until(shows.presence_of_element_located((By.CSS_SELECTOR, "#chart p.empty")))
    first = httpx.post(
        f"{url}/v1/conversations/fresh/messages",
        headers=auth,
        json={"messages": [{"role": "user", "content": "Hello there"}]},
        timeout=WAIT_SECONDS,
    )
    assert first.status_code == 201
    wait.until(shows.visibility_of_element_located((By.ID, "composition")))

    # Nothing was blocked or failed on the way (a script from elsewhere would be, by the CSP).
    problems = [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]
    assert problems == []
