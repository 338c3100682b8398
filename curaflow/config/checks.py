"""Validation across sections: the rules no single section can check on its own (names that
must be unique or well-formed, targets and schedules naming what exists, no example secret,
every duration one its parts can honour, every pair of bounds in order)."""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol
from urllib.parse import unquote

from pydantic import BaseModel, SecretStr

from curaflow.config.api import ApiSettings
from curaflow.config.base import ID_PATTERN, Loc, SettingsProblem, dotted
from curaflow.config.database import DatabaseSettings
from curaflow.config.delivery import DeliverySettings
from curaflow.config.observability import MAX_LEDGER_GAUGES_INTERVAL_MS
from curaflow.config.schedules import ScheduleConfig
from curaflow.config.supervision import SupervisionSettings
from curaflow.config.targets import TargetConfig
from curaflow.domain.days import day_problem
from curaflow.domain.execution import MAX_HEARTBEAT_INTERVAL_MS, MAX_JOB_SENDS, MAX_JOB_TARGETS
from curaflow.domain.messages import TargetFilters
from curaflow.domain.text import setting_text_problem
from curaflow.outbound.settings import OutboundSettings
from curaflow.protocol.models import MAX_DEADLINE_MS
from curaflow.sources.base import SourceConfig
from curaflow.sources.pixiv.config import PixivSettings

#: How every secret of the env example begins (``deploy/curaflow.env.example``): a process
#: refuses to start with one, so a copied example never runs as a production secret.
EXAMPLE_SECRET_PREFIX = "change-me"

#: The longest duration any ``*_ms`` setting may give, ms (365 days). Every such setting is
#: a timeout, an interval, a hold or a pause: beyond a year it is a unit slip, and far beyond
#: it the parts that honour it break when first used (``datetime.timedelta`` overflows past
#: ~2.7 million years, PostgreSQL's ``interval`` arithmetic past ~178 million years).
MAX_SETTING_MS = 365 * 86_400_000
#: The longest a ``*_days`` setting may give (100 years; ``retention.days``: the cut-off
#: ``now - days`` must stay a timestamp PostgreSQL holds).
MAX_SETTING_DAYS = 36_500
#: PostgreSQL's own ceiling of a timeout parameter (``statement_timeout`` is an int of ms:
#: https://www.postgresql.org/docs/current/runtime-config-client.html); the pool sets it
#: on every session, so a larger value refused every connection.
PG_MAX_TIMEOUT_MS = 2_147_483_647
#: Settings with a ceiling of their own, by dotted name, with the rule's source.
OWN_CEILINGS: dict[str, tuple[int, str]] = {
    "database.statement_timeout_ms": (PG_MAX_TIMEOUT_MS, "PostgreSQL's statement_timeout is an int of ms"),
    "budgets.default_deadline_ms": (
        MAX_DEADLINE_MS,
        "the largest deadline_ms a task may ask: curaflow.protocol.models.MAX_DEADLINE_MS",
    ),
    "budgets.heartbeat_interval_ms": (
        MAX_HEARTBEAT_INTERVAL_MS,
        "a step's heartbeat timeout is twice it, and a step whose worker was lost at the deadline must be "
        "given up within the execution's grace: curaflow.domain.execution.MAX_HEARTBEAT_INTERVAL_MS",
    ),
    "observability.ledger_gauges_interval_ms": (
        MAX_LEDGER_GAUGES_INTERVAL_MS,
        "CuraflowLedgerGaugesStale pages on a reading older than 2 minutes for 2 minutes; read less often, "
        "a healthy ledger pages it: curaflow.config.observability.MAX_LEDGER_GAUGES_INTERVAL_MS",
    ),
}


@dataclass(frozen=True)
class OrderedPair:
    """Two settings of one model where the first must not exceed the second.

    Attributes:
        model: the model holding both (a section, a target's filters, or the base of every
            ``[sources]`` kind: each instance of it is checked, wherever it is in the settings).
        lower / upper: the two fields' names.
        why: what the pair means and what an inverted one did (the rule's source).
    """

    model: type[BaseModel]
    lower: str
    upper: str
    why: str


