"""``curaflow refusals|unavailable|accounts|routes``: what the ledger remembers about works,
accounts and routes.

* ``curaflow refusals list [--route R] [--json]`` — works a route refused for good (later
  jobs never offer them to that route again) and works *held back* from a route until a
  time after the route refused the request (``held until``). ``curaflow refusals clear
  ROUTE WORK_ID`` (or ``--all``) forgets a refusal or a hold once the receiver was fixed:
  the next job may pick the work again.
* ``curaflow routes list [--json]`` — each route's gate: paused (it refused several
  different works in a row with the same answer) until when and why, cooling down after
  a global rate limit, its current refusal streak; ``curaflow routes resume ROUTE`` lifts
  the pause and the cooldown and releases the works held back from it, once the route
  was fixed.
* ``curaflow unavailable list [--json]`` — works found gone (404, deleted) and skipped
  without a request until their time runs out (the account's ``unavailable_ttl_ms``), and
  works only *held* back on an answer not recognised as theirs (a 403, an image 404 the
  work's detail does not confirm, a page that is no image: the account's
  ``unrecognised_hold_ms``; column ``as``, ``held`` in JSON);
  ``curaflow unavailable clear [WORK_ID] [--account A] [--held]`` forgets them now
  (``--held``: only the held ones, once the way to the source is fixed);
* ``curaflow frontiers list [--json]`` — each target's scan frontier: how far its jobs
  know its results (the source's own memory, stored as it left it; Pixiv's is described
  by :func:`curaflow.sources.pixiv.frontier.describe`); ``curaflow frontiers reset
  TARGET`` (or ``--all``) forgets it: the target's next job reads from the top.
* ``curaflow accounts list [--json]`` — each account's gate (every source instance a
  target's account can name): paused (restricted by its source) until when, rate-limit
  cooldown, and, neither running, its next slot when it lies ahead (a request waits for
  it: ``next_at``); ``curaflow accounts resume ACCOUNT`` lifts a pause once the account
  was checked.

A table shows every value whole, folding a long word onto the next line, but a refusal's
answer, an unavailable work's why and another source's frontier, which it cuts at
:data:`ANSWER_CHARS`, :data:`WHY_CHARS` and :data:`FRONTIER_CHARS` characters saying how
many it left out (``… (+1920 characters)``); ``--json`` prints every value whole.

They only need the ledger: ``DATABASE_URL`` (``database.url``), else the running
``curaflow dev`` stack of the state directory, else the embedded PostgreSQL of the state
directory, started for the command. Exit status: 0 on success, 1 when there was nothing
to clear or resume, 2 for configuration or usage errors, 3 when the ledger could not be
reached (one line naming it and the error: :func:`curaflow.cli.common.open_ledger`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

import asyncpg
import typer

from curaflow.cli.common import (
    EXIT_LEDGER_UNREACHABLE,
    LEDGER_CONFIGURED,
    ConfigOption,
    clipped,
    error,
    fail,
    open_ledger,
    operator_table,
    out_console,
    running_dev_ledger,
    settings_or_exit,
)
from curaflow.config import Settings
from curaflow.devstack.postgres import EmbeddedPostgres
from curaflow.devstack.stack import read_stack_info
from curaflow.domain.ratelimit import cooldown_left_ms
from curaflow.ledger import frontiers as ledger_frontiers
from curaflow.ledger import gates as ledger_gates
from curaflow.ledger import remembered as memory
from curaflow.ledger import route_gates
from curaflow.observability.console import print_json
from curaflow.observability.logs import configure_logging
from curaflow.sources.pixiv.frontier import describe as describe_pixiv_frontier

T = TypeVar("T")

#: The most characters of a receiver's answer ``refusals list`` shows (the ledger keeps up
#: to 2000; ``--json`` prints it whole). A longer one says how many it left out.
ANSWER_CHARS = 80
#: The most characters of the answer that made a work unavailable ``unavailable list``
#: shows (the ledger keeps up to 500; ``--json`` prints it whole).
WHY_CHARS = 60
#: The most characters of another source's frontier (its JSON) ``frontiers list`` shows.
FRONTIER_CHARS = 100

refusals_app = typer.Typer(rich_markup_mode="markdown", help="Works a route refused for good (never re-offered).")
unavailable_app = typer.Typer(rich_markup_mode="markdown", help="Works found unavailable, skipped for a while.")
frontiers_app = typer.Typer(rich_markup_mode="markdown", help="Targets' scan frontiers: what their jobs know.")
accounts_app = typer.Typer(
    rich_markup_mode="markdown",
    help="Source accounts' gates (every source instance a target's account can name): pauses and cooldowns.",
)
routes_app = typer.Typer(
    rich_markup_mode="markdown", help="Routes' gates: paused as broken, cooling down, refusal streaks."
)


@contextlib.asynccontextmanager
async def ledger_pool(settings: Settings) -> AsyncIterator[asyncpg.Pool]:
    """A pool on the ledger: the configured database, a running ``curaflow dev``, or the
    embedded one (started for the command). A ledger that cannot be reached ends the
    command with one line and :data:`~curaflow.cli.common.EXIT_LEDGER_UNREACHABLE`
    (:func:`~curaflow.cli.common.open_ledger`)."""
    postgres: EmbeddedPostgres | None = None
    url = settings.database.url
    where = LEDGER_CONFIGURED
    if not url:
        info = read_stack_info(settings.state_dir)
        if info is not None:
            url, where = info.database_url, running_dev_ledger(settings)
        else:
            postgres = EmbeddedPostgres(settings.state_dir / "pg")
            where = f"the embedded PostgreSQL in {settings.state_dir / 'pg'}"
            try:
                url = await asyncio.to_thread(postgres.start)
            except (RuntimeError, FileNotFoundError) as err:  # e.g. the [embedded] extra is not installed
                fail(f"the ledger ({where}) did not start: {err}", EXIT_LEDGER_UNREACHABLE)
    try:
        async with open_ledger(settings, url, where=where, code=EXIT_LEDGER_UNREACHABLE) as pool:
            yield pool
    finally:
        if postgres is not None:
            await asyncio.to_thread(postgres.stop)


def _run(config: Path | None, body: Callable[[Settings, asyncpg.Pool], Awaitable[T]]) -> T:
    settings = settings_or_exit(config)
    configure_logging("WARNING", settings.observability.log_json)

    async def main() -> T:
        async with ledger_pool(settings) as pool:
            return await body(settings, pool)

    return asyncio.run(main())


def _when(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y-%m-%d %H:%M:%SZ")


def _print_json(rows: list[Any]) -> None:
    print_json(rows, ensure_ascii=False, indent=2)


# ---- refusals ---------------------------------------------------------------------------


@refusals_app.command("list")
def refusals_list(
    route: str | None = typer.Option(None, "--route", help="Only this route."),
    as_json: bool = typer.Option(False, "--json", help="JSON rows instead of a table."),
    config: Path | None = ConfigOption,
) -> None:
    """List works a route refused for good, and works held back from a route (newest first)."""
    rows = _run(config, lambda _s, pool: memory.list_refusals(pool, route))
    if as_json:
        _print_json([asdict(r) for r in rows])
        return
    print_refusals(rows)


def print_refusals(rows: list[memory.Refusal]) -> None:
    """``refusals list``'s table on stdout (the receiver's answer: its first
    :data:`ANSWER_CHARS` characters, saying how many more it had — :func:`clipped`), and
    how to clear a refusal when there is one."""
    table = operator_table("route", "work", "refused at", "held until", "job", "answer")
    for r in rows:
        held = _when(r.until) if r.until is not None else "for good"
        table.add_row(
            r.route, r.work_id, _when(r.refused_at), held, r.job_id or "", clipped(r.error or "", ANSWER_CHARS)
        )
    out_console.print(table)
    if rows:
        out_console.print("clear one with `curaflow refusals clear ROUTE WORK_ID` once the receiver takes it")


@refusals_app.command("clear")
def refusals_clear(
    route: str = typer.Argument(..., help="The route's name."),
    work_id: str | None = typer.Argument(None, help="The work; omit with --all to clear every refusal of the route."),
    all_works: bool = typer.Option(False, "--all", help="Clear every refusal of the route."),
    config: Path | None = ConfigOption,
) -> None:
    """Forget a route's refusal of a work: the next job may offer it to that route again."""
    if (work_id is None) == (not all_works):
        error("give a WORK_ID, or --all (not both)")
        raise typer.Exit(2)
    cleared = _run(config, lambda _s, pool: memory.clear_refusals(pool, route=route, work_id=work_id))
    out_console.print(f"cleared {cleared} refusal{'s' if cleared != 1 else ''} of route {route}")
    if not cleared:
        raise typer.Exit(1)


