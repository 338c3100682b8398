"""Error messages of the command line keep the text they quote (rich markup off)."""

from __future__ import annotations

import contextlib
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from curaflow.cli import common
from curaflow.cli.app import app


@contextlib.contextmanager
def api_answering(status: int, body: bytes) -> Iterator[str]:
    """A stand-in for curaflow's API on a port of 127.0.0.1 answering every GET and POST with
    ``status`` and the JSON ``body`` (a POST's body read first); yields its base URL."""
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Answer(BaseHTTPRequestHandler):
        def _answer(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length", "0")))
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_GET = do_POST = _answer

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Answer)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_an_error_keeps_square_brackets_of_the_text_it_quotes(capsys: pytest.CaptureFixture[str]) -> None:
    common.error("not installed: pip install 'curaflow[embedded]' ([link=http://x]here[/link])")
    err = capsys.readouterr().err
    assert "pip install 'curaflow[embedded]'" in err
    assert "[link=http://x]here[/link]" in err  # a third party's text is printed, never obeyed


def test_curaflow_dev_that_cannot_start_names_the_extra_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`curaflow dev` without the embedded extra said ``pip install 'curaflow'``: rich took
    ``[embedded]`` of the exception's text for a style tag (a newcomer's finding)."""
    from curaflow.devstack import stack as devstack

    async def missing(self: object) -> object:
        raise RuntimeError(
            "the embedded PostgreSQL (pgserver) is not installed: pip install 'curaflow[embedded]'"
            " (or set DATABASE_URL and TEMPORAL_ADDRESS)"
        )

    monkeypatch.setattr(devstack.EmbeddedStack, "__aenter__", missing)
    monkeypatch.chdir(tmp_path)
    ports = ["--temporal-port", "0", "--ui-port", "0", "--api-port", "0", "--temporal-http-port", "0"]
    ports += ["--temporal-metrics-port", "0", "--worker-metrics-port", "0", "--replay-port", "0"]
    result = CliRunner().invoke(app, ["dev", *ports])
    assert result.exit_code == 2, result.output
    assert "pip install 'curaflow[embedded]'" in result.output


def test_curaflow_dev_names_the_missing_extra_before_a_port_in_use(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A services-only install (``pip install .``) with the replay's port taken was told
    "port 8300 (Pixiv replay) is in use: pick another with --replay-port", and only with the
    port free that the embedded extra is missing (a newcomer's finding, 2026-12-08)."""
    import socket

    monkeypatch.setitem(sys.modules, "pgserver", None)  # as on an install without the extra
    monkeypatch.chdir(tmp_path)
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = str(held.getsockname()[1])
        ports = ["--temporal-port", "0", "--ui-port", "0", "--api-port", "0", "--temporal-http-port", "0"]
        ports += ["--temporal-metrics-port", "0", "--worker-metrics-port", "0", "--replay-port", port]
        result = CliRunner().invoke(app, ["dev", *ports])
    assert result.exit_code == 2, result.output
    assert "pip install 'curaflow[embedded]'" in result.output
    assert "in use" not in result.output, result.output


