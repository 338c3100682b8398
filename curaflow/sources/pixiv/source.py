"""Pixiv as a :class:`~curaflow.sources.base.Source`, and its registration (kind ``pixiv``).

One :class:`PixivSource` per account and worker process: its
:class:`~curaflow.sources.pixiv.client.PixivClient` behind the account's rate gate
(:class:`~curaflow.ledger.gates.LedgerGate` from the worker, keyed by the account's
source task queue, so spacing and cooldown hold across processes and restarts), and Pixiv's scan
(:mod:`curaflow.sources.pixiv.scan`: date windows past offset 5000, crowded days) with
its scan frontier (:mod:`curaflow.sources.pixiv.frontier`: the fingerprint a target's
frontier is stored under, what the stored JSON means, when a bookmark count has settled).

Where requests go (:func:`endpoints`): with a refresh token, Pixiv's app-api and auth
host (or ``pixiv.api_url`` / ``auth_url``) and Pixiv's image host (or
``pixiv.image_url``); in replay mode, ``pixiv.api_url`` or the replay server the
worker process started, with its images at ``<replay>/i``. The API and image outbound
clients are shared by every account of the process.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from curaflow.domain.messages import TargetSpec
from curaflow.domain.models import Work
from curaflow.outbound import Outbound, configured, parse_networks
from curaflow.sources.base import Animation, Download, ScanRequest, ScanState, SourcePolicy
from curaflow.sources.pixiv import frontier as fr
from curaflow.sources.pixiv.client import PIXIV_API_URL, PIXIV_AUTH_URL, PixivClient, image_destinations
from curaflow.sources.pixiv.config import PixivSourceConfig
from curaflow.sources.pixiv.scan import ScanCheckpoint, scan
from curaflow.sources.registry import SourceContext, register_source


@dataclass(frozen=True)
class PixivEndpoints:
    """Where one process's Pixiv requests go (base URLs, no trailing slash needed)."""

    api_url: str
    auth_url: str
    image_host: str | None


def endpoints(pixiv: PixivSourceConfig, replay_url: str | None) -> PixivEndpoints:
    """Where an account's requests go (see the module doc): from the ``[pixiv]`` fields its
    config carries and the replay server this process started (``replay_url``).

    Raises:
        RuntimeError: replay mode without ``pixiv.api_url`` and without a replay server.
    """
    if pixiv.replay:
        api = pixiv.api_url or replay_url
        if api is None:
            raise RuntimeError("replay mode needs pixiv.api_url or a running replay server")
        auth = pixiv.auth_url or api
    else:
        api = pixiv.api_url or PIXIV_API_URL
        auth = pixiv.auth_url or PIXIV_AUTH_URL
    image_host = pixiv.image_url or (f"{api.rstrip('/')}/i" if pixiv.replay else None)
    return PixivEndpoints(api_url=api, auth_url=auth, image_host=image_host)


async def _close(out: Outbound) -> None:
    await out.aclose()


def api_outbound(context: SourceContext, ends: PixivEndpoints) -> Outbound:
    """The process's outbound client of Pixiv's API and auth host (shared by every account
    that has these endpoints: all of them, as ``[pixiv]`` sets them for every account)."""
    key = f"pixiv:api:{ends.api_url} {ends.auth_url}"
    return context.shared(key, lambda: Outbound(configured(ends.api_url, ends.auth_url)), _close)


def image_outbound(context: SourceContext, ends: PixivEndpoints) -> Outbound:
    """The process's outbound client of the image host (shared as :func:`api_outbound`)."""
    networks = parse_networks(context.outbound.private_networks)
    key = f"pixiv:images:{ends.image_host}"
    return context.shared(key, lambda: Outbound(image_destinations(ends.image_host, networks)), _close)


