"""``/docs`` and ``/redoc`` render with the network off: their assets are served locally.

The browser test drives the same headless chromium as test_calendar_e2e, with every host name but
127.0.0.1 made unresolvable, so a page that needs a CDN stays blank and the test fails.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from _live_server import live_server
from test_calendar_e2e import headless_chromium, needs_browser

OPERATIONS = {"/models", "/learn", "/predict", "/readyz"}


@pytest.fixture(scope="module")
def server(tmp_path_factory) -> Iterator[str]:
    with live_server(tmp_path_factory.mktemp("data"), warmup="none") as url:
        yield url


def test_doc_pages_reference_only_local_assets(server):
    import httpx

    for page in ("/docs", "/redoc"):
        html = httpx.get(server + page).text
        srcs = re.findall(r'(?:src|href)="([^"]+)"', html) + re.findall(r"url: '([^']+)'", html)
        assert srcs, html
        assert all(s.startswith("/") for s in srcs), srcs  # nothing from another host
        for s in srcs:
            assert httpx.get(server + s).status_code == 200, s


@pytest.fixture
def offline_browser(tmp_path: Path) -> Iterator[object]:
    # every host name but 127.0.0.1 unresolvable: the network is off
    rules = "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1"
    yield from headless_chromium(tmp_path / "profile", rules)


@needs_browser
def test_swagger_ui_and_redoc_render_offline(server, offline_browser):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    d = offline_browser
    d.get(server + "/docs")
    WebDriverWait(d, 30).until(lambda d: d.find_elements(By.CSS_SELECTOR, ".opblock-summary-path"))
    paths = {e.text.strip() for e in d.find_elements(By.CSS_SELECTOR, ".opblock-summary-path")}
    assert OPERATIONS <= {p.replace("\u200b", "") for p in paths}, paths
    d.get(server + "/redoc")
    WebDriverWait(d, 30).until(lambda d: "Predict" in d.find_element(By.TAG_NAME, "body").text)
    body = d.find_element(By.TAG_NAME, "body").text
    assert "Readiness" in body and "Chorus" in body
