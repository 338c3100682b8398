"""Shared pieces of the CLI: settings loading with readable errors, consoles, services."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

import asyncpg
import typer
from rich.table import Table
from temporalio.api.workflowservice.v1 import DescribeNamespaceRequest
from temporalio.client import Client
from temporalio.service import RPCError

from curaflow.config import ConfigError, Settings, load_settings, warn_budget_fallbacks
from curaflow.devstack.stack import EmbeddedStack, StackBusy, read_stack_info, with_services
from curaflow.domain.text import cut_mark
from curaflow.ledger.db import OPEN_ERRORS, UnreadableLedgerUrl, create_pool, is_unavailable, migrate, open_failure
from curaflow.observability.console import text_console
from curaflow.observability.logs import get_logger
from curaflow.observability.supervision import EXIT_CANNOT_START
from curaflow.observability.supervision import EXIT_CONFIGURATION as SUPERVISION_EXIT_CONFIGURATION
from curaflow.temporal.connection import TemporalConnectError, connect_configured, describe_service, temporal_refusal

err_console = text_console(stderr=True)
out_console = text_console(soft_wrap=True)  # long ids and paths stay whole when piped


def operator_table(*headers: str, **options: Any) -> Table:
    """A table whose every column folds a long word onto its next line — the one way the
    operator tables (``refusals``, ``unavailable``, ``frontiers``, ``accounts``, ``routes``
    lists, ``schedules misses``, a job's table and ``run``'s progress) are made.

    rich's columns cut a word wider than the column with an ellipsis: at 80 columns (a
    terminal, and rich's width when the output is piped) ``refusals list`` showed a
    receiver's answer as ``HTTP 400: https://exam…`` (until 2026-12-07). A cell is whole
    now, on as many lines as it takes; what a table shortens on purpose says so
    (:func:`clipped`). ``options``: :class:`rich.table.Table`'s."""
    table = Table(**options)
    for header in headers:
        table.add_column(header, overflow="fold")
    return table


def clipped(text: str, limit: int) -> str:
    """``text`` whole when it has at most ``limit`` characters; else its first ``limit``
    characters, an ellipsis and how many characters were left out (``HTTP 400: …… (+1920
    characters)``: :func:`~curaflow.domain.text.cut_mark`, the mark the ledger stores too):
    a table cell that shortens a value says that it did and by how much
    (until 2026-12-07 ``refusals list`` cut the answer at 80 characters and ``unavailable
    list`` the why at 60 without a mark). ``--json`` prints every value whole.

    Args:
        text: the value (a receiver's answer, a source's why, a frontier's JSON).
        limit: the most characters shown, > 0.
    """
    if len(text) <= limit:
        return text
    return text[:limit] + cut_mark(len(text) - limit)


ConfigOption = typer.Option(None, "--config", "-c", help="TOML configuration file (default: $CURAFLOW_CONFIG).")


def settings_or_exit(config: Path | None) -> Settings:
    """Load settings; print the problems and exit 2 when the configuration is invalid."""
    try:
        return load_settings(config)
    except ConfigError as err:
        error(str(err))
        raise typer.Exit(EXIT_CANNOT_START) from None


def error(message: str) -> None:
    """Print ``message`` on stderr in red as one line (never wrapped), **without markup**:
    a message holds text of others — an exception's, a third party's answer, a path —
    whose square brackets rich would take for style tags and drop (``pip install
    'curaflow[embedded]'`` printed as ``'curaflow'``), or obey."""
    err_console.print(message, style="red", markup=False, highlight=False, soft_wrap=True)


def warning(message: str) -> None:
    """Print ``message`` on stderr in yellow as one line (never wrapped), without markup —
    :func:`error`'s rule for what is not an error (``curaflow run``'s "gave up waiting",
    ``temporal-setup``'s warnings)."""
    err_console.print(message, style="yellow", markup=False, highlight=False, soft_wrap=True)


def fail(message: str, code: int = 1) -> NoReturn:
    """Print ``message`` on stderr as one line (never wrapped, no markup: :func:`error`)
    and exit ``code``."""
    error(message)
    raise typer.Exit(code)


@contextlib.contextmanager
def temporal_errors(where: str) -> Iterator[None]:
    """Turn a Temporal that cannot serve the command into one line on stderr and exit 1.

    Unreachable or refusing the connection (TLS, API key: :class:`TemporalConnectError`,
    which names the address and the TLS options) and a request it refuses (a namespace
    that does not exist, permission denied: ``RPCError``) — never a traceback. Used around
    the body of every command that connects to Temporal.

    Args:
        where: ``HOST:PORT (namespace N)``, for the message of a refused request.
    """
    try:
        yield
    except TemporalConnectError as err:
        fail(str(err).replace("\n", " "))
    except RPCError as err:
        fail(temporal_refusal(err, where))


