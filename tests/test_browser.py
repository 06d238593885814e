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
from inspector_data import compacted_away_term, replay

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


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[str, SQLiteStore]]:
    """`precis serve` over a home holding a replayed real conversation, with an API key."""
    home = tmp_path / "home"
    store = SQLiteStore(home / "precis.db")
    replay(store, "airline", manual_every=25)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {k: v for k, v in os.environ.items() if not k.startswith("PRECIS_")}
    env |= {"PRECIS_HOME": str(home), "PRECIS_API_KEY": KEY, "PRECIS_CONTEXT_WINDOW": "4000"}
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


def click_fresh(driver: Any, css: str) -> bool:
    """Click the element now matching `css`; False (try again) if a live swap replaced it."""
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.common.by import By

    try:
        driver.find_element(By.CSS_SELECTOR, css).click()
    except StaleElementReferenceException:
        return False
    return True


def test_the_inspector_in_chromium(
    driver: Any, served: tuple[str, SQLiteStore], tmp_path: Path
) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as shows
    from selenium.webdriver.support.ui import WebDriverWait

    url, store = served
    wait = WebDriverWait(driver, WAIT_SECONDS)
    shots = tmp_path / "screenshots"
    shots.mkdir()
    events = store.events("airline")

    # The page asks for the key once.
    driver.get(f"{url}/ui/c/airline")
    wait.until(shows.presence_of_element_located((By.ID, "key"))).send_keys(KEY)
    driver.save_screenshot(str(shots / "login.png"))
    driver.find_element(By.CSS_SELECTOR, "form button[type=submit]").click()
    wait.until(shows.url_to_be(f"{url}/ui/c/airline"))

    # The chart: a band per part of the window and a marker per compaction.
    chart = wait.until(shows.visibility_of_element_located((By.ID, "composition")))
    assert chart.size["width"] > 600 and chart.size["height"] > 200
    assert len(driver.find_elements(By.CSS_SELECTOR, "#composition path.part")) >= 4
    markers = driver.find_elements(By.CSS_SELECTOR, "#composition a.marker")
    assert len(markers) == len(events) >= 3
    frame = driver.find_element(By.CSS_SELECTOR, ".chart-frame")
    turns = int(frame.get_attribute("data-turns") or 0)
    assert turns == len(store.samples("airline"))
    hover = driver.find_elements(By.CSS_SELECTOR, "#composition rect.col title")[-1]
    assert "tokens" in hover.get_attribute("textContent") and "system prompt" in (
        hover.get_attribute("textContent") or ""
    )
    driver.save_screenshot(str(shots / "conversation.png"))

    # It follows the agent live: a turn appended over the API redraws the chart.
    appended = httpx.post(
        f"{url}/v1/conversations/airline/messages",
        headers={"Authorization": f"Bearer {KEY}"},
        json={"messages": [{"role": "user", "content": "One more thing: is my seat confirmed?"}]},
        timeout=WAIT_SECONDS,
    )
    assert appended.status_code == 201
    wait.until(
        lambda d: (
            d.find_element(By.CSS_SELECTOR, ".chart-frame").get_attribute("data-turns")
            == str(turns + 1)
        )
    )
    assert "is my seat confirmed?" in driver.find_element(By.ID, "context").text

    # Clicking a compaction marker opens that compaction.
    wait.until(lambda d: click_fresh(d, "#composition a.marker path"))
    wait.until(shows.url_to_be(f"{url}/ui/c/airline/compactions/1"))
    heading = wait.until(shows.visibility_of_element_located((By.ID, "compaction-title")))
    assert heading.text == "Compaction 1"
    assert driver.find_element(By.ID, "trigger").text == events[0].trigger
    assert driver.find_element(By.ID, "mode").text == events[0].mode
    driver.save_screenshot(str(shots / "compaction.png"))

    # Recall finds an original that was compacted away, and links into the history.
    word, message_id = compacted_away_term(store, "airline")
    driver.get(f"{url}/ui/c/airline/recall")
    wait.until(shows.visibility_of_element_located((By.ID, "q"))).send_keys(word)
    # Typing fires a search per pause, so a prefix's hits may be swapped out under the cursor:
    # wait for the hit on this original, and click it again if the list was replaced meanwhile.
    wanted = f"ol.hits a[href*='{message_id}']"
    wait.until(shows.element_to_be_clickable((By.CSS_SELECTOR, wanted)))
    driver.save_screenshot(str(shots / "recall.png"))
    wait.until(lambda d: click_fresh(d, wanted))
    original = wait.until(shows.visibility_of_element_located((By.ID, f"m-{message_id}")))
    assert word in original.text
    assert driver.find_elements(By.CSS_SELECTOR, f".hit #m-{message_id}")
    driver.save_screenshot(str(shots / "history.png"))

    # Nothing was blocked or failed on the way (a script from elsewhere would be, by the CSP).
    problems = [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]
    assert problems == []
    assert sorted(p.name for p in shots.iterdir()) == [
        "compaction.png",
        "conversation.png",
        "history.png",
        "login.png",
        "recall.png",
    ]
