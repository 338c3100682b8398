"""What every source implements (the seam beside :mod:`curaflow.routes.base`).

A *source* is where works are found and fetched from: any kind registered in
:mod:`curaflow.sources.registry` (the built-in one is Pixiv's app-api,
:mod:`curaflow.sources.pixiv`). One configured *source instance* (an entry of
``[sources]``, or one account of ``[pixiv]``) is one :class:`Source` object per worker
process; its requests run on its own source task queue (``<task_queue>-source-<name>``),
served by one process at a time (the source-queue lease) and spaced by its rate gate
(:mod:`curaflow.sources.gate`).

The activities (``search``, ``fetch``, ``acquire``) and the artifact store talk only to
this protocol:

* **search pages** — :meth:`Source.scan` runs (or resumes) the candidate scan of one
  cell: it pages the source, asks the ledger which works are ruled out (``known``),
  applies the target's filters and returns a :class:`ScanState` holding the candidates
  in rank order and the :class:`~curaflow.domain.models.CandidateReport`. A source whose
  results are a plain list of pages implements only its page request and uses the
  generic scan :func:`curaflow.sources.paging.scan_pages`;
* **its scan frontier** — a source with :attr:`SourcePolicy.keeps_frontier` keeps a
  memory of each target between jobs (where its next scan should read). The memory is
  the source's own JSON: :meth:`Source.frontier_key` names it for a target, the ledger
  stores it under that key without reading it (:mod:`curaflow.ledger.frontiers`), the
  scan receives it in :attr:`ScanRequest.frontier` and returns the next one in
  :attr:`ScanState.frontier`. It is advisory only: every work a scan reads is still
  judged by the ledger, so a stale or lost frontier costs pages, never a duplicate;
* **its query words** — the words of a target's query a kind's source sends as they are
  (Pixiv's ``sort``, ``search_target`` …) are the kind's to define:
  :meth:`SourceConfig.query_problems` names each word the source does not take, and the
  configuration refuses a target with one (:func:`curaflow.config.checks.check_query_words`);
* **work details** — :meth:`Source.work`;
* **image download** — :meth:`Source.download` (one page's body, streamed) and
  :meth:`Source.animation` (an animated work's frames zip and delays, or None:
  :class:`~curaflow.sources.animation.Animation`);
* **its errors** — every method raises only
  :class:`~curaflow.sources.errors.SourceError` (classified into a terminal reason) or
  :class:`~curaflow.sources.errors.WorkUnavailable` (the work cannot be used: the cell
  moves on). What a reason *means* is never the source's to decide (DESIGN "Owners").
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Annotated, Any, Protocol

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from curaflow.domain.config_numbers import BooleansAreNoNumbers
from curaflow.domain.messages import TargetQuery, TargetSpec
from curaflow.domain.models import CandidateReport, SkippedDay, Work
from curaflow.domain.ratelimit import LADDER_BASE_MS, LADDER_CAP_MS
from curaflow.sources.animation import Animation

#: Given work ids, the ones the ledger rules out for this target, with the reason word
#: (``duplicate``, ``refused``, ``unavailable``).
KnownHook = Callable[[list[str]], Awaitable[dict[str, str]]]
#: Awaited with the scan's state after each page another page follows (checkpoint + heartbeat).
PageHook = Callable[["ScanState"], Awaitable[None]]
#: Called once for each day the source cannot page fully.
SkippedDayHook = Callable[[SkippedDay], None]

__all__ = [
    "Animation",
    "Download",
    "FileSource",
    "KnownHook",
    "PageHook",
    "QueryWordProblem",
    "ScanRequest",
    "ScanState",
    "SkippedDayHook",
    "Source",
    "SourceConfig",
    "SourcePolicy",
]


class ScanState(BaseModel):
    """Where a scan is, as every source keeps it; persisted after every page (JSON).

    A source may subclass it with fields of its own (e.g. Pixiv's date windows and
    frontier walk: :class:`~curaflow.sources.pixiv.scan.ScanCheckpoint`).

    Attributes:
        started: the first page was requested.
        pages_done: the source has no page left to fetch.
        exhausted: nothing is left: no page to fetch and nothing pending.
        pending: works of the last fetched page not examined yet.
        next_url: the source's cursor of the next page (a URL, an offset, a token; None
            before the first page and after the last).
        examined / pages: works examined and pages fetched so far.
        uncapped: of ``examined``, the works that do not count against ``max_examined``:
            a source's own re-reading of works examined before (Pixiv's ``popular_desc``
            revisit page, up to a page of a ``date_desc`` head); 0 for the generic scan.
            See :meth:`capped`.
        candidates: eligible works, in rank order.
        report: what the scan saw (stored on the cell).
        all_duplicates: every work examined was a duplicate so far.
        frontier: once the scan ended, the frontier it leaves for the target's next job
            (the source's own JSON, stored as it is under :meth:`Source.frontier_key`;
            None: nothing to store — a source without
            :attr:`SourcePolicy.keeps_frontier`, or a scan given no frontier).
    """

    started: bool = False
    pages_done: bool = False
    exhausted: bool = False
    pending: list[Work] = Field(default_factory=list)
    next_url: str | None = None
    examined: int = 0
    pages: int = 0
    candidates: list[Work] = Field(default_factory=list)
    report: CandidateReport = Field(default_factory=CandidateReport)
    all_duplicates: bool = True
    frontier: dict[str, Any] | None = None
    uncapped: int = 0

    def capped(self, max_examined: int) -> bool:
        """Whether the scan has examined ``max_examined`` works that count against the
        cap (``examined`` less ``uncapped``): it examines no further work."""
        return self.examined - self.uncapped >= max_examined


@dataclass
class ScanRequest:
    """What one scan of one cell may do, and the ledger hooks it calls.

    Attributes:
        scan_limit: most candidates kept (1..100; the fallback pass's bound).
        known: the ledger's verdict on a page's works (one query per page).
        on_page: awaited with the state after each page another page follows.
        max_examined: most works examined in one scan (:attr:`SourcePolicy.max_examined`).
        want: stop once this many candidates are held (None: ``min(scan_limit, WANT)``).
        unavailable: works this cell already found unavailable (rejected as such).
        on_skipped_day: called once for each day the source cannot page fully.
        frontier: the target's stored frontier, the source's own JSON as a scan of it
            left it (``{}`` when none is stored yet); None: this scan keeps none. Read
            only when the scan starts (a resumed scan keeps its place in its checkpoint);
            the source alone knows its shape, and one it cannot read is a fresh start.
    """

    scan_limit: int
    known: KnownHook
    on_page: PageHook
    max_examined: int = 1000
    want: int | None = None
    unavailable: set[str] | None = None
    on_skipped_day: SkippedDayHook | None = None
    frontier: dict[str, Any] | None = None


@dataclass(frozen=True)
class SourcePolicy:
    """How the activities and the worker treat one source instance.

    Attributes:
        concurrency: source activities of this instance run at once (its task queue's
            ``max_concurrent_activities``; one process serves the queue).
        max_examined: most works one scan examines (a scan that reaches it without a
            candidate is ``scan_capped``).
        unavailable_ttl_ms: how long a work found unavailable is skipped by later jobs.
        unrecognised_hold_ms: how long instead when the answer was not recognised as the
            work's (:attr:`~curaflow.sources.errors.WorkUnavailable.recognised`).
        rate_limit_base_s / rate_limit_cap_s: first step and cap of the cooldown ladder
            when a rate limit carries no cooldown from the gate (s): the instance's own,
            as its gate's (a stated ``Retry-After`` is waited up to the cap).
        keeps_frontier: the scan reads and leaves a scan frontier (the source's own
            memory of a target, stored by the ledger per target and
            :meth:`Source.frontier_key`; module doc).
        clean_text: the kind reads every answer's text cleaned as it parses it (NUL and
            the other control characters removed, a lone surrogate replaced:
            :func:`curaflow.domain.text.loads_clean`, as Pixiv's client reads every
            app-api answer), so the guard does not walk its works again
            (:func:`curaflow.sources.guard.storable_text`: ~0.5 ms of the worker's CPU a
            search page of 30 works). False: the guard cleans what the kind answers.
    """

    concurrency: int = 1
    max_examined: int = 1000
    unavailable_ttl_ms: int = 7 * 86_400_000
    unrecognised_hold_ms: int = 3_600_000
    rate_limit_base_s: float = 60.0
    rate_limit_cap_s: float = LADDER_CAP_MS / 1000
    keeps_frontier: bool = False
    clean_text: bool = False

    def memory_ms(self, recognised: bool) -> int:
        """How long later scans skip a work found unavailable (ms; 0: not at all): the
        source's ``unavailable_ttl_ms`` when the answer was recognised as the work's, else
        ``unrecognised_hold_ms``, never longer (the one owner of this rule)."""
        if recognised:
            return self.unavailable_ttl_ms
        return min(self.unrecognised_hold_ms, self.unavailable_ttl_ms)


class Download(Protocol):
    """One page's body being downloaded (inside :meth:`Source.download`'s block).

    Attributes:
        expected_bytes: the length the source announced of the bytes :meth:`chunks`
            yields, or None — never an encoded length for decoded bytes
            (:func:`curaflow.outbound.announced_length`: the artifact store takes a body
            of another length for one cut short).
    """

    expected_bytes: int | None

    def chunks(self) -> AsyncIterator[bytes]:
        """The body, chunk by chunk, within the source's byte limit.

        Raises:
            SourceError / WorkUnavailable: as :meth:`Source.download`.
        """
        ...


class FileSource(Protocol):
    """The download half of a :class:`Source`: what the artifact store needs
    (:meth:`curaflow.artifacts.ArtifactStore.fetch`)."""

    def download(self, url: str) -> AbstractAsyncContextManager[Download]:
        """Open a streaming download of one page ``url`` of a work (the ``async with``
        block reads it under the source's total time limit).

        Raises:
            SourceError: ``download_failed`` / ``download_timeout`` / ``rate_limited``.
            WorkUnavailable: the page is gone (403/404/410: a 404/410 with
                ``corroborate`` when only the work's description can say whose it is —
                :mod:`curaflow.sources.corroboration`), on a host the source may not
                fetch, or over the source's byte limit.
        """
        ...

    async def animation(self, work: Work) -> Animation | None:
        """An animated work's frames zip and delays (delivered as one GIF), None for a
        work of still pages.

        Raises:
            WorkUnavailable / SourceError: as :meth:`work`; ``download_failed`` (not
                retryable) when the answer is not a usable animation.
        """
        ...


class Source(FileSource, Protocol):
    """One configured instance of a source.

    Attributes:
        name: the instance's name (the ``[sources]`` key, or the account of
            ``[pixiv]``) — what a target's ``account`` names; its gate and queue are
            keyed by it.
        kind: the source kind (a registered kind: ``pixiv``, …).
        policy: limits and flags (:class:`SourcePolicy`).
    """

    name: str
    kind: str
    policy: SourcePolicy

    def restore(self, saved: dict[str, Any]) -> ScanState:
        """The scan state a previous attempt saved (its ``model_dump(mode="json")``).

        Raises:
            pydantic.ValidationError: ``saved`` is not this source's state.
        """
        ...

    def frontier_key(self, target: TargetSpec) -> str | None:
        """The key ``target``'s scan frontier is stored under (only asked of a source
        with :attr:`SourcePolicy.keeps_frontier`): what identifies what the target's
        scans see — change it and the target starts afresh. None: this target's scans
        keep no frontier. Pure (no request).
        """
        ...

    async def scan(self, target: TargetSpec, request: ScanRequest, checkpoint: ScanState | None = None) -> ScanState:
        """Run (or resume from ``checkpoint``) the candidate scan of ``target``.

        Returns:
            The final state: ``candidates`` in rank order (at most ``scan_limit``), the
            ``report`` (``fetched``, ``pages``, ``exhausted``, rejections by reason)
            and, when the request carried a frontier, the next one (``frontier``).

        Raises:
            SourceError: a source call failed (the attempt fails; the saved state survives).
        """
        ...

    async def work(self, work_id: str) -> Work:
        """The work ``work_id`` as the source describes it now.

        Raises:
            WorkUnavailable: the work is gone, private or restricted.
            SourceError: classified failure.
        """
        ...


#: The longest spacing of an account's requests (``min_interval_ms``, ms): a minute.
#: Pixiv's own client spaces them a second apart (reference §2.5); beyond a minute a
#: job's requests — a search's pages, each work's detail and pages — outlast its
#: deadline (30 min by default), and a value a zero too many (600 000) held every job of
#: the account, silently, until it expired.
MIN_INTERVAL_CEILING_MS = 60_000
#: The most source activities of an account at once (``max_concurrency``). Pixiv's own
#: guidance is one (reference §2.5); the replay benchmarks run 40. Beyond 64 it is a
#: typo, not a gate: each holds a worker's activity slot for the account's queue, and
#: they wait for their slots in a queue of concurrency × interval.
CONCURRENCY_CEILING = 64


def _interval_within_bounds(value: int) -> int:
    if not 0 <= value <= MIN_INTERVAL_CEILING_MS:
        raise ValueError(
            f"{value} is not between 0 and {MIN_INTERVAL_CEILING_MS} (1 min) milliseconds: the spacing of an "
            "account's requests (Pixiv's own client uses 1000; beyond a minute a job's requests outlast its "
            "deadline)"
        )
    return value


def _concurrency_within_bounds(value: int) -> int:
    if not 1 <= value <= CONCURRENCY_CEILING:
        raise ValueError(
            f"{value} is not between 1 and {CONCURRENCY_CEILING}: the source activities of an account at once "
            "(Pixiv's own guidance is 1; more is a typo, not a gate)"
        )
    return value


#: An account's request spacing (ms), validated: 0 … :data:`MIN_INTERVAL_CEILING_MS`.
GateIntervalMs = Annotated[int, AfterValidator(_interval_within_bounds)]
#: An account's concurrency, validated: 1 … :data:`CONCURRENCY_CEILING`.
GateConcurrency = Annotated[int, AfterValidator(_concurrency_within_bounds)]


@dataclass(frozen=True)
class QueryWordProblem:
    """A word of a target's query its source does not take (:meth:`SourceConfig.query_problems`).

    Attributes:
        key: the query's key (``sort``, ``ranking_date`` …: a field of
            :class:`~curaflow.domain.messages.TargetQuery`).
        word: the word given.
        takes: what the source takes there, in words an operator can act on
            (``"one of date_desc, date_asc, popular_desc"``, ``"a day YYYY-MM-DD …"``).
    """

    key: str
    word: str
    takes: str


class SourceConfig(BooleansAreNoNumbers):
    """The configuration of one source instance (an entry of ``[sources.<name>]``).

    Each source kind subclasses it with its own fields and a ``kind`` literal, and
    registers the subclass (:func:`curaflow.sources.registry.register_source`); the
    settings validate ``[sources.<name>]`` with the model registered for its ``kind``.
    A kind may keep instances elsewhere (Pixiv's accounts stay under ``[pixiv]``,
    :mod:`curaflow.sources.pixiv.config`).

    Attributes:
        kind: the source kind.
        min_interval_ms: spacing of the instance's requests (its gate, across processes);
            0 … :data:`MIN_INTERVAL_CEILING_MS` (1 min), refused at load beyond.
        max_concurrency: source activities of the instance at once; 1 …
            :data:`CONCURRENCY_CEILING` (64), refused at load beyond.
        max_examined: most works one scan examines.
        unavailable_ttl_ms: how long a work found unavailable is skipped by later jobs.
        unrecognised_hold_ms: how long instead when the answer was not recognised as the
            work's (:attr:`~curaflow.sources.errors.WorkUnavailable.recognised`).
        rate_limit_base_ms / rate_limit_cap_ms: the cooldown ladder of its gate.
    """

    model_config = ConfigDict(extra="forbid")

    kind: str
    min_interval_ms: GateIntervalMs = 0
    max_concurrency: GateConcurrency = 1
    max_examined: int = Field(default=1000, ge=1)
    unavailable_ttl_ms: int = Field(default=7 * 86_400_000, ge=0)
    unrecognised_hold_ms: int = Field(default=3_600_000, ge=0)
    rate_limit_base_ms: int = Field(default=LADDER_BASE_MS, ge=1)
    rate_limit_cap_ms: int = Field(default=LADDER_CAP_MS, ge=1)

    def query_problems(self, query: TargetQuery) -> list[QueryWordProblem]:
        """The words of ``query`` this instance's source does not take, in the query's key
        order (none: every word is taken). A kind whose source sends a query's words as
        they are defines them by overriding this (Pixiv's:
        :mod:`curaflow.sources.pixiv.query_words`); a kind that defines none takes what it
        is given. Read by the configuration for every target
        (:func:`curaflow.config.checks.check_query_words`)."""
        return []

    def policy(self) -> SourcePolicy:
        """The :class:`SourcePolicy` these settings give (no frontier kept)."""
        return SourcePolicy(
            concurrency=self.max_concurrency,
            max_examined=self.max_examined,
            unavailable_ttl_ms=self.unavailable_ttl_ms,
            unrecognised_hold_ms=self.unrecognised_hold_ms,
            rate_limit_base_s=self.rate_limit_base_ms / 1000,
            rate_limit_cap_s=self.rate_limit_cap_ms / 1000,
        )