#: Every pair of settings one bound of which must not exceed the other — a start and its
#: cap, a least and a most, a part and its whole, a first day and a last — refused inverted
#: at load by :func:`check_ordered`. Each loaded inverted until 2026-12-07 (the pool sizes
#: until 2026-12-06) and ran as something else than it said. A route kind orders its own
#: fields in its model (Discord's ``max_file_bytes`` ≤ ``max_message_bytes``). Pairs that
#: only look alike are independent and not here: ``supervision.fatal_after_ms`` and the
#: backoff (a deadline from the first failure, not a step of it); the ``database.*_timeout_ms``
#: among themselves (the connect timeout also bounds the pool's first connections, where no
#: acquire waits) and ``api.ledger_timeout_ms`` (the API's cap of them, on purpose);
#: ``outbound.page_max_bytes`` and ``download_max_bytes`` (two kinds of answer);
#: ``pixiv.source_standby_poll_ms`` and ``source_lease_ms`` (the renewal is
#: ``min(poll, lease / 4)`` whatever they are); a target's ``min_bookmarks`` and
#: ``max_page_count``; a Telegram route's ``document_max_bytes`` and ``max_request_bytes``
#: (Telegram's limit and the Bot API server's, each lowered on its own; a page over the
#: request is refused naming it).
ORDERED_SETTINGS: tuple[OrderedPair, ...] = (
    OrderedPair(
        SupervisionSettings,
        "initial_backoff_ms",
        "max_backoff_ms",
        "a failed background loop restarts after a backoff doubling from the first up to the second; "
        "inverted, every restart waited the second",
    ),
    OrderedPair(
        DeliverySettings,
        "retry_initial_interval_ms",
        "retry_max_interval_ms",
        "every step's Temporal retry policy backs off from the first up to the second, and Temporal refuses "
        "a maximum interval below the initial one: inverted, no step of any job could be scheduled",
    ),
    OrderedPair(
        ApiSettings,
        "callback_retry_initial_interval_ms",
        "callback_retry_max_interval_ms",
        "a push's retries back off from the first up to the second; inverted, every retry waited the first "
        "while the push's bounded wait reckoned with the second",
    ),
    OrderedPair(
        PixivSettings,
        "rate_limit_base_ms",
        "rate_limit_cap_ms",
        "an account's rate-limit cooldown doubles from the first up to the second; inverted, every cooldown "
        "was the second",
    ),
    OrderedPair(
        PixivSettings,
        "unrecognised_hold_ms",
        "unavailable_ttl_ms",
        "an answer not recognised as the work's never holds it longer than one that is "
        "(SourcePolicy.memory_ms); inverted, it was held for the second only",
    ),
    OrderedPair(
        SourceConfig,
        "rate_limit_base_ms",
        "rate_limit_cap_ms",
        "the source's rate-limit cooldown doubles from the first up to the second; inverted, every cooldown "
        "was the second",
    ),
    OrderedPair(
        SourceConfig,
        "unrecognised_hold_ms",
        "unavailable_ttl_ms",
        "an answer not recognised as the work's never holds it longer than one that is "
        "(SourcePolicy.memory_ms); inverted, it was held for the second only",
    ),
    OrderedPair(
        DatabaseSettings,
        "pool_min_size",
        "pool_max_size",
        "asyncpg's pool keeps at least the first and at most the second connections; inverted, it refused to start",
    ),
    OrderedPair(
        OutboundSettings,
        "image_max_pixels",
        "decode_max_pixels",
        "a frame's pixels count toward its decode's; inverted, a frame over the second was refused whatever "
        "the first allowed",
    ),
    OrderedPair(
        TargetFilters,
        "start_date",
        "end_date",
        "a work is kept when its day is from the first to the second (curaflow.sources.filters, compared as "
        "written); inverted, every work with a day was filtered out, every job of the target found nothing",
    ),
)

#: The settings of a target's ``filters`` that are days (:func:`check_days`): ``YYYY-MM-DD``
#: (:data:`~curaflow.domain.days.DAY_PATTERN`), what the date filter of every source
#: compares a work's day (``create_date[:10]``) with, as written
#: (:func:`curaflow.sources.filters.reject_reason`), and Pixiv's search takes.
DAY_SETTINGS = ("start_date", "end_date")


