"""The Temporal UI as the operator's console, driven by a real headless Chromium.

Starts its own dev server *with the Web UI* (free ports), a real worker and two jobs
(one succeeds, one finds no candidate), then in Debian's ``chromium`` (driven by the
``playwright`` package's API; no browser download):

1. lists workflows filtered by ``JobStatus`` and finds exactly the matching job;
2. opens that job and finds its status and its current details (cells, business status);
3. lists a running, a terminated and a failed job, each with its own badge (a failed
   job is *Failed*, not a green *Completed*), and opens the running one: its current
   details show the stage (``fetching``) and the summary ``start_job`` set;
4. opens a job admitted over HTTP and one started by ``start_job`` whose Task's tags and
   key hold markdown: their summary and details (rendered as markdown) show it as text —
   no link, no image the browser fetches.

Screenshots land in ``tests/artifacts/`` (kept by CI as artifacts). Skipped with a
clear message when Chromium is not installed (``apt-get install -y chromium``).
"""

from __future__ import annotations

import re
import shutil
import urllib.parse
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from curaflow.devstack.temporal import TemporalDevServer
from tests.support import Stack, eventually, short_id

pytestmark = [pytest.mark.integration, pytest.mark.slow]

ARTIFACTS = Path(__file__).resolve().parents[1] / "artifacts"
CHROMIUM = shutil.which("chromium") or ("/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else None)
LAUNCH_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-sync",
    "--disable-dev-shm-usage",
]


@pytest.fixture
async def ui_server(tmp_path: Path) -> AsyncIterator[TemporalDevServer]:
    server = TemporalDevServer(ui_port=0, log_file=tmp_path / "temporal-ui.log")
    await server.start()
    try:
        yield server
    finally:
        server.stop()


async def test_ui_filters_jobs_by_status_and_shows_a_jobs_status_and_details(
    ui_server: TemporalDevServer, tmp_path: Path, database_url: str
) -> None:
    if CHROMIUM is None:
        pytest.skip("Chromium is not installed (Debian: apt-get install -y chromium); the UI test needs it")
    assert ui_server.ui_url

    route = f"out-{short_id()}"
    config: dict[str, Any] = {
        "routes": {route: {"kind": "directory", "path": str(tmp_path / "delivered")}},
        "targets": [{"id": "demo", "query": {"tags": ["オリジナル"]}, "routes": [route]}],
    }
    stack = Stack(tmp_path, ui_server.address, database_url, config)
    try:
        await _browse(stack, ui_server.ui_url)
    finally:
        await stack.stop()


async def _all_text(page: Any) -> str:
    """Visible text of the page and of its frames (the UI renders user markdown in iframes)."""
    parts = []
    for frame in page.frames:
        try:
            parts.append(await frame.inner_text("body"))
        except Exception:  # noqa: BLE001 - a frame may be navigating or empty
            continue
    return "\n".join(parts)


async def _wait_for_text(page: Any, needle: str, timeout_s: float = 60.0) -> None:
    """Poll the page's visible text (the UI's CSP forbids evaluated predicates)."""

    async def shown() -> bool:
        return needle in await _all_text(page)

    await eventually(shown, timeout_s=timeout_s, interval_s=0.25, what=f"{needle!r} shown")


