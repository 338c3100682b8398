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