def check_days(targets: Sequence[TargetConfig]) -> None:
    """Refuse every date filter of a target (:data:`DAY_SETTINGS`) that is not a day
    ``YYYY-MM-DD`` of the calendar (:func:`day_problem`), naming the target, the setting
    and its value. Run before :func:`check_ordered`, which compares the two as written.
    Until 2026-12-07 any text loaded: ``"yesterday"`` filtered out every work with a day
    (a word compared with days) and was sent to Pixiv with each search, which refuses it.

    Raises:
        SettingsProblem: naming every such setting.
    """
    found = [
        (
            loc,
            f"{dotted(loc)} ({value!r}) of target {target.id!r} is not a day YYYY-MM-DD ({problem}): the date "
            "filter compares a work's day with it as written, and Pixiv's search takes no other form",
        )
        for index, target in enumerate(targets)
        for key in DAY_SETTINGS
        if (value := getattr(target.filters, key)) is not None and (problem := day_problem(value))
        for loc in [("targets", index, "filters", key)]
    ]
    if found:
        raise SettingsProblem("; ".join(text for _, text in found), [loc for loc, _ in found])


#: The least value of each bound of a target's ``filters`` that some work can pass, with the
#: rule's source (:func:`check_filters`). A bound below it filters every work out
#: (:func:`curaflow.sources.filters.reject_reason`): every job of the target finds nothing.
#: ``min_bookmarks`` has no such floor (below 0 it passes every work: no filter, not none),
#: and a first day after the last is :data:`ORDERED_SETTINGS`'s.
FILTER_FLOORS: dict[str, tuple[int, str]] = {
    "max_page_count": (1, "a work has at least one page (Pixiv's page_count), so every work is filtered out"),
}


def check_filters(targets: Sequence[TargetConfig]) -> None:
    """Refuse every bound of a target's ``filters`` below its :data:`FILTER_FLOORS` — one no
    work can pass — naming the target, the setting and its value. Until 2026-12-07
    ``max_page_count = 0`` loaded, and every job of the target found nothing, for ever.

    Raises:
        SettingsProblem: naming every such setting.
    """
    found = [
        (
            loc,
            f"{dotted(loc)} ({value}) of target {target.id!r} is below {floor}: {why}; every job of the target "
            "finds nothing",
        )
        for index, target in enumerate(targets)
        for key, (floor, why) in FILTER_FLOORS.items()
        if (value := getattr(target.filters, key)) is not None and value < floor
        for loc in [("targets", index, "filters", key)]
    ]
    if found:
        raise SettingsProblem("; ".join(text for _, text in found), [loc for loc, _ in found])


#: The most characters of a refused query word a report repeats.
QUERY_WORD_SHOWN = 80


def check_query_words(settings: ConfiguredNames) -> None:
    """Refuse every word of a target's query its source does not take, naming the target,
    the key, the word and what the source takes there. The words are the source kind's
    (:meth:`curaflow.sources.base.SourceConfig.query_problems`; Pixiv's:
    :mod:`curaflow.sources.pixiv.query_words`), asked of the instance the target's
    ``account`` names — run after :func:`check_references`, which refuses an account not
    configured. Until 2026-12-07 any text loaded: ``sort = "newest"`` was sent with every
    search of the target, Pixiv answered HTTP 400 naming the parameter, and every job of
    the target ended ``remote_http_error`` without a work.

    Raises:
        SettingsProblem: naming every such word.
    """
    sources = settings.source_configs()
    found: list[tuple[Loc, str]] = []
    for index, target in enumerate(settings.targets):
        source = sources.get(target.account)
        if not isinstance(source, SourceConfig):
            continue
        for problem in source.query_problems(target.query):
            loc: Loc = ("targets", index, "query", problem.key)
            word = problem.word if len(problem.word) <= QUERY_WORD_SHOWN else problem.word[:QUERY_WORD_SHOWN] + "…"
            found.append(
                (
                    loc,
                    f"{dotted(loc)} ({word!r}) of target {target.id!r} is not a word its source "
                    f"{target.account!r} ({source.kind}) takes: {problem.takes}",
                )
            )
    if found:
        raise SettingsProblem("; ".join(text for _, text in found), [loc for loc, _ in found])


