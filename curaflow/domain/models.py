"""Pure data models shared by workflows, activities, the ledger and the API.

These are the shapes of the domain (a work found at the source, a cell's snapshot, a
candidate report), not of the wire protocol (see :mod:`curaflow.protocol.models`).
Times are epoch milliseconds (UTC) unless a field says otherwise.

Pure module: imported by workflows through the sandbox pass-through.
"""

from __future__ import annotations

from pydantic import AliasChoices, BaseModel, Field, ValidationError, ValidatorFunctionWrapHandler, field_validator

from curaflow.domain.cells import CellState
from curaflow.domain.holds import Hold
from curaflow.domain.text import clipped

#: The characters of a work's title a cell's brief form carries (:meth:`CellSnapshot.brief`);
#: Pixiv's titles are at most 32.
BRIEF_TITLE_CHARS = 1000
#: The characters of a cell's reason message its brief form carries.
BRIEF_MESSAGE_CHARS = 2000
#: The longest work URL a cell's brief form carries (a longer one is left out).
BRIEF_URL_CHARS = 2048


class WorkPage(BaseModel):
    """One image page of a work at the source."""

    index: int
    url: str
    width: int | None = None
    height: int | None = None


class Work(BaseModel):
    """A work — one item of a source (an illustration, a picture, an animation) — as the
    search activity saw it.

    Attributes:
        work_id: the source's id, as a string.
        work_type: protocol work type, ``illustration`` | ``novel`` | ``unknown``.
        kind: the source's own type word (Pixiv's: ``illust``, ``manga``, ``ugoira``;
            the default is Pixiv's for payloads written before other sources).
        create_date: ISO-8601 timestamp as the source gives it.
        pages: every image page, in order (originals).
    """

    work_id: str
    work_type: str = "illustration"
    kind: str = "illust"
    title: str = ""
    url: str = ""
    tags: list[str] = Field(default_factory=list)
    create_date: str | None = None
    page_count: int = 1
    width: int | None = None
    height: int | None = None
    x_restrict: int = 0
    ai_type: int = 0
    total_bookmarks: int = 0
    visible: bool = True
    author: str | None = None
    pages: list[WorkPage] = Field(default_factory=list)


class SkippedDay(BaseModel):
    """A day the source could not page fully.

    A source may page only so deep into one query (Pixiv's app-api: about 5000 works,
    so its date-sorted scan reads a crowded day from both ends). A day with more works
    than the source's scan reaches keeps a part no request can reach; when the source
    gives no total, what is known is the day and how many of its works were reached.

    Attributes:
        day: ``YYYY-MM-DD`` (the source's calendar; Pixiv's is JST).
        reached: works of that day the scan fetched, from both ends.
    """

    day: str
    reached: int = 0


class CandidateReport(BaseModel):
    """What a search scan saw (reference §5.5, stored on the cell).

    Attributes:
        fetched: works examined at the source.
        read_again: of ``fetched``, works the source read again that do not count
            against its ``max_examined`` (Pixiv's ``popular_desc`` revisit page, up to a
            page of a ``date_desc`` head examined before: ``ScanState.uncapped``); what
            the pass examined anew is ``fetched`` less these
            (:func:`~curaflow.domain.fallback.reached_cap`). 0 in a report stored before
            the field existed.
        selected: the work id bound to the cell, if any.
        rejected: works examined and not eligible.
        reasons: rejection counts by reason word (``duplicate``, ``excluded``,
            ``invalid`` (an id or fields the source should never have sent),
            ``refused`` (a route of the target refused it for good), ``unavailable``,
            ``hidden`` (the source hides it from the account searched with: its
            settings, its relation to the artist — not the work's; a later job meets it
            again),
            ``unusable`` (what the source sent for it cannot be used: an image URL on
            another host), ``filtered:min_bookmarks`` …).
        known: works earlier scans of the target ruled out for good that this scan
            did not read again (its scan frontier's known run), by the same words; the
            cell's tally counts them with ``reasons`` (:mod:`curaflow.domain.tally`).
        filtered: per-work rejections, capped, as ``{work_id, reason}`` with the protocol
            reason words (``duplicate | excluded | invalid | unavailable | other``).
        exhausted: the scan read everything the source had for this query (no page
            left, nothing pending): a wider pass would find nothing new.
        skipped_days: days the source could not page fully (:class:`SkippedDay`).
        unavailable: works of this cell found unavailable when fetched, by why
            (:class:`~curaflow.sources.errors.UnavailableKind`: ``gone``,
            ``unusable_url``, ``too_large``, ``not_an_image``, ``undecodable``,
            ``over_budget``, ``unusable_animation``, ``no_file``); each is also one ``unavailable``
            of ``reasons``. Works a scan skipped as remembered unavailable are in
            ``reasons`` only.
        unrecognised: of ``unavailable``, the works found so on an answer not recognised
            as the work's (:attr:`~curaflow.sources.errors.WorkUnavailable.recognised`),
            by the same kinds: the source's answers, which the tally counts ``unusable``.
    """

    fetched: int = 0
    read_again: int = 0
    selected: str | None = None
    rejected: int = 0
    reasons: dict[str, int] = Field(default_factory=dict)
    known: dict[str, int] = Field(default_factory=dict)
    filtered: list[dict[str, str]] = Field(default_factory=list)
    pages: int = 0
    exhausted: bool = False
    skipped_days: list[SkippedDay] = Field(default_factory=list)
    unavailable: dict[str, int] = Field(default_factory=dict)
    unrecognised: dict[str, int] = Field(default_factory=dict)


