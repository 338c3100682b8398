"""Shared pieces of the CLI: settings loading with readable errors, consoles, services."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

import asyncpg
import typer
from rich.console import Console
from temporalio.api.workflowservice.v1 import DescribeNamespaceRequest
from temporalio.client import Client
from temporalio.service import RPCError

from curaflow.config import ConfigError, Settings, load_settings, warn_budget_fallbacks
from curaflow.devstack.stack import EmbeddedStack, read_stack_info, with_services
from curaflow.ledger.db import create_pool, migrate
from curaflow.observability.logs import get_logger
from curaflow.observability.supervision import EXIT_CANNOT_START
from curaflow.temporal.connection import TemporalConnectError, connect_configured, describe_service, temporal_refusal

err_console = Console(stderr=True)
out_console = Console(soft_wrap=True)  # long ids and paths stay whole when piped


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
    """
    warn_budget_fallbacks(settings, get_logger("curaflow.cli"))
    stack: EmbeddedStack | None = None
    if settings.embedded:
        info = read_stack_info(settings.state_dir)
        if info is not None:
            settings = with_services(settings, info.temporal_address, info.database_url)
        else:
            stack = EmbeddedStack(settings, workers=1)
            try:
                with err_console.status(status):
                    await stack.__aenter__()
            except (RuntimeError, FileNotFoundError) as err:  # e.g. the [embedded] extra is not installed
                error(f"the embedded stack did not start: {err}")
                raise typer.Exit(2) from None
            settings = stack.settings
    elif not settings.temporal.address or not settings.database.url:
        err_console.print("[red]set both TEMPORAL_ADDRESS and DATABASE_URL, or neither (embedded stack)[/red]")
        raise typer.Exit(2)
    pool = None
    try:
        assert settings.database.url and settings.temporal.address
        pool = await create_pool(settings.database.url, min_size=1, max_size=4, **settings.database.pool_bounds())
        await migrate(pool)
        with temporal_errors(temporal_where(settings)):
            client = await connect_configured(settings.temporal)
            await check_namespace(client)
        yield Services(settings=settings, pool=pool, client=client, stack=stack)
    finally:
        if pool is not None:
            await pool.close()
        if stack is not None:
            with err_console.status("stopping the embedded stack"):
                await stack.__aexit__(None, None, None)
