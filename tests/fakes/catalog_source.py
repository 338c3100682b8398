"""The ``catalog`` source kind (test-only): the fake catalog of ``tests/fakes/catalog.py``
as a :class:`~curaflow.sources.base.Source`.

Everything a new source needs, in one module: its config model
(:class:`CatalogSourceConfig`), its implementation (:class:`CatalogSource`: the page
request for the generic scan :func:`~curaflow.sources.paging.scan_pages`, work
details, downloads, no animations, and — with ``keeps_frontier`` — a scan frontier of
its own format) and its registration (the last line). A stack names this module in
``source_modules`` and configures an instance as ``[sources.<name>] kind = "catalog"``;
a target uses it with ``account = "<name>"``.

Its frontier (only to prove the seam: the ledger stores a source's memory without
knowing its shape) is ``{"format": "catalog/1", "key": <the key>, "scans": n,
"first_ref": <the first item the last scan listed>}``: each fresh scan is handed the
one the last scan left and leaves ``scans + 1``. It changes no page the scan reads.
"""

from __future__ import annotations

import contextlib
import dataclasses
import re
from collections.abc import AsyncIterator
from typing import Any, Literal

import httpx

from curaflow.domain.messages import TargetSpec
from curaflow.domain.models import Work, WorkPage
from curaflow.domain.reasons import TerminalReason
from curaflow.domain.text import clean_text, loads_clean
from curaflow.outbound import AnswerTooLarge, Limits, Outbound, announced_length, configured, iter_capped
from curaflow.sources.base import Animation, ScanRequest, ScanState, SourceConfig, SourcePolicy
from curaflow.sources.errors import SourceError, WorkUnavailable
from curaflow.sources.gate import Gate
from curaflow.sources.paging import SourcePage, scan_pages
from curaflow.sources.registry import SourceContext, register_source

REF = re.compile(r"c[0-9]{1,12}")


class CatalogSourceConfig(SourceConfig):
    """``[sources.<name>]`` of kind ``catalog``.

    Attributes:
        url: the catalog's base URL.
        timeout_ms: total time of one request.
        max_bytes: largest answer or picture.
    """

    kind: Literal["catalog"] = "catalog"
    url: str
    timeout_ms: int = 10_000
    max_bytes: int = 8 * 1024 * 1024
    keeps_frontier: bool = False

    def policy(self) -> SourcePolicy:
        return dataclasses.replace(super().policy(), keeps_frontier=self.keeps_frontier)


class InvalidItem(ValueError):
    """An item that is not of the catalog's shape."""


def parse_item(item: Any) -> Work:
    """A catalog item as a :class:`~curaflow.domain.models.Work`.

    Raises:
        InvalidItem: no ``ref`` of the catalog's shape, or broken fields.
    """
    ref = item.get("ref") if isinstance(item, dict) else None
    if not isinstance(ref, str) or not REF.fullmatch(ref):
        raise InvalidItem(f"ref {ref!r}")
    try:
        pictures = [
            WorkPage(index=n, url=str(p["path"]), width=p.get("w"), height=p.get("h"))
            for n, p in enumerate(item["pictures"])
        ]
        return Work(
            work_id=ref,
            work_type="illustration",
            kind="picture",
            title=clean_text(str(item.get("caption") or "")),
            tags=[clean_text(str(label)) for label in item.get("labels") or []],
            create_date=str(item["posted"]),
            page_count=len(pictures),
            width=pictures[0].width if pictures else None,
            height=pictures[0].height if pictures else None,
            total_bookmarks=int(item.get("hearts") or 0),
            author=clean_text(str((item.get("artist") or {}).get("handle") or "")) or None,
            pages=pictures,
        )
    except (KeyError, TypeError, ValueError) as err:
        raise InvalidItem(f"{ref}: {type(err).__name__}") from None


class _Body:
    def __init__(self, response: httpx.Response, max_bytes: int) -> None:
        self.expected_bytes = announced_length(response)
        self._response = response
        self._max = max_bytes

    def chunks(self) -> AsyncIterator[bytes]:
        return iter_capped(self._response, self._max)