# ---- scan frontiers ----------------------------------------------------------------------


def _frontier_line(stored: dict[str, Any]) -> str:
    """A stored frontier in one line: Pixiv's described, another source's JSON (shortened)."""
    line = describe_pixiv_frontier(stored)
    if line is not None:
        return line
    text = json.dumps(stored, ensure_ascii=False, sort_keys=True)
    return clipped(text, FRONTIER_CHARS)


@frontiers_app.command("list")
def frontiers_list(
    as_json: bool = typer.Option(False, "--json", help="JSON rows instead of a table."),
    config: Path | None = ConfigOption,
) -> None:
    """List each target's scan frontier: what its jobs know of its results (the source's own
    memory; for a Pixiv account: the newest and last work of its known run, a capped scan's stop)."""
    rows = _run(config, lambda _s, pool: ledger_frontiers.list_frontiers(pool))
    if as_json:
        _print_json([asdict(r) for r in rows])
        return
    print_frontiers(rows)


def print_frontiers(rows: list[ledger_frontiers.StoredFrontier]) -> None:
    """``frontiers list``'s table on stdout."""
    table = operator_table("target", "frontier", "updated", "by job")
    for r in rows:
        table.add_row(r.target_id, _frontier_line(r.frontier), _when(r.updated_at), r.job_id or "")
    out_console.print(table)