#: The longest Pixiv account name, in bytes of UTF-8 (85 CJK characters, 255 ASCII ones). A
#: name is part of its source task queue (``<task_queue>-source-<name>``), which keys the
#: ledger's ``source_gates``, ``unavailable_works`` and ``source_tokens`` rows (a btree entry
#: is refused over 2 704 bytes, with the work's id beside it) and names a Temporal task
#: queue (:data:`MAX_TASK_QUEUE_BYTES`); a ``[sources]`` name is at most 64 ASCII characters.
MAX_ACCOUNT_NAME_BYTES = 255
#: The longest task queue name Temporal takes, in bytes (the server's ``limit.maxIDLength``
#: default, 1 000): a source task queue longer than this is refused by every poll and start.
MAX_TASK_QUEUE_BYTES = 1000
#: Unicode categories no account name holds (besides what :func:`setting_text_problem`
#: refuses): format characters (a zero-width space: two names that look alike), private-use
#: and unassigned code points, line and paragraph separators — what is not printable.
_UNPRINTABLE_CATEGORIES = frozenset({"Cf", "Co", "Cn", "Zl", "Zp"})


def account_name_problem(name: str) -> str | None:
    """What is wrong with ``name`` as a Pixiv account's name (``[pixiv.accounts.<name>]``),
    or None. It is text an operator can write and read back — not blank, no control
    character or lone surrogate (:func:`~curaflow.domain.text.setting_text_problem`),
    nothing unprintable (:data:`_UNPRINTABLE_CATEGORIES`) — of at most
    :data:`MAX_ACCOUNT_NAME_BYTES` bytes of UTF-8. Any other character works: a dotted
    name, a Japanese one, a space.

    Returns:
        e.g. ``"is 3000 bytes of UTF-8 (at most 255)"``, or None when the name is fine.
    """
    problem = setting_text_problem(name)
    if problem is not None:
        return problem
    for position, char in enumerate(name):
        if unicodedata.category(char) in _UNPRINTABLE_CATEGORIES:
            return f"holds a character that is not printable (U+{ord(char):04X} at position {position})"
    size = len(name.encode("utf-8"))
    if size > MAX_ACCOUNT_NAME_BYTES:
        return f"is {size} bytes of UTF-8 (at most {MAX_ACCOUNT_NAME_BYTES})"
    return None


#: Text settings whose empty value is documented to mean something, by dotted name:
#: ``temporal.nexus_endpoint = ""`` creates no Nexus endpoint (docs/configuration.md).
BLANK_ALLOWED: frozenset[str] = frozenset({"temporal.nexus_endpoint"})


class ConfiguredNames(Protocol):
    """What :func:`check_references` reads (a :class:`curaflow.config.Settings`)."""

    @property
    def targets(self) -> list[TargetConfig]: ...

    @property
    def schedules(self) -> list[ScheduleConfig]: ...

    @property
    def routes(self) -> Mapping[str, object]: ...

    @property
    def sources(self) -> Mapping[str, object]: ...

    def accounts(self) -> Mapping[str, object]: ...

    def source_configs(self) -> Mapping[str, object]: ...

    def source_task_queues(self) -> Mapping[str, str]: ...

    def own_task_queues(self) -> Mapping[str, str]: ...


def refuse_example_secrets(secrets: Iterable[tuple[Loc, str, str]], urls: Iterable[tuple[Loc, str, str]] = ()) -> None:
    """Refuse settings that still hold a secret of the env example: a secret beginning
    :data:`EXAMPLE_SECRET_PREFIX`, or a URL holding it anywhere in its text.

    Args:
        secrets: ``(where, dotted name, value)`` of every secret that is set
            (:meth:`curaflow.config.Settings.secret_settings`).
        urls: ``(where, dotted name, text)`` of URLs that hold a secret (``DATABASE_URL``:
            the compose file writes the example's password into it unencoded), refused by
            their text, percent-decoded and case-folded — whatever part a reader takes for
            the password: a ``/`` or ``#`` in it makes ``urlsplit`` read none and asyncpg
            read a port (until 2026-12-07 ``change-me/x`` loaded, and was said as a URL to
            percent-encode instead of as the example's).

    Raises:
        SettingsProblem: naming every such secret ("``api.token`` still holds", "``api.token``,
            ``database.url (password)`` still hold"; until 2026-12-07 one "still hold").
    """
    found = [(loc, name) for loc, name, value in secrets if value.strip().lower().startswith(EXAMPLE_SECRET_PREFIX)]
    found += [
        (loc, name)
        for loc, name, text in urls
        if EXAMPLE_SECRET_PREFIX in unquote(text).lower() and (loc, name) not in found
    ]
    if found:
        raise SettingsProblem(
            f"{', '.join(name for _, name in found)} still {'hold' if len(found) > 1 else 'holds'} the example value "
            f"'{EXAMPLE_SECRET_PREFIX}…' of the "
            "env example: set real secrets (in the env file, the environment or CURAFLOW_SECRETS_DIR)",
            [loc for loc, _ in found],
        )