class ArtifactFile(BaseModel):
    """One file of a fetched artifact in the artifact store.

    ``frame_delays_ms``: for an animation (an animated work as one animated GIF), how long each
    frame shows, in ms, in order; None for a still image.
    """

    path: str
    bytes: int
    mime: str
    width: int | None = None
    height: int | None = None
    sha256: str | None = None
    page: int = 0
    frame_delays_ms: list[int] | None = None


class Artifact(BaseModel):
    """The fetched files of a work, complete on disk."""

    work_id: str
    files: list[ArtifactFile] = Field(default_factory=list)


class RouteDelivery(BaseModel):
    """The ledger's view of one delivery intent of a cell.

    Attributes:
        status: the intent's status: ``reserved`` | ``sending`` | ``delivered`` |
            ``duplicate`` | ``failed`` | ``unknown`` | ``released``.
        work_id: the work the intent is for (the cell's bound work).
        parts_posted: parts of a multi-part send the route confirmed (albums, messages;
            an album recorded partly posted before 2026-12-07 counts): on an intent that did not complete, the
            delivery is *partial* (:attr:`partial`).
    """

    route: str
    status: str
    idempotency_key: str
    remote_id: str | None = None
    attempts: int = 0
    last_error: str | None = None
    work_id: str | None = None
    parts_posted: int = 0

    @property
    def partial(self) -> bool:
        """Part of the work is at the route although the delivery did not complete."""
        return self.status in ("failed", "unknown") and self.parts_posted > 0


#: Intent statuses of a delivery that is on the route (the receiver has the work).
LANDED_STATUSES = frozenset({"delivered", "duplicate"})
#: Intent statuses of a delivery that may be on the route (a request left, no answer).
MAYBE_LANDED_STATUSES = frozenset({"unknown", "sending"})


class DeliveryReport(BaseModel):
    """One delivery of a job as reported to consumers and operators.

    See docs/http-api.md "Cancellation, liveness and the outcome record".

    Every delivery intent of a cell's bound work, whatever the job's terminal status:
    in the Job (``result.deliveries`` / ``error.detail.deliveries``), the terminal event,
    the outcome record (``deliveries``) and the ``status`` query.

    Attributes:
        status: ``delivered`` (the route has it) | ``duplicate`` (the route already had
            it) | ``partial`` (part of the work is at the route: albums or messages
            confirmed, the rest never will be) | ``unknown`` (a request left and may have landed) | ``released`` (never
            sent, or sent and refused in a way that proves it did not land; another job
            may deliver it) | ``failed`` (the route refused it) | ``pending`` / ``sending``
            (a job still running).
        remote_id: the route's id of what it received (message id, file path …), if any.
    """

    target_id: str
    route: str
    work_id: str
    status: str
    remote_id: str | None = None