@frontiers_app.command("reset")
def frontiers_reset(
    target: str | None = typer.Argument(None, help="The target's id; omit with --all to reset every target."),
    all_targets: bool = typer.Option(False, "--all", help="Reset every target's frontier."),
    config: Path | None = ConfigOption,
) -> None:
    """Forget a target's scan frontier: its next job reads its results from the top again."""
    if (target is None) == (not all_targets):
        error("give a TARGET, or --all (not both)")
        raise typer.Exit(2)
    cleared = _run(config, lambda _s, pool: ledger_frontiers.clear_frontiers(pool, target))
    out_console.print(f"reset {cleared} frontier{'s' if cleared != 1 else ''}")
    if not cleared:
        raise typer.Exit(1)


# ---- unavailable works ----------------------------------------------------------------------


@unavailable_app.command("list")
def unavailable_list(
    as_json: bool = typer.Option(False, "--json", help="JSON rows instead of a table."),
    config: Path | None = ConfigOption,
) -> None:
    """List works remembered as unavailable, and until when they are skipped."""

    async def body(settings: Settings, pool: asyncpg.Pool) -> list[dict[str, Any]]:
        accounts = {queue: account for account, queue in settings.source_task_queues().items()}
        return [{"account": accounts.get(r.gate, r.gate), **asdict(r)} for r in await memory.list_unavailable(pool)]

    rows = _run(config, body)
    if as_json:
        _print_json(rows)
        return
    print_unavailable(rows)


def print_unavailable(rows: list[dict[str, Any]]) -> None:
    """``unavailable list``'s table on stdout (rows as its ``--json``; the answer that made
    the work unavailable: its first :data:`WHY_CHARS` characters, saying how many more it
    had — :func:`clipped`)."""
    table = operator_table("account", "work", "seen", "skipped until", "as", "why")
    for r in rows:
        kind = "held" if r["held"] else "unavailable"
        table.add_row(
            r["account"], r["work_id"], _when(r["seen_at"]), _when(r["until"]), kind, clipped(r["why"] or "", WHY_CHARS)
        )
    out_console.print(table)