def case_twins(ids: list[str]) -> list[str]:
    """The distinct ``ids`` that another, different id equals but for letter case (sorted).

    A target's id names its cells' artifact folders (``<job>/<target>``,
    :meth:`curaflow.artifacts.store.ArtifactStore.folder`) and starts its manual jobs' ids
    (``<target>@manual-<key>``), a schedule's id its occurrences' (``<schedule>@<date>T<HHMM>``):
    on a case-insensitive disk (macOS's and Windows' defaults) two such ids name one
    folder. Ids are ASCII (``[A-Za-z0-9_-]``) and :func:`~curaflow.artifacts.names.safe_name`
    writes every other character as ``%XX`` escapes of its UTF-8 bytes, so no two ids meet
    by Unicode normalisation (NFC, NFD) or a non-ASCII letter's case — letter case is
    the one folding left, and ``str.lower`` folds all of it."""
    folded: dict[str, set[str]] = {}
    for i in ids:
        folded.setdefault(i.lower(), set()).add(i)
    return sorted(i for group in folded.values() if len(group) > 1 for i in group)


def check_references(settings: ConfiguredNames) -> None:
    """Check the names across sections, in this order: target ids unique; each Pixiv
    account name one that can work (:func:`account_name_problem`); each
    ``[sources]`` name well-formed and not a Pixiv account's; each source task queue at
    most :data:`MAX_TASK_QUEUE_BYTES` bytes (the callback pushes', ``<task_queue>-pushes``,
    is shorter than account ``default``'s, always there); no route's ``task_queue`` one of
    curaflow's own (2026-12-07: a route on the pushes', the main or a source queue put a
    worker of ``deliver`` alone beside the queue's own in every process, and the tasks it
    took of the queue's other activities failed as not registered, each a spent attempt);
    each target's ``account`` configured, its routes present, distinct and configured;
    schedule ids unique (one
    Temporal schedule per id: until 2026-12-06 a second plan of one id replaced the
    first's cron at sync while occurrences were admitted with the first's targets);
    no two target ids, nor two schedule ids, that differ only in letter case
    (:func:`case_twins`: one artifact folder on a case-insensitive disk; loaded until
    2026-12-07, one job's files the other's, retention deleting both); each
    schedule's targets distinct and configured; each route name well-formed.

    Raises:
        SettingsProblem: the first rule broken, naming the target, schedule, route or
            source (and, for the report, the settings it is about).
    """
    ids = [t.id for t in settings.targets]
    dupes = {i for i in ids if ids.count(i) > 1}
    if dupes:
        raise SettingsProblem(
            f"duplicate target ids: {sorted(dupes)}", [("targets", n, "id") for n, i in enumerate(ids) if i in dupes]
        )
    if twins := case_twins(ids):
        raise SettingsProblem(
            f"target ids {twins} differ only in letter case: a case-insensitive disk (macOS, Windows) keeps their "
            "artifact folders as one; rename one of them",
            [("targets", n, "id") for n, i in enumerate(ids) if i in twins],
        )
    pixiv_accounts = settings.accounts()
    for name in pixiv_accounts:
        if problem := account_name_problem(name):
            # Until 2026-12-06 any name loaded: one of 3 000 characters reached the ledger's
            # primary keys and a Temporal task queue name, and failed there.
            raise SettingsProblem(
                f"pixiv account name {name[:80]!r}{'…' if len(name) > 80 else ''} {problem}",
                [("pixiv", "accounts", name)],
            )
    for name in settings.sources:
        if not ID_PATTERN.match(name):
            raise SettingsProblem(f"source name {name!r} must match [A-Za-z0-9_-]{{1,64}}", [("sources", name)])
        if name in pixiv_accounts:
            raise SettingsProblem(
                f"source {name!r} has the name of a pixiv account: a target could not tell them apart",
                [("sources", name), ("pixiv", "accounts", name)],
            )
    for name, queue in settings.source_task_queues().items():
        size = len(queue.encode("utf-8"))
        if size > MAX_TASK_QUEUE_BYTES:
            raise SettingsProblem(
                f"source task queue {queue[:80]!r}… (temporal.task_queue + '-source-' + the source's name) is "
                f"{size} bytes: Temporal takes a task queue name of at most {MAX_TASK_QUEUE_BYTES}",
                [("temporal", "task_queue"), _source_at(settings, name)],
            )
    own = settings.own_task_queues()
    for name, route in settings.routes.items():
        route_queue = getattr(route, "task_queue", None)
        if isinstance(route_queue, str) and route_queue in own:
            raise SettingsProblem(
                f"route {name!r} runs on task queue {route_queue!r}, which is {own[route_queue]}: a route's "
                "task_queue must be a queue of its own (or none: the main task queue's workers deliver)",
                [("routes", name, "task_queue")],
            )
    accounts = settings.source_configs()
    for index, target in enumerate(settings.targets):
        if target.account not in accounts:
            raise SettingsProblem(
                f"target {target.id!r} uses pixiv account {target.account!r}, which is not configured "
                f"(accounts: {sorted(pixiv_accounts)}"
                + (f"; sources: {sorted(settings.sources)})" if settings.sources else ")"),
                [("targets", index, "account")],
            )
        routes_at: Loc = ("targets", index, "routes")
        if not target.routes:
            raise SettingsProblem(f"target {target.id!r} has no routes", [routes_at])
        twice = sorted({r for r in target.routes if target.routes.count(r) > 1})
        if twice:
            raise SettingsProblem(f"target {target.id!r} names route(s) {twice} more than once", [routes_at])
        for route in target.routes:
            if route not in settings.routes:
                raise SettingsProblem(
                    f"target {target.id!r} names unknown route {route!r} "
                    f"(configured routes: {sorted(settings.routes)})",
                    [routes_at],
                )
    plans = [s.id for s in settings.schedules]
    plans_twice = sorted({i for i in plans if plans.count(i) > 1})
    if plans_twice:
        raise SettingsProblem(
            f"duplicate schedule ids: {plans_twice}",
            [("schedules", n, "id") for n, i in enumerate(plans) if i in plans_twice],
        )
    if twins := case_twins(plans):
        raise SettingsProblem(
            f"schedule ids {twins} differ only in letter case: a case-insensitive disk (macOS, Windows) keeps "
            "their occurrences' artifact folders as one; rename one of them",
            [("schedules", n, "id") for n, i in enumerate(plans) if i in twins],
        )
    for index, schedule in enumerate(settings.schedules):
        named_at: Loc = ("schedules", index, "target_ids")
        twice = sorted({t for t in schedule.target_ids if schedule.target_ids.count(t) > 1})
        if twice:
            raise SettingsProblem(f"schedule {schedule.id!r} names target(s) {twice} more than once", [named_at])
        for tid in schedule.target_ids:
            if tid not in ids:
                raise SettingsProblem(f"schedule {schedule.id!r} names unknown target {tid!r}", [named_at])
        check_job_size(
            schedule.id,
            [t for t in settings.targets if t.id in schedule.target_ids] or settings.targets,
            [named_at] if schedule.target_ids else [("targets",)],
        )
    for name in settings.routes:
        if not ID_PATTERN.match(name):
            raise SettingsProblem(f"route name {name!r} must match [A-Za-z0-9_-]{{1,64}}", [("routes", name)])


