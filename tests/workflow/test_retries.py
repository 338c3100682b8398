"""Retries per reason, fallback passes and cells that end on their own.

One job holds a cell per case, so every reason's attempt budget is read from one execution:
a source step (``acquire``) gets the source budget, ``deliver`` the delivery budget, a
reason the catalogue calls final (:data:`curaflow.domain.verdicts.NON_RETRYABLE_TYPES`)
one attempt whether or not the activity marked it so, and a type nobody knows the budget
of its step — never more. ``finish`` receives the facts Temporal reported.
"""

from __future__ import annotations

import pytest

from curaflow.domain.messages import Budgets
from curaflow.domain.reasons import REASONS
from curaflow.domain.verdicts import NON_RETRYABLE_TYPES, FailureKind
from tests.workflow.fakes import Act
from tests.workflow.harness import Env

pytestmark = pytest.mark.integration

SOURCE_BUDGET, DELIVERY_BUDGET = 3, 4
#: Every reason of the catalogue, and a type no code knows.
TYPES = [*sorted(str(r) for r in REASONS), "a_new_kind_of_failure"]


def budgets() -> Budgets:
    return Budgets(
        # A heartbeat timeout (twice this) far above the time an attempt takes: some sixty
        # attempts start at once, and on a loaded machine one of them may wait over a
        # second for the event loop — a timed-out attempt would be retried, as it should.
        heartbeat_interval_ms=5_000,
        queued_timeout_ms=5_000,
        stall_timeout_ms=5_000,
        retry_initial_interval_ms=50,
        retry_max_interval_ms=100,
        delivery_max_attempts=DELIVERY_BUDGET,
        source_max_attempts=SOURCE_BUDGET,
    )


async def test_every_reason_gets_the_attempts_of_its_step_and_no_more(env: Env) -> None:
    cases = {f"{step}-{kind}": (step, kind) for step in ("search", "deliver") for kind in TYPES}
    cases["search-marked"] = ("search", "remote_http_error")  # retryable, but the activity says final
    for tid, (step, kind) in cases.items():
        act = Act("fail", error_type=kind, non_retryable=tid.endswith("marked"))
        env.fakes.on(step, tid, act, route="a" if step == "deliver" else None)
    handle = await env.start(env.job({tid: ["a"] for tid in cases}, budgets=budgets()))

    final = await env.closed(handle, timeout_s=60)

    assert final.name == "FAILED"  # no cell delivered: the job failed
    (finish,) = env.fakes.finishes
    for tid, (step, kind) in cases.items():
        attempts = [c.attempt for c in env.fakes.calls if c.target_id == tid and c.step == step]
        final_type = kind in NON_RETRYABLE_TYPES or tid.endswith("marked")
        budget = 1 if final_type else (SOURCE_BUDGET if step == "search" else DELIVERY_BUDGET)
        assert attempts == list(range(1, budget + 1)), (tid, attempts)
        facts = finish.failures[tid]
        assert (facts.kind, facts.error_type, facts.step) == (
            FailureKind.APPLICATION,
            kind,
            "acquire" if step == "search" else "deliver",
        ), tid
        assert facts.retry_state == ("NON_RETRYABLE_FAILURE" if final_type else "MAXIMUM_ATTEMPTS_REACHED"), tid
        if step == "search":
            assert [c.step for c in env.fakes.calls if c.target_id == tid] == ["search"] * budget  # never fetched
    state = await env.status(handle)
    assert {c.state for c in state.cells} == {"failed"} and all(c.reason for c in state.cells)


async def test_fallback_passes_widen_the_search_until_one_binds(env: Env) -> None:
    env.fakes.on("search", "t", Act("next_pass"), Act("next_pass"), Act("ok"))
    handle = await env.start(env.job(stages=3))

    final = await handle.result()

    assert final.status == "succeeded"
    assert [(s.fallback_stage, s.max_fallback_stages) for s in env.fakes.searches] == [(0, 3), (1, 3), (2, 3)]
    assert env.fakes.steps() == ["search", "search", "search", "fetch", "deliver"]
    summaries = [name for _, name in await env.scheduled(handle)]
    assert summaries.count("acquire") == 3 and summaries.count("deliver") == 1


async def test_the_last_pass_that_finds_nothing_ends_the_cell_no_candidate(env: Env) -> None:
    env.fakes.on("search", "t", Act("next_pass"), Act("no_candidate"))
    handle = await env.start(env.job(stages=2))

    await env.closed(handle)

    assert [s.fallback_stage for s in env.fakes.searches] == [0, 1]
    assert env.fakes.steps() == ["search", "search"]
    assert [(c.state, c.reason) for c in (await env.status(handle)).cells] == [("no_candidate", "no_candidate")]


@pytest.mark.parametrize("stages", [1, 2])
async def test_no_cell_runs_more_passes_than_its_job_allows_whatever_a_step_says(env: Env, stages: int) -> None:
    env.fakes.on("search", "t", Act("next_pass"))  # a search that always asks for one more pass
    handle = await env.start(env.job(stages=stages))

    await env.closed(handle)

    assert [s.fallback_stage for s in env.fakes.searches] == list(range(stages))
    assert env.fakes.steps() == ["search"] * stages
    (finish,) = env.fakes.finishes
    assert finish.failures == {}  # no step failed: the ledger decides the open cell
    assert (await env.status(handle)).cells[0].state == "failed"