@unavailable_app.command("clear")
def unavailable_clear(
    work_id: str | None = typer.Argument(None, help="The work; omit to clear every one (of --account)."),
    account: str | None = typer.Option(
        None, "--account", help="Only this account's works (the name of a source instance a target's account names)."
    ),
    held: bool = typer.Option(
        False, "--held", help="Only works held back on an answer not recognised as theirs (after fixing the source)."
    ),
    config: Path | None = ConfigOption,
) -> None:
    """Forget unavailable works now: the next job requests them again."""

    async def body(settings: Settings, pool: asyncpg.Pool) -> int:
        gate = settings.source_task_queue(account) if account else None
        return await memory.clear_unavailable(pool, work_id=work_id, gate=gate, held_only=held)

    cleared = _run(config, body)
    out_console.print(f"cleared {cleared} unavailable work{'s' if cleared != 1 else ''}")
    if not cleared:
        raise typer.Exit(1)


# ---- accounts ---------------------------------------------------------------------------------


@accounts_app.command("list")
def accounts_list(
    as_json: bool = typer.Option(False, "--json", help="JSON rows instead of a table."),
    config: Path | None = ConfigOption,
) -> None:
    """Each configured account's gate (every source instance a target's account can name):
    paused (restricted by its source) until, cooling down until, and (neither running) its
    next slot when a request would wait for it."""

    async def body(settings: Settings, pool: asyncpg.Pool) -> list[dict[str, Any]]:
        rows = []
        configs = settings.source_configs()
        for account, queue in settings.source_task_queues().items():
            gate = await ledger_gates.read_gate(pool, queue)
            now = gate.now if gate else 0
            # What is held (a cooldown written before the cap holds at most the cap from now;
            # the next slot as the gate would hand it out now).
            config = configs[account]
            policy = config.policy()
            cap_ms = int(policy.rate_limit_cap_s * 1000)
            cooling = cooldown_left_ms(gate.cooldown_until, now, cap_ms) if gate else 0
            slot = (
                ledger_gates.next_slot_at(
                    gate, interval_ms=config.min_interval_ms, cap_ms=cap_ms, waiters=policy.concurrency
                )
                if gate
                else None
            )
            rows.append(
                {
                    "account": account,
                    "gate": queue,
                    "paused_until": gate.paused_until if gate and gate.paused_until > now else None,
                    "pause_reason": gate.pause_reason if gate and gate.paused_until > now else None,
                    "cooldown_until": now + cooling if cooling else None,
                    "next_at": slot,
                    "requests": gate.requests if gate else 0,
                    "rate_limits": gate.rate_limits if gate else 0,
                }
            )
        return rows

    rows = _run(config, body)
    if as_json:
        _print_json(rows)
        return
    print_accounts(rows)


def print_accounts(rows: list[dict[str, Any]]) -> None:
    """``accounts list``'s table on stdout (rows as its ``--json``)."""
    table = operator_table("account", "paused until", "cooling down until", "next slot", "requests", "rate limits")
    for r in rows:
        paused = f"{_when(r['paused_until'])} ({r['pause_reason']})" if r["paused_until"] else ""
        cooling = _when(r["cooldown_until"]) if r["cooldown_until"] else ""
        slot = _when(r["next_at"]) if r["next_at"] else ""
        table.add_row(r["account"], paused, cooling, slot, str(r["requests"]), str(r["rate_limits"]))
    out_console.print(table)