async def _browse(stack: Stack, ui: str) -> None:
    from playwright.async_api import async_playwright

    # the worker keeps running: the UI reads a job's current details through a query
    await stack.start_worker()
    ok = await stack.admit(stack.task(query={"tags": ["オリジナル"]}))
    none = await stack.admit(stack.task(query={"tags": ["no-such-tag-" + short_id()]}))
    ok_record = await stack.wait_terminal(ok)
    none_record = await stack.wait_terminal(none)
    assert ok_record.business_status == "success"
    assert none_record.business_status != "success"
    ok_status = "succeeded"

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    query = urllib.parse.quote(f'JobStatus="{ok_status}"')
    async with async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=CHROMIUM, args=LAUNCH_ARGS, headless=True)
        try:
            page = await browser.new_page(viewport={"width": 1600, "height": 1000})
            await page.goto(f"{ui}/namespaces/default/workflows?query={query}")
            await page.get_by_text(ok, exact=True).first.wait_for(timeout=60_000)
            await page.screenshot(path=str(ARTIFACTS / "ui-jobs-filtered-by-status.png"), full_page=True)
            listed = await page.content()
            assert ok in listed
            assert none not in listed  # the filter excluded the job of the other status

            await page.get_by_text(ok, exact=True).first.click()
            await page.get_by_text("Completed", exact=False).first.wait_for(timeout=60_000)
            # the UI (2.x) shows the summary and the current details under "User Metadata"
            await page.get_by_text("User Metadata", exact=True).first.click()
            try:
                await _wait_for_text(page, "business status")
            finally:
                await page.screenshot(path=str(ARTIFACTS / "ui-job-details.png"), full_page=True)
            text = await _all_text(page)
            assert "completed" in text.lower()  # the execution status
            assert f"status {ok_status}" in text or ok_status in text  # current details: job status
            assert "submitted" in text  # the cell's state in the current details
            # each field of a cell on its own line (UI 2.54.1 ran table cells and nested lists together)
            lines = [line.strip() for line in text.splitlines()]
            assert "demo: submitted" in lines and "stage: done" in lines, lines
            assert "candidate_search (protocol)" in text  # the static summary: what was asked
        finally:
            await browser.close()


async def test_ui_lists_a_running_a_terminated_and_a_failed_job_as_such(
    ui_server: TemporalDevServer, tmp_path: Path, database_url: str
) -> None:
    """The list's badge is the job's: Running (its stage in the details), Terminated,
    and Failed for a job that ended failed — never a green Completed."""
    if CHROMIUM is None:
        pytest.skip("Chromium is not installed (Debian: apt-get install -y chromium); the UI test needs it")
    assert ui_server.ui_url
    from tests.fakes.replay import ReplayServer

    replay = await ReplayServer().start()
    route = f"out-{short_id()}"
    config: dict[str, Any] = {
        "pixiv": {"api_url": replay.url},
        "routes": {route: {"kind": "directory", "path": str(tmp_path / "delivered")}},
        "targets": [{"id": "demo", "query": {"tags": ["オリジナル"]}, "routes": [route]}],
    }
    stack = Stack(tmp_path, ui_server.address, database_url, config)
    try:
        await _browse_statuses(stack, replay, ui_server.ui_url, ui_server.address)
    finally:
        replay.faults.slow_images_s = 0.0
        await stack.stop()
        await replay.stop()


async def _browse_statuses(stack: Stack, replay: Any, ui: str, address: str) -> None:
    from playwright.async_api import async_playwright

    from curaflow.jobs.submit import start_job
    from curaflow.temporal.connection import connect

    client = await connect(address)
    await stack.start_worker()
    failed = await stack.admit(stack.task(query={"tags": ["no-such-tag-" + short_id()]}))
    assert (await stack.wait_terminal(failed)).business_status == "no_candidate"

    replay.faults.slow_images_s = 120.0  # the two other jobs stay in their download

    async def fetching_job() -> str:
        handle = await start_job(client, stack.task(target_id="demo"), task_queue=stack.task_queue)

        async def fetching() -> bool:
            job = await stack.job(handle.id)
            return any(c.stage == "fetching" for c in job.cells)

        await eventually(fetching, timeout_s=60, what=f"{handle.id} fetching")
        return handle.id

    running = await fetching_job()
    terminated = await fetching_job()
    await client.get_workflow_handle(terminated).terminate(reason="operator: UI test")
    await stack.wait_terminal(terminated, 60)

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    async with async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=CHROMIUM, args=LAUNCH_ARGS, headless=True)
        try:
            page = await browser.new_page(viewport={"width": 1600, "height": 1000})
            everything = urllib.parse.quote('WorkflowType="JobWorkflow"')
            await page.goto(f"{ui}/namespaces/default/workflows?query={everything}")
            for job_id in (running, terminated, failed):
                await page.get_by_text(job_id, exact=True).first.wait_for(timeout=60_000)
            await page.screenshot(path=str(ARTIFACTS / "ui-jobs-running-terminated-failed.png"), full_page=True)
            text = await _all_text(page)
            # Each row: "Select Workflow <id>", then its status badge.
            badges = dict(re.findall(r"Select Workflow (\S+)\s+([A-Z_]+)", text))
            assert badges == {running: "RUNNING", terminated: "TERMINATED", failed: "FAILED"}, text
            assert "COMPLETED" not in text  # no job here succeeded: no green badge at all

            # The running job shows its stage in its current details.
            await page.goto(f"{ui}/namespaces/default/workflows/{urllib.parse.quote(running, safe='')}")
            await page.get_by_text("User Metadata", exact=True).first.click()
            try:
                await _wait_for_text(page, "fetching")
            finally:
                await page.screenshot(path=str(ARTIFACTS / "ui-running-job-stage.png"), full_page=True)
            text = await _all_text(page)
            assert "status running, stage fetching" in text, text
            assert "candidate_search (temporal)" in text  # the summary start_job set
        finally:
            await browser.close()
    await client.get_workflow_handle(running).cancel()
    replay.faults.slow_images_s = 0.0
    await stack.wait_terminal(running, 60)


