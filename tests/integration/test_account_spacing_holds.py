"""A job its source account held past the deadline says so: its request spacing kept the
download, or its source queue was busy with another job's step.

Real Temporal, real PostgreSQL, a real worker process; Pixiv is the replay, its account's
requests spaced (``min_interval_ms``, :data:`INTERVAL_MS`) with one source activity at a
time, and the receiver is the signed-webhook fake of ``tests/fakes``.

Found by a break-it pass (2026-12-05): two jobs on one target whose webhook answered
``503`` with ``Retry-After: 600``, deadline 30 s. The first named its hold (the receiver
unavailable); the second never sent anything and expired "retry with a longer
deadline_ms or a narrower query", naming nothing. It had bound the next work — 32 pages,
one request each through the account's gate, at least 31 s of spacing after its binding —
and the deadline passed while the account's spacing held its download. The test keeps
that proportion at a tenth of its time (the case took 30 s): 300 ms between requests,
a 6 s deadline, so the 32-page download needs at least 9.3 s after its binding.

And a job whose step waited in the account's source queue (one source activity at a time)
behind another job's download expired the same way, naming nothing: its ``acquire`` was
never started, and the deadline passed while the other job held the account's one slot.
"""

from __future__ import annotations

from typing import Any

import pytest

from curaflow.domain.models import CellSnapshot
from curaflow.temporal.connection import connect_configured
from tests.integration.test_delivery_attribution import held_report, unavailable
from tests.jobs_support import SharedEnv, ordered, webhook_route
from tests.support import eventually

pytestmark = [pytest.mark.integration, pytest.mark.slow]

#: Each test's slot → its one route's config (one worker for the module).
SLOTS = {
    "paced": lambda f: webhook_route(f.webhook, "/paced"),
    "holder": lambda f: webhook_route(f.webhook, "/holder"),
    "queued": lambda f: webhook_route(f.webhook, "/queued"),
}
#: The account's spacing (a real account's is 1 s) and the jobs' deadline: the second job's
#: 32 pages take at least 31 intervals (9.3 s) after its binding, past the deadline.
INTERVAL_MS, DEADLINE_MS = 300, 6_000

#: A tag whose one recorded work has 88 pages: at :data:`INTERVAL_MS` between requests,
#: its download holds the account's one source slot for at least 26 s (87 intervals).
LONG_TAG = "ジニア先生"


def shared_config(env: SharedEnv) -> dict[str, Any]:
    """The module's worker: Pixiv's replay with its account's requests spaced."""
    return {
        "pixiv": env.replay.config(replay_min_interval_ms=INTERVAL_MS, replay_max_concurrency=1),
        "routes": {env.route(slot): route(env.fakes) for slot, route in SLOTS.items()},
        "targets": [{"id": slot, "query": {"tags": ["オリジナル"]}, "routes": [env.route(slot)]} for slot in SLOTS],
    }


async def test_a_job_whose_download_the_accounts_spacing_held_past_the_deadline_says_so(env: SharedEnv) -> None:
    route = env.route("paced")
    env.webhook.script["/paced"] = [unavailable(600)] * 5

    jobs = [await env.stack.admit({**env.task("paced"), "deadline_ms": DEADLINE_MS}) for _ in range(2)]
    reports = [await held_report(env.stack, job) for job in jobs]

    # The one request the receiver got: the job that bound the first work (one page).
    assert len(env.webhook.received) == 1
    by_kind = {error["detail"]["held_by"]["kind"]: (deadline, error, outcome) for deadline, error, outcome in reports}
    assert set(by_kind) == {"unavailable", "spacing"}, [r[1] for r in reports]
    assert by_kind["unavailable"][1]["detail"]["held_by"]["name"] == route

    # The other never sent: its work's 32 pages, one request an interval through the
    # account's gate, could not all be asked for before the deadline. The report says so.
    assert 31 * INTERVAL_MS > DEADLINE_MS
    deadline_at, error, outcome = by_kind["spacing"]
    assert (error["code"], error["detail"]["internal_code"]) == ("deadline_exceeded", "execution_timeout")
    held = error["detail"]["held_by"]
    assert (held["owner"], held["name"], held["kind"]) == ("account", "default", "spacing")
    assert held["until"] > deadline_at
    target = outcome["cells"]["targets"][0]
    assert target["held_by"] == held
    for text in (error["message"], outcome["user_message"]["en"], target["error"]):
        assert "default" in text and "min_interval_ms" in text, text
        assert "narrower query" not in text, text  # the remedy that would not help
    assert "default" in outcome["user_message"]["zh"] and "min_interval_ms" in outcome["user_message"]["zh"]


async def test_a_job_whose_step_waited_behind_another_jobs_download_says_the_account_was_busy(
    env: SharedEnv,
) -> None:
    stack = env.stack
    [long_work] = ordered(LONG_TAG)
    holder = await stack.admit({**env.task("holder", [LONG_TAG]), "deadline_ms": 20_000})

    async def downloading() -> CellSnapshot | None:
        cell = (await stack.job(holder)).cells[0]
        return cell if cell.state == "selected" and cell.work_id == long_work else None

    # The holder's acquire holds the account's one slot: it bound the 88-page work.
    await eventually(downloading, timeout_s=30, what="the holder downloading its long work")
    queued = await stack.admit({**env.task("queued", ["ゆずソフト"]), "deadline_ms": 6_000})
    deadline_at, error, outcome = await held_report(stack, queued)

    # The queued job's step was never started: the holder kept the slot past its deadline.
    record = await stack.job(queued)
    assert (record.started_at, record.cells[0].state) == (None, "failed"), record
    assert (await stack.job(holder)).completed_at is None  # still holding the slot
    assert (error["code"], error["detail"]["internal_code"]) == ("deadline_exceeded", "execution_timeout")
    held = error["detail"].get("held_by")
    assert held is not None, error
    assert (held["owner"], held["name"], held["kind"]) == ("account", "default", "busy")
    assert held["until"] > deadline_at
    target = outcome["cells"]["targets"][0]
    assert target["held_by"] == held
    for text in (error["message"], outcome["user_message"]["en"], target["error"]):
        assert "default" in text and "max_concurrency" in text and "another job" in text, text
        assert "narrower query" not in text, text  # the remedy that would not help
    zh = outcome["user_message"]["zh"]
    assert "default" in zh and "max_concurrency" in zh and "其他任务" in zh, zh

    # The holder is done with: cancelled, not waited out to its own deadline (~10 s more of
    # an 88-page download at 300 ms a page, nothing left to check).
    client = await connect_configured(stack.settings.temporal)
    await client.get_workflow_handle(holder).cancel()
    await stack.wait_terminal(holder, timeout_s=60)
