"""``curaflow submit | status | cancel | events``: the HTTP job API from the command line.

The verbs use :class:`curaflow.client.CuraflowClient` against a running API:

* **where**: ``--api-url`` (or ``CURAFLOW_API_URL``); else the API of the ``curaflow dev``
  stack running on the configured state directory (``<state_dir>/stack.json``); else
  ``http://<api.host>:<api.port>`` from the configuration;
* **token**: ``CURAFLOW_API_TOKEN`` (or ``api.token``); else ``<state_dir>/api-token``
  (the token ``curaflow dev`` generates).

Output: human-readable by default; ``--json`` prints the protocol JSON on stdout (a Job,
or one Event per line for ``events``). Progress displays go to stderr. Exit status: 0
done (for ``submit --follow``: the job succeeded), 1 the followed job ended otherwise,
2 the API refused the request, the configuration is invalid, ``--api-url`` can name no
API (:func:`api_url_problem`) or ``submit`` has nothing to search for (neither ``--tags``
nor ``--target``), 3 the API could not be reached,
refused the token, or could not serve the request now (a 5xx answer such as ``503`` while
PostgreSQL is down behind it, or ``429``: :func:`exit_code_of_refusal`) — try again later.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import typer
from rich.console import Console
from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from curaflow.cli.common import ConfigOption, err_console, error, operator_table, out_console, settings_or_exit
from curaflow.client import (
    ApiUnreachable,
    CuraflowClient,
    ProtocolRefusal,
    UnauthorizedError,
    UnexpectedResponse,
    candidate_search_task,
)
from curaflow.config import Settings
from curaflow.devstack.stack import read_stack_info
from curaflow.observability.console import print_json
from curaflow.outbound.destinations import origin_of
from curaflow.protocol import models

ApiUrlOption = typer.Option(
    None,
    "--api-url",
    envvar="CURAFLOW_API_URL",
    help="API base URL (default: the running `curaflow dev` stack, else api.host/api.port).",
)
JsonOption = typer.Option(False, "--json", help="Print protocol JSON on stdout.")


def api_url_problem(url: str) -> str | None:
    """Why ``url`` (``--api-url`` / ``CURAFLOW_API_URL``) can name no API, or None.

    An API base URL is an ``http(s)`` URL with a host and a port (1…65535,
    :func:`curaflow.outbound.destinations.origin_of`), without whitespace (a space inside
    too: printable, it passed until 2026-12-07 and ``http://exa mple.org`` was tried), query or
    fragment — an empty one too: ``…:8080?`` then the path appended asked ``/`` (until
    2026-12-07) — (each request's path is appended to it), without user information (httpx
    sends a URL's user and password as HTTP Basic in place of the bearer token: every
    request refused 401). The words never repeat the URL,
    which may carry a credential. Until 2026-12-07 such a URL was tried and failed "cannot
    reach" with exit status 3, "try again later" (``localhost:8080``, no scheme, included).
    """
    if any(ch.isspace() or not ch.isprintable() for ch in url):  # a space inside too
        return "holds whitespace or an unprintable character"
    try:
        parsed = httpx.URL(url)
        origin_of(url)
    except (httpx.InvalidURL, ValueError):
        parsed = None
    if parsed is None or parsed.scheme not in ("http", "https"):
        return "not an http(s) URL with a host and a port (1…65535), such as http://127.0.0.1:8080"
    if parsed.userinfo:
        return (
            "holds a user name or a password: the API reads its token from CURAFLOW_API_TOKEN, and a URL's "
            "credentials would be sent in its place (HTTP Basic)"
        )
    if "?" in url or "#" in url:  # an empty one too: httpx reads neither as present
        return "holds a query or a fragment: give the API's base URL (the paths /jobs … are appended to it)"
    return None


def api_url_for(settings: Settings, explicit: str | None) -> str:
    """The API to talk to (see the module doc).

    Raises:
        typer.Exit: (2) ``explicit`` can name no API (:func:`api_url_problem`).
    """
    if explicit:
        problem = api_url_problem(explicit)
        if problem is not None:
            error(f"--api-url / CURAFLOW_API_URL: {problem}")
            raise typer.Exit(2)
        return explicit.rstrip("/")
    info = read_stack_info(settings.state_dir)
    if info is not None and info.api_url:
        return info.api_url
    host = "127.0.0.1" if settings.api.host in ("0.0.0.0", "::") else settings.api.host
    return f"http://{host}:{settings.api.port}"


def token_for(settings: Settings) -> str | None:
    """The bearer token: ``CURAFLOW_API_TOKEN`` / ``api.token``, else ``<state_dir>/api-token``."""
    if settings.api.token and settings.api.token.get_secret_value().strip():
        return settings.api.token.get_secret_value().strip()
    path = settings.state_dir / "api-token"
    try:
        return path.read_text().strip() or None
    except OSError:
        return None


def refused_token_hint(settings: Settings) -> str:
    """What to check when the API refused the token sent (401): ``CURAFLOW_API_TOKEN``; and,
    when ``api.token`` is configured and ``<state_dir>/api-token`` holds another token, that
    the setting (named by its origin: the variable, the secret file, the TOML) overrides the
    file — the usual cause after changing directory, a variable exported for another
    ``curaflow dev`` (2026-12-07, a newcomer's finding). No token is ever printed."""
    from curaflow.config.loading import origin_of

    path = settings.state_dir / "api-token"
    try:
        in_the_file = path.read_text().strip()
    except OSError:
        in_the_file = ""
    configured = settings.api.token.get_secret_value().strip() if settings.api.token else ""
    if not configured or not in_the_file or configured == in_the_file:
        return "check CURAFLOW_API_TOKEN"
    origin = origin_of(("api", "token"), settings._toml_path)
    return (
        f"api.token ({origin}) overrides {path}, which holds another token — the usual cause after "
        "changing directory: unset it to use the file's"
    )


def _run(config: Path | None, api_url: str | None, action: Callable[[CuraflowClient], Awaitable[int]]) -> None:
    """Run ``action`` with a client; map client errors to messages and exit codes."""
    settings = settings_or_exit(config)
    url = api_url_for(settings, api_url)

    async def main() -> int:
        async with CuraflowClient(url, token_for(settings)) as api:
            return await action(api)

    try:
        code = asyncio.run(main())
    except ProtocolRefusal as err:
        detail = f" {json.dumps(err.detail, ensure_ascii=False)}" if err.detail else ""
        code = exit_code_of_refusal(err)
        said = "refused" if code == 2 else "could not serve it now"
        error(f"{said} ({err.http_status}): {err.code}: {err.error.message or ''}{detail}")
    except UnauthorizedError as err:
        hint = "the API has no token configured" if err.endpoint_disabled else refused_token_hint(settings)
        error(f"{err.http_status} {err.text} ({hint})")
        code = 3
    except (ApiUnreachable, UnexpectedResponse) as err:
        where = "" if url in str(err) else f" at {url}"
        error(
            f"{err} (is the API running{where}? Start `curaflow dev` in this directory, or point --api-url / "
            "CURAFLOW_API_URL at a running API)"
        )
        code = 3
    except KeyboardInterrupt:
        code = 130
    raise typer.Exit(code)


def exit_code_of_refusal(err: ProtocolRefusal) -> int:
    """The exit status of a protocol ``Error`` answer: 3 when the API could not serve the
    request now — a 5xx (``503`` ``ledger_unavailable``, ``500``) or ``429`` (RFC 9110 §15.6,
    RFC 6585 §4: the same request may succeed later) —, else 2 (the request itself was refused:
    sending it again does not help). A script reads 3 as "try again", as for an API it cannot
    reach.
    """
    status = err.http_status or 0
    return 3 if status >= 500 or status == 429 else 2


def _time(ms: int | None) -> str:
    if ms is None:
        return "-"
    return datetime.fromtimestamp(ms / 1000, UTC).astimezone().strftime("%H:%M:%S.%f")[:-3]


def describe_event(event: models.Event) -> str:
    """One human-readable line for an event."""
    payload = event.payload
    extra = ""
    if payload is not None:
        progress = (payload.model_extra or {}).get("progress")
        if isinstance(progress, dict) and progress.get("stage"):
            extra = f"stage={progress['stage']}"
        if payload.error is not None:
            extra = f"{payload.error.code}: {payload.error.message or ''}"
        elif payload.result is not None and payload.result.candidates:
            extra = "work " + ", ".join(c.work_id for c in payload.result.candidates)
    return f"{_time(event.at)}  {event.type:<14} {extra}".rstrip()


def job_table(job: models.Job) -> Table:
    """A two-column table of a job's main fields; every value is text, never markup (a job id
    or key ``k[b]`` is printed as it is)."""
    table = operator_table("", "", show_header=False, box=None, pad_edge=False)
    table.columns[0].style = "bold"
    stage = job.progress.stage if job.progress else "-"
    rows: list[tuple[str, str]] = [
        ("job", job.job_id),
        ("status", f"{job.status} ({stage})"),
        ("idempotency key", job.idempotency_key or "-"),
        ("created", _time(job.created_at)),
        ("started", _time(job.started_at)),
        ("updated", _time(job.updated_at)),
        ("deadline", _time(job.deadline_at)),
        ("heartbeat", f"{_time(job.heartbeat_at)} (lease {'active' if job.lease_active else 'none'})"),
        ("attempt", str(job.attempt)),
    ]
    if job.correlation_id:
        rows.insert(3, ("correlation id", job.correlation_id))
    if job.result is not None:
        for candidate in job.result.candidates:
            rows.append(("delivered", f"{candidate.work_id} {candidate.url or ''}".rstrip()))
        rows.append(("scanned", str(job.result.scanned)))
    if job.error is not None:
        rows.append(("error", f"{job.error.code}: {job.error.message or ''}"))
    for name, value in rows:
        table.add_row(name, Text(value))
    return table


#: How ``--json`` writes a job's body and an event: as the API sends them (pydantic's
#: ``model_dump_json``: no spaces, letters beyond ASCII as they are).
BODY_JSON: dict[str, Any] = {"separators": (",", ":"), "ensure_ascii": False}


def print_job(job: models.Job, as_json: bool) -> None:
    """Print a job: its protocol JSON (``--json``) or a table."""
    if as_json:
        print_json(
            job.model_dump(mode="json", exclude_unset=True), flush=True, **BODY_JSON
        )  # the body as the API sent it
    else:
        out_console.print(job_table(job))


def follow_progress(console: Console) -> Progress:
    """The live line of a followed job on ``console``: the job's id, its status and stage
    (``task.description``: the stage is the worker's word), the time elapsed — text, never
    markup (a column's markup is its own, not the console's)."""
    return Progress(
        SpinnerColumn(),
        TextColumn("{task.fields[job]}", style="bold", markup=False),
        TextColumn("{task.description}", markup=False),
        TimeElapsedColumn(),
        console=console,
        transient=True,
    )


async def follow_with_progress(api: CuraflowClient, job: models.Job, *, ack: bool = False) -> models.Job:
    """Stream the job's events to stderr under a live progress line; returns the final job."""
    progress = follow_progress(err_console)
    stage = job.progress.stage if job.progress else job.status
    final: models.Job | None = None
    with progress:
        task = progress.add_task(f"{job.status} · {stage}", job=job.job_id)
        async for event in api.follow(job.job_id, ack=ack):
            progress.console.print(describe_event(event), markup=False, highlight=False)
            payload = event.payload
            progress_info = (payload.model_extra or {}).get("progress") if payload else None
            if isinstance(progress_info, dict) and progress_info.get("stage"):
                progress.update(task, description=f"running · {progress_info['stage']}")
            if event.type == "job.started":
                progress.update(task, description="running · started")
            if payload is not None and payload.job is not None:
                final = payload.job
    return final or await api.get_job(job.job_id)


def submit(
    tags: list[str] = typer.Option(
        [], "--tags", "-t", metavar="TAG", help="Tag to search for (repeat for several; AND)."
    ),
    target: str | None = typer.Option(None, "--target", metavar="ID", help="Configured target id (params.target_id)."),
    key: str | None = typer.Option(
        None, "--idempotency-key", "--key", metavar="KEY", help="Idempotency key (default: a new one)."
    ),
    correlation_id: str | None = typer.Option(
        None, "--correlation-id", metavar="ID", help="Opaque id echoed in the job and events."
    ),
    callback_url: str | None = typer.Option(
        None, "--callback-url", metavar="URL", help="URL receiving every event (allow-listed)."
    ),
    deadline_ms: int | None = typer.Option(
        None, "--deadline-ms", min=1000, metavar="MS", help="Deadline of the whole job (ms)."
    ),
    follow: bool = typer.Option(False, "--follow", "-f", help="Stream the events until the job ends."),
    as_json: bool = JsonOption,
    api_url: str | None = ApiUrlOption,
    config: Path | None = ConfigOption,
) -> None:
    """Submit a candidate_search task to the API (202 accepted, 200 replayed).

    Exits 2 before sending anything when neither ``--tags`` nor ``--target`` is given:
    the Task needs a query unless ``target_id`` names a configured target (the API answers
    ``params.query is required``).
    """
    # The docstring is the command's --help (no cross-reference roles there,
    # tests/unit/test_cli_help.py); the rule is CandidateSearchParams's
    # (curaflow.protocol.models.tasks). The options' metavars are short (TAG, KEY, MS):
    # typer's types (<list[str]>, <int range> [x>=1000]) left the names too little room
    # at 80 columns and rich cut them ("--idempotency-key,--k…").
    if not tags and target is None:
        error(
            "nothing to search for: give --tags TAG (repeat for several; AND) or --target ID "
            "(a configured target, run with its own query)"
        )
        raise typer.Exit(2)

    async def action(api: CuraflowClient) -> int:
        task = candidate_search_task(
            key or f"cli-{uuid.uuid4()}",
            tags=tags or None,
            target_id=target,
            correlation_id=correlation_id,
            callback_url=callback_url,
            deadline_ms=deadline_ms,
        )
        submission = await api.submit(task)
        job = submission.job
        word = "replayed" if submission.replayed else "accepted"
        err_console.print(Text.assemble(f"{word}: job ", (job.job_id, "bold"), f" ({job.status})"), soft_wrap=True)
        if not follow:
            print_job(job, as_json)
            return 0
        job = await follow_with_progress(api, job)
        print_job(job, as_json)
        return 0 if job.status == "succeeded" else 1

    _run(config, api_url, action)


def _job_id_given(value: str) -> str:
    """A job id as given, refused when blank: no job has one, and ``/jobs/`` is the job
    list (until 2026-12-06 ``curaflow status ''`` asked for it)."""
    if not value.strip():
        raise typer.BadParameter("a job id is never empty")
    return value


#: The job id argument of ``status``, ``cancel`` and ``events`` (exit 2 when blank).
JobIdArgument = typer.Argument(..., help="The job id.", callback=_job_id_given)


def status(
    job_id: str = JobIdArgument,
    as_json: bool = JsonOption,
    api_url: str | None = ApiUrlOption,
    config: Path | None = ConfigOption,
) -> None:
    """Show a job as the API reports it."""

    async def action(api: CuraflowClient) -> int:
        print_job(await api.get_job(job_id), as_json)
        return 0

    _run(config, api_url, action)


def what_the_cancel_did(job: models.Job) -> str | None:
    """One line on what a cancel's answer means, or None when its status says it (``cancelled``).

    The answer is the job after the cancel (docs/http-api.md, "A cancel's answer", owned by
    ``curaflow.domain.projection.job_status``): ``succeeded`` — the cancel stopped nothing
    (the job had ended, or every cell had delivered); ``failed`` / ``expired`` — a job that
    had ended, or whose system failure outranks the cancel, keeps its status; not terminal —
    the cancel is recorded and the job is stopping (``api.cancel_wait_ms`` passed first).
    Until 2026-12-07 the table alone was printed: a newcomer's cancel after ``curaflow
    submit --follow`` showed ``succeeded``, exit 0, and nothing said the cancel did nothing.
    """
    status = job.status
    if status == "cancelled":
        return None
    if status == "succeeded":
        return f"job {job.job_id} ended succeeded: the cancel stopped nothing"
    if status in ("failed", "expired"):
        return (
            f"job {job.job_id} ended {status}, not cancelled: a job that had ended, or whose failure "
            "outranks the cancel, keeps its status"
        )
    return f"cancel recorded: job {job.job_id} is stopping (`curaflow status {job.job_id}` shows how it ends)"


def cancel(
    job_id: str = JobIdArgument,
    as_json: bool = JsonOption,
    api_url: str | None = ApiUrlOption,
    config: Path | None = ConfigOption,
) -> None:
    """Cancel a job; prints the job afterwards (a terminal job is unchanged)."""

    async def action(api: CuraflowClient) -> int:
        job = await api.cancel(job_id)
        print_job(job, as_json)
        said = what_the_cancel_did(job)
        if said:
            err_console.print(said, markup=False, highlight=False, soft_wrap=True)
        return 0

    _run(config, api_url, action)


def events(
    job_id: str = JobIdArgument,
    follow: bool = typer.Option(False, "--follow", "-f", help="Long-poll until the terminal event."),
    ack: bool = typer.Option(False, "--ack", help="Acknowledge the events shown (moves the durable cursor)."),
    unacked: bool = typer.Option(False, "--unacked", help="Start after the durable ack cursor."),
    after: str | None = typer.Option(None, "--after", help="Start after this event id."),
    as_json: bool = typer.Option(False, "--json", help="One Event JSON per line on stdout."),
    api_url: str | None = ApiUrlOption,
    config: Path | None = ConfigOption,
) -> None:
    """Print a job's events (--follow waits for new ones until the job ends)."""

    def show(event: models.Event) -> None:
        if as_json:
            print_json(event.model_dump(mode="json", exclude_unset=True), flush=True, **BODY_JSON)
        else:
            out_console.print(describe_event(event), markup=False, highlight=False)

    async def action(api: CuraflowClient) -> int:
        if follow:
            async for event in api.follow(job_id, after=after, unacked=unacked, ack=ack):
                show(event)
            return 0
        cursor, from_ack = after, unacked
        while True:
            page = await api.events(job_id, after=cursor, unacked=from_ack)
            from_ack = False
            for event in page.events:
                show(event)
            if page.events:
                cursor = page.events[-1].event_id
                if ack:
                    result = await api.ack(job_id, cursor)
                    err_console.print(f"acked through {cursor}: {result.acked} acked, {result.unacked} unacked")
            if not page.next_after:  # absent or "": the last page
                return 0

    _run(config, api_url, action)
