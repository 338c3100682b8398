"""Log lines written through Temporal's activity and workflow loggers.

An operator matches log lines on ``event`` exactly (``event = "candidate_exhaustion"``);
the SDK's loggers append their context dict to the message by default
(``"candidate_exhaustion ({'activity_id': …})"``). The line is produced in a child
process configured like a worker, so the test process's logging stays untouched.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

SCRIPT = textwrap.dedent(
    """
    import asyncio
    from temporalio import activity
    from temporalio.testing import ActivityEnvironment
    from curaflow.observability.logs import configure_logging

    configure_logging("INFO", True)

    @activity.defn(name="search")
    async def search() -> None:
        activity.logger.info("candidate_exhaustion", extra={"job_id": "demo@manual-k", "searched": 3})

    asyncio.run(ActivityEnvironment().run(search))
    """
)


def test_an_activity_log_lines_event_is_exactly_its_message() -> None:
    done = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=60, check=True)
    lines = [json.loads(line) for line in done.stderr.splitlines() if line.startswith("{")]
    [line] = [line for line in lines if line.get("job_id") == "demo@manual-k"]
    assert line["event"] == "candidate_exhaustion"
    assert line["searched"] == 3
    # the activity's context stays available as its own field, never inside the message
    assert line["temporal_activity"]["activity_id"] == "test"


def test_workflow_log_lines_carry_no_context_in_the_message() -> None:
    script = "from temporalio import workflow\nfrom curaflow.observability.logs import configure_logging\n"
    script += "configure_logging('INFO', True)\nprint(workflow.logger.workflow_info_on_message)\n"
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.strip() == "False"


TRACEBACK_SCRIPT = textwrap.dedent(
    """
    import logging
    from curaflow.observability.logs import configure_logging, get_logger

    configure_logging("INFO", True)

    def deep_in_the_code() -> None:
        raise ValueError("the cause\\nwith a second line")

    try:
        deep_in_the_code()
    except ValueError as err:
        get_logger("curaflow.api").error("api.internal_error", error="ValueError", exc_info=err)
        # the SDK's and uvicorn's lines: the standard library's logger, exc_info=True
        logging.getLogger("temporalio.activity").warning("Completing activity as failed", exc_info=True)
    """
)


def test_a_json_log_line_carries_the_traceback_of_its_exception() -> None:
    """``exc_info`` (structlog's and the standard library's) is rendered as the traceback in
    one field of the one line: it was written as the exception's repr (structlog's
    ``api.internal_error``) or a tuple ending ``<traceback object at 0x…>`` (Temporal's
    lines), the traceback lost — an operator could not tell where an internal error came from."""
    done = subprocess.run(
        [sys.executable, "-c", TRACEBACK_SCRIPT], capture_output=True, text=True, timeout=60, check=True
    )
    raw = done.stderr.splitlines()
    lines = [json.loads(line) for line in raw]  # every line is one JSON object: nothing spilled
    assert [line["event"] for line in lines] == ["api.internal_error", "Completing activity as failed"]
    for line in lines:
        assert "exc_info" not in line
        trace = line["exception"]
        assert trace.startswith("Traceback (most recent call last):")
        assert "in deep_in_the_code" in trace
        assert trace.rstrip().endswith("ValueError: the cause\nwith a second line")
    assert "<traceback object" not in done.stderr


LOCALS_SCRIPT = textwrap.dedent(
    """
    import logging, sys
    from curaflow.observability.logs import configure_logging, get_logger

    configure_logging("INFO", sys.argv[1] == "json")

    def refresh(refresh_token: str) -> None:
        headers = {"Authorization": "Bearer access-TOKEN-9f3b"}
        raise ConnectionError("pixiv's auth host went away")

    try:
        refresh("refresh-TOKEN-77aa")
    except ConnectionError as err:
        get_logger("curaflow.sources").error("background.loop_failed", exc_info=err)
        logging.getLogger("temporalio.activity").warning("Completing activity as failed", exc_info=True)
    """
)


@pytest.mark.parametrize("mode", ["json", "console"])
def test_a_logged_traceback_never_shows_the_values_of_a_frames_variables(mode: str) -> None:
    """The console renderer printed rich tracebacks with every frame's locals: a token held
    by a variable of a frame (the Pixiv client's headers, a refresh) was written to the log
    by any failure logged with exc_info there — the Temporal SDK logs every failed activity
    attempt so. A traceback names files, lines and code, never values of variables."""
    done = subprocess.run(
        [sys.executable, "-c", LOCALS_SCRIPT, mode], capture_output=True, text=True, timeout=60, check=True
    )
    assert "in refresh" in done.stderr  # the frame is named
    assert "auth host went away" in done.stderr
    assert "TOKEN" not in done.stderr


LEVEL_SCRIPT = textwrap.dedent(
    """
    import logging
    import structlog
    from curaflow.observability import logs
    from curaflow.observability.logs import configure_logging, get_logger

    configure_logging("INFO", True)
    seen = []
    redact = logs._redact

    def spying(logger, method, event_dict):
        seen.append(event_dict["event"])
        return redact(logger, method, event_dict)

    logs._redact = spying
    configure_logging("INFO", True)  # the chain again, with the spy in the mask's place
    log = get_logger("curaflow.test")
    log.debug("below_the_level", n=1)
    log.info("at_the_level", n=2)
    logging.getLogger().setLevel("DEBUG")  # the level read at each line, not at configuration
    log.debug("debug_now_enabled", n=3)
    print(",".join(seen))
    """
)


def test_a_line_below_the_level_is_dropped_before_any_processor_runs() -> None:
    """A line the level filters out costs no processing: before 2026-12-08 the whole chain
    (context, level, logger name, an ISO time stamp, the secrets' mask) ran for it and the
    standard library's logger then dropped it — ~16-40 µs each, for the worker's
    ``activity.attempt_done`` at every activity attempt (docs/performance.md, the
    twenty-eighth session). What is written is unchanged: the line at the level is, and a
    debug line is once the level is lowered, read line by line."""
    done = subprocess.run([sys.executable, "-c", LEVEL_SCRIPT], capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.strip() == "at_the_level,debug_now_enabled"
    lines = [json.loads(line) for line in done.stderr.splitlines() if line.startswith("{")]
    assert [line["event"] for line in lines] == ["at_the_level", "debug_now_enabled"]


OUTAGE_SCRIPT = textwrap.dedent(
    """
    import logging
    import asyncpg
    import curaflow.ledger.db  # a process with a ledger: it registers what its outages are
    from curaflow.observability.logs import configure_logging

    configure_logging("INFO", True)

    def restore_floor() -> None:
        raise ConnectionRefusedError(111, "Connect call failed ('127.0.0.1', 5432)")

    try:
        restore_floor()
    except OSError:
        logging.getLogger("asyncpg.pool").warning(
            "Failed to restore the pool connection floor; retrying", exc_info=True
        )
    try:
        raise ValueError("a bug, not an outage")
    except ValueError:
        logging.getLogger("asyncpg.pool").warning("something else", exc_info=True)
    """
)


def test_a_librarys_line_about_a_ledger_outage_is_one_line_without_a_traceback() -> None:
    """An outage is expected: asyncpg's pool logs its failure to restore the connection floor
    with ``exc_info`` while PostgreSQL is away, and the line carried the whole traceback
    (2026-12-08). It is one line naming the error's type and message (``error``), as
    curaflow's own outage lines; a failure that is no outage keeps its traceback."""
    done = subprocess.run([sys.executable, "-c", OUTAGE_SCRIPT], capture_output=True, text=True, timeout=60, check=True)
    outage, other = [json.loads(line) for line in done.stderr.splitlines()]
    assert outage["event"] == "Failed to restore the pool connection floor; retrying"
    assert "exception" not in outage and "exc_info" not in outage
    assert outage["error"] == "ConnectionRefusedError: [Errno 111] Connect call failed ('127.0.0.1', 5432)"
    assert other["exception"].startswith("Traceback (most recent call last):")
