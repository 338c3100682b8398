"""Every source as the activities see it: failures attributed to the source, downloads bounded.

The :class:`~curaflow.sources.base.Source` protocol says a source raises only
:class:`~curaflow.sources.errors.SourceError` or
:class:`~curaflow.sources.errors.WorkUnavailable`, and reads an image within the
outbound layer's limits. A source kind registered outside curaflow (``source_modules``)
may not keep that promise: a ``KeyError`` on an answer of an unexpected shape, a
pydantic error on an id that is not a string, a download that never ends or never
stops growing. :func:`guarded` wraps every instance the activities use
(:meth:`activities.deps.ActivityDeps.source`) so that:

* any other exception raised *by the source* becomes a retryable ``SourceError``
  (``remote_http_error`` from a scan, ``metadata_failed`` from :meth:`work`,
  ``download_failed`` from a download or an animation): its reason's owner is the
  source, never curaflow's ``internal_error``. What curaflow's own code raises through
  the source — the ledger hooks of a scan (``known``, ``on_page``), the store's code
  inside a download block, any ledger failure of the rate gate
  (:class:`~curaflow.sources.gate.GateUnavailable`) — passes unchanged;
* a download is read within ``outbound.download_max_bytes`` (more: the work is
  unavailable, as a source's own byte cap says) and ``outbound.download_timeout_ms`` (plus a grace, so a
  source keeping the limit itself fails first; never past the job's deadline), whether
  or not the source applies them;
* a scan frontier the scan leaves (:attr:`~curaflow.sources.base.ScanState.frontier`)
  is stored only when it is a JSON object the ledger's ``jsonb`` takes
  (:func:`storable_json`: no NaN, no NUL, no lone surrogate); another value is the
  source's bug, dropped with a warning (``source.frontier_dropped``): a frontier is
  advisory, so losing it costs pages, never a job; a frontier *key* that is no text the
  ledger can store (:func:`storable_key`: a NUL, a lone surrogate, over
  :data:`MAX_FRONTIER_KEY_BYTES` bytes — it is half of a btree key) is the source's
  retryable failure, as a key that is no text is (2026-12-06: both reached the ledger
  and failed its statement — 22021, 22000, 54000 — as curaflow's bug);
* every work a source answers — a scan's candidates and pending works, as each
  checkpoint is stored and as the scan ends, :meth:`GuardedSource.work`'s and an
  animation's — holds only text the ledger can store (:func:`storable_text`): a NUL or
  another control character is removed from its text and a lone surrogate replaced by
  U+FFFD (:func:`curaflow.domain.text.clean_text`, what Pixiv's client does to its answers
  with ``loads_clean``), and a work id holding one has each replaced by U+FFFD, so it
  stays the source's invalid work (:data:`curaflow.sources.paging.WORK_ID`) and never
  becomes another, valid id. Until 2026-12-06 another kind's title, tag or author with
  a NUL or a lone surrogate failed ``bind_work``'s ``jsonb`` write as curaflow's bug. A
  kind that reads its answers cleaned (:attr:`~curaflow.sources.base.SourcePolicy.clean_text`:
  Pixiv's) is not walked again;
* a download is asked only for a URL a request can be made for
  (:func:`~curaflow.outbound.url_problem`: text, at most
  :data:`~curaflow.outbound.MAX_URL_CHARS` characters, no whitespace or unprintable
  character, ``http(s)`` with a host, no dot-segment): another is what the source answered
  for the work, so the work is unavailable (``unusable_url``, held back briefly: never
  recognised as the work's) — never a retried download.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import re
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

import asyncpg
from pydantic import BaseModel

from curaflow.domain.messages import TargetSpec
from curaflow.domain.models import Work
from curaflow.domain.reasons import TerminalReason
from curaflow.domain.text import clean_text
from curaflow.observability.logs import get_logger
from curaflow.observability.secrets import redacted
from curaflow.outbound import time_left, url_problem
from curaflow.protocol.keys import storable
from curaflow.sources.base import Animation, ScanRequest, ScanState, Source, SourcePolicy
from curaflow.sources.errors import SourceError, UnavailableKind, WorkUnavailable
from curaflow.sources.gate import GateUnavailable

log = get_logger("curaflow.source")

#: A source's own time limit fires before the guard's by this much (s).
GRACE_S = 1.0
#: The longest frontier key, in bytes of UTF-8: it is half of ``scan_frontiers``' primary
#: key, whose btree entry PostgreSQL refuses over 2 704 bytes (54000
#: program_limit_exceeded); Pixiv's is a 64-character hex digest.
MAX_FRONTIER_KEY_BYTES = 1024


def storable_key(key: str) -> bool:
    """Whether the ledger can store ``key`` as a frontier's key: text without a NUL or a
    lone surrogate (:func:`curaflow.protocol.keys.storable`), at most
    :data:`MAX_FRONTIER_KEY_BYTES` bytes of UTF-8."""
    return storable(key) and len(key.encode("utf-8")) <= MAX_FRONTIER_KEY_BYTES


def storable_json(value: Any) -> bool:
    """Whether PostgreSQL's ``jsonb`` takes ``value``: JSON without NaN or infinities, whose
    every string and key encodes as UTF-8 (no lone surrogate: asyncpg refuses to send it,
    22000) and holds no NUL (``\\u0000``: 22P05). False also for a value JSON cannot hold
    or nests deeper than the encoder recurses."""
    try:
        text = json.dumps(value, allow_nan=False, ensure_ascii=False)
        text.encode("utf-8")
    except (TypeError, ValueError, RecursionError):  # UnicodeEncodeError is a ValueError
        return False
    return "\\u0000" not in text


#: What no stored id holds: a control character or a surrogate (each becomes U+FFFD in an id).
_ID_UNSTORABLE = re.compile("[\x00-\x1f\x7f-\x9f\ud800-\udfff]")
#: Fields (and report keys) holding a work's id, whose text is never cleaned into another id.
_ID_FIELDS = frozenset({"work_id"})
#: Fields holding a source's own JSON, kept or dropped whole, never cleaned
#: (:meth:`GuardedSource._stored`: a frontier changed is another frontier).
_OWN_JSON_FIELDS = frozenset({"frontier"})


def _cleaned(value: Any, *, is_id: bool = False) -> Any:
    """``value`` with every text :func:`storable_text`: models and lists changed in place,
    a mapping rebuilt only when one of its keys or values changed."""
    if isinstance(value, str):
        if is_id:
            return _ID_UNSTORABLE.sub("\ufffd", value)
        return clean_text(value)
    if isinstance(value, BaseModel):
        for name in type(value).model_fields:
            item = getattr(value, name)
            if item is None or isinstance(item, bool | int | float) or name in _OWN_JSON_FIELDS:
                continue
            clean = _cleaned(item, is_id=name in _ID_FIELDS)
            if clean is not item:
                setattr(value, name, clean)
        return value
    if isinstance(value, list):
        for index, item in enumerate(value):
            clean = _cleaned(item)
            if clean is not item:
                value[index] = clean
        return value
    if isinstance(value, dict):
        pairs = [
            (_cleaned(k) if isinstance(k, str) else k, _cleaned(v, is_id=k in _ID_FIELDS)) for k, v in value.items()
        ]
        if all(k is k0 and v is v0 for (k, v), (k0, v0) in zip(pairs, value.items(), strict=True)):
            return value
        return dict(pairs)
    return value


def storable_text(value: T) -> T:
    """``value`` — a :class:`~curaflow.domain.models.Work`, a scan's state, an animation, or
    any model, list or mapping of them — with every text the ledger can store: each text
    :func:`~curaflow.domain.text.clean_text` (no NUL or other control character but TAB,
    LF and CR; a lone surrogate replaced by U+FFFD), each work id (``work_id``) with such a
    character replaced by U+FFFD instead, so it never becomes another, valid id; a scan's
    ``frontier`` is left whole (the source's own JSON: stored or dropped as it is). Models and
    lists are changed in place (returned as given); a text that needs no cleaning is kept
    as it is (one search of each text)."""
    result: T = _cleaned(value)
    return result


#: Exceptions of curaflow's own services a source call may carry: never the source's
#: failure. The rate gate raises every ledger failure as ``GateUnavailable``
#: (:class:`curaflow.ledger.gates.LedgerGate`: a pool or statement timeout and a reset are
#: ``OSError`` s, which a source's own code raises too, so the gate names them); asyncpg's
#: own classes pass as before.
OWN_ERRORS: tuple[type[BaseException], ...] = (GateUnavailable, asyncpg.PostgresError, asyncpg.InterfaceError)

T = TypeVar("T")


class _HookFailed(Exception):
    """A ledger hook of the scan failed (carried through the source, re-raised as it was)."""

    def __init__(self, err: Exception) -> None:
        super().__init__(str(err))
        self.err = err


def _passes(err: BaseException) -> bool:
    return isinstance(err, (SourceError, WorkUnavailable, *OWN_ERRORS)) or not isinstance(err, Exception)


def _attributed(source: str, reason: TerminalReason, what: str, err: Exception) -> SourceError:
    # the secrets masked before the cut: a cut through one would leave its start
    return SourceError(reason, redacted(f"source {source!r} {what} raised {type(err).__name__}: {err}")[:500])


class _Body:
    """A download's body within the guard's byte limit; the source's own errors attributed."""

    def __init__(self, inner: Any, source: str, url: str, max_bytes: int) -> None:
        announced = getattr(inner, "expected_bytes", None)
        self.expected_bytes = announced if isinstance(announced, int) and announced >= 0 else None
        self._inner = inner
        self._source = source
        self._work_id = url
        self._max = max_bytes
        #: The source's own exception out of its body, left as it was: the source's
        #: download may still answer it when its ``async with`` ends (a source may turn its
        #: byte cap into an unavailable work there); the guard attributes it only if it does not.
        self.failed: BaseException | None = None

    async def chunks(self) -> AsyncIterator[bytes]:
        # The bytes received are counted, not the length announced: a source that checks
        # the announced length itself keeps its own answer.
        received = 0
        iterator = aiter(self._inner.chunks())
        while True:
            try:
                chunk = await anext(iterator)
            except StopAsyncIteration:
                return
            except Exception as err:
                if not _passes(err):
                    self.failed = err
                raise
            if not isinstance(chunk, bytes | bytearray | memoryview):
                raise SourceError(TerminalReason.DOWNLOAD_FAILED, f"source {self._source!r} download yielded no bytes")
            received += len(chunk)
            if received > self._max:
                raise WorkUnavailable(
                    self._work_id,
                    f"an image page is larger than {self._max} bytes (outbound.download_max_bytes)",
                    UnavailableKind.TOO_LARGE,
                    limit_bytes=self._max,  # the page's size settles it (corroboration.sized)
                )
            yield bytes(chunk)


class GuardedSource:
    """A :class:`~curaflow.sources.base.Source` keeping the protocol's promises (module doc)."""

    def __init__(self, inner: Source, *, download_max_bytes: int, download_timeout_s: float) -> None:
        self.inner = inner
        self.name: str = inner.name
        self.kind: str = inner.kind
        self.policy: SourcePolicy = inner.policy
        #: Whether the guard cleans what the kind answers (:func:`storable_text`): not for
        #: a kind that reads its answers cleaned (:attr:`SourcePolicy.clean_text`).
        self._cleans = not inner.policy.clean_text
        self._max_bytes = download_max_bytes
        self._timeout_s = download_timeout_s

    def restore(self, saved: dict[str, Any]) -> ScanState:
        return self.inner.restore(saved)

    def frontier_key(self, target: TargetSpec) -> str | None:
        try:
            key = self.inner.frontier_key(target)
        except Exception as err:
            raise _attributed(self.name, TerminalReason.REMOTE_HTTP_ERROR, "frontier key", err) from err
        if key is not None and not isinstance(key, str):
            raise SourceError(
                TerminalReason.REMOTE_HTTP_ERROR, f"source {self.name!r} frontier key is a {type(key).__name__}"
            )
        if key is not None and not storable_key(key):
            raise SourceError(
                TerminalReason.REMOTE_HTTP_ERROR,
                f"source {self.name!r} frontier key cannot be stored (a NUL, a lone surrogate, or over "
                f"{MAX_FRONTIER_KEY_BYTES} bytes of UTF-8)",
            )
        return key

    async def scan(self, target: TargetSpec, request: ScanRequest, checkpoint: ScanState | None = None) -> ScanState:
        def hook(call: Callable[..., Awaitable[T]]) -> Callable[..., Awaitable[T]]:
            async def run(*args: Any) -> T:
                try:
                    return await call(*args)
                except Exception as err:
                    raise _HookFailed(err) from err

            return run

        skipped = request.on_skipped_day

        def on_skipped_day(day: Any) -> None:
            assert skipped is not None
            try:
                skipped(day)
            except Exception as err:
                raise _HookFailed(err) from err

        on_page = request.on_page

        async def on_clean_page(state: ScanState) -> None:
            await on_page(storable_text(state))

        inner_request = dataclasses.replace(
            request,
            known=hook(request.known),
            on_page=hook(on_clean_page if self._cleans else on_page),
            on_skipped_day=on_skipped_day if skipped is not None else None,
        )
        try:
            return self._stored(await self.inner.scan(target, inner_request, checkpoint))
        except _HookFailed as failed:
            raise failed.err from None
        except WorkUnavailable as err:  # not a scan's answer: the scan failed
            raise _attributed(self.name, TerminalReason.REMOTE_HTTP_ERROR, "scan", err) from err
        except Exception as err:
            if _passes(err):
                raise
            raise _attributed(self.name, TerminalReason.REMOTE_HTTP_ERROR, "scan", err) from err

    def _stored(self, state: ScanState) -> ScanState:
        """``state`` with text the ledger can store (:func:`storable_text`) and a frontier it
        can store (a JSON object), or none."""
        if self._cleans:
            storable_text(state)
        frontier = state.frontier
        if frontier is None:
            return state
        ok = isinstance(frontier, dict) and storable_json(frontier)
        if not ok:
            log.warning("source.frontier_dropped", source=self.name, type=type(frontier).__name__)
            state.frontier = None
        return state

    async def work(self, work_id: str) -> Work:
        try:
            work = await self.inner.work(work_id)
        except Exception as err:
            if _passes(err):
                raise
            raise _attributed(self.name, TerminalReason.METADATA_FAILED, "work details", err) from err
        return storable_text(work) if self._cleans else work

    async def animation(self, work: Work) -> Animation | None:
        try:
            animation = await self.inner.animation(work)
        except Exception as err:
            if _passes(err):
                raise
            raise _attributed(self.name, TerminalReason.DOWNLOAD_FAILED, "animation", err) from err
        return storable_text(animation) if self._cleans else animation

    @contextlib.asynccontextmanager
    async def download(self, url: str) -> AsyncIterator[_Body]:
        problem = url_problem(url)
        if problem is not None:  # what the source answered for the work: no request can be made for it
            raise WorkUnavailable(
                str(url).rsplit("/", 1)[-1][:64], f"page URL refused: {problem}", UnavailableKind.UNUSABLE_URL
            )
        # The source's own limit (the same, and the job's deadline) fires first when it keeps it.
        budget = time_left(self._timeout_s) + GRACE_S
        caller: BaseException | None = None
        wrapped: _Body | None = None
        started = time.monotonic()
        bound = asyncio.timeout(budget)
        try:
            async with bound, self.inner.download(url) as body:
                wrapped = _Body(body, self.name, url, self._max_bytes)
                try:
                    yield wrapped
                except BaseException as err:  # the caller's own (the store's writes, its checks)
                    caller = err
                    raise
        except TimeoutError as err:
            if wrapped is not None and err is wrapped.failed:  # the source's body, not answered by it
                raise _attributed(self.name, TerminalReason.DOWNLOAD_TIMEOUT, "download", err) from err
            if caller is not None and err is caller:
                raise
            # Durations in messages are measured: the guard's limit is named only when it
            # is what cut the download.
            elapsed = time.monotonic() - started
            if bound.expired():
                raise SourceError(
                    TerminalReason.DOWNLOAD_TIMEOUT,
                    f"source {self.name!r}: an image page took over {budget:.1f} s (cut after {elapsed:.1f} s)",
                ) from None
            raise SourceError(
                TerminalReason.DOWNLOAD_TIMEOUT,
                redacted(
                    f"source {self.name!r}: the download timed out after {elapsed:.1f} s ({type(err).__name__}: {err})"
                )[:500],
            ) from None
        except Exception as err:
            if wrapped is not None and err is wrapped.failed:  # the source's body, not answered by it
                raise _attributed(self.name, TerminalReason.DOWNLOAD_FAILED, "download", err) from err
            if (caller is not None and err is caller) or _passes(err):
                raise
            raise _attributed(self.name, TerminalReason.DOWNLOAD_FAILED, "download", err) from err


def guarded(source: Source, *, download_max_bytes: int, download_timeout_s: float) -> Source:
    """``source`` wrapped by a :class:`GuardedSource` (once)."""
    if isinstance(source, GuardedSource):
        return source
    return GuardedSource(source, download_max_bytes=download_max_bytes, download_timeout_s=download_timeout_s)