class CellSnapshot(BaseModel):
    """A cell as written to the ledger by the last transition.

    Both readers of status (the workflow's ``status`` query and ``GET /jobs/{id}``) are
    computed from these snapshots by :mod:`curaflow.domain.projection`.

    ``stage`` is what the cell is doing (:class:`~curaflow.domain.cells.CellStage`);
    ``fallback_pass`` the search pass it is in (:mod:`curaflow.domain.fallback`); in
    payloads (workflow histories) it keeps its former name ``fallback_stage``, so workers
    before and after the rename read each other's payloads.
    """

    target_id: str
    state: CellState = CellState.PENDING
    stage: str = "queued"
    work_id: str | None = None
    work_type: str | None = None
    work: Work | None = None
    reason: str | None = None
    reason_message: str | None = None
    attempt: int = 0
    fallback_pass: int = Field(
        default=0,
        validation_alias=AliasChoices("fallback_stage", "fallback_pass"),
        serialization_alias="fallback_stage",  # the payload name in workflow histories
    )
    candidate_report: CandidateReport | None = None
    artifact: Artifact | None = None
    deliveries: list[RouteDelivery] = Field(default_factory=list)
    updated_at: int = 0
    #: what held the cell when its job's finish ended it (:mod:`curaflow.domain.holds`).
    held_by: Hold | None = None

    @field_validator("held_by", mode="wrap")
    @classmethod
    def _readable_hold(cls, value: object, handler: ValidatorFunctionWrapHandler) -> Hold | None:
        """A hold this build cannot read — a kind a later build added
        (:data:`~curaflow.domain.holds.HoldKind`), in a payload or a row read during a
        rolling upgrade — is dropped, never the snapshot: the cell's message, written with
        the hold, still says it."""
        try:
            return handler(value)  # type: ignore[no-any-return]
        except ValidationError:
            return None

    def delivery_reports(self) -> list[DeliveryReport]:
        """This cell's deliveries as :class:`DeliveryReport` s (``reserved`` → ``pending``)."""
        return [
            DeliveryReport(
                target_id=self.target_id,
                route=d.route,
                work_id=d.work_id or self.work_id or "",
                status="pending" if d.status == "reserved" else "partial" if d.partial else d.status,
                remote_id=d.remote_id,
            )
            for d in self.deliveries
        ]

    def landed(self) -> bool:
        """True when a route received this cell's work from this job (an intent
        ``delivered``, or a partial delivery: part of the work is at the route)."""
        return any(d.status == "delivered" or d.partial for d in self.deliveries)

    def brief(self) -> CellSnapshot:
        """A copy small enough for workflow history: state, stage, reason and the work's
        id, title and URL; no candidate report, artifact, page list or delivery rows.

        The source's and a receiver's text is bounded (:func:`~curaflow.domain.text.clipped`):
        the title to :data:`BRIEF_TITLE_CHARS`, the reason's message to
        :data:`BRIEF_MESSAGE_CHARS`, both cut with ``…``; a URL over :data:`BRIEF_URL_CHARS`
        is left out (cut, it would name another page). Until 2026-12-06 they went whole: a
        work titled 3 MB (a 4 MiB search page holds one) made every ``acquire`` result
        over Temporal's blob limit (2 MiB), and the cell ended ``internal_error`` in every
        job that found the work. The ledger keeps them whole.
        """
        work = None
        if self.work is not None:
            url = self.work.url if len(self.work.url) <= BRIEF_URL_CHARS else ""
            title = clipped(self.work.title, BRIEF_TITLE_CHARS)
            work = Work(work_id=self.work.work_id, work_type=self.work.work_type, title=title, url=url)
        message = clipped(self.reason_message, BRIEF_MESSAGE_CHARS) if self.reason_message else self.reason_message
        return self.model_copy(
            update={
                "work": work,
                "reason_message": message,
                "candidate_report": None,
                "artifact": None,
                "deliveries": [],
            }
        )


class JobRecord(BaseModel):
    """A job as the ledger holds it: the ``jobs`` row plus its cells.

    Times are epoch ms (UTC) or None. ``heartbeat_at`` is the latest over the job's
    cells (each running activity heartbeats its own cell); ``lease_until`` the latest of
    the cells' leases that were live when the job was read (judged by the ledger's read on
    the database's clock, :func:`curaflow.ledger.records.load_job`), None when none was.
    """

    job_id: str
    job_type: str = "candidate_search"
    plan_id: str
    schedule_id: str | None = None
    trigger: str = "protocol"
    idempotency_key: str | None = None
    correlation_id: str | None = None
    callback_url: str | None = None
    params: dict[str, object] | None = None
    target_ids: list[str] = Field(default_factory=list)
    business_status: str | None = None
    created_at: int
    started_at: int | None = None
    updated_at: int
    completed_at: int | None = None
    deadline_at: int | None = None
    heartbeat_at: int | None = None
    lease_until: int | None = None
    attempt: int = 0
    cancel_requested_at: int | None = None
    workflow_started_at: int | None = None
    occurrence_date: str | None = None
    #: a scheduled job's nominal time (None: the occurrence is the admission, ``created_at``)
    occurrence_at: int | None = None
    #: the query each target's cell ran, by target id (the ``query`` of the job's
    #: ``TargetSpec`` s: ``tags``, ``relation``, ``search_target``, ``mode``), the recall
    #: basis of a candidate (:func:`curaflow.protocol.projection.recall_basis`); empty
    #: when not read.
    queries: dict[str, dict[str, object]] = Field(default_factory=dict)
    cells: list[CellSnapshot] = Field(default_factory=list)
