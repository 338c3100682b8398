"""The ledger's connection pool and versioned migrations (PostgreSQL via asyncpg).

One pool per process (:func:`create_pool`). A connection going back to the pool is not
reset with asyncpg's default reset query (``pg_advisory_unlock_all(); CLOSE ALL;
UNLISTEN *; RESET ALL``: one more round trip for every ledger call, a quarter of the
worker's statements in the benchmark): nothing here leaves session state on a
pooled connection except a session advisory lock, and those are taken only through
:func:`session_lock`, which releases the lock or closes the connection. A transaction
left open is rolled back (:func:`_reset_connection`).

Migrations are the numbered ``*.sql`` files
of ``curaflow/ledger/migrations``, applied in order at start-up by :func:`migrate`
under a session advisory lock, so two processes starting at once apply each version
exactly once.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import re
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from importlib import resources
from typing import Any

import asyncpg
import orjson

from curaflow.config.database import PoolBounds
from curaflow.domain.text import parse_json
from curaflow.ledger.statements import StatementCounter
from curaflow.observability import logs

MIGRATION_LOCK_KEY = 0x6375726166  # "curaf"
#: Bound of migrating (waiting for another process's migration included), seconds: a
#: migration may rewrite a table, far longer than any request's statement bound.
MIGRATION_TIMEOUT_S = 600.0

Pool = asyncpg.Pool
Connection = asyncpg.Connection


#: What a ledger call raises when PostgreSQL cannot be reached or did not answer in time:
#: a socket error or an elapsed bounded wait (``OSError``, ``TimeoutError``), an error
#: PostgreSQL returned (``PostgresError``), or a connection that went away under the call
#: (asyncpg's ``InterfaceError``: a restart, a closed pool; its ``InternalClientError``: the
#: connection's protocol state broken mid-call, "cannot switch to state 12; another
#: operation is in progress"). Best-effort ledger writes (a lease extension, a gauge)
#: catch this tuple and nothing wider.
LEDGER_ERRORS: tuple[type[Exception], ...] = (
    OSError,
    asyncpg.PostgresError,
    asyncpg.InterfaceError,
    asyncpg.exceptions.InternalClientError,
)


#: What opening the ledger at a process's start raises that is not curaflow's bug: one of
#: :data:`LEDGER_ERRORS`, or a DATABASE_URL asyncpg cannot use (``ValueError``: "Invalid
#: IPv6 URL", a port that is not a number; ``OverflowError``: a port over 65535).
OPEN_ERRORS: tuple[type[Exception], ...] = (*LEDGER_ERRORS, ValueError, OverflowError)


#: A piece of a text quoted as Python's ``repr`` quotes a string: in single quotes, or in
#: double quotes when it holds a single quote (escapes included).
_QUOTED = re.compile(r"'(?:[^'\\]|\\.)*'" + r'|"(?:[^"\\]|\\.)*"')

#: What stands for a quoted piece of the ledger's URL in :class:`UnreadableLedgerUrl`'s words.
PIECE_NOT_SHOWN = "'…'"


class UnreadableLedgerUrl(ValueError):
    """asyncpg refused ``database.url`` before any connection: a URL it cannot read (a port
    that is no number or out of range, a query it cannot parse, a host it cannot split) or
    a parameter it refuses (``sslmode``, a root certificate file that is not there).

    Its words are asyncpg's with every piece of the URL they quote replaced by
    :data:`PIECE_NOT_SHOWN`, and a hint. asyncpg splits the URL as a URL is split: a
    password written with a ``/`` or a ``#`` unencoded ends the host part there, and the
    password's start is read as the port (``invalid literal for int() with base 10:
    'S3cr'``), one with a ``?`` starts the query inside the password (``bad query field:
    'et@host/db'``) — the pieces asyncpg quotes are then the password's. Until 2026-12-07
    they were printed as they came, by every command, ``curaflow api`` and the worker
    (``tests/unit/test_cli_ledger_unreachable.py::test_a_database_url_asyncpg_cannot_read_is_said_without_a_piece_of_its_password``).
    """

    def __init__(self, err: ValueError | OverflowError) -> None:
        words = _QUOTED.sub(lambda m: PIECE_NOT_SHOWN if m[0][0] == "'" or "'" in m[0] else m[0], str(err))
        super().__init__(
            f"{type(err).__name__}: {words} — asyncpg refused DATABASE_URL / database.url before connecting (the "
            "pieces of it its words quote are not shown: they may be the password's); a '/', '?', '#', '@' or "
            "':' in the user name or the password must be percent-encoded (%2F, %3F, %23, %40, %3A)"
        )


def open_failure(err: BaseException, connect_timeout_ms: int) -> str:
    """``"<type>: <detail>"`` of an error opening the ledger, for an operator's one line.

    asyncpg's connect that got no answer (a PostgreSQL that takes the connection and never
    speaks) raises a bare ``TimeoutError``: it reads "no answer within N ms
    (database.connect_timeout_ms)". A URL asyncpg cannot read is
    :class:`UnreadableLedgerUrl`'s words (no piece of the URL quoted).

    Args:
        err: one of :data:`LEDGER_ERRORS` (or any exception).
        connect_timeout_ms: the connect timeout that was used (``database.connect_timeout_ms``).
    """
    if isinstance(err, UnreadableLedgerUrl):
        return str(err)
    detail = str(err) or (
        f"no answer within {connect_timeout_ms} ms (database.connect_timeout_ms)"
        if isinstance(err, TimeoutError)
        else "no detail"
    )
    return f"{type(err).__name__}: {detail}"


async def check_answers(url: str, bounds: PoolBounds) -> None:
    """Open one connection to the ledger as :func:`create_pool` would, and close it: a
    process's check before it starts serving (``curaflow api``).

    Raises:
        one of :data:`OPEN_ERRORS`: PostgreSQL refused, did not answer within
            ``bounds["connect_timeout_s"]`` (a bare ``TimeoutError``) or refused the login;
            or ``url`` is not one asyncpg can use.
    """
    pool = await create_pool(url, min_size=1, max_size=1, **bounds)
    await pool.close()


#: SQLSTATE classes (their first two characters) whose every code means "the ledger cannot
#: serve this call now; the same call later may succeed" (see :func:`is_unavailable`): 08
#: connection exception, 53 insufficient resources (too many connections, out of memory,
#: disk full), 57 operator intervention (shutdown, crash, cannot connect now, database
#: dropped, idle session timeout, query canceled — a statement timeout), 58 system error
#: (PostgreSQL's own I/O); 40 transaction rollback (40001 serialization failure, 40P01
#: deadlock detected, 40003 statement completion unknown: PostgreSQL rolled the transaction
#: back because of another one, and says to retry it — all but 40002, a deferred
#: constraint, which a retry meets again). Read from the error's SQLSTATE, not asyncpg's
#: class: a code asyncpg has no class for (a newer server's) is ``UnknownPostgresError``,
#: and its class says nothing (2026-12-06).
UNAVAILABLE_SQLSTATE_CLASSES: frozenset[str] = frozenset({"08", "40", "53", "57", "58"})
#: Codes of other classes that mean the same: the sessions PostgreSQL ended (25P03 idle in
#: transaction, 25P04 transaction timeout); 25006 read-only SQL transaction — a write
#: reaching a standby, what a failover answers until the address leads to the new primary;
#: 55P03 lock not available — a ``lock_timeout`` the operator set ran out behind another
#: transaction's lock (2026-12-06: the last two were a bug's 500).
UNAVAILABLE_SQLSTATES: frozenset[str] = frozenset({"25P03", "25P04", "25006", "55P03"})
#: Codes of those classes that are a refused statement, never an outage: a deferred
#: constraint refused at commit (40002).
NOT_AN_OUTAGE_SQLSTATES: frozenset[str] = frozenset({"40002"})
#: asyncpg's own readings of a PostgreSQL error that mean the same, whatever the SQLSTATE's
#: class says: ``InvalidCachedStatementError`` — PostgreSQL refused a statement the
#: connection had prepared before a schema change (``cached plan must not change result
#: type``, 0A000 feature not supported, the class of a bug): a migration of a new release
#: added a column while this process runs (a rolling upgrade). asyncpg drops the statement
#: from its cache and prepares it again on the next call, which succeeds; it retries by
#: itself only outside a transaction, and every ledger write runs in one. Until 2026-12-07
#: a bug's 500 (``tests/integration/test_ledger_sqlstates.py``), where asyncpg's
#: ``OutdatedSchemaCacheError`` — the same change seen by a type's codec — was an outage.
UNAVAILABLE_POSTGRES_ERRORS: tuple[type[Exception], ...] = (asyncpg.exceptions.InvalidCachedStatementError,)
#: Client-side: sockets and bounded waits (``OSError``, which ``TimeoutError`` and
#: ``ConnectionError`` are), a connection or pool closed under the call
#: (``InterfaceError``), the connection's protocol state broken by the server going away
#: mid-call (``InternalClientError``, also a schema cache to refresh: a retry succeeds).
UNAVAILABLE_CLIENT_ERRORS: tuple[type[Exception], ...] = (
    OSError,
    asyncpg.InterfaceError,
    asyncpg.exceptions.InternalClientError,
)
#: Errors of those classes that are a bug, a configuration or a value, never an outage:
#: ``InterfaceError``s of the client's configuration or features, and asyncpg's "invalid
#: query input" (``asyncpg.exceptions._base.DataError``, an ``InterfaceError`` and a
#: ``ValueError``; asyncpg 0.32 raises its ``PostgresError`` namesake of SQLSTATE 22000
#: instead, already none: :func:`refused_value`).
NOT_AN_OUTAGE: tuple[type[Exception], ...] = (
    asyncpg.exceptions.ClientConfigurationError,
    asyncpg.exceptions.UnsupportedClientFeatureError,
    asyncpg.exceptions.UnsupportedServerFeatureError,
    asyncpg.exceptions._base.DataError,
)
#: How asyncpg's plain ``InterfaceError`` begins when it refuses a call's arguments before
#: anything is sent (its bind message): another number of arguments than the statement's
#: parameters ("the server expects 1 argument for this query, 2 were passed"), or more than
#: 32 767. A bug of the call, which fails again for ever: never an outage (until 2026-12-06
#: one was, a 503 for ever and the ledger-unavailable alert). Any other ``InterfaceError``
#: stays an outage: the unknown costs one retry.
REFUSED_ARGUMENTS_MESSAGES: tuple[str, ...] = (
    "the server expects ",
    "the number of query arguments cannot exceed ",
)


def refused_arguments(err: BaseException) -> bool:
    """Whether ``err`` is asyncpg refusing a call's arguments before sending anything: a
    plain ``InterfaceError`` whose message begins with one of
    :data:`REFUSED_ARGUMENTS_MESSAGES` (asyncpg has no class of its own for it)."""
    return (
        type(err) is asyncpg.InterfaceError
        and bool(err.args)
        and isinstance(err.args[0], str)
        and err.args[0].startswith(REFUSED_ARGUMENTS_MESSAGES)
    )


def unavailable_sqlstate(code: object) -> bool:
    """Whether the SQLSTATE ``code`` (five characters, as PostgreSQL sends it) means the
    ledger could not serve a call now: its class is one of
    :data:`UNAVAILABLE_SQLSTATE_CLASSES` or it is one of :data:`UNAVAILABLE_SQLSTATES`, and
    it is none of :data:`NOT_AN_OUTAGE_SQLSTATES`. Anything that is not a five-character
    string is not (False)."""
    if not isinstance(code, str) or len(code) != 5:
        return False
    code = code.upper()
    if code in NOT_AN_OUTAGE_SQLSTATES:
        return False
    return code[:2] in UNAVAILABLE_SQLSTATE_CLASSES or code in UNAVAILABLE_SQLSTATES


def _unavailable_one(err: BaseException) -> bool:
    if isinstance(err, NOT_AN_OUTAGE) or refused_arguments(err):
        return False
    if isinstance(err, UNAVAILABLE_POSTGRES_ERRORS):
        return True
    if isinstance(err, asyncpg.PostgresError):
        # Each asyncpg class carries its code; an UnknownPostgresError carries the server's.
        return unavailable_sqlstate(getattr(err, "sqlstate", None))
    return isinstance(err, UNAVAILABLE_CLIENT_ERRORS)


def is_unavailable(err: BaseException) -> bool:
    """Whether ``err`` means the ledger could not serve a call now (PostgreSQL unreachable,
    hung, restarting, failing over, out of connections or resources; the connection broke
    mid-call; the transaction rolled back by a serialization failure or a deadlock; a lock
    timeout; a statement a migration changed under the connection's cache).

    The one classification of asyncpg's, the socket's and the bounded waits' errors: the
    API answers such an error 503 ``ledger_unavailable`` with ``Retry-After``
    (:func:`curaflow.api.errors.internal_error_response`); anything else (a constraint, a
    syntax error, a bug) is a 500. An error raised ``from`` such an error (its
    ``__cause__``) counts as it. A PostgreSQL error is judged by its SQLSTATE
    (:func:`unavailable_sqlstate`), whether asyncpg has a class for it or not — but for
    asyncpg's readings in :data:`UNAVAILABLE_POSTGRES_ERRORS` (a statement a schema change
    invalidated under the connection's cache); the client's own by
    :data:`UNAVAILABLE_CLIENT_ERRORS`, less :data:`NOT_AN_OUTAGE` and :func:`refused_arguments`.

    A call refused before anything was sent is never an outage, the same call failing
    again for ever: a value asyncpg cannot encode for its parameter (asyncpg 0.32's
    ``asyncpg.exceptions.DataError``, SQLSTATE 22000, "invalid input for query argument
    $N", the encoding error its ``__cause__``; or its ``InterfaceError`` namesake) and
    arguments asyncpg refuses to send (:func:`refused_arguments`).
    """
    seen = 0
    current: BaseException | None = err
    while current is not None and seen < 8:
        if _unavailable_one(current):
            return True
        current, seen = current.__cause__, seen + 1
    return False


#: SQLSTATEs that refuse this process's login, whatever it asks: class 28 (invalid
#: authorization: a password rotated, a role gone — PostgreSQL Appendix A) and 3D000 (the
#: database named does not exist).
LOGIN_REFUSED_SQLSTATE_CLASSES: frozenset[str] = frozenset({"28"})
LOGIN_REFUSED_SQLSTATES: frozenset[str] = frozenset({"3D000"})


logs.outage_is(is_unavailable)  # a library's line about such an error is one line, no traceback


def refused_login(err: BaseException) -> bool:
    """Whether ``err`` is PostgreSQL refusing this process's login or database
    (:data:`LOGIN_REFUSED_SQLSTATE_CLASSES`, :data:`LOGIN_REFUSED_SQLSTATES`): its
    configuration (``DATABASE_URL``), which no later try of the same process changes."""
    code = getattr(err, "sqlstate", None)
    return isinstance(code, str) and (code[:2] in LOGIN_REFUSED_SQLSTATE_CLASSES or code in LOGIN_REFUSED_SQLSTATES)


def refused_statement(err: BaseException) -> str | None:
    """The SQLSTATE of PostgreSQL refusing the statement itself: the ledger answered, and the
    answer is no outage (:func:`is_unavailable`) — a constraint the rows break (23xxx), an
    internal error reading them (XX000, XX001 a damaged page), a ``RAISE`` of a ledger
    function (P0001), a value. The same statement meets it again; another statement —
    another job's — need not: a caller working through many jobs leaves the one refused and
    goes on (the reconciler's convergence, :func:`curaflow.ledger.reconciler.convergence.converge`).

    Returns:
        The SQLSTATE (five characters; asyncpg's class name when the error carries none), or
        None when ``err`` is not such a refusal: an outage, a client-side error (a connection
        gone, a bounded wait), an exception of curaflow's own code.
    """
    if not isinstance(err, asyncpg.PostgresError) or is_unavailable(err):
        return None
    code = getattr(err, "sqlstate", None)
    return code if isinstance(code, str) else type(err).__name__


#: How a refused value names its parameter: PostgreSQL in the error's context while
#: binding it (``… portal parameter $8 = '…'``), asyncpg in its message when it could
#: not encode it, before anything was sent (``invalid input for query argument $8: …``).
#: Each is anchored where its text begins (a line of the context, the message), so a
#: refused value quoted in it never names a parameter.
_BOUND_PARAMETER = re.compile(r'^(?:unnamed portal|portal "[^"\n]*") parameter \$(\d+)\b', re.MULTILINE)
_ENCODED_PARAMETER = re.compile(r"^invalid input for query argument \$(\d+)\b")


def refused_parameter(err: BaseException) -> int | None:
    """The number of the statement's parameter whose value was refused (``$N``: 1-based),
    read from PostgreSQL's context of the error (a value it could not bind) or from
    asyncpg's message (a value it could not encode: asyncpg 0.32's ``DataError``, its
    ``InterfaceError`` namesake); None when the error names none."""
    found = _BOUND_PARAMETER.search(getattr(err, "context", None) or "") or _ENCODED_PARAMETER.match(str(err))
    return int(found.group(1)) if found else None


#: SQLSTATE classes of a value the ledger refuses (:func:`refused_value`): 22 data
#: exception (a string too long for its column 22001, a character the encoding or
#: ``jsonb`` cannot hold 22021 / 22P05, a number out of range 22003, a date out of range
#: 22008) and 54 program limit exceeded (an index entry or a value too large, 54000).
REFUSED_VALUE_SQLSTATE_CLASSES = frozenset({"22", "54"})


def refused_value(err: BaseException) -> str | None:
    """Whether ``err`` is a value the ledger cannot take, raised where a statement's values
    are built or written, rather than an outage or a bug of the statement: the SQLSTATE
    PostgreSQL answered (class :data:`REFUSED_VALUE_SQLSTATE_CLASSES`), or the Python
    class of an error raised while building or encoding a value client side
    (``UnicodeEncodeError`` — a lone surrogate —, ``OverflowError`` — a date past any
    calendar —, any other ``ValueError``).

    A value asyncpg cannot encode for its parameter (a lone surrogate, an ``int`` past
    ``int4``, a ``str`` for an ``int``, a ``set`` for a ``jsonb``) is raised before anything
    is sent as ``asyncpg.exceptions.DataError`` — in asyncpg 0.32 the ``PostgresError`` of
    SQLSTATE 22000, the encoding error its ``__cause__`` —, so it is ``"22000"``; asyncpg's
    ``InterfaceError`` namesake (``asyncpg.exceptions._base.DataError``, "invalid query
    input") is judged first, by the class of the encoding error under it. An outage
    (:func:`is_unavailable`) is never one; nor are arguments asyncpg refuses to send
    (:func:`refused_arguments`: the statement's bug, no value).

    Returns:
        The SQLSTATE (five characters) or the class name of the Python error (for asyncpg's
        ``InterfaceError`` ``DataError``, of the encoding error under it); None when ``err``
        is no refused value.
    """
    if isinstance(err, asyncpg.exceptions._base.DataError):
        return type(err.__cause__ or err).__name__
    if is_unavailable(err):
        return None
    if isinstance(err, asyncpg.PostgresError):
        code = getattr(err, "sqlstate", None)
        if isinstance(code, str) and code[:2] in REFUSED_VALUE_SQLSTATE_CLASSES:
            return code
        return None
    if isinstance(err, (ValueError, OverflowError)):
        return type(err).__name__
    return None


def now_ms() -> int:
    """This process's wall-clock time in epoch milliseconds (UTC).

    Not for a time another process judges against its present — a lease, a heartbeat,
    a barrier's deadline, a budget's start: those are the database's clock
    (:data:`DB_NOW_MS`, docs/DESIGN.md "Ledger times are the database's clock"). Hosts'
    clocks differ; the one PostgreSQL every process shares has one.
    """
    return int(time.time() * 1000)


#: The database's wall clock in epoch milliseconds (UTC), as a SQL expression: the one
#: clock of every ledger time that one process writes and another judges against its
#: present (docs/DESIGN.md "Ledger times are the database's clock") — a cell's lease and
#: heartbeat, a step's start, a job's deadline barrier and budgets, the send lease, the
#: rate gates, the source queue leases. Written inside the statement that needs it (no
#: round trip of its own); ``clock_timestamp()``, not ``now()``: the time the statement
#: runs, not its transaction's start. A statement reading it more than once takes it
#: once (``WITH clock AS (SELECT DB_NOW_MS AS now)``) where the values must agree.
DB_NOW_MS = "(extract(epoch from clock_timestamp()) * 1000)::bigint"

#: The most characters the ledger keeps of a third party's answer (a receiver's refusal or
#: failure: ``route_refusals.error``, ``delivery_intents.last_error``) and of a why or a
#: reason (``unavailable_works.why``, ``route_gates.pause_reason``,
#: ``event_pushes.last_error``). A longer one is kept cut with its mark
#: (:func:`curaflow.domain.text.clipped_within`: ``… (+N characters)``, within the bound).
ANSWER_CHARS = 2_000
REASON_CHARS = 500


#: orjson options of :func:`dump_jsonb`: a datetime or a dataclass is refused (as the
#: standard library refuses it) instead of written in orjson's own way.
_ORJSON_REFUSED = orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_DATACLASS


def dump_jsonb(value: Any) -> str:
    """The text of a ``jsonb`` parameter: orjson (~0.6 µs for a work, against ~5.7 µs for
    ``json.dumps``: ~13 values a job), and ``json.dumps(value, ensure_ascii=False)`` for
    what orjson refuses — an integer beyond 64 bits, a key that is not a string, a lone
    surrogate (which the standard library writes and asyncpg then refuses to encode) —
    so every value the standard library wrote reads back the same from ``jsonb``.

    One difference: a float NaN or infinity is written ``null``; the standard library
    wrote ``NaN``, which PostgreSQL refuses (the statement failed).

    Raises:
        TypeError: a value JSON cannot hold (a set, a datetime, a dataclass…), as
            ``json.dumps`` raises it.
    """
    try:
        return orjson.dumps(value, option=_ORJSON_REFUSED).decode()
    except TypeError:
        return json.dumps(value, ensure_ascii=False)


async def _init_connection(conn: asyncpg.Connection) -> None:
    # jsonb is read with orjson where it reads as json.loads does (parse_json), and
    # written by dump_jsonb. A json column keeps its text as written (the admission's
    # frozen response, an event push's body): it stays with the standard library.
    await conn.set_type_codec("jsonb", encoder=dump_jsonb, decoder=parse_json, schema="pg_catalog")
    await conn.set_type_codec(
        "json", encoder=lambda v: json.dumps(v, ensure_ascii=False), decoder=json.loads, schema="pg_catalog"
    )


#: How long giving a connection back may wait for the cancellation of a statement that
#: was interrupted (a timeout, a cancelled task). A healthy server acknowledges a cancel
#: in milliseconds; a hung one never does, and the connection is then terminated instead
#: of holding the caller (asyncpg's default waits for the cancel request itself, which a
#: stopped server never answers: every API request then took as long as the outage).
RELEASE_TIMEOUT_S = 0.5


class LedgerConnection(asyncpg.Connection):
    """A ledger connection that remembers whether one of its statements was stopped from the
    client's side — its bound ran out (``TimeoutError``) or its caller was cancelled
    (``CancelledError``) — so :class:`LedgerPool` closes it instead of pooling it again.

    asyncpg stops such a statement with a ``CancelRequest`` sent on a connection of its own,
    which PostgreSQL takes whenever it arrives: when the statement had ended meanwhile, the
    request cancels the connection's *next* statement — another caller's, which fails at once
    with ``QueryCanceledError`` (a ``POST /jobs`` answered 503 in 4 ms on a loaded machine).
    The server's own bound runs out first (:func:`server_statement_timeout_ms`); when the
    client's still did, or the caller was cancelled, no other caller gets the connection.
    """

    __slots__ = ("stopped_client_side",)

    def _stopped(self) -> None:
        self.stopped_client_side = True

    async def execute(self, *args: Any, **kwargs: Any) -> Any:
        """:meth:`asyncpg.Connection.execute`, remembering a client-side stop."""
        try:
            return await super().execute(*args, **kwargs)
        except (TimeoutError, asyncio.CancelledError):
            self._stopped()
            raise

    async def executemany(self, *args: Any, **kwargs: Any) -> Any:
        """:meth:`asyncpg.Connection.executemany`, remembering a client-side stop."""
        try:
            return await super().executemany(*args, **kwargs)
        except (TimeoutError, asyncio.CancelledError):
            self._stopped()
            raise

    async def fetch(self, *args: Any, **kwargs: Any) -> Any:
        """:meth:`asyncpg.Connection.fetch`, remembering a client-side stop."""
        try:
            return await super().fetch(*args, **kwargs)
        except (TimeoutError, asyncio.CancelledError):
            self._stopped()
            raise

    async def fetchrow(self, *args: Any, **kwargs: Any) -> Any:
        """:meth:`asyncpg.Connection.fetchrow`, remembering a client-side stop."""
        try:
            return await super().fetchrow(*args, **kwargs)
        except (TimeoutError, asyncio.CancelledError):
            self._stopped()
            raise

    async def fetchval(self, *args: Any, **kwargs: Any) -> Any:
        """:meth:`asyncpg.Connection.fetchval`, remembering a client-side stop."""
        try:
            return await super().fetchval(*args, **kwargs)
        except (TimeoutError, asyncio.CancelledError):
            self._stopped()
            raise


class LedgerPool(asyncpg.Pool):
    """An asyncpg pool whose every wait is bounded: a PostgreSQL that stops answering
    fails calls instead of holding them.

    * ``acquire()`` without a timeout waits at most ``acquire_timeout`` seconds (a new
      connection's connect included);
    * giving a connection back waits at most :data:`RELEASE_TIMEOUT_S` for an interrupted
      statement's cancellation, then terminates the connection; one whose statement was
      stopped client side is terminated at once (:class:`LedgerConnection`);
    * statements are bounded by the pool's ``command_timeout`` (client side) and the
      server's ``statement_timeout`` (:func:`create_pool`).

    Every bound raises ``TimeoutError`` (``asyncio.TimeoutError``), which
    :func:`is_unavailable` classifies as the ledger being unavailable.
    """

    def __init__(self, *args: Any, acquire_timeout: float, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.acquire_timeout = acquire_timeout

    def acquire(self, *, timeout: float | None = None) -> Any:
        """:meth:`asyncpg.Pool.acquire`, bounded by ``acquire_timeout`` when no timeout is given."""
        return super().acquire(timeout=self.acquire_timeout if timeout is None else timeout)

    async def release(self, connection: Any, *, timeout: float | None = None) -> None:
        """:meth:`asyncpg.Pool.release`, bounded by :data:`RELEASE_TIMEOUT_S` by default; a
        connection one of whose statements was stopped client side is closed, not pooled
        (:class:`LedgerConnection`)."""
        if getattr(connection, "stopped_client_side", False) and not connection.is_closed():
            connection.terminate()
        await super().release(connection, timeout=RELEASE_TIMEOUT_S if timeout is None else timeout)


def server_statement_timeout_ms(statement_timeout_s: float) -> int:
    """The server's ``statement_timeout`` for a client-side bound of ``statement_timeout_s``
    seconds, milliseconds: a tenth less, by 20 ms at least and 250 ms at most (at least 1).

    The server stops a slow statement itself, and says so in its answer
    (``QueryCanceledError``), before the client's bound runs out. When the client's bound
    ran out first, asyncpg stopped the statement by a ``CancelRequest`` — sent on a
    connection of its own, taken by the server whenever it arrives: a statement that had
    ended meanwhile left the request to cancel the *next* statement of that connection,
    another caller's, which failed at once for nothing (on a loaded machine a ``POST /jobs``
    answered 503 in 4 ms; 1 of 14 such timeouts in 300 statements on the bound, measured
    2026-12-06). The client's bound stays, for a server that does not answer at all.
    """
    margin = min(max(statement_timeout_s * 0.1, 0.02), 0.25)
    return max(1, round((statement_timeout_s - margin) * 1000))


async def create_pool(
    dsn: str,
    *,
    min_size: int = 1,
    max_size: int = 10,
    connect_timeout_s: float = 5.0,
    acquire_timeout_s: float = 30.0,
    statement_timeout_s: float = 30.0,
    counter: StatementCounter | None = None,
) -> asyncpg.Pool:
    """Open the process's connection pool with JSON codecs for ``json``/``jsonb``.

    Every wait on PostgreSQL is bounded (:class:`LedgerPool`), so a server that stops
    answering (SIGSTOP, a network partition) fails calls with ``TimeoutError`` instead
    of holding them for as long as it is away.

    Args:
        dsn: a ``postgresql://`` URL (a unix socket via ``?host=/dir`` works).
        min_size / max_size: pool bounds.
        connect_timeout_s: one connection attempt (TCP/socket, startup, authentication).
        acquire_timeout_s: waiting for a pooled connection (a connect included).
        statement_timeout_s: one statement, client side (``command_timeout``) and server
            side (``statement_timeout``, so the server stops work nobody waits for; a
            little earlier: :func:`server_statement_timeout_ms`).
            :func:`migrate` lifts both for its own statements.
        counter: counts every statement of the pool's connections
            (:mod:`curaflow.ledger.statements`); None → not counted.

    Raises:
        OSError / asyncpg.PostgresError / TimeoutError: the database is unreachable.
        UnreadableLedgerUrl: ``dsn`` is no URL asyncpg can read (its ``ValueError`` or
            ``OverflowError``, worded without the pieces of the URL it quoted).
    """
    pool = LedgerPool(
        dsn,
        acquire_timeout=acquire_timeout_s,
        connection_class=LedgerConnection,
        record_class=asyncpg.Record,
        min_size=min_size,
        max_size=max_size,
        max_queries=50000,
        max_inactive_connection_lifetime=300.0,
        connect=None,
        setup=None,
        init=_init_connection if counter is None else _counting_init(counter),
        reset=_reset_connection,
        loop=None,
        command_timeout=statement_timeout_s,
        timeout=connect_timeout_s,
        server_settings={"statement_timeout": str(server_statement_timeout_ms(statement_timeout_s))},
    )
    try:
        await asyncio.wait_for(pool, timeout=connect_timeout_s + acquire_timeout_s)
    except (ValueError, OverflowError) as err:  # asyncpg reading the URL, before any connection
        raise UnreadableLedgerUrl(err) from None  # not chained: a traceback would quote its words
    return pool


def _counting_init(counter: StatementCounter) -> Callable[[asyncpg.Connection], Awaitable[None]]:
    async def init(conn: asyncpg.Connection) -> None:
        await _init_connection(conn)
        counter.attach(conn)

    return init


async def _reset_connection(conn: asyncpg.Connection) -> None:
    """The pool's reset: no statement (module doc: no session state is left on a pooled
    connection). asyncpg itself rolls back a transaction left open before calling this;
    the check keeps that true should it stop doing so."""
    if conn.is_in_transaction():
        await conn.execute("ROLLBACK")


#: The idle bound of the per-tick leader locks (the reconciler's, the schedule watcher's),
#: milliseconds: a leader that sends its lock's session no statement for this long — a
#: hung process — loses the lock to the next process's tick (:func:`session_lock`'s
#: ``idle_timeout_ms``). A tick sends a statement every few milliseconds to seconds.
LEADER_IDLE_MS = 60_000

#: Restores what :func:`session_lock` lifted or bounded on a connection it returns to the pool.
_RESET_BOUNDS = "RESET statement_timeout; RESET idle_session_timeout; RESET idle_in_transaction_session_timeout"


@contextlib.asynccontextmanager
async def session_lock(
    pool: asyncpg.Pool,
    key: int,
    *,
    wait: bool = False,
    timeout_s: float | None = None,
    idle_timeout_ms: int | None = None,
) -> AsyncIterator[asyncpg.Connection | None]:
    """Hold the session advisory lock ``key`` on a pooled connection.

    Yields the connection holding the lock, or None when ``wait`` is false and another
    session holds it. On exit the lock is released; when the release cannot be confirmed
    (an error, a cancellation) the connection is terminated, so no pooled connection ever
    carries a lock (the pool does not reset session state: module doc).

    Args:
        timeout_s: the statement bound on this connection while it is held, seconds
            (waiting for the lock included): the server's ``statement_timeout`` is
            lifted and restored on exit. None → the pool's bound.
        idle_timeout_ms: while the lock is held, PostgreSQL ends the session once it sent
            no statement for this long, milliseconds (``idle_session_timeout`` and
            ``idle_in_transaction_session_timeout``, PostgreSQL 14+), which releases the
            lock. A holder that hangs (a SIGSTOPped or wedged process keeps its socket,
            so the server sees a live session) then loses the lock instead of holding it
            for ever; a holder that is only slow sees its next statement fail with
            ``InterfaceError`` (the connection is gone). None → no idle bound (the lock
            outlives an idle holder).

    Raises:
        OSError / asyncpg.PostgresError / TimeoutError: the ledger is unreachable.
    """
    async with pool.acquire() as conn:
        lifted = False
        try:
            if timeout_s is not None:
                await conn.execute("SET statement_timeout = 0")
                lifted = True
            if idle_timeout_ms is not None:
                bound = int(idle_timeout_ms)
                await conn.execute(
                    f"SET idle_session_timeout = {bound}; SET idle_in_transaction_session_timeout = {bound}"
                )
                lifted = True
            if wait:
                await conn.execute("SELECT pg_advisory_lock($1)", key, timeout=timeout_s)
            elif not await conn.fetchval("SELECT pg_try_advisory_lock($1)", key):
                if lifted:
                    await conn.execute(_RESET_BOUNDS)
                yield None
                return
        except BaseException:
            conn.terminate()  # a lock, or the lifted bound, may be left on it
            raise
        released = False
        try:
            yield conn
        finally:
            with contextlib.suppress(Exception):
                await conn.execute("SELECT pg_advisory_unlock($1)", key)
                if lifted:
                    await conn.execute(_RESET_BOUNDS)
                released = True
            if not released:
                conn.terminate()


def migration_files() -> list[tuple[int, str, str]]:
    """Every migration as ``(version, name, sql)``, ordered by version.

    Raises:
        RuntimeError: two files carry one version number (two branches numbered a migration
            alike): the second would be taken as applied and never run.
    """
    found = []
    root = resources.files("curaflow.ledger") / "migrations"
    for entry in root.iterdir():
        if entry.name.endswith(".sql"):
            version = int(entry.name.split("_", 1)[0])
            found.append((version, entry.name, entry.read_text(encoding="utf-8")))
    found.sort()
    for (version, first, _), (again, second, _) in itertools.pairwise(found):
        if version == again:
            raise RuntimeError(f"migrations {first} and {second} share version {version}: renumber the newer one")
    return found


async def migrate(pool: asyncpg.Pool) -> list[str]:
    """Apply pending migrations; safe when several processes call it at once.

    Returns:
        The names of the migrations this call applied (empty when up to date).
    """
    applied: list[str] = []
    wait = MIGRATION_TIMEOUT_S
    async with session_lock(pool, MIGRATION_LOCK_KEY, wait=True, timeout_s=wait) as conn:
        assert conn is not None
        await conn.execute(
            """CREATE TABLE IF NOT EXISTS schema_migrations (
                   version integer PRIMARY KEY,
                   name text NOT NULL,
                   applied_at bigint NOT NULL)""",
            timeout=wait,
        )
        done = {r["version"] for r in await conn.fetch("SELECT version FROM schema_migrations", timeout=wait)}
        for version, name, sql in migration_files():
            if version in done:
                continue
            async with conn.transaction():
                await conn.execute(sql, timeout=wait)
                await conn.execute(
                    "INSERT INTO schema_migrations (version, name, applied_at) VALUES ($1, $2, $3)",
                    version,
                    name,
                    now_ms(),
                    timeout=wait,
                )
            applied.append(name)
    return applied


def jsonable(value: Any) -> Any:
    """Dump a pydantic model (or pass a plain value through) for a jsonb parameter."""
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="json")
    return value