async def check_namespace(client: Client) -> None:
    """Ask Temporal for the client's namespace, so a namespace that does not exist is said
    at once (one ``DescribeNamespace``).

    Raises:
        RPCError: ``NOT_FOUND`` (or any refusal) from Temporal.
    """
    await client.workflow_service.describe_namespace(DescribeNamespaceRequest(namespace=client.namespace))


def temporal_where(settings: Settings) -> str:
    """``HOST:PORT (namespace N)`` of the settings' Temporal service."""
    return describe_service(settings.temporal.address, settings.temporal.namespace)


#: Exit status of a command that reads or writes only the ledger (``refusals``,
#: ``unavailable``, ``frontiers``, ``accounts``, ``routes``, ``prune``, ``schedules
#: misses``) when the ledger could not be reached: not 1, which several of them give
#: for "nothing to clear / resume", nor 2 (configuration or usage errors). The same
#: number as the HTTP client commands' "API unreachable".
EXIT_LEDGER_UNREACHABLE = 3

#: Exit status of a command whose configuration cannot work (a setting refused, a
#: ``DATABASE_URL`` asyncpg cannot use): the same 2 as a usage error, and as a service
#: whose loop could not recover from a refusal of its configuration
#: (:data:`curaflow.observability.supervision.EXIT_CONFIGURATION`, its owner).
EXIT_CONFIGURATION = SUPERVISION_EXIT_CONFIGURATION

#: Where a command's ledger is, as :func:`open_ledger`'s message names it.
LEDGER_CONFIGURED = "PostgreSQL at DATABASE_URL / database.url"


@dataclass(frozen=True)
class TemporalService:
    """The Temporal service a command talks to (:func:`temporal_service_or_exit`).

    Attributes:
        address: ``host:port`` of its frontend.
        configured: True for the settings' service (``temporal.address``: its TLS, API key
            and namespace apply), False for the running ``curaflow dev`` (plain, the
            settings' namespace).
        database_url: the ledger of the running ``curaflow dev`` when the service is its
            (None for a configured service: the settings' ``database.url`` applies).
    """

    address: str
    configured: bool
    database_url: str | None = None


def temporal_service_or_exit(settings: Settings) -> TemporalService:
    """The configured Temporal service, or the running ``curaflow dev``'s of the settings'
    state directory — as the README says, the commands run in a directory find the stack
    wherever it listens (until 2026-12-07 ``upgrade-check`` asked for ``TEMPORAL_ADDRESS``
    beside a running ``curaflow dev``; ``schedules`` already found it).

    Raises:
        typer.Exit: 2 (a usage error), neither is there; one line says what to set.
    """
    if settings.temporal.address:
        return TemporalService(settings.temporal.address, configured=True)
    info = read_stack_info(settings.state_dir)
    if info is None:
        error(
            "no Temporal service: set TEMPORAL_ADDRESS (or temporal.address), "
            f"or run `curaflow dev` for the state directory {settings.state_dir}"
        )
        raise typer.Exit(2)
    return TemporalService(info.temporal_address, configured=False, database_url=info.database_url)


def running_dev_ledger(settings: Settings) -> str:
    """How :func:`open_ledger` names the PostgreSQL of the ``curaflow dev`` running on the
    settings' state directory."""
    return f"the PostgreSQL of the curaflow dev running on {settings.state_dir}"


def ledger_went_away(err: BaseException) -> bool:
    """Whether ``err``, escaping a command's ledger calls, is the ledger going away under
    them (:func:`curaflow.ledger.db.is_unavailable`) rather than a bug or a refused
    statement. A plain ``OSError`` counts only as a socket's (``ConnectionError``) or a
    bounded wait's (``TimeoutError``): a command may touch files too (``prune`` deletes
    artifact folders), and a refused file is no ledger outage."""
    if isinstance(err, OSError) and not isinstance(err, ConnectionError | TimeoutError):
        return False
    return is_unavailable(err)


def ledger_unreachable(
    err: BaseException, settings: Settings, where: str, code: int, what: str = "could not be reached"
) -> NoReturn:
    """Say in one line that the ledger at ``where`` ``what`` (with the error:
    :func:`curaflow.ledger.db.open_failure`) and exit ``code``.

    A URL asyncpg refused before connecting (:class:`~curaflow.ledger.db.UnreadableLedgerUrl`:
    a port that is no number or out of range, an ``sslmode`` it does not know) is no outage —
    no later try can use it: the line says the URL cannot be used and the command exits 2,
    the status of every configuration error (until 2026-12-07 it exited ``code``, "could not
    be reached", which a script reads as "try again later")."""
    if isinstance(err, UnreadableLedgerUrl):
        fail(f"the ledger's URL ({where}) cannot be used: {err}", EXIT_CONFIGURATION)
    fail(f"the ledger ({where}) {what}: {open_failure(err, settings.database.connect_timeout_ms)}", code)


