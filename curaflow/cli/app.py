"""The ``curaflow`` command (typer): one verb per module under ``curaflow/cli``; its entry
point is :func:`curaflow.cli.main.main`."""

from __future__ import annotations

import typer

from curaflow.cli.bench import bench
from curaflow.cli.chaos import chaos
from curaflow.cli.jobs import cancel, events, status, submit
from curaflow.cli.pixiv import app as pixiv_app
from curaflow.cli.prune import prune
from curaflow.cli.remembered import accounts_app, frontiers_app, refusals_app, routes_app, unavailable_app
from curaflow.cli.run import run
from curaflow.cli.schedules import app as schedules_app
from curaflow.cli.stack import api, dev, temporal_setup, worker
from curaflow.cli.upgrades import upgrade_check

app = typer.Typer(
    name="curaflow",
    help="Durable candidate-search jobs on Temporal + PostgreSQL.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode="markdown",  # docstrings wrap; `code` renders as code
)
app.command()(run)
app.command()(dev)
app.command()(worker)
app.command()(api)
app.command()(submit)
app.command()(status)
app.command()(cancel)
app.command()(events)
app.command()(bench)
app.command()(chaos)
app.command()(prune)
app.command("temporal-setup")(temporal_setup)
app.command("upgrade-check")(upgrade_check)
app.add_typer(schedules_app, name="schedules")
app.add_typer(refusals_app, name="refusals")
app.add_typer(unavailable_app, name="unavailable")
app.add_typer(accounts_app, name="accounts")
app.add_typer(routes_app, name="routes")
app.add_typer(pixiv_app, name="pixiv")
app.add_typer(frontiers_app, name="frontiers")