def _source_at(settings: ConfiguredNames, name: str) -> Loc:
    """Where the source instance ``name`` is configured: its ``[sources]`` table, else its
    Pixiv account's (account ``default`` may be no table: then it is the default's)."""
    return ("sources", name) if name in settings.sources else ("pixiv", "accounts", name)


def check_job_size(schedule_id: str, targets: list[TargetConfig], settings: Iterable[Loc] = ()) -> None:
    """Refuse a schedule whose job Temporal could not run: more than
    :data:`~curaflow.domain.execution.MAX_JOB_TARGETS` targets (``targets``: the schedule's,
    or every configured one for a schedule naming none), or more than
    :data:`~curaflow.domain.execution.MAX_JOB_SENDS` routes over them (each a delivery
    pending at once). Until 2026-12-06 such a plan loaded, and each occurrence's job failed
    its workflow tasks (measured: 2 100 targets ran no step in 240 s; before the job's first
    activation was made linear, 500 failed it).

    Args:
        settings: where the settings that chose those targets sit (for the report).

    Raises:
        SettingsProblem: naming the schedule, the count and the bound.
    """
    if len(targets) > MAX_JOB_TARGETS:
        raise SettingsProblem(
            f"schedule {schedule_id!r} runs {len(targets)} targets in one job: at most {MAX_JOB_TARGETS} "
            "(Temporal fails the workflow task of a larger job); split it into several schedules",
            settings,
        )
    sends = sum(len(t.routes) for t in targets)
    if sends > MAX_JOB_SENDS:
        raise SettingsProblem(
            f"schedule {schedule_id!r} sends to {sends} routes at once in one job: at most {MAX_JOB_SENDS} "
            "(Temporal's limit on pending activities); split it into several schedules",
            settings,
        )


