"""A hostile source as the activities see it (:mod:`curaflow.sources.guard`): its own
failures are the source's (``SourceError``, owner ``source``), never curaflow's
``internal_error``; curaflow's own failures pass through it unchanged; its downloads are
bounded in bytes and time whether or not it bounds them itself."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from curaflow.artifacts import ArtifactStore
from curaflow.config import load_settings
from curaflow.domain.messages import RouteRef, TargetSpec
from curaflow.domain.models import Work, WorkPage
from curaflow.domain.reasons import REASONS, Owner, TerminalReason
from curaflow.sources.base import ScanRequest, ScanState, SourcePolicy
from curaflow.sources.errors import SourceError, UnavailableKind, WorkUnavailable
from curaflow.sources.guard import GuardedSource, guarded, storable_json
from curaflow.sources.paging import SourcePage, scan_pages

TARGET = TargetSpec(target_id="t", account="hostile", routes=[RouteRef(name="out", kind="directory")])


class Hostile:
    """A source whose every call misbehaves as told."""

    kind = "hostile"

    def __init__(self, *, page: Any = None, work: Any = None, chunks: Any = None, body: Any = None) -> None:
        self.name = "hostile"
        self.policy = SourcePolicy()
        self._page, self._work, self._chunks, self._body = page, work, chunks, body

    def restore(self, saved: dict[str, Any]) -> ScanState:
        return ScanState.model_validate(saved)

    async def _fetch(self, target: TargetSpec, cursor: str | None) -> SourcePage:
        return await self._page(cursor)  # type: ignore[no-any-return]

    async def scan(self, target: TargetSpec, request: ScanRequest, checkpoint: ScanState | None = None) -> ScanState:
        return await scan_pages(self._fetch, target, request, checkpoint)

    async def work(self, work_id: str) -> Work:
        return await self._work(work_id)  # type: ignore[no-any-return]

    @contextlib.asynccontextmanager
    async def download(self, url: str) -> AsyncIterator[Any]:
        if self._body is not None:
            await self._body()

        class Body:
            expected_bytes = None

            def chunks(inner) -> AsyncIterator[bytes]:
                return self._chunks()  # type: ignore[no-any-return]

        yield Body()

    async def animation(self, work: Work) -> None:
        return None


def guard(source: Hostile, *, max_bytes: int = 1 << 20, timeout_s: float = 5.0) -> GuardedSource:
    wrapped = guarded(source, download_max_bytes=max_bytes, download_timeout_s=timeout_s)  # type: ignore[arg-type]
    assert isinstance(wrapped, GuardedSource)
    return wrapped


async def nothing_known(ids: list[str]) -> dict[str, str]:
    return {}


async def no_page(state: ScanState) -> None:
    return None


def request(**kw: Any) -> ScanRequest:
    return ScanRequest(scan_limit=5, known=kw.pop("known", nothing_known), on_page=kw.pop("on_page", no_page), **kw)


def owner(err: SourceError) -> Owner | None:
    return REASONS[err.reason].owner


async def test_an_unexpected_exception_of_a_scan_is_the_sources_failure() -> None:
    async def page(cursor: str | None) -> SourcePage:
        answer: dict[str, Any] = {"results": []}
        return answer["items"]  # type: ignore[no-any-return]  # a KeyError on a shape it did not expect

    with pytest.raises(SourceError) as raised:
        await guard(Hostile(page=page)).scan(TARGET, request())
    assert raised.value.reason == TerminalReason.REMOTE_HTTP_ERROR and raised.value.retryable
    assert owner(raised.value) == Owner.SOURCE
    assert "KeyError" in str(raised.value)


async def test_an_id_that_is_not_a_string_is_the_sources_failure() -> None:
    async def page(cursor: str | None) -> SourcePage:
        return SourcePage(works=[Work(work_id=123)])  # type: ignore[arg-type]  # pydantic refuses it

    with pytest.raises(SourceError) as raised:
        await guard(Hostile(page=page)).scan(TARGET, request())
    assert owner(raised.value) == Owner.SOURCE


async def test_the_ledger_hooks_failures_pass_through_the_scan_unchanged() -> None:
    class LedgerDown(ConnectionError):
        pass

    async def page(cursor: str | None) -> SourcePage:
        return SourcePage(works=[Work(work_id="w1")])

    async def known(ids: list[str]) -> dict[str, str]:
        raise LedgerDown("ledger")

    with pytest.raises(LedgerDown):
        await guard(Hostile(page=page)).scan(TARGET, request(known=known))


async def test_an_unexpected_exception_of_work_details_is_the_sources_failure() -> None:
    async def work(work_id: str) -> Work:
        raise TypeError("NoneType is not subscriptable")

    with pytest.raises(SourceError) as raised:
        await guard(Hostile(work=work)).work("w1")
    assert raised.value.reason == TerminalReason.METADATA_FAILED
    assert owner(raised.value) == Owner.SOURCE

    async def gone(work_id: str) -> Work:
        raise WorkUnavailable(work_id, "deleted")

    with pytest.raises(WorkUnavailable):
        await guard(Hostile(work=gone)).work("w1")


def still_work() -> Work:
    return Work(work_id="w1", pages=[WorkPage(index=0, url="http://source.test/w1_p0.png")])


async def test_an_unexpected_exception_of_a_download_is_the_sources_failure(tmp_path: Path) -> None:
    async def chunks() -> AsyncIterator[bytes]:
        yield b"\x89PNG"
        raise IndexError("the source's own bug")

    store = ArtifactStore(tmp_path)
    with pytest.raises(SourceError) as raised:
        await store.fetch(guard(Hostile(chunks=chunks)), still_work(), "job", "t")
    assert raised.value.reason == TerminalReason.DOWNLOAD_FAILED
    assert owner(raised.value) == Owner.SOURCE

    async def opening() -> None:
        raise LookupError("opening the download")

    async def empty() -> AsyncIterator[bytes]:
        return
        yield b""

    with pytest.raises(SourceError) as raised:
        await store.fetch(guard(Hostile(chunks=empty, body=opening)), still_work(), "job", "t")
    assert raised.value.reason == TerminalReason.DOWNLOAD_FAILED


async def test_the_stores_own_failure_inside_a_download_passes_unchanged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import errno

    from curaflow import artifacts

    async def chunks() -> AsyncIterator[bytes]:
        yield b"x" * (artifacts.WRITE_BATCH + 1)

    def full(self: Any, pending: list[bytes]) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(artifacts._PartFile, "write", full)
    with pytest.raises(OSError) as raised:
        source = guard(Hostile(chunks=chunks), max_bytes=4 * artifacts.WRITE_BATCH)
        await ArtifactStore(tmp_path).fetch(source, still_work(), "job", "t")
    assert raised.value.errno == errno.ENOSPC  # storage_full stays curaflow's, never the source's


async def test_a_download_that_never_stops_growing_makes_the_work_unavailable(tmp_path: Path) -> None:
    async def endless() -> AsyncIterator[bytes]:
        while True:
            yield b"\0" * 65_536
            await asyncio.sleep(0)

    with pytest.raises(WorkUnavailable, match="larger than"):
        await asyncio.wait_for(
            ArtifactStore(tmp_path).fetch(guard(Hostile(chunks=endless), max_bytes=1 << 20), still_work(), "job", "t"),
            10,
        )


async def test_a_download_that_never_ends_is_a_download_timeout(tmp_path: Path) -> None:
    async def trickle() -> AsyncIterator[bytes]:
        while True:
            yield b"\0"
            await asyncio.sleep(0.05)

    with pytest.raises(SourceError) as raised:
        await asyncio.wait_for(
            ArtifactStore(tmp_path).fetch(guard(Hostile(chunks=trickle), timeout_s=0.2), still_work(), "job", "t"),
            10,
        )
    assert raised.value.reason == TerminalReason.DOWNLOAD_TIMEOUT
    assert owner(raised.value) == Owner.SOURCE


async def test_a_timeout_message_says_the_measured_duration(tmp_path: Path) -> None:
    # Seen from outside: "an image page took over 121.0 s" for an attempt that lasted at
    # most 41 s — a TimeoutError that was not the guard's limit, reported as if it were.
    async def gives_up() -> None:
        await asyncio.sleep(0.1)
        raise TimeoutError("the source's own connect timeout")

    with pytest.raises(SourceError) as raised:
        await ArtifactStore(tmp_path).fetch(guard(Hostile(body=gives_up), timeout_s=120.0), still_work(), "job", "t")
    message = str(raised.value)
    assert raised.value.reason == TerminalReason.DOWNLOAD_TIMEOUT
    assert "took over" not in message and "121.0" not in message, message
    assert "timed out after 0.1 s" in message or "timed out after 0.2 s" in message, message

    # The guard's own limit: named, with the time it measured.
    async def trickle() -> AsyncIterator[bytes]:
        while True:
            yield b"\0"
            await asyncio.sleep(0.05)

    with pytest.raises(SourceError) as raised:
        await ArtifactStore(tmp_path).fetch(guard(Hostile(chunks=trickle), timeout_s=0.2), still_work(), "job", "t")
    assert "took over 1.2 s (cut after 1.2 s)" in str(raised.value), str(raised.value)


def test_the_activities_use_every_source_guarded(tmp_path: Path) -> None:
    from activities.deps import ActivityDeps
    from curaflow.sources.gate import MemoryGate
    from curaflow.sources.registry import SourceContext

    settings = load_settings(
        state_dir=tmp_path,
        source_modules=["tests.fakes.catalog_source"],
        sources={"shelf": {"kind": "catalog", "url": "http://127.0.0.1:9"}},
        targets=[{"id": "t", "account": "shelf", "routes": ["out"]}],
    )
    context = SourceContext(settings.outbound, lambda _name, **policy: MemoryGate(**policy))
    deps = ActivityDeps(settings=settings, pool=None, client=None, store=None, sources=context)  # type: ignore[arg-type]
    source = deps.source("shelf")
    assert isinstance(source, GuardedSource)
    assert (source.name, source.kind) == ("shelf", "catalog")


class Translating(Hostile):
    """A source that, as Pixiv's client does, turns its body's failure into its own answer
    when the download's ``async with`` ends (an over-long body → the work is unavailable)."""

    @contextlib.asynccontextmanager
    async def download(self, url: str) -> AsyncIterator[Any]:
        try:
            async with super().download(url) as body:
                yield body
        except OverflowError:
            raise WorkUnavailable("w1", "an image page is larger than the source's cap") from None