@pytest.mark.parametrize("timeout", ["-1", "0", "0.5"])
def test_curaflow_run_refuses_a_timeout_under_a_second_before_starting_anything(
    timeout: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--timeout -1`` was accepted: the embedded stack started, the command gave up at
    once and stopped the stack, the job left for a later start (a newcomer's finding)."""
    from curaflow.cli import run as run_cli

    def started(*args: object) -> object:
        raise AssertionError("nothing may start")

    monkeypatch.setattr(run_cli, "run_job", started)
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, ["run", "--tags", "a", "--timeout", timeout])
    assert result.exit_code == 2, result.output
    assert "timeout" in result.output


def test_the_progress_shows_the_job_id_whole_on_its_own_line() -> None:
    """In an 80-column terminal the id wrapped in the table's title, cut in the middle."""
    import io

    from rich.console import Console

    from curaflow.cli.run import progress_table
    from curaflow.ledger.records import JobRecord

    job_id = "demo@manual-cli-223b962f-65e1-4c33-a110-2bbca04facd4"
    record = JobRecord.model_construct(job_id=job_id, cells=[])
    out = io.StringIO()
    Console(file=out, width=60).print(progress_table(record, {"status": "succeeded", "progress": {"stage": "done"}}))
    lines = out.getvalue().splitlines()
    assert f"job {job_id}" in "".join(lines[:2])
    assert any("succeeded (done)" in line for line in lines)


def test_curaflow_submit_with_nothing_to_search_names_the_options_before_sending(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``curaflow submit`` with neither ``--tags`` nor ``--target`` sent the Task and printed
    the API's ``params.query is required``, naming a JSON field, not the option to give (a
    newcomer's finding). The rule is the Task's (``curaflow.protocol.models.tasks``: a query
    unless ``target_id`` names a configured target): refused before anything is sent."""
    from curaflow import client as api_client

    async def sent(*args: object, **kwargs: object) -> object:
        raise AssertionError("nothing may be sent")

    monkeypatch.setattr(api_client.CuraflowClient, "submit", sent)
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, ["submit", "--api-url", "http://127.0.0.1:9"])
    assert result.exit_code == 2, result.output
    assert "--tags" in result.output and "--target" in result.output


def test_an_unreachable_api_says_how_to_start_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``curaflow status`` with no ``curaflow dev`` running said only ``is the API running?
    --api-url http://127.0.0.1:8080``: nothing said which command serves it (a newcomer's
    finding, after stopping ``curaflow dev`` as the README says)."""
    import socket

    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("CURAFLOW_API_URL", raising=False)
    result = CliRunner().invoke(app, ["status", "demo@manual-x", "--api-url", f"http://127.0.0.1:{port}"])
    assert result.exit_code == 3, result.output
    assert "curaflow dev" in result.output
    assert f"127.0.0.1:{port}" in result.output


def test_curaflow_run_with_an_unknown_target_names_the_configured_ones(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``curaflow run --target nope`` said ``unknown target 'nope'`` and nothing of the
    targets there are (a newcomer's finding): with no configuration the only one is the
    built-in ``demo``. Nothing starts."""
    from curaflow.cli import run as run_cli

    def started(*args: object, **kwargs: object) -> object:
        raise AssertionError("nothing may start")

    monkeypatch.setattr(run_cli, "services", started)
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("CURAFLOW_CONFIG", raising=False)
    result = CliRunner().invoke(app, ["run", "--target", "nope"])
    assert result.exit_code == 2, result.output
    assert "unknown_target" in result.output
    assert "configured targets: demo" in result.output


def test_curaflow_run_with_no_target_accepting_jobs_does_not_speak_of_several(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With no target accepting jobs, ``curaflow run`` said ``several targets accept jobs
    (); choose one with --target``."""
    config = tmp_path / "curaflow.toml"
    config.write_text(
        '[routes.out]\nkind = "directory"\npath = "out"\n\n'
        '[[targets]]\nid = "t"\nquery = { tags = ["a"] }\nroutes = ["out"]\naccept_jobs = false\n'
    )
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, ["run", "--config", str(config)])
    assert result.exit_code == 2, result.output
    assert "several" not in result.output
    assert "no configured target accepts jobs" in result.output


def test_a_second_curaflow_dev_names_the_running_one_and_what_to_do(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``curaflow dev`` while one already ran in the directory said only ``a curaflow dev
    stack already runs on …/.curaflow`` (exit 2): not which process, nor that every command
    there uses it, nor how to stop it (a newcomer's finding). Nothing starts."""
    import json
    import os

    from curaflow.devstack import stack as devstack

    async def started(self: object) -> object:
        raise AssertionError("nothing may start")

    monkeypatch.setattr(devstack.EmbeddedStack, "__aenter__", started)
    state = tmp_path / ".curaflow"
    state.mkdir()
    info = {"pid": os.getpid(), "temporal_address": "127.0.0.1:7233", "database_url": "postgresql://x"}
    (state / devstack.STACK_FILE).write_text(json.dumps(info))
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("CURAFLOW_CONFIG", raising=False)
    ports = ["--temporal-port", "0", "--ui-port", "0", "--api-port", "0", "--temporal-http-port", "0"]
    ports += ["--temporal-metrics-port", "0", "--worker-metrics-port", "0", "--replay-port", "0"]
    result = CliRunner().invoke(app, ["dev", *ports])
    assert result.exit_code == 2, result.output
    output = " ".join(result.output.split())  # the console wraps long lines
    assert f"pid {os.getpid()}" in output, output
    assert "curaflow run" in output and "Ctrl-C" in output, output


def test_the_progress_table_ends_its_line_when_stderr_is_no_terminal() -> None:
    """With stderr in a file or a pipe (a CI log, ``2>&1 | tee``), the next line was glued
    to the table's last one: ``└──┘gave up waiting after 15s``, ``└──┘job …: succeeded``.
    Rich's live display ends its output with a newline on a terminal only."""
    import io

    from rich.console import Console

    from curaflow.cli.run import live_progress, progress_table
    from curaflow.ledger.records import JobRecord

    record = JobRecord.model_construct(job_id="demo@manual-x", cells=[])
    for transient in (False, True):
        out = io.StringIO()
        console = Console(file=out, width=80, force_terminal=False, color_system=None)
        with live_progress(console, transient=transient) as live:
            live.update(progress_table(record, {"status": "running", "progress": {"stage": "searching"}}))
        console.print("next")
        text = out.getvalue()
        assert text.endswith("\nnext\n") or text == "next\n", repr(text)
        if not transient:
            assert "running (searching)" in text, text


@pytest.mark.parametrize(
    ("status", "code", "retryable", "exit_code"),
    [
        (503, "internal_error", True, 3),  # ledger_unavailable: PostgreSQL down behind the API
        (500, "internal_error", False, 3),  # the API's own failure: not the request's fault
        (429, "quota_exceeded", True, 3),  # try again later
        (404, "invalid_params", False, 2),  # the request itself: no retry helps
    ],
)
def test_an_api_that_cannot_serve_now_exits_3_not_the_refused_request_s_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, status: int, code: str, retryable: bool, exit_code: int
) -> None:
    """``curaflow status`` while PostgreSQL was down behind the API exited 2 — "the API refused
    the request", which a script reads as "do not send it again" — for a 503 ``ledger_unavailable``
    (``retryable: true``). An answer the API could not serve now (5xx, or ``retryable``) exits 3,
    as an API that cannot be reached does; a refusal of the request itself stays 2."""
    import json

    body = json.dumps(
        {"error": {"code": code, "message": "the ledger is unavailable", "retryable": retryable}}
    ).encode()

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("CURAFLOW_API_URL", raising=False)
    with api_answering(status, body) as url:
        result = CliRunner().invoke(app, ["status", "demo@manual-x", "--api-url", url])
    assert result.exit_code == exit_code, result.output
    assert code in result.output


def test_a_refusal_of_curaflow_run_is_one_line_whatever_the_width(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``curaflow run --target nope`` printed ``refused: invalid_params: unknown target
    'nope' (reason: unknown_target,`` and ``target_id: nope)`` on the next line: rich
    wrapped the refusal at 80 columns (a newcomer's finding). A refusal is one line, as
    every error of the command line is (:func:`curaflow.cli.common.error`)."""
    from curaflow.cli import run as run_cli

    def started(*args: object, **kwargs: object) -> object:
        raise AssertionError("nothing may start")

    monkeypatch.setattr(run_cli, "services", started)
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("CURAFLOW_CONFIG", raising=False)
    target = "a-target-nobody-configured-" + "x" * 60
    result = CliRunner().invoke(app, ["run", "--target", target], env={"COLUMNS": "80"})
    assert result.exit_code == 2, result.output
    refusal = next(line for line in result.output.splitlines() if line.startswith("refused:"))
    assert refusal.endswith(f"(reason: unknown_target, target_id: {target})"), result.output


@pytest.mark.parametrize("verb", ["login", "validate", "refresh"])
def test_an_unknown_pixiv_account_is_named_on_one_line(
    verb: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``curaflow pixiv … --account`` with an account the configuration lacks says so on
    one line, the configured accounts included, however long the name."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("CURAFLOW_CONFIG", raising=False)
    account = "an-account-nobody-configured-" + "y" * 60
    result = CliRunner().invoke(app, ["pixiv", verb, "--account", account], env={"COLUMNS": "80"})
    assert result.exit_code == 2, result.output
    assert f"unknown pixiv account {account!r} (configured: default)" in result.output.splitlines()


def test_no_temporal_service_is_said_on_one_line_with_the_state_directory_as_it_is(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A command that needs Temporal, with none configured and no ``curaflow dev`` here,
    names the state directory on the same line, its square brackets kept: the message was
    rich markup, so ``[x]`` in a path was taken for a style tag, and it wrapped."""
    state = tmp_path / ("a-long-directory-name-" + "z" * 50) / "[x]"
    state.mkdir(parents=True)
    monkeypatch.chdir(state)
    monkeypatch.delenv("CURAFLOW_CONFIG", raising=False)
    monkeypatch.delenv("TEMPORAL_ADDRESS", raising=False)
    monkeypatch.delenv("CURAFLOW_TEMPORAL__ADDRESS", raising=False)
    result = CliRunner().invoke(app, ["schedules", "list"], env={"COLUMNS": "80"})
    assert result.exit_code == 2, result.output
    line = next(line for line in result.output.splitlines() if line.startswith("no Temporal service"))
    assert line.endswith(f"run `curaflow dev` for the state directory {state / '.curaflow'}"), result.output


def test_curaflow_submit_names_a_job_id_with_square_brackets_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``accepted: job <id>`` was rich markup: a key ``k[b]`` (any text is a key) made the
    line ``accepted: job demo@manual-k`` — ``[b]`` taken for bold — naming a job that is
    not the one submitted."""
    import json

    job_id = "demo@manual-k[b]x"
    job = {
        "protocol_version": "1",
        "job_id": job_id,
        "job_type": "candidate_search",
        "status": "queued",
        "idempotency_key": "k[b]x",
        "created_at": 1796632734838,
        "updated_at": 1796632734838,
        "started_at": None,
        "heartbeat_at": None,
        "deadline_at": 1796634534838,
        "lease_active": False,
        "lease_expires_at": None,
        "attempt": 0,
        "progress": {"stage": "queued", "at": 1796632734838},
        "events_url": f"/jobs/{job_id}/events",
    }
    body = json.dumps({"job": job}).encode()

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("CURAFLOW_API_URL", raising=False)
    with api_answering(202, body) as url:
        result = CliRunner().invoke(
            app, ["submit", "-t", "x", "--idempotency-key", "k[b]x", "--api-url", url], env={"COLUMNS": "80"}
        )
    assert result.exit_code == 0, result.output
    lines = [line.rstrip() for line in result.output.splitlines()]
    assert f"accepted: job {job_id} (queued)" in lines, result.output
    assert f"job              {job_id}" in lines, result.output  # the job's table, too
    assert "idempotency key  k[b]x" in lines, result.output


def test_a_warning_is_one_line_and_keeps_square_brackets(capsys: pytest.CaptureFixture[str]) -> None:
    """``curaflow run``'s ``gave up waiting after 25s; the job continues on the next stack
    start (`curaflow run` or `curaflow dev` here)`` was wrapped at 80 columns (a newcomer's
    finding), and ``temporal-setup``'s warnings were markup: a warning is one line, its text
    as it is (:func:`curaflow.cli.common.warning`)."""
    text = "gave up waiting after 25s; the job continues on the next stack start " + "[x] " * 20
    common.warning(text)
    assert capsys.readouterr().err == text + "\n"


def test_curaflow_run_prints_the_outcome_as_it_is(capsys: pytest.CaptureFixture[str]) -> None:
    """``curaflow run``'s summary was rich markup: a key ``k[b]`` printed the job as
    ``demo@manual-k``, a directory route's folder ``…/[out]/1`` lost ``[out]``."""
    from types import SimpleNamespace
    from typing import cast

    from curaflow.cli.run import print_summary
    from curaflow.domain.models import JobRecord

    record = cast(JobRecord, SimpleNamespace(cells=[SimpleNamespace(target_id="demo", work_id="1", state="submitted")]))
    result = {
        "job": {"job_id": "demo@manual-k[b]x", "status": "succeeded"},
        "business_status": "success",
        "user_message": {"en": "The job completed [ok]."},
        "deliveries": [{"target_id": "demo", "route": "out", "status": "delivered", "location": "/srv/[out]/1"}],
    }
    print_summary(result, record)
    assert capsys.readouterr().out.splitlines() == [
        "job demo@manual-k[b]x: succeeded",
        "business status: success — The job completed [ok].",
        "target demo: work 1 submitted",
        "  out: delivered → /srv/[out]/1",
    ]


def _job(job_id: str, status: str, stage: str) -> dict[str, object]:
    """A protocol Job as the API answers it (``status``, ``progress.stage``)."""
    return {
        "protocol_version": "1",
        "job_id": job_id,
        "job_type": "candidate_search",
        "status": status,
        "idempotency_key": "k",
        "created_at": 1796632734838,
        "updated_at": 1796632735838,
        "started_at": 1796632734938,
        "heartbeat_at": None,
        "deadline_at": 1796634534838,
        "lease_active": False,
        "lease_expires_at": None,
        "attempt": 1,
        "progress": {"stage": stage, "at": 1796632735838},
        "events_url": f"/jobs/{job_id}/events",
    }


@pytest.mark.parametrize(
    ("status", "stage", "said"),
    [
        ("succeeded", "done", "job demo@manual-k ended succeeded: the cancel stopped nothing"),
        ("failed", "failed", "job demo@manual-k ended failed, not cancelled"),
        ("expired", "expired", "job demo@manual-k ended expired, not cancelled"),
        ("running", "cancelling", "cancel recorded: job demo@manual-k is stopping"),
    ],
)
def test_curaflow_cancel_says_what_the_cancel_did(
    status: str, stage: str, said: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``curaflow cancel`` of a job that had already ended printed the job's table, exit 0, and
    not a word: a newcomer who tried it after ``curaflow submit --follow`` (as the README says)
    saw ``succeeded`` and could not tell whether the cancel did anything. It says so on
    stderr, as it says of a job still stopping; the table and the exit status are as before."""
    import json

    body = json.dumps(_job("demo@manual-k", status, stage)).encode()
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("CURAFLOW_API_URL", raising=False)
    with api_answering(200, body) as url:
        result = CliRunner().invoke(app, ["cancel", "demo@manual-k", "--api-url", url], env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.output
    assert said in " ".join(result.output.split()), result.output
    assert "job              demo@manual-k" in result.output  # the table, as before


def test_curaflow_cancel_of_a_cancelled_job_adds_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import json

    body = json.dumps(_job("demo@manual-k", "cancelled", "cancelled")).encode()
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("CURAFLOW_API_URL", raising=False)
    with api_answering(200, body) as url:
        result = CliRunner().invoke(app, ["cancel", "demo@manual-k", "--api-url", url], env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.output
    assert "stopped nothing" not in result.output and "is stopping" not in result.output


def test_a_missing_secrets_directory_is_named_without_a_python_none(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``CURAFLOW_SECRETS_DIR=/nonexistent curaflow run`` said ``cannot read config None: …``
    (a newcomer's finding): Python's ``None`` of the file not given. What could not be read
    is named — the secrets directory, not a file —, exit 2, nothing started."""
    from curaflow.cli import run as run_cli

    def started(*args: object, **kwargs: object) -> object:
        raise AssertionError("nothing may start")

    monkeypatch.setattr(run_cli, "services", started)
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("CURAFLOW_CONFIG", raising=False)
    monkeypatch.setenv("CURAFLOW_SECRETS_DIR", str(tmp_path / "nonexistent"))
    result = CliRunner().invoke(app, ["run", "--tags", "a"])
    assert result.exit_code == 2, result.output
    assert "None" not in result.output
    assert f"CURAFLOW_SECRETS_DIR={tmp_path / 'nonexistent'}: not a directory" in result.output


@pytest.mark.parametrize(
    ("variable", "in_the_file", "overridden"),
    [
        ("CURAFLOW_API_TOKEN", "the-token-of-this-directorys-dev", True),
        ("CURAFLOW_API__TOKEN", "the-token-of-this-directorys-dev", True),
        ("CURAFLOW_API_TOKEN", "the-exported-token-of-another-dev", False),  # the same: not the cause
        ("CURAFLOW_API_TOKEN", None, False),  # no file: nothing is overridden
    ],
)
def test_a_refused_token_says_when_the_environment_overrides_the_token_file(
    variable: str, in_the_file: str | None, overridden: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A 401 said ``(check CURAFLOW_API_TOKEN)`` whatever the cause; the usual one after
    changing directory is a variable exported for another ``curaflow dev``, which overrides
    this directory's ``.curaflow/api-token`` (a newcomer's finding): said when it is so."""
    import json

    for name in ("CURAFLOW_API_TOKEN", "CURAFLOW_API__TOKEN", "CURAFLOW_API_URL", "CURAFLOW_CONFIG"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("CURAFLOW_STATE_DIR", raising=False)
    monkeypatch.chdir(tmp_path)
    if in_the_file is not None:
        (tmp_path / ".curaflow").mkdir()
        (tmp_path / ".curaflow" / "api-token").write_text(in_the_file + "\n")
    monkeypatch.setenv(variable, "the-exported-token-of-another-dev")
    body = json.dumps({"status": "error", "error": "unauthorized"}).encode()
    with api_answering(401, body) as url:
        result = CliRunner().invoke(app, ["status", "demo@manual-k", "--api-url", url], env={"COLUMNS": "80"})
    assert result.exit_code == 3, result.output
    said = " ".join(result.output.split())
    assert said.startswith("401 unauthorized ("), said
    if overridden:
        assert f"environment variable {variable}" in said and "overrides" in said, said
        assert str(Path(".curaflow") / "api-token") in said, said
    else:
        assert "overrides" not in said and "check CURAFLOW_API_TOKEN" in said, said
    assert "the-exported-token" not in said and "this-directorys-dev" not in said  # no token is printed