@accounts_app.command("resume")
def accounts_resume(
    account: str = typer.Argument(
        ...,
        help="The account: the name of a source instance (for a Pixiv account, `default` or a key of "
        "pixiv.accounts; else the name of its [sources] entry).",
    ),
    config: Path | None = ConfigOption,
) -> None:
    """Lift the pause of an account its source restricted, once you checked the account (for a
    Pixiv account: at pixiv.net)."""

    async def body(settings: Settings, pool: asyncpg.Pool) -> bool | None:
        if account not in settings.source_configs():  # a Pixiv account or a [sources] instance
            return None
        return await ledger_gates.resume(pool, settings.source_task_queue(account))

    resumed = _run(config, body)
    if resumed is None:
        error(f"unknown account {account!r}")
        raise typer.Exit(2)
    out_console.print(f"account {account} resumed" if resumed else f"account {account} was not paused")
    if not resumed:
        raise typer.Exit(1)


# ---- routes -----------------------------------------------------------------------------------


@routes_app.command("list")
def routes_list(
    as_json: bool = typer.Option(False, "--json", help="JSON rows instead of a table."),
    config: Path | None = ConfigOption,
) -> None:
    """Each configured route's gate: paused (as broken) until, cooling down until, its refusal streak."""

    async def body(settings: Settings, pool: asyncpg.Pool) -> list[dict[str, Any]]:
        rows = []
        holds: dict[str, int] = {}
        for refusal in await memory.list_refusals(pool):
            if refusal.until is not None:
                holds[refusal.route] = holds.get(refusal.route, 0) + 1
        for name, route in settings.routes.items():
            gate = await route_gates.read_gate(pool, name)
            # What is held: a cooldown written before the cap holds at most the cap from now.
            cap_ms = settings.delivery.route_rate_limit_cap_ms
            cooling = cooldown_left_ms(gate.cooldown_until, gate.now, cap_ms) if gate else 0
            rows.append(
                {
                    "route": name,
                    "kind": route.kind,
                    "paused_until": gate.paused_until if gate and gate.paused_ms else None,
                    "pause_reason": gate.pause_reason if gate and gate.paused_ms else None,
                    "cooldown_until": gate.now + cooling if gate and cooling else None,
                    "streak": {"answer": gate.streak_answer, "works": [w[1] for w in gate.streak_works]}
                    if gate and gate.streak_answer
                    else None,
                    "held_works": holds.get(name, 0),
                    "pauses": gate.pauses if gate else 0,
                }
            )
        return rows

    rows = _run(config, body)
    if as_json:
        _print_json(rows)
        return
    print_routes(rows)


def print_routes(rows: list[dict[str, Any]]) -> None:
    """``routes list``'s table on stdout (rows as its ``--json``), and what to do when a
    route is paused."""
    table = operator_table("route", "kind", "paused until", "cooling down until", "refusal streak", "held works")
    for r in rows:
        paused = f"{_when(r['paused_until'])} ({r['pause_reason']})" if r["paused_until"] else ""
        cooling = _when(r["cooldown_until"]) if r["cooldown_until"] else ""
        streak = f"{len(r['streak']['works'])} × {r['streak']['answer']}" if r["streak"] else ""
        table.add_row(r["route"], r["kind"], paused, cooling, streak, str(r["held_works"]))
    out_console.print(table)
    if any(r["paused_until"] for r in rows):
        out_console.print("fix the route, then `curaflow routes resume ROUTE`")


@routes_app.command("resume")
def routes_resume(
    route: str = typer.Argument(..., help="The route's name (a key of [routes])."),
    config: Path | None = ConfigOption,
) -> None:
    """Lift a route's pause (and cooldown) and release the works held back from it, once you fixed it."""

    async def body(settings: Settings, pool: asyncpg.Pool) -> tuple[bool, int] | None:
        if route not in settings.routes:
            return None
        return await route_gates.resume(pool, route)

    answer = _run(config, body)
    if answer is None:
        error(f"unknown route {route!r}")
        raise typer.Exit(2)
    resumed, released = answer
    works = f"{released} held work{'s' if released != 1 else ''} released"
    out_console.print(f"route {route} resumed; {works}" if resumed else f"route {route} was not paused; {works}")
    if not resumed and not released:
        raise typer.Exit(1)