async def test_a_sources_own_translation_of_its_body_failure_is_kept(tmp_path: Path) -> None:
    async def capped() -> AsyncIterator[bytes]:
        yield b"\x89PNG"
        raise OverflowError("over the source's own byte cap")  # Pixiv: outbound's AnswerTooLarge

    with pytest.raises(WorkUnavailable, match="source's cap"):
        await ArtifactStore(tmp_path).fetch(guard(Translating(chunks=capped)), still_work(), "job", "t")


@pytest.mark.parametrize(
    "url",
    [
        "http://source.test/" + "a" * 100_000 + "_p0.png",
        "http://source.test/img/../../secret_p0.png",
        "http://source.test/img/%2e%2e/secret_p0.png",
        "http://source.test/w1 p0.png",
        "w1_p0.png",
        "",
    ],
    ids=["100000-chars", "dot-segments", "encoded-dot-segments", "space", "no-host", "empty"],
)
async def test_a_page_url_no_request_can_be_made_for_is_the_works_before_the_source_is_asked(
    tmp_path: Path, url: str
) -> None:
    asked: list[str] = []

    async def opening() -> None:
        asked.append("download")

    async def chunks() -> AsyncIterator[bytes]:
        yield b""

    work = Work(work_id="w1", pages=[WorkPage(index=0, url=url)])
    with pytest.raises(WorkUnavailable) as raised:
        await ArtifactStore(tmp_path).fetch(guard(Hostile(chunks=chunks, body=opening)), work, "job", "t")
    # what the source answered, not the work: held back briefly, never remembered for the week
    assert (raised.value.kind, raised.value.recognised) == (UnavailableKind.UNUSABLE_URL, False)
    assert asked == []