def _durations(model: BaseModel, at: Loc) -> Iterator[tuple[Loc, int, int, str]]:
    """``(where, value, ceiling, why)`` of every integer ``*_ms`` and ``*_days`` field of
    ``model`` (at ``at``) and of the models, mappings and lists it holds."""
    for key, field in type(model).model_fields.items():
        value = getattr(model, key)
        loc = (*at, key)
        name = dotted(loc)
        if field.annotation is Any:  # a budget: its own rule (resolve_budget), never refused
            continue
        if isinstance(value, int) and not isinstance(value, bool):
            if name in OWN_CEILINGS:
                yield (loc, value, *OWN_CEILINGS[name])
            elif key.endswith("_ms"):
                yield loc, value, MAX_SETTING_MS, "365 days"
            elif key == "days" or key.endswith("_days"):
                yield loc, value, MAX_SETTING_DAYS, "100 years"
        else:
            yield from _nested(value, loc)


def _nested(value: Any, at: Loc) -> Iterator[tuple[Loc, int, int, str]]:
    if isinstance(value, BaseModel):
        yield from _durations(value, at)
    elif isinstance(value, Mapping):
        for key, item in value.items():
            yield from _nested(item, (*at, key))
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            yield from _nested(item, (*at, index))


def check_durations(settings: BaseModel) -> None:
    """Refuse every duration the parts that honour it cannot: each integer ``*_ms`` setting
    at most :data:`MAX_SETTING_MS`, each ``*_days`` at most :data:`MAX_SETTING_DAYS`, a
    setting of :data:`OWN_CEILINGS` at most its own — in every section, route, source and
    account, whatever its kind. (A budget of ``[budgets]`` given as any value is no integer
    field here: it falls back to its default with a warning, reference §8 —
    :func:`curaflow.config.budgets.resolve_budget`.)

    Args:
        settings: the loaded settings (any model: the walk reads its fields).

    Raises:
        SettingsProblem: naming every setting beyond its ceiling, with the ceiling.
    """
    found = [
        (loc, f"{dotted(loc)} is {value}: at most {ceiling} ({why})")
        for loc, value, ceiling, why in _durations(settings, ())
        if value > ceiling
    ]
    if found:
        raise SettingsProblem("; ".join(text for _, text in found), [loc for loc, _ in found])


def _models(value: Any, at: Loc) -> Iterator[tuple[Loc, BaseModel]]:
    """``(where, model)`` of ``value`` if it is a model, and of every model it holds
    (sections, routes, sources, accounts, targets, schedules)."""
    if isinstance(value, BaseModel):
        yield at, value
        for key in type(value).model_fields:
            yield from _models(getattr(value, key), (*at, key))
    elif isinstance(value, Mapping):
        for key, item in value.items():
            yield from _models(item, (*at, key))
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            yield from _models(item, (*at, index))