class PixivSource:
    """One Pixiv account as a source (the :class:`~curaflow.sources.base.Source` protocol).

    Args:
        name: the account's id.
        client: its app-api client (behind its gate).
        policy: its limits (:meth:`~curaflow.sources.pixiv.config.PixivSourceConfig.policy`).
        clock: the time now (UTC; tests pass a fixed one): when a bookmark count settled.
    """

    kind = "pixiv"

    def __init__(
        self,
        name: str,
        client: PixivClient,
        policy: SourcePolicy,
        *,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.name = name
        self.client = client
        self.policy = policy
        self._clock = clock

    def frontier_key(self, target: TargetSpec) -> str | None:
        """The target's fingerprint (:func:`curaflow.sources.pixiv.frontier.key`: account,
        work type, query, filters, routes); None for a target whose scans keep no frontier
        (rankings)."""
        return fr.key(target)

    def restore(self, saved: dict[str, Any]) -> ScanState:
        """A saved :class:`~curaflow.sources.pixiv.scan.ScanCheckpoint`."""
        return ScanCheckpoint.model_validate(saved)

    async def scan(self, target: TargetSpec, request: ScanRequest, checkpoint: ScanState | None = None) -> ScanState:
        """Pixiv's scan (:func:`curaflow.sources.pixiv.scan.scan`) of ``target``.

        The stored frontier (``request.frontier``) is read by
        :func:`curaflow.sources.pixiv.frontier.read` (unreadable or of another sort: a
        fresh start), and a ``min_bookmarks`` rejection is lasting for works created
        before :func:`~curaflow.sources.pixiv.frontier.settled_before` now.
        """
        resumed = (
            checkpoint
            if checkpoint is None or isinstance(checkpoint, ScanCheckpoint)
            else ScanCheckpoint.model_validate(checkpoint.model_dump())
        )
        keeps = request.frontier is not None and fr.applies(target)
        frontier = fr.read(request.frontier, target.query.sort) if keeps else None
        return await scan(
            self.client,
            target,
            scan_limit=request.scan_limit,
            want=request.want,
            unavailable=request.unavailable,
            known=request.known,
            on_skipped_day=request.on_skipped_day,
            on_page=request.on_page,
            checkpoint=resumed,
            max_examined=request.max_examined,
            frontier=frontier,
            settled_before=fr.settled_before(self._clock()),
            now=self._clock(),
        )

    async def work(self, work_id: str) -> Work:
        """``GET /v1/illust/detail`` (:meth:`~curaflow.sources.pixiv.client.PixivClient.illust_detail`)."""
        return await self.client.illust_detail(work_id)

    @contextlib.asynccontextmanager
    async def download(self, url: str) -> AsyncIterator[Download]:
        """An image of a work (:meth:`~curaflow.sources.pixiv.client.PixivClient.download`)."""
        async with self.client.download(url) as body:
            yield body

    async def animation(self, work: Work) -> Animation | None:
        """An ugoira's frames zip and delays; None for other works."""
        return await self.client.animation(work)


def build_pixiv_source(name: str, config: PixivSourceConfig, context: SourceContext) -> PixivSource:
    """The account ``name`` of this process (the registered factory of kind ``pixiv``)."""
    ends = endpoints(config, context.replay_url)
    token = config.refresh_token.get_secret_value() if config.refresh_token else ""
    gate = context.gate(
        name,
        min_interval_ms=config.min_interval_ms,
        base_ms=config.rate_limit_base_ms,
        cap_ms=config.rate_limit_cap_ms,
        decay_after=config.rate_limit_decay_after,
        pause_ms=config.restriction_pause_ms,
        concurrency=config.policy().concurrency,
    )
    limits = context.outbound
    client = PixivClient(
        api_outbound(context, ends),
        images=image_outbound(context, ends),
        request_timeout_s=config.request_timeout_ms / 1000,
        page_max_bytes=limits.page_max_bytes,
        download_timeout_s=limits.download_timeout_ms / 1000,
        download_max_bytes=limits.download_max_bytes,
        refresh_token="replay" if config.replay else token,
        api_url=ends.api_url,
        auth_url=ends.auth_url,
        image_referer=config.image_referer,
        gate=gate,
        image_host=ends.image_host,
        token_store=None if config.replay else context.token_store(name),
    )
    return PixivSource(name, client, config.policy())


register_source("pixiv", PixivSourceConfig, build_pixiv_source, configurable=False)
