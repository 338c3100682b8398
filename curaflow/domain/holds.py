"""What held a cell when its job ended: a third party's stated wait the report must name.

A send that its receiver rate-limited waits as the receiver stated (Telegram's flood wait
of hours on one send: :func:`curaflow.ledger.route_gates.rate_limited`); a route-wide
limit makes the whole route cool down; a route found broken is paused. When the job's
deadline passes meanwhile — or Temporal refuses a retry due after the execution's end —
the cell ends with the deadline's reason or the route's last failure, whose sentences
("retry with a narrower query", "check the bot and the chat") hid what held it. The
finish (:func:`curaflow.ledger.finish.finish_job`) gathers the facts from the ledger and
asks :func:`held_by`; the answer is stored with the cell (``cells.held_by``) and said by
:func:`hold_sentence` wherever the cell's message is built
(:func:`curaflow.domain.tally.cell_message`), and shown structured in
``GET /jobs/{id}``'s ``error.detail.held_by`` and the outcome record's targets. The
reason code is unchanged (the protocol's code stays the deadline's or the route's).

Pure module: no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Literal

from pydantic import BaseModel

from curaflow.domain.cells import CellState
from curaflow.domain.reasons import CANCEL_REASONS

#: The states of a cell whose work waits for its routes (stored, not yet delivered
#: everywhere): only there can a route's wait be what held it. A cell bound but still
#: fetching keeps reserved intents too, but its download held it, not a route that cools
#: down meanwhile (the deadline's remedy is the one that helps).
WAITING_STATES: frozenset[str] = frozenset({CellState.ARTIFACT_READY, CellState.DELIVERY_PENDING})


def may_be_held(state: str, reason: str) -> bool:
    """Whether a route's wait may be named for a cell its job's finish ends in ``state``
    with ``reason``: its work waits for its routes (:data:`WAITING_STATES`) and no
    consumer or operator stopped it (:data:`~curaflow.domain.reasons.CANCEL_REASONS`:
    the stop is what ended it, whatever a route was waiting for)."""
    return state in WAITING_STATES and reason not in CANCEL_REASONS


class Hold(BaseModel):
    """What held a cell, and until when.

    Attributes:
        owner: who held it: ``route`` (its receiver, or the route found broken).
        name: the route's name.
        kind: ``rate_limited`` (the receiver rate-limited this send: its next attempt was
            due at ``until``), ``cooling`` (the receiver's route-wide rate limit: every
            send of the route waits until ``until``), ``paused`` (the route was paused as
            broken until ``until``).
        until: epoch ms (UTC, the database's clock).
    """

    owner: Literal["route"] = "route"
    name: str
    kind: Literal["rate_limited", "cooling", "paused"]
    until: int


class RouteWait(BaseModel):
    """The facts of one undelivered intent of a cell, as the finish reads them.

    Attributes:
        route: the intent's route.
        held_until: its next attempt's time after a rate limit (0: none recorded).
        cooldown_until / paused_until: the route's gate (0: none).
    """

    route: str
    held_until: int = 0
    cooldown_until: int = 0
    paused_until: int = 0


def held_by(waits: Iterable[RouteWait], *, at: int) -> Hold | None:
    """The hold that still held the cell at ``at`` (the job's deadline, or when it ended if
    sooner), or None.

    Of every wait lasting past ``at`` the longest is named; between equal ends a pause
    (the operator's to lift) before a route-wide cooldown before a limit of the send
    alone.

    Args:
        waits: the cell's undelivered intents with their routes' gates.
        at: epoch ms.
    """
    found: list[tuple[int, int, Hold]] = []
    for w in waits:
        for rank, kind, until in (
            (2, "paused", w.paused_until),
            (1, "cooling", w.cooldown_until),
            (0, "rate_limited", w.held_until),
        ):
            if until and until > at:
                found.append((until, rank, Hold(name=w.route, kind=kind, until=until)))  # type: ignore[arg-type]
    if not found:
        return None
    return max(found, key=lambda f: (f[0], f[1]))[2]


def _when(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def hold_sentence(hold: Hold, lang: str = "en") -> str:
    """The sentence saying what held the cell (``lang`` ``"en"`` or ``"zh"``): whose wait,
    of what kind, until when, and what to do."""
    when, name = _when(hold.until), hold.name
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