def check_ordered(settings: BaseModel) -> None:
    """Refuse every pair of :data:`ORDERED_SETTINGS` given inverted — in its section, or in
    every ``[sources]`` instance whatever its kind —, naming both settings and their values
    (``supervision.initial_backoff_ms (60000) must not exceed supervision.max_backoff_ms
    (1000): …``). Equal bounds are in order. A pair is judged as the process would run it:
    one setting given, the other its default; a pair with a bound unset (None: no bound) is
    in order.

    Args:
        settings: the loaded settings (any model: the walk reads its fields).

    Raises:
        SettingsProblem: naming every inverted pair.
    """
    found = [
        (
            (lower, upper),
            f"{dotted(lower)} ({low!r}) must not exceed {dotted(upper)} ({high!r}): {pair.why}",
        )
        for at, model in _models(settings, ())
        for pair in ORDERED_SETTINGS
        if isinstance(model, pair.model)
        for lower, upper in [((*at, pair.lower), (*at, pair.upper))]
        if (low := getattr(model, pair.lower)) is not None
        and (high := getattr(model, pair.upper)) is not None
        and low > high
    ]
    if found:
        raise SettingsProblem("; ".join(text for _, text in found), [loc for locs, _ in found for loc in locs])


def _texts(value: Any, at: Loc, *, secrets: bool = True) -> Iterator[tuple[Loc, str]]:
    """``(where, text)`` of every text (``str``, and ``SecretStr`` unless ``secrets`` is
    false) in ``value`` and in the models, mappings and lists it holds (a mapping's keys are
    names, checked by :func:`check_references`)."""
    if isinstance(value, SecretStr):
        if secrets:
            yield at, value.get_secret_value()
    elif isinstance(value, str):
        yield at, value
    elif isinstance(value, BaseModel):
        for key in type(value).model_fields:
            yield from _texts(getattr(value, key), (*at, key), secrets=secrets)
    elif isinstance(value, Mapping):
        for key, item in value.items():
            yield from _texts(item, (*at, key), secrets=secrets)
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            yield from _texts(item, (*at, index), secrets=secrets)


def plain_urls(settings: BaseModel) -> list[tuple[Loc, str]]:
    """``(where, url)`` of every text setting that is an ``http(s)`` URL and no secret —
    in every section, route, source, account, target and schedule, whatever its kind (a
    webhook's ``url``, a Telegram ``api_url``, a source's ``url``). A ``SecretStr`` is left
    out: it is held whole (``Settings.secret_settings``)."""
    return [
        (loc, text)
        for loc, text in _texts(settings, (), secrets=False)
        if text.strip().lower().startswith(("http://", "https://"))
    ]


def check_text(settings: BaseModel) -> None:
    """Refuse every text setting that is blank or holds a control character
    (:func:`curaflow.domain.text.setting_text_problem`) — in every section, route, source,
    account, target and schedule, whatever its kind, secrets included; only the settings
    of :data:`BLANK_ALLOWED` may be empty. (A path setting is refused by its own field
    before it becomes a ``Path``: :func:`curaflow.domain.text.setting_path`.)

    Until 2026-12-06 such a value loaded and meant something else or nothing: an empty
    ``api.host`` served on every interface, an empty route ``task_queue`` or Telegram
    ``chat_id`` failed only at the first delivery, an ``api.token`` holding a NUL or a
    newline matched no request, a tag ``""`` searched for nothing.

    Args:
        settings: the loaded settings (any model: the walk reads its fields).

    Raises:
        SettingsProblem: naming every such setting (``api.token is empty``).
    """
    found = [
        (loc, f"{dotted(loc)} {problem}")
        for loc, text in _texts(settings, ())
        if (problem := setting_text_problem(text)) and not (dotted(loc) in BLANK_ALLOWED and text == "")
    ]
    if found:
        raise SettingsProblem(
            "; ".join(text for _, text in found) + " (leave a setting out for its default)", [loc for loc, _ in found]
        )