@contextlib.asynccontextmanager
async def open_ledger(
    settings: Settings, url: str, *, where: str, code: int, max_size: int = 2
) -> AsyncIterator[asyncpg.Pool]:
    """A pool on the ledger at ``url``, migrated, for one command; closed on exit.

    The one way a command opens the ledger. Its waits are the configured ones
    (``database.connect_timeout_ms`` …: :meth:`~curaflow.config.database.DatabaseSettings.pool_bounds`).
    A ledger that refuses, never answers, or goes away under the command's calls
    (:func:`ledger_went_away`) ends the command with one line naming ``where`` and the
    error, and exit status ``code`` — never a traceback.

    Args:
        where: how the message names the ledger (:data:`LEDGER_CONFIGURED`, the running
            ``curaflow dev``'s PostgreSQL …).
        code: the command's exit status for an unreachable ledger
            (:data:`EXIT_LEDGER_UNREACHABLE`, or 1 for ``curaflow run``, as for Temporal).

    Raises:
        typer.Exit: ``code``, the ledger could not be reached.
    """
    try:
        pool = await create_pool(url, min_size=1, max_size=max_size, **settings.database.pool_bounds())
    except OPEN_ERRORS as err:
        ledger_unreachable(err, settings, where, code)
    try:
        await migrate(pool)
        yield pool
    except Exception as err:
        if isinstance(err, OPEN_ERRORS) and ledger_went_away(err):
            # a statement timeout, a restart, a dropped connection under the command
            ledger_unreachable(err, settings, where, code, "failed under the command")
        raise
    finally:
        await pool.close()


@dataclass
class Services:
    """Connections of a CLI command: the effective settings, ledger pool, Temporal client."""

    settings: Settings
    pool: asyncpg.Pool
    client: Client
    stack: EmbeddedStack | None


@contextlib.asynccontextmanager
async def services(settings: Settings, *, status: str = "starting the embedded stack") -> AsyncIterator[Services]:
    """Connect to configured services, to a running ``curaflow dev`` stack, or start one.

    With neither ``TEMPORAL_ADDRESS`` nor ``DATABASE_URL`` configured, a live
    ``curaflow dev`` of the same state directory is used if there is one; otherwise an
    embedded stack (dev server, PostgreSQL, one worker) runs for the command's duration
    and is torn down afterwards.

    Raises:
        typer.Exit: 2 (``EXIT_CANNOT_START``) when the embedded stack cannot start — among
            others when another command holds this state directory's stack
            (:class:`~curaflow.devstack.stack.StackBusy`: the message names it and its pid).
    """
    warn_budget_fallbacks(settings, get_logger("curaflow.cli"))
    stack: EmbeddedStack | None = None
    where = LEDGER_CONFIGURED
    if settings.embedded:
        info = read_stack_info(settings.state_dir)
        where = running_dev_ledger(settings) if info is not None else "the embedded PostgreSQL"
        if info is not None:
            settings = with_services(settings, info.temporal_address, info.database_url)
        else:
            stack = EmbeddedStack(settings, workers=1)
            try:
                with err_console.status(status):
                    await stack.__aenter__()
            except StackBusy as err:  # another `curaflow run` (or a `curaflow dev` still starting)
                error(
                    f"{err}. Run this command when it has ended — or keep `curaflow dev` running in "
                    "this directory: every command here then uses its stack"
                )
                raise typer.Exit(EXIT_CANNOT_START) from None
            except (RuntimeError, FileNotFoundError) as err:  # e.g. the [embedded] extra is not installed
                error(f"the embedded stack did not start: {err}")
                raise typer.Exit(2) from None
            settings = stack.settings
    elif not settings.temporal.address or not settings.database.url:
        error("set both TEMPORAL_ADDRESS and DATABASE_URL, or neither (embedded stack)")
        raise typer.Exit(2)
    try:
        assert settings.database.url and settings.temporal.address
        async with open_ledger(settings, settings.database.url, where=where, code=1, max_size=4) as pool:
            with temporal_errors(temporal_where(settings)):
                client = await connect_configured(settings.temporal)
                await check_namespace(client)
            yield Services(settings=settings, pool=pool, client=client, stack=stack)
    finally:
        if stack is not None:
            with err_console.status("stopping the embedded stack"):
                await stack.__aexit__(None, None, None)
