"""``/docs`` and ``/redoc`` load only same-origin assets, and the API serves them.

The pages are read as a browser would read them: every ``src`` / ``href`` and every URL
in an inline script must be on the API's own origin (no scheme, no ``//`` host) and
answer 200 with the packaged file; nothing names a CDN or Google Fonts. The assets are
the pinned npm dist files (hashes in ``curaflow/api/docs_ui/README.md``).
"""

from __future__ import annotations

import hashlib
import re
from html.parser import HTMLParser

import httpx
import pytest

from curaflow.api.app import create_app
from curaflow.api.docs import ASSETS_DIR, ASSETS_PATH
from curaflow.config import Settings

PINNED = {
    "swagger-ui/swagger-ui-bundle.js": "e6a898692f2d768e807c3ba4626068a69a2c5dd960dd6c76f3e4d3a3de180af2",
    "swagger-ui/swagger-ui.css": "5ed08757e53da3e026d6cbecc61fe5d43585c9560b302d534ad56692519a273d",
    "swagger-ui/favicon-32x32.png": "3ed612f41e050ca5e7000cad6f1cbe7e7da39f65fca99c02e99e6591056e5837",
    "redoc/redoc.standalone.js": "dcaf76612bc4a3fbcc923a8966dee2f6146a5f32e5ce1b6f02dd60cbbf89500b",
}
LICENCES = ["swagger-ui/LICENSE", "swagger-ui/NOTICE", "redoc/LICENSE"]
CONTENT_TYPES = {".js": "javascript", ".css": "text/css", ".png": "image/png", ".json": "application/json"}


class References(HTMLParser):
    """Every URL an HTML page makes a browser load: ``src``, ``href``, ``spec-url`` and the
    quoted URLs of inline scripts."""

    def __init__(self) -> None:
        super().__init__()
        self.urls: list[str] = []
        self._in_script = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self._in_script = tag == "script"
        for name, value in attrs:
            if name in ("src", "href", "spec-url") and value:
                self.urls.append(value)

    def handle_endtag(self, tag: str) -> None:
        self._in_script = False

    def handle_data(self, data: str) -> None:
        if self._in_script:
            self.urls += re.findall(r"""(?:url|href|src)\s*:\s*['"]([^'"]+)['"]""", data)


@pytest.fixture
async def http() -> httpx.AsyncClient:
    app = create_app(Settings())
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://api.local")


@pytest.mark.parametrize("page", ["/docs", "/redoc"])
async def test_the_docs_pages_load_only_same_origin_assets_and_those_are_served(
    http: httpx.AsyncClient, page: str
) -> None:
    answer = await http.get(page)
    assert answer.status_code == 200 and answer.headers["content-type"].startswith("text/html")
    html = answer.text
    # the browser may load nothing from another origin (ReDoc's bundle names a CDN logo)
    policy = dict(part.strip().split(" ", 1) for part in answer.headers["content-security-policy"].split(";"))
    assert policy["default-src"] == "'self'" and policy["img-src"] == "'self' data:"
    assert "http" not in answer.headers["content-security-policy"]
    for outside in ("cdn.", "jsdelivr", "unpkg", "googleapis", "fastapi.tiangolo.com", "validator.swagger.io"):
        assert outside not in html, outside
    parser = References()
    parser.feed(html)
    assert parser.urls, html
    assert "/openapi.json" in parser.urls
    for url in parser.urls:
        assert url.startswith("/") and not url.startswith("//"), f"{page} loads {url} from another origin"
        asset = await http.get(url)
        assert asset.status_code == 200, url
        suffix = url[url.rfind(".") :]
        assert CONTENT_TYPES[suffix] in asset.headers["content-type"], (url, asset.headers["content-type"])
        if url.startswith(ASSETS_PATH):
            assert asset.content == (ASSETS_DIR / url.removeprefix(ASSETS_PATH + "/")).read_bytes()


async def test_the_pages_follow_the_root_path_behind_a_proxy() -> None:
    app = create_app(Settings())
    transport = httpx.ASGITransport(app=app, root_path="/curaflow")
    async with httpx.AsyncClient(transport=transport, base_url="http://api.local") as http:
        parser = References()
        parser.feed((await http.get("/docs")).text)
    assert parser.urls and all(url.startswith("/curaflow/") for url in parser.urls), parser.urls


def test_the_assets_are_the_pinned_builds_with_their_licences() -> None:
    for name, digest in PINNED.items():
        assert hashlib.sha256((ASSETS_DIR / name).read_bytes()).hexdigest() == digest, name
    for name in LICENCES:
        assert (ASSETS_DIR / name).stat().st_size > 0, name
    readme = (ASSETS_DIR / "README.md").read_text()
    assert "swagger-ui-dist@5.35.0" in readme and "redoc@2.5.4" in readme
    for digest in PINNED.values():
        assert digest in readme
