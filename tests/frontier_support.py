"""Scans as a target's job runs them, for the scan frontier's tests (no I/O of their own)."""

from __future__ import annotations

from typing import Any

import httpx

from curaflow.domain.messages import TargetFilters, TargetQuery, TargetSpec
from curaflow.sources.pixiv.client import PixivClient
from curaflow.sources.pixiv.frontier import Frontier
from curaflow.sources.pixiv.replay.app import create_replay_app
from curaflow.sources.pixiv.scan import KnownHook, ScanCheckpoint, scan
from tests.fakes.replay import Faults
from tests.support import pixiv_answering


async def _nothing(cp: ScanCheckpoint) -> None:
    return None


#: The replay app of each ``Faults`` a test scans over (by identity, the faults held so
#: the identity stays theirs): one app for all of a test's scans, as one serves all the
#: pages of a scan — its search results cached, its routes built once (FastAPI reads
#: each endpoint's source lines when the app is built).
_APPS: dict[int, tuple[Faults, Any]] = {}


def _replay_app(faults: Faults) -> Any:
    held = _APPS.get(id(faults))
    if held is None or held[0] is not faults:
        if len(_APPS) >= 8:
            _APPS.clear()
        held = _APPS[id(faults)] = (faults, create_replay_app(faults))
    return held[1]


async def scan_for_one(
    client: PixivClient, target: TargetSpec, known: KnownHook, *, on_page: Any = _nothing, **extra: Any
) -> ScanCheckpoint:
    """One scan for one candidate (``scan_limit`` 1), every bookmark count settled
    (``settled_before`` far ahead), checkpoints dropped unless ``on_page`` keeps them;
    ``extra``: the rest of :func:`~curaflow.sources.pixiv.scan.scan`'s keywords
    (``frontier``, ``max_examined``, ``unavailable``, ``checkpoint`` …)."""
    return await scan(client, target, scan_limit=1, known=known, on_page=on_page, settled_before="2100-01-01", **extra)


async def scan_on_replay(
    faults: Faults, target: TargetSpec, known: KnownHook, *, on_page: Any = _nothing, **extra: Any
) -> ScanCheckpoint:
    """:func:`scan_for_one` against the replay app over ``faults`` (in process, no socket):
    a client of its own, the access token the replay's."""
    app = _replay_app(faults)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://replay") as http:
        client = PixivClient(http, refresh_token="r", api_url="http://replay", auth_url="http://replay")
        return await scan_for_one(client, target, known, on_page=on_page, **extra)


async def scan_all_delivered(
    api: Any, sort: str, frontier: bool, *, max_examined: int = 100_000, max_asked: int | None = None
) -> tuple[ScanCheckpoint, list[int], set[str]]:
    """One scan (``scan_limit`` 10) of a tag search whose every listed work was delivered
    before (none held: it reads on to the end of its results or a cap), over the app-api
    answering ``api`` (a request → response function), with a frontier of ``sort`` or none.

    Returns:
        the last checkpoint, the offsets it asked in order, the ids of the works it examined.

    Raises:
        AssertionError: it asked more than ``max_asked`` pages (a scan with no end in sight).
    """
    asked: list[int] = []
    examined: set[str] = set()

    def counting(request: httpx.Request) -> httpx.Response:
        asked.append(int(request.url.params.get("offset") or 0))
        if max_asked is not None and len(asked) > max_asked:
            raise AssertionError(f"the scan asked {len(asked)} pages")
        return api(request)  # type: ignore[no-any-return]

    target = TargetSpec(target_id="t", query=TargetQuery(tags=["x"], sort=sort), filters=TargetFilters(), scan_limit=10)  # type: ignore[arg-type]

    async def known(ids: list[str]) -> dict[str, str]:
        examined.update(ids)
        return dict.fromkeys(ids, "duplicate")

    extra: dict[str, Any] = {"frontier": Frontier(sort=sort)} if frontier else {}
    cp = await scan(
        pixiv_answering(counting), target, scan_limit=10, known=known, on_page=_nothing, max_examined=max_examined,
        settled_before="2100-01-01", **extra,
    )  # fmt: skip
    return cp, asked, examined
