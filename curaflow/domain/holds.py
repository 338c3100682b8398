"""What held a cell when its job ended: a third party's stated wait the report must name.

A send that its receiver rate-limited waits as the receiver stated (Telegram's flood wait
of hours on one send: :func:`curaflow.ledger.route_gates.rate_limited`), and so does one
its receiver answered it is unavailable (a 5xx) with a ``Retry-After``; a route-wide
limit makes the whole route cool down; a route found broken is paused. A source
account's gate refuses every request while it cools down after a rate limit or is paused
after the source restricted it (:mod:`curaflow.ledger.gates`). When the job's deadline
passes meanwhile — or Temporal refuses a retry due after the execution's end — the cell
ends with the deadline's reason or the last failure, whose sentences ("retry with a
narrower query", "check the bot and the chat") hid what held it. The finish
(:func:`curaflow.ledger.finish.finish_job`) asks :func:`hold_scope` which holds may be
named for a cell, gathers their facts from the ledger and asks :func:`held_by`; the answer
is stored with the cell (``cells.held_by``) and said by :func:`hold_sentence` wherever the
cell's message is built (:func:`curaflow.domain.tally.cell_message`), and shown structured
in ``GET /jobs/{id}``'s ``error.detail.held_by`` and the outcome record's targets. The
reason code is unchanged (the protocol's code stays the deadline's or the failure's).

Pure module: no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Literal

from pydantic import BaseModel

from curaflow.domain.cells import CellState
from curaflow.domain.reasons import CANCEL_REASONS, Owner, TerminalReason, reason_info

#: The states of a cell whose work waits for its routes (stored, not yet delivered
#: everywhere): only there can a route's wait be what held it. A cell bound but still
#: fetching keeps reserved intents too, but its download held it, not a route that cools
#: down meanwhile (the deadline's remedy is the one that helps).
WAITING_STATES: frozenset[str] = frozenset({CellState.ARTIFACT_READY, CellState.DELIVERY_PENDING})

#: The states of a cell whose work still needs its source account (searching, or bound
#: and fetching): only there can the account's gate be what held it. Once the work is
#: stored the source is done with it.
SOURCE_STATES: frozenset[str] = frozenset({CellState.PENDING, CellState.SELECTED})

HoldOwner = Literal["route", "account"]

#: Who a named hold is of (:attr:`Hold.owner`): a route's or an account's gate or answer,
#: or curaflow itself — its processes' configurations differ (kind ``configuration``).
HeldByOwner = Literal["route", "account", "curaflow"]

#: What held one send (``delivery_intents.held_kind``): ``rate_limited`` (a rate limit, 429
#: or the platform's flood wait) or ``unavailable`` (a 5xx with a ``Retry-After``: the
#: receiver is down and said when to come back) — what its receiver asked —, or
#: ``configuration`` (the worker that took the attempt does not know the route: the
#: processes' configurations differ; the next attempt was due then —
#: :func:`curaflow.ledger.deliveries.hold_unknown_route`, added 2026-12-05).
SendHoldKind = Literal["rate_limited", "unavailable", "configuration"]

#: Every :attr:`Hold.kind` (the public ``held_by.kind``). The protocol is additive-only
#: and ``held_by`` lives in the error's free-form ``detail``: a kind may be added (the
#: message says it in words); a reader meeting one it does not know — a later build's,
#: during a rolling upgrade — drops the structured hold
#: (:func:`curaflow.ledger.records.load_cells`), never the cell.
HoldKind = Literal["rate_limited", "unavailable", "cooling", "paused", "spacing", "busy", "configuration"]

#: The kinds stored in ``cells.held_by``: those every build since migration 0046 reads
#: there. A build of before 2026-12-05 reads that column with this closed list, and any
#: other kind failed its whole read of the job (``GET /jobs/{id}``, a cancel, a schedule's
#: ``follow``) during a rolling upgrade or after a rollback; a hold of a kind added since
#: (``unavailable``) is stored in ``cells.held_by_added`` instead (migration 0049,
#: :func:`curaflow.ledger.cells.finish_cell`), where only builds that know it look — a
#: build of before reads no structured hold, the cell's message still says it. A kind
#: added later goes there too, never here.
KINDS_OF_0046: frozenset[str] = frozenset({"rate_limited", "cooling", "paused"})

#: The source kinds (:attr:`~curaflow.domain.models.Work.kind`) a source downloads as one
#: archive of frames, whatever its listed pages (Pixiv's ``ugoira``): such a work's
#: download is counted as one request by :func:`least_requests`.
ANIMATION_KINDS: frozenset[str] = frozenset({"ugoira"})


@dataclass(frozen=True)
class HoldScope:
    """Whose holds may be named for a cell (:func:`hold_scope`).

    Attributes:
        owner: ``route`` (the cell's routes: its work waits for them) or ``account`` (its
            source account: its work is not stored yet).
        name: only this one's hold (the route whose own failure is the cell's reason);
            None: any of the owner's.
    """

    owner: HoldOwner
    name: str | None = None


def hold_scope(
    state: str,
    reason: str,
    *,
    failure_step: str | None = None,
    failure_route: str | None = None,
    failure_reason: str | None = None,
) -> HoldScope | None:
    """Which hold may be named for a cell its job's finish ends in ``state`` with
    ``reason``: only a hold that is what held the cell (DESIGN.md "What a job and its
    cells end as").

    * a consumer's or an operator's stop (:data:`~curaflow.domain.reasons.CANCEL_REASONS`)
      is what ended the cell, whatever anything waited for: none; so is an operator's
      pause of its step that Temporal still held at the deadline (``step_paused``), or
      its step ended by hand (``step_ended_by_hand``), or its execution pinned to a build no
      worker ran (``pinned_build_unserved``: nothing of the job could go on, whatever held it);
    * a cell whose work waits for its routes (:data:`WAITING_STATES`) may be held by a
      route, one still needing its source (:data:`SOURCE_STATES`) by its account; any
      other state by none;
    * the reason is the job's stop (the deadline, a budget: no failure of the cell's own
      is its reason, or the failure is the deadline's): the job stopped while the cell
      waited, so any hold of the owner that lasted past the deadline held it;
    * the reason is a failed step's own (``failure_reason`` equals it): only a hold of
      that failure's owner explains it — the failing route's own wait (its retry refused
      after the execution's end), the account's for a source step failing for the
      account (its rate limit, its restriction). A failure of another owner (route a
      gave up while route b waited; the source answered a 5xx while the account cooled
      down) is what ended the cell, and the report keeps its reason's sentence.

    Args:
        failure_step / failure_route / failure_reason: the cell's failed step as the
            workflow saw it (:class:`~curaflow.domain.verdicts.StepFailure`: its step,
            its route, the reason it gives); None when no step of the cell failed.
    """
    if reason in CANCEL_REASONS or reason in (
        TerminalReason.STEP_PAUSED,
        TerminalReason.STEP_ENDED_BY_HAND,
        TerminalReason.PINNED_BUILD_UNSERVED,
    ):
        return None  # a stop on purpose, the operator's pause or hand, or a pin no worker served: that ended it
    owner: HoldOwner
    if state in WAITING_STATES:
        owner = "route"
    elif state in SOURCE_STATES:
        owner = "account"
    else:
        return None
    if failure_reason is None or failure_reason != reason or reason == TerminalReason.EXECUTION_TIMEOUT:
        return HoldScope(owner)  # the job stopped while the cell waited
    if owner == "route":
        return HoldScope("route", failure_route) if failure_step == "deliver" and failure_route else None
    if failure_step != "deliver" and reason_info(reason).owner == Owner.ACCOUNT:
        return HoldScope("account")
    return None


class Hold(BaseModel):
    """What held a cell, and until when.

    Attributes:
        owner: who held it: ``route`` (its receiver, or the route found broken) or
            ``account`` (the source account the cell's search and download go through).
        name: the route's name, or the account's (a target's ``account``).
        kind: ``rate_limited`` (the receiver rate-limited this send: its next attempt was
            due at ``until``), ``unavailable`` (the receiver answered this send it is
            unavailable — a 5xx — and asked to be tried again at ``until``; added
            2026-12-05), ``cooling`` (a route-wide rate limit of the receiver, or
            the account's cooldown after a rate limit: every send of the route, every
            request of the account waits until ``until``), ``paused`` (the route was
            paused as broken, the account paused after the source restricted it, until
            ``until``), ``spacing`` (the account's request spacing, its
            ``min_interval_ms``: the bound work's pages need one request each, and at
            that spacing the last of them could not leave before ``until`` — counted
            from the binding, whatever else the account served meanwhile; added
            2026-12-05), ``busy`` (the account's source queue runs ``max_concurrency``
            source steps at once, and every one was taken by another job's step from
            before the deadline until ``until``, while the cell's step, never started,
            waited in the queue behind them: :func:`busy_until`; added 2026-12-05),
            ``configuration`` (owner ``curaflow``, ``name`` the route: the worker that took
            the send's last attempt does not know the route — the processes'
            configurations differ, a rolling change not finished — and its next attempt was
            due at ``until``; added 2026-12-05).
        until: epoch ms (UTC, the database's clock): when the gate lets the next attempt
            go — a cooldown at most its cap from when the finish read it, as the gate
            reads it (:func:`curaflow.domain.ratelimit.cooldown_left_ms`); for ``spacing``
            and ``busy`` a lower bound (the earliest the last request could leave; when
            the finish still saw every slot taken).
    """

    owner: HeldByOwner = "route"
    name: str
    kind: HoldKind
    until: int


@dataclass(frozen=True)
class HoldCaps:
    """The caps the gates read a stored cooldown with (the instance's settings), so a hold
    is reported as the gate will hold it.

    Attributes:
        route_cooldown_ms: ``delivery.route_rate_limit_cap_ms`` (``claim_send`` reads a
            route's cooldown at most this far ahead); None: as stored.
        account_cooldown_ms: account → its ladder's cap (``rate_limit_cap_ms``:
            ``gates.reserve`` reads its cooldown at most this far ahead); an account
            absent: as stored.
        account_spacing_ms: account → the spacing its gate keeps between two of its
            requests (``min_interval_ms``, as its workers run it: the replay's in replay
            mode); an account absent or 0: no spacing is named
            (:func:`spacing_until`).
        account_concurrency: account → the source steps its queue's worker runs at once
            (``max_concurrency``, as its workers run it: the replay's in replay mode); an
            account absent: no busy queue is named (:func:`busy_until`).
    """

    route_cooldown_ms: int | None = None
    account_cooldown_ms: dict[str, int] = field(default_factory=dict)
    account_spacing_ms: dict[str, int] = field(default_factory=dict)
    account_concurrency: dict[str, int] = field(default_factory=dict)


class RouteWait(BaseModel):
    """The facts of one undelivered intent of a cell, as the finish reads them.

    Attributes:
        route: the intent's route.
        held_until: its next attempt's time after its receiver stated a wait for the send
            (0: none recorded).
        held_kind: what that wait was (``delivery_intents.held_kind``; a row written
            before the column: a rate limit).
        cooldown_until / paused_until: the route's gate (0: none; the cooldown as the
            gate reads it, at most its cap ahead).
    """

    route: str
    held_until: int = 0
    held_kind: SendHoldKind = "rate_limited"
    cooldown_until: int = 0
    paused_until: int = 0


class AccountWait(BaseModel):
    """The facts of a cell's source account, as the finish reads them.

    Attributes:
        account: the target's account.
        cooldown_until: the account's rate-limit cooldown (0: none; as the gate reads it,
            at most its cap ahead).
        rate_limited_at: when it met the rate limit that started it (0: unknown).
        paused_until: the account's pause after the source restricted it (0: none).
        spacing_until: the earliest the account's spacing let the last request of the
            cell's bound work leave (:func:`spacing_until`; 0: none — no work bound, or
            no spacing).
        busy_until: when the finish saw every slot of the account's source queue still
            taken by other jobs' steps opened by the deadline, the cell's own step never
            started (:func:`busy_until`; 0: not known so).
    """

    account: str
    cooldown_until: int = 0
    rate_limited_at: int = 0
    paused_until: int = 0
    spacing_until: int = 0
    busy_until: int = 0


def least_requests(kind: str, pages: int) -> int:
    """The fewest source requests a work's download makes: one per listed page (every
    request of an account — an image page too — passes its gate), one for an animation
    (:data:`ANIMATION_KINDS`: its frames come in one archive). At least 1.

    Args:
        kind: the work's source kind (:attr:`~curaflow.domain.models.Work.kind`).
        pages: its listed pages (``len(Work.pages)``, or ``Work.page_count`` when none
            is listed).
    """
    return 1 if kind in ANIMATION_KINDS else max(1, pages)


def spacing_until(bound_at: int, requests: int, interval_ms: int) -> int:
    """The earliest the last of ``requests`` source requests of a work bound at
    ``bound_at`` (epoch ms) can leave when the account's gate keeps ``interval_ms``
    between two of its requests (``min_interval_ms``): its first at the binding at the
    soonest, each next one an interval later. A lower bound, whatever else the account
    served meanwhile (other jobs' requests only push it later) — so a value past the
    job's deadline proves the spacing alone kept the download from ending by then.

    Returns:
        epoch ms; 0 when there is no spacing, no binding, or a single request (the
        spacing holds nothing back from the first).
    """
    if interval_ms <= 0 or bound_at <= 0 or requests <= 1:
        return 0
    return bound_at + (requests - 1) * interval_ms


def busy_until(*, started: bool, others: int, concurrency: int, seen_at: int) -> int:
    """Until when (at least) the account's source queue was too busy to start the cell's
    step: ``seen_at`` (epoch ms, when the finish read the queue) when the cell never had a
    step opened (``started`` False: its first ``acquire`` waited in the queue, scheduled
    and not started) and ``others`` — other jobs' steps on the same queue opened by the
    job's deadline and still holding their cells at ``seen_at`` (source steps: the cell
    still searching or fetching) — fill every one of the queue's ``concurrency`` slots
    (``max_concurrency``: its worker runs that many at once, one process serving it,
    decision 10). The slots were then all taken from the deadline (or before) until
    ``seen_at``, and the cell's step could not start before one of them ended.

    Positive knowledge only: a step that started (a retry, a later fallback pass — a
    backoff is not a queue), a slot free or held by the job's own other cells, an unknown
    concurrency (0) give 0. Pure.
    """
    if started or concurrency < 1 or others < concurrency or seen_at <= 0:
        return 0
    return seen_at


#: The latest end a :class:`Hold` names, epoch ms (9999-12-31 23:59:59.999 UTC: the last
#: instant a date names, and below 2**53, so every JSON reader holds it exactly). A wait
#: computed from a third party's number may lie far beyond: a source's work of 2**63 pages
#: made the account's spacing end past any date, and the finish's sentence raised
#: ``OverflowError`` on every attempt — the job never ended (2026-12-06).
LATEST_HOLD_MS = 253_402_300_799_999


def held_by(waits: Iterable[RouteWait | AccountWait], *, at: int, scope: HoldScope | None = None) -> Hold | None:
    """The hold that still held the cell at ``at`` (the job's deadline, or when it ended if
    sooner), or None.

    Of every wait lasting past ``at`` the longest is named; between equal ends a pause
    (the operator's to lift) before a cooldown before a wait of the send alone (a rate
    limit, or the receiver unavailable), the account's spacing or its busy queue. A
    cooldown the account met only after ``at`` (another job's request, read by a late
    finish) held nothing then.

    Args:
        waits: the cell's undelivered intents with their routes' gates, and its account.
        at: epoch ms.
        scope: only holds of this owner (and name) (:func:`hold_scope`); None: any.

    Returns:
        The hold, its ``until`` at most :data:`LATEST_HOLD_MS`; or None.
    """
    found: list[tuple[int, int, Hold]] = []
    for w in waits:
        owner: HoldOwner
        kinds: tuple[tuple[int, str, int], ...]
        if isinstance(w, AccountWait):
            owner, name = "account", w.account
            started = w.rate_limited_at <= at
            kinds = (
                (2, "paused", w.paused_until),
                (1, "cooling", w.cooldown_until if started else 0),
                (0, "spacing", w.spacing_until),
                (0, "busy", w.busy_until),
            )
        else:
            owner, name = "route", w.route
            kinds = ((2, "paused", w.paused_until), (1, "cooling", w.cooldown_until), (0, w.held_kind, w.held_until))
        if scope is not None and (owner != scope.owner or (scope.name is not None and name != scope.name)):
            continue
        for rank, kind, until in kinds:
            if until and until > at:
                # A route no worker that took the send knew is curaflow's own hold, not the route's.
                held: HeldByOwner = "curaflow" if kind == "configuration" else owner
                until = min(until, LATEST_HOLD_MS)  # a time a date names (a source's page count is its own)
                found.append((until, rank, Hold(owner=held, name=name, kind=kind, until=until)))  # type: ignore[arg-type]
    if not found:
        return None
    return max(found, key=lambda f: (f[0], f[1]))[2]


def _when(ms: int) -> str:
    return datetime.fromtimestamp(min(max(ms, 0), LATEST_HOLD_MS) / 1000, tz=UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def hold_sentence(hold: Hold, lang: str = "en") -> str:
    """The sentence saying what held the cell (``lang`` ``"en"`` or ``"zh"``): whose wait,
    of what kind, until when, and what to do."""
    if hold.owner == "account":
        return _account_sentence(hold, lang)
    when, name = _when(hold.until), hold.name
    if hold.kind == "configuration":
        if lang == "zh":
            return (
                f"处理此次发送的 curaflow worker 不认识路由 {name}（各进程的配置不一致，例如滚动更新尚未完成）；"
                f"下一次尝试须等到 {when}，已晚于任务的截止时间；未发送。请让每个 worker 使用相同的配置后重新运行任务。"
            )
        return (
            f"The curaflow worker that took this send does not know route {name} (the processes' configurations "
            f"differ, as while a rolling change is not finished): its next attempt was due at {when}, past the "
            "job's deadline, so nothing was sent. Give every worker the same configuration, then run the job again."
        )
    if hold.kind == "rate_limited":
        if lang == "zh":
            return (
                f"路由 {name} 的接收方对此次发送限流，下一次尝试须等到 {when}，已晚于任务的截止时间；"
                "未再发送。可等限流过去，或降低对该路由的发送频率。"
            )
        return (
            f"Route {name}'s receiver rate-limited this send: its next attempt had to wait until {when}, "
            "past the job's deadline, so it was not sent again. Let the rate limit pass, or send to the route "
            "less often."
        )
    if hold.kind == "unavailable":
        if lang == "zh":
            return (
                f"路由 {name} 的接收方回复此次发送时表示暂时不可用，并要求在 {when} 之后再试，已晚于任务的截止时间；"
                "未再发送。请在该时间之后、接收方恢复后重试。"
            )
        return (
            f"Route {name}'s receiver answered this send that it was unavailable and asked to be tried again at "
            f"{when}, past the job's deadline, so it was not sent again. Retry after that time, once the receiver "
            "is back up."
        )
    if hold.kind == "cooling":
        if lang == "zh":
            return f"路由 {name} 的接收方对整个路由限流，该路由冷却至 {when}，已晚于任务的截止时间；未再发送。"
        return (
            f"Route {name}'s receiver rate-limited the whole route: it cools down until {when}, past the job's "
            "deadline, so nothing was sent again. Let the rate limit pass, or send to the route less often."
        )
    if lang == "zh":
        return f"路由 {name} 被判定为故障，已暂停至 {when}；未再发送。修正后运行 curaflow routes resume {name}。"
    return (
        f"Route {name} was paused as broken until {when}, so nothing was sent again. Fix the route, then run "
        f"curaflow routes resume {name}."
    )


def _account_sentence(hold: Hold, lang: str) -> str:
    when, name = _when(hold.until), hold.name
    if hold.kind == "busy":
        if lang == "zh":
            return (
                f"来源账号 {name} 同时只运行其 max_concurrency 个来源步骤，"
                "这些名额在任务截止前已全被其他任务的下载或搜索占用，"
                f"到 {when} 仍未释放；本任务的搜索在该账号的队列中等待，始终未能开始。"
                "可给任务更长的 deadline_ms，错开同一账号的任务，或让目标改用其他账号。"
            )
        return (
            f"Source account {name} runs max_concurrency source steps at once, and every one was taken by another "
            f"job's download or search from before the job's deadline until at least {when}, so this job's search "
            "waited in the account's queue and never started. Give the job a longer deadline_ms, space out the "
            "account's jobs, or move the target to another account."
        )
    if hold.kind == "spacing":
        if lang == "zh":
            return (
                f"来源账号 {name} 的请求之间须间隔其 min_interval_ms；所选作品的每一页各需一次请求，"
                f"按此间隔最后一次请求最早也要到 {when} 才能发出，已晚于任务的截止时间；下载未能完成。"
                "可给任务更长的 deadline_ms，或在来源允许时缩短该账号的 min_interval_ms。"
            )
        return (
            f"Source account {name} spaces its requests min_interval_ms apart: the selected work needs one "
            f"request per page, and at that spacing the last could not leave before {when}, past the job's "
            "deadline, so its download could not finish. Give the job a longer deadline_ms, or shorten the "
            "account's min_interval_ms if the source allows it."
        )
    if hold.kind == "paused":
        if lang == "zh":
            return (
                f"来源账号 {name} 的访问被来源限制，其请求已暂停至 {when}；此后未再请求。"
                f"请检查该账号（Pixiv：登录 pixiv.net 查看通知），然后运行 curaflow accounts resume {name}，"
                "或让目标改用其他账号。"
            )
        return (
            f"Source account {name} was paused until {when} after the source restricted its access, so nothing "
            f"more was requested. Check the account (for Pixiv: sign in at pixiv.net and read the notice), then "
            f"run curaflow accounts resume {name}, or move the target to another account."
        )
    if lang == "zh":
        return (
            f"来源账号 {name} 被限流，冷却至 {when}，已晚于任务的截止时间；其搜索与下载未能继续。"
            "可等冷却结束，或降低该账号的请求频率。"
        )
    return (
        f"Source account {name} was rate-limited: it cools down until {when}, past the job's deadline, so its "
        "search and download could not go on. Let the cooldown pass, or lower the account's request rate."
    )