class Remembering(Hostile):
    """A source keeping a frontier: its key and the frontier it leaves are as told."""

    def __init__(self, *, key: Any = "k", left: Any = None) -> None:
        async def page(cursor: str | None) -> SourcePage:
            return SourcePage(works=[Work(work_id="w1")])

        super().__init__(page=page)
        self._key, self._left = key, left

    def frontier_key(self, target: TargetSpec) -> str | None:
        if isinstance(self._key, Exception):
            raise self._key
        return self._key  # type: ignore[no-any-return]

    async def scan(self, target: TargetSpec, request: ScanRequest, checkpoint: ScanState | None = None) -> ScanState:
        state = await super().scan(target, request, checkpoint)
        state.frontier = self._left
        return state


@pytest.mark.parametrize(
    "left",
    [
        ["not", "an", "object"],
        {"a": float("nan")},
        {"a": "\x00"},
        {"a": object()},
        {(1, 2): "tuple key"},
        "text",
        {"a": "\ud83d"},
        {"\udc00": 1},
    ],
    ids=["list", "nan", "nul", "object", "tuple-key", "text", "lone-surrogate", "lone-surrogate-key"],
)
async def test_a_frontier_the_ledger_cannot_store_is_dropped_never_a_failure(left: Any) -> None:
    # A frontier is advisory: losing it costs pages; it never fails the scan.
    state = await guard(Remembering(left=left)).scan(TARGET, request(frontier={}))  # type: ignore[arg-type]
    assert state.frontier is None and [w.work_id for w in state.candidates] == ["w1"]


