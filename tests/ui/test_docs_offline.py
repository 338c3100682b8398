"""``/docs`` and ``/redoc`` render in a real browser with no network but the API's own origin.

A headless Chromium (Debian's ``chromium``, driven by the ``playwright`` package's API; no
browser download) opens both pages of a real API; every request to another origin is
aborted and recorded. Swagger UI must list the protocol's operations and ReDoc its title,
with no request leaving the API's origin. Screenshots land in ``tests/artifacts/``
(``docs-swagger-offline.png``, ``docs-redoc-offline.png``). Skipped when Chromium is not
installed (``apt-get install -y chromium``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.support import Stack, short_id
from tests.ui.test_temporal_ui import ARTIFACTS, CHROMIUM, LAUNCH_ARGS

pytestmark = [pytest.mark.integration, pytest.mark.slow]


async def test_the_docs_ui_renders_with_no_request_off_the_api(
    tmp_path: Path, temporal_address: str, database_url: str, ledger_pool: Any
) -> None:
    if CHROMIUM is None:
        pytest.skip("Chromium is not installed (Debian: apt-get install -y chromium); the UI test needs it")
    from playwright.async_api import async_playwright

    out = f"out-{short_id()}"
    stack = Stack(
        tmp_path,
        temporal_address,
        database_url,
        {
            "routes": {out: {"kind": "directory", "path": str(tmp_path / "out")}},
            "targets": [{"id": "demo", "routes": [out]}],
        },
    )
    await stack.start_api()
    assert stack.api is not None
    origin = stack.api.url
    elsewhere: list[str] = []
    ARTIFACTS.mkdir(exist_ok=True)
    try:
        async with async_playwright() as pw:
            browser = await pw.chromium.launch(executable_path=CHROMIUM, args=LAUNCH_ARGS, headless=True)
            page = await browser.new_page()

            async def only_the_api(route: Any) -> None:
                url = route.request.url
                if url.startswith(origin) or url.startswith("data:") or url.startswith("blob:"):
                    await route.continue_()
                else:
                    elsewhere.append(url)
                    await route.abort()

            await page.route("**/*", only_the_api)
            await page.goto(f"{origin}/docs")
            await page.wait_for_selector(".opblock", timeout=30_000)  # Swagger UI's operations
            await page.screenshot(path=str(ARTIFACTS / "docs-swagger-offline.png"), full_page=False)
            operations = len(await page.query_selector_all(".opblock"))
            swagger = (await page.inner_text("body")).replace("\u200b", "")

            await page.goto(f"{origin}/redoc")
            await page.wait_for_selector("h1:has-text('curaflow job API')", timeout=30_000)
            await page.wait_for_selector("text=Find Jobs", state="attached", timeout=30_000)
            await page.screenshot(path=str(ARTIFACTS / "docs-redoc-offline.png"), full_page=False)
            redoc = await page.inner_text("body")
            await browser.close()
    finally:
        await stack.stop()
    assert operations >= 9 and "/jobs/{job_id}/cancel" in swagger, swagger[:2000]
    assert "Workflow Protocol v1" in redoc
    assert elsewhere == []