#: A link and an image a Task's tags and key may hold: shown as text, never rendered.
LINK = "[click](http://evil.test/x)"
IMAGE = "![x](http://127.0.0.1:1/ui.png)"


async def test_ui_shows_markdown_a_task_holds_as_text(
    ui_server: TemporalDevServer, tmp_path: Path, database_url: str
) -> None:
    """The summary and details of a job whose Task's tags and key hold a link and an image:
    the UI (its markdown frames) shows them as written, with no link to the address and
    no request for the image. Before, both rendered and the browser fetched the image."""
    if CHROMIUM is None:
        pytest.skip("Chromium is not installed (Debian: apt-get install -y chromium); the UI test needs it")
    assert ui_server.ui_url
    route = f"out-{short_id()}"
    config: dict[str, Any] = {
        "routes": {route: {"kind": "directory", "path": str(tmp_path / "delivered")}},
        "targets": [{"id": "demo", "query": {"tags": ["オリジナル"]}, "routes": [route]}],
    }
    stack = Stack(tmp_path, ui_server.address, database_url, config)
    try:
        await _browse_markdown(stack, ui_server.ui_url, ui_server.address)
    finally:
        await stack.stop()


async def _browse_markdown(stack: Stack, ui: str, address: str) -> None:
    from playwright.async_api import async_playwright

    from curaflow.jobs.submit import start_job
    from curaflow.temporal.connection import connect

    client = await connect(address)
    await stack.start_worker()
    tags = [LINK, IMAGE, "<b>html</b>"]
    protocol = await stack.admit(stack.task(query={"tags": tags}))  # job_summary / job_static_details
    body = stack.task(key=f"k-{LINK} {IMAGE} `x` {short_id()}", target_id="demo", query={"tags": tags})
    temporal = (await start_job(client, body, task_queue=stack.task_queue)).id  # task_summary / task_static_details
    for job_id in (protocol, temporal):
        await stack.wait_terminal(job_id)

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    async with async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=CHROMIUM, args=LAUNCH_ARGS, headless=True)
        try:
            page = await browser.new_page(viewport={"width": 1600, "height": 1000})
            requested: list[str] = []
            page.on("request", lambda request: requested.append(request.url))
            for n, job_id in enumerate((protocol, temporal)):
                await page.goto(f"{ui}/namespaces/default/workflows/{urllib.parse.quote(job_id, safe='')}")
                await page.get_by_text("User Metadata", exact=True).first.click()
                try:
                    await _wait_for_text(page, "business status")
                    await _wait_for_text(page, LINK)  # the summary's tags, as written
                finally:
                    await page.screenshot(path=str(ARTIFACTS / f"ui-markdown-as-text-{n}.png"), full_page=True)
                text = await _all_text(page)
                assert IMAGE in text and "<b>html</b>" in text, text
                if job_id == temporal:
                    assert body["idempotency_key"] in text  # the details' key, one code span
                for frame in page.frames:
                    live = frame.locator(
                        "a[href^='http://evil.test' i], a[href^='http://127.0.0.1:1/'], img[src^='http://127.0.0.1:1/']"
                    )
                    assert await live.count() == 0, frame.url
        finally:
            await browser.close()
    assert [url for url in requested if url.startswith("http://127.0.0.1:1/")] == []
