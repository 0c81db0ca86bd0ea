"""The built docs site in a real browser (issue 45): Debian's Chromium, headless, driven by Playwright, over the site
built strict and served on 127.0.0.1. The start page's navigation reaches the command-line reference, whose
generated sections are on the page, and the search finds a setting on the configuration reference.

Chromium comes from Debian's `chromium` package (`.ci/run` installs it); Playwright drives that binary and downloads
no browser of its own."""

from __future__ import annotations

import functools
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

pytestmark = pytest.mark.servers

REPO = Path(__file__).resolve().parent.parent
CHROMIUM = Path("/usr/bin/chromium")
# Without the background-networking flags Chromium keeps dialling hosts this closed network refuses.
FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
# Every wait in the browser is on a condition (a page loaded, an element shown); this bound only stops a wait that
# would never end. A loaded machine took over 20 s to show the search results once, so it is far from that: the
# search index is built in a web worker, which a busy machine can starve for a long while.
WAIT_MS = 300_000


@pytest.fixture(scope="module")
def site_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    out = tmp_path_factory.mktemp("site")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1", "PYTHONPATH": str(REPO)}
    command = [sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(out)]
    done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True)
    assert done.returncode == 0, f"mkdocs build --strict failed:\n{done.stderr}"

    class Quiet(SimpleHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(out)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture(scope="module")
def page(site_url: str) -> Iterator[object]:
    assert CHROMIUM.exists(), f"{CHROMIUM}: needs Debian's chromium package (apt-get install chromium; .ci/run does)"
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=FLAGS, timeout=WAIT_MS)
        try:
            page = browser.new_page()
            page.set_default_timeout(WAIT_MS)
            page.set_default_navigation_timeout(WAIT_MS)
            yield page
        finally:
            browser.close()


def test_the_start_page_navigates_to_the_generated_cli_reference(page, site_url: str) -> None:
    page.goto(f"{site_url}/")
    assert page.title() == "skipindex", "the start page is the site's home"
    page.locator("nav.md-nav--primary a.md-nav__link[href$='reference/cli/']").first.click()
    page.wait_for_url("**/reference/cli/")
    assert page.title().startswith("Command line"), "the navigation reaches the command-line reference"
    body = page.locator("article").inner_text()
    for command in ("skipindex build", "skipindex explain", "skipindex serve"):
        assert command in body, f"the generated reference shows `{command}` in the browser"


def test_the_search_finds_a_setting_on_the_configuration_reference(page, site_url: str) -> None:
    from playwright.sync_api import TimeoutError as PlaywrightTimeoutError

    page.goto(f"{site_url}/")
    search = page.locator("input.md-search__input")
    search.click()
    # until the search worker has indexed the site (its "Initializing search" gives way), then typed key by key: a
    # value set at once (`fill`) before or after that moment was seen never to start a search
    page.locator(".md-search-result__meta", has_text="Type to start searching").wait_for()
    search.press_sequentially("open_cost_bytes")
    # the list is redrawn as each key's search answers: a link counted before a redraw may be gone after it, so the
    # test waits for the configuration reference's link itself (and reads the whole list at once to say what it saw)
    results = page.locator(".md-search-result__item a")
    configuration = page.locator('.md-search-result__item a[href*="reference/configuration/"]')
    try:
        configuration.first.wait_for()
    except PlaywrightTimeoutError:
        targets = results.evaluate_all("links => links.map(link => link.getAttribute('href'))")
        raise AssertionError(f"the search for a setting lists the configuration reference: {targets}") from None