class CatalogSource:
    """One configured catalog (the :class:`~curaflow.sources.base.Source` protocol)."""

    kind = "catalog"

    def __init__(self, name: str, config: CatalogSourceConfig, out: Outbound, gate: Gate) -> None:
        self.name = name
        self.policy: SourcePolicy = config.policy()
        self._base = config.url.rstrip("/")
        self._out = out
        self._gate = gate
        self._limits = Limits(time_s=config.timeout_ms / 1000, max_bytes=config.max_bytes)

    async def _get(self, path: str, params: list[tuple[str, str]] | None = None, *, ref: str | None = None) -> Any:
        await self._gate.acquire()
        try:
            response = await self._out.request("GET", f"{self._base}{path}", params=params, limits=self._limits)
        except AnswerTooLarge as err:
            raise SourceError(TerminalReason.REMOTE_HTTP_ERROR, f"catalog answer over {err.limit} bytes") from None
        except httpx.HTTPError as err:
            raise SourceError(TerminalReason.NETWORK_ERROR, f"catalog: {type(err).__name__}") from err
        if response.status_code == 429:
            cooldown = await self._gate.rate_limited(None)
            raise SourceError(TerminalReason.RATE_LIMITED, "catalog rate limit", cooldown_s=cooldown, status=429)
        if ref is not None and response.status_code == 404:
            raise WorkUnavailable(ref, "the catalog has no such item")
        if response.status_code >= 400:
            raise SourceError(
                TerminalReason.REMOTE_HTTP_ERROR,
                f"catalog answered HTTP {response.status_code}",
                retryable=response.status_code >= 500,
                status=response.status_code,
            )
        try:
            body = loads_clean(response.text)
        except ValueError:
            raise SourceError(TerminalReason.REMOTE_HTTP_ERROR, "catalog answered something not JSON") from None
        await self._gate.succeeded()
        return body

    async def _page(self, target: TargetSpec, cursor: str | None) -> SourcePage:
        page = int(cursor or 1)
        params = [("label", tag) for tag in target.query.tags] + [("page", str(page))]
        body = await self._get("/api/v2/search", params)
        if not isinstance(body, dict) or not isinstance(body.get("results"), list):
            raise SourceError(TerminalReason.REMOTE_HTTP_ERROR, "catalog answered without results")
        works: list[Work] = []
        invalid = 0
        for item in body["results"]:
            try:
                works.append(parse_item(item))
            except InvalidItem:
                invalid += 1
        return SourcePage(works=works, next_url=str(page + 1) if body.get("has_more") else None, invalid=invalid)

    def restore(self, saved: dict[str, Any]) -> ScanState:
        return ScanState.model_validate(saved)

    def frontier_key(self, target: TargetSpec) -> str | None:
        labels = ",".join(sorted(target.query.tags))
        routes = ",".join(sorted(r.name for r in target.routes))
        return f"catalog:{labels}|{routes}"

    async def scan(self, target: TargetSpec, request: ScanRequest, checkpoint: ScanState | None = None) -> ScanState:
        state = await scan_pages(self._page, target, request, checkpoint)
        if request.frontier is not None:  # a fresh scan of a target keeping a frontier
            last = request.frontier if request.frontier.get("format") == "catalog/1" else {}
            first = state.candidates[0].work_id if state.candidates else last.get("first_ref")
            state.frontier = {
                "format": "catalog/1",
                "key": self.frontier_key(target),
                "scans": int(last.get("scans", 0)) + 1,
                "first_ref": first,
            }
        return state

    async def work(self, work_id: str) -> Work:
        body = await self._get(f"/api/v2/items/{work_id}", ref=work_id)
        try:
            return parse_item(body.get("item") if isinstance(body, dict) else None)
        except InvalidItem as err:
            raise WorkUnavailable(work_id, str(err)) from None

    @contextlib.asynccontextmanager
    async def download(self, url: str) -> AsyncIterator[_Body]:
        work_id = url.rsplit("/", 1)[-1].split("-", 1)[0]
        if not url.startswith(f"{self._base}/media/"):
            raise WorkUnavailable(work_id, "a picture outside the catalog")
        await self._gate.acquire()
        try:
            async with self._out.stream(self._out.build_request("GET", url), self._limits) as response:
                if response.status_code in (403, 404, 410):
                    raise WorkUnavailable(work_id, f"picture HTTP {response.status_code}")
                if response.status_code >= 300:
                    raise SourceError(TerminalReason.DOWNLOAD_FAILED, f"picture HTTP {response.status_code}")
                await self._gate.succeeded()
                yield _Body(response, self._limits.max_bytes or 0)
        except AnswerTooLarge:
            raise WorkUnavailable(work_id, "picture too large") from None
        except httpx.TimeoutException as err:
            raise SourceError(TerminalReason.DOWNLOAD_TIMEOUT, "picture timeout") from err
        except httpx.HTTPError as err:
            raise SourceError(TerminalReason.DOWNLOAD_FAILED, f"picture: {type(err).__name__}") from err

    async def animation(self, work: Work) -> Animation | None:
        return None


def build_catalog_source(name: str, config: CatalogSourceConfig, context: SourceContext) -> CatalogSource:
    async def close(out: Outbound) -> None:
        await out.aclose()

    out = context.shared(f"catalog:{config.url}", lambda: Outbound(configured(config.url)), close)
    gate = context.gate(name, min_interval_ms=config.min_interval_ms, concurrency=config.policy().concurrency)
    return CatalogSource(name, config, out, gate)


register_source("catalog", CatalogSourceConfig, build_catalog_source)
