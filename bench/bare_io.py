"""The same-I/O baseline: curaflow's external work on Temporal, with none of curaflow's machinery.

``BareIOWorkflow`` does per job what a straightforward Temporal implementation of the
same job would do: ``search`` reads the same ranking page from the replay server and
picks a work, ``fetch`` downloads every page of that work (the same image bytes),
hashes it and writes it with ``fsync`` to an artifact directory, ``deliver`` copies the
files into a route directory with ``fsync`` and a manifest, ``finish`` does nothing. No
ledger, no domain rules, no projection, no rate gate. curaflow's throughput divided by
this workflow's is what curaflow's own machinery costs; divided by
:mod:`bench.bare`'s no-op engine, what the whole job costs.

Run its worker with ``python -m bench.bare_io --address HOST:PORT --task-queue Q
--source-queue S --replay URL --dir DIR``.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import os
import signal
from datetime import timedelta
from pathlib import Path

from pydantic import BaseModel
from temporalio import activity, workflow
from temporalio.common import RetryPolicy
from temporalio.worker import Worker

with workflow.unsafe.imports_passed_through():
    import httpx  # activities only; the workflow sandbox must not re-import it

APP_REFERER = "https://app-api.pixiv.net/"


class BareIOSpec(BaseModel):
    """Which work a job takes (``index`` into the ranking page) and where things go."""

    index: int
    source_queue: str


class Picked(BaseModel):
    """The work ``search`` picked: its id and the URLs of its original pages."""

    work_id: str
    pages: list[str]


class Fetched(BaseModel):
    """The files ``fetch`` wrote: paths and sha256 digests."""

    work_id: str
    files: list[str]
    digests: list[str]


def _write_synced(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically: temporary file, fsync, rename, fsync the folder."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".part")
    with open(tmp, "wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
    fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class BareIOActivities:
    """The activities, sharing one HTTP client and the replay's token.

    Args:
        replay: the replay server's base URL (Pixiv's app-api, image host at ``/i``).
        root: where artifacts and deliveries are written.
    """

    def __init__(self, replay: str, root: Path) -> None:
        self.replay = replay.rstrip("/")
        self.root = root
        self.http = httpx.AsyncClient(timeout=30)
        self.token: str | None = None

    async def _token(self) -> str:
        if self.token is None:
            answer = await self.http.post(f"{self.replay}/auth/token", data={"refresh_token": "bench"})
            self.token = str(answer.json()["access_token"])
        return self.token

    def _image(self, url: str) -> str:
        if url.startswith("https://i.pximg.net/"):
            return f"{self.replay}/i/{url.removeprefix('https://i.pximg.net/')}"
        return url

    @activity.defn(name="bareio_search")
    async def search(self, spec: BareIOSpec) -> Picked:
        """Read the ranking page and pick the ``index``-th work (cyclic)."""
        headers = {"Authorization": f"Bearer {await self._token()}"}
        page = await self.http.get(f"{self.replay}/v1/illust/ranking", params={"mode": "day"}, headers=headers)
        works = page.json()["illusts"]
        work = works[spec.index % len(works)]
        if work.get("meta_pages"):
            urls = [p["image_urls"]["original"] for p in work["meta_pages"]]
        else:
            urls = [work["meta_single_page"]["original_image_url"]]
        return Picked(work_id=str(work["id"]), pages=urls)

    @activity.defn(name="bareio_fetch")
    async def fetch(self, picked: Picked) -> Fetched:
        """Download every page, hash it and write it with fsync (off the event loop)."""
        job = activity.info().workflow_id or "job"
        files, digests = [], []
        for i, url in enumerate(picked.pages):
            answer = await self.http.get(self._image(url), headers={"Referer": APP_REFERER})
            answer.raise_for_status()
            body = answer.content
            path = self.root / "artifacts" / job / f"{picked.work_id}_p{i}"
            digests.append(await asyncio.to_thread(_sha256, body))
            await asyncio.to_thread(_write_synced, path, body)
            files.append(str(path))
        return Fetched(work_id=picked.work_id, files=files, digests=digests)

    @activity.defn(name="bareio_deliver")
    async def deliver(self, fetched: Fetched) -> str:
        """Copy the files into the route directory with fsync, then write a manifest."""
        out = self.root / "out" / f"{activity.info().workflow_id}-{fetched.work_id}"

        def copy() -> None:
            for src in fetched.files:
                _write_synced(out / Path(src).name, Path(src).read_bytes())
            manifest = "\n".join(f"{Path(f).name} {d}" for f, d in zip(fetched.files, fetched.digests, strict=True))
            _write_synced(out / "manifest.txt", manifest.encode())

        await asyncio.to_thread(copy)
        return str(out)

    @activity.defn(name="bareio_finish")
    async def finish(self, where: str) -> str:
        """Nothing to record: there is no ledger. Prints ``finished <workflow id>`` (how the
        benchmark tells a job is done without asking Temporal)."""
        print(f"finished {activity.info().workflow_id}", flush=True)
        return where


OPTIONS = workflow.ActivityConfig(
    schedule_to_start_timeout=timedelta(minutes=30),
    start_to_close_timeout=timedelta(minutes=30),
    heartbeat_timeout=timedelta(seconds=60),
    retry_policy=RetryPolicy(maximum_attempts=10),
)


@workflow.defn(name="BareIOWorkflow")
class BareIOWorkflow:
    """search → fetch on the source queue, deliver and finish on the main queue."""

    @workflow.run
    async def run(self, spec: BareIOSpec) -> str:
        source = workflow.ActivityConfig(**OPTIONS, task_queue=spec.source_queue)
        picked = await workflow.execute_activity_method(BareIOActivities.search, spec, **source)
        fetched = await workflow.execute_activity_method(BareIOActivities.fetch, picked, **source)
        where = await workflow.execute_activity_method(BareIOActivities.deliver, fetched, **OPTIONS)
        return await workflow.execute_activity_method(BareIOActivities.finish, where, **OPTIONS)


async def serve(
    address: str, task_queue: str, source_queue: str, concurrency: int, replay: str, root: str, sandbox: bool = False
) -> None:
    """Serve the baseline's main and source task queues until SIGTERM; its workflows in the
    SDK's sandbox only when ``sandbox`` (``--workflow-sandbox``: as curaflow's worker in the
    same run, :func:`curaflow.process.worker.runner_for`)."""
    from curaflow.process.worker import runner_for
    from curaflow.temporal.connection import connect

    client = await connect(address)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    acts = BareIOActivities(replay, Path(root))
    main = Worker(
        client,
        task_queue=task_queue,
        workflows=[BareIOWorkflow],
        activities=[acts.deliver, acts.finish],
        workflow_runner=runner_for(sandbox=sandbox),
    )
    source = Worker(
        client, task_queue=source_queue, activities=[acts.search, acts.fetch], max_concurrent_activities=concurrency
    )
    async with main, source:
        print("worker.started", flush=True)
        await stop.wait()
    await acts.http.aclose()


def main() -> None:
    parser = argparse.ArgumentParser(description="curaflow benchmark: same-I/O baseline worker")
    parser.add_argument("--address", required=True)
    parser.add_argument("--task-queue", required=True)
    parser.add_argument("--source-queue", required=True)
    parser.add_argument("--source-concurrency", type=int, default=4)
    parser.add_argument("--replay", required=True)
    parser.add_argument("--dir", required=True)
    parser.add_argument(
        "--workflow-sandbox",
        action="store_true",
        help="run the workflows in the SDK's sandbox (as curaflow's worker does when temporal.workflow_sandbox is set)",
    )
    args = parser.parse_args()
    asyncio.run(
        serve(
            args.address,
            args.task_queue,
            args.source_queue,
            args.source_concurrency,
            args.replay,
            args.dir,
            args.workflow_sandbox,
        )
    )


if __name__ == "__main__":
    main()