async def test_a_frontier_of_json_is_kept_as_the_source_left_it() -> None:
    left = {"format": "mine/1", "pages": [1, 2], "note": "ok"}
    state = await guard(Remembering(left=left)).scan(TARGET, request(frontier={}))  # type: ignore[arg-type]
    assert state.frontier == left


@pytest.mark.parametrize(
    "key",
    [KeyError("query"), 42, "k\x00", "k\ud800", "".join(chr(0x4E00 + i) for i in range(1000))],
    ids=["raises", "not-text", "nul", "lone-surrogate", "longer-than-an-index-entry"],
)
def test_a_frontier_key_the_source_gets_wrong_is_the_sources_failure(key: Any) -> None:
    with pytest.raises(SourceError) as raised:
        guard(Remembering(key=key)).frontier_key(TARGET)  # type: ignore[arg-type]
    assert owner(raised.value) == Owner.SOURCE and raised.value.retryable


#: Text a source kind may answer that the ledger cannot store: a NUL (22P05 in jsonb, 22021
#: in text), a lone surrogate (asyncpg cannot encode it).
UNSTORABLE = ["a\x00b", "a\ud83db", "a\udc00"]


def _dirty_work(work_id: str, text: str) -> Work:
    return Work(
        work_id=work_id,
        title=text,
        tags=["ok", text],
        author=text,
        url=f"https://img.example.org/{text}",
        create_date=text,
        kind=text,
        pages=[WorkPage(index=0, url=f"https://img.example.org/{text}.png")],
    )


@pytest.mark.parametrize("text", UNSTORABLE, ids=["nul", "lone-high", "lone-low"])
async def test_every_work_a_source_answers_is_storable(text: str) -> None:
    # Until 2026-12-06 only Pixiv's client cleaned what it answered (loads_clean): another
    # kind's title, tag or author holding a NUL or a lone surrogate failed bind_work's jsonb
    # write (and each checkpoint's) as curaflow's bug.
    async def page(cursor: str | None) -> SourcePage:
        if cursor is None:
            return SourcePage(works=[_dirty_work("w1", text), _dirty_work(f"w{text}2", text)], next_url=f"p2{text}")
        return SourcePage(works=[_dirty_work("w3", text)])

    saved: list[dict[str, Any]] = []

    async def on_page(state: ScanState) -> None:
        saved.append(state.model_dump(mode="json"))

    async def work(work_id: str) -> Work:
        return _dirty_work(work_id, text)

    source = guard(Hostile(page=page, work=work))
    state = await source.scan(TARGET, request(on_page=on_page, want=3))
    assert saved and all(storable_json(s) for s in saved)
    assert storable_json(state.model_dump(mode="json"))
    # The source's text is kept, less what cannot be stored; a work id that held such a
    # character never becomes another, valid id: still the source's invalid work.
    assert [w.work_id for w in state.candidates] == ["w1", "w3"]
    assert state.report.reasons.get("invalid") == 1
    assert all("a" in w.title and "ok" in w.tags for w in state.candidates)
    fetched = await source.work("w1")
    assert storable_json(fetched.model_dump(mode="json")) and fetched.title.startswith("a")


async def test_a_kind_that_reads_its_answers_cleaned_is_not_walked_again() -> None:
    # Pixiv's client reads every app-api answer cleaned (loads_clean: test_untrusted), so
    # the guard's walk of every work of every search page (~0.5 ms of CPU a page of 30
    # works) would only repeat it: a kind saying so (SourcePolicy.clean_text) is answered
    # as it gave, the same objects, on every path — and a kind that does not is cleaned.

    async def page(cursor: str | None) -> SourcePage:
        return SourcePage(works=[_dirty_work("w1", "a\x00b")])

    given = _dirty_work("w1", "a\x00b")

    async def work(work_id: str) -> Work:
        return given

    trusting = Hostile(page=page, work=work)
    trusting.policy = SourcePolicy(clean_text=True)
    state = await guard(trusting).scan(TARGET, request(want=1))
    assert (await guard(trusting).work("w1")) is given
    assert [w.title for w in state.candidates] == ["a\x00b"]
    assert (await guard(Hostile(work=work)).work("w1")).title == "ab"
    assert all(s.policy().clean_text for s in load_settings(None).pixiv.sources().values())


async def test_a_clean_work_is_answered_as_the_source_gave_it() -> None:
    given = _dirty_work("w1", "絵 🎨\ttab\nline")

    async def work(work_id: str) -> Work:
        return given

    assert (await guard(Hostile(work=work)).work("w1")) == given
