"""A job's static summary and details (:mod:`curaflow.domain.presentation`) show every value
as text: the Temporal UI renders them as markdown, so a consumer's Task (key, tags, target,
correlation id) or a target's tags holding markup would give the operator links, images
their browser fetches, headings and HTML nobody wrote.

CommonMark (markdown-it, :mod:`tests.markdown_support`) stands for the UI's renderer;
``tests/workflow/test_start_metadata.py`` checks what the workflows start jobs with.
"""

from __future__ import annotations

import pytest

from curaflow.domain.messages import JobInput, RouteRef, TargetQuery, TargetSpec
from curaflow.domain.presentation import (
    SUMMARY_LIMIT,
    job_static_details,
    job_summary,
    push_summary,
    task_static_details,
    task_summary,
)
from tests.markdown_support import HOSTILE, as_one_line, shown

#: curaflow's own markup in the summary and details; nothing else may render.
OWN_MARKUP = frozenset({"p", "strong", "code", "ul", "li"})
KEY = "k-[click](http://evil.test/x) ![i](http://127.0.0.1:1/k.png) <b>b</b> `tick` `` x"


def hostile_input(**update: object) -> JobInput:
    """A scheduled job whose plan, schedule, targets, tags and routes all hold markup."""
    inp = JobInput(
        job_id="nightly@2025-01-01T0300",
        plan_id="plan`[p](http://evil.test/p)",
        schedule_id="night`ly<b>",
        trigger="schedule",
        created_at_ms=1_735_700_400_000,
        deadline_at_ms=1_735_702_200_000,
        targets=[
            TargetSpec(
                target_id=f"target {text}",
                query=TargetQuery(tags=[text, "風景"]),
                routes=[RouteRef(name=f"route {text}", kind="webhook")],
            )
            for text in HOSTILE
        ],
    )
    return inp.model_copy(update=update)


def hostile_task(**update: object) -> dict[str, object]:
    return {
        "protocol_version": "1",
        "job_type": "candidate_search",
        "idempotency_key": KEY,
        "correlation_id": "![c](http://127.0.0.1:1/c.png) `x`",
        "deadline_ms": "<img src=http://127.0.0.1:1/d.png>",
        "params": {"target_id": "[t](http://evil.test/t)", "query": {"tags": list(HOSTILE)}},
        **update,
    }


@pytest.mark.parametrize(
    "markdown",
    [
        job_summary(hostile_input()),
        job_static_details(hostile_input()),
        job_summary(
            hostile_input(
                targets=[TargetSpec(target_id="t", query={"mode": "ranking", "ranking_mode": "[r](http://evil.test)"})]
            )
        ),
        task_summary(hostile_task(), "x"),
        task_summary(hostile_task(job_type="<b>other</b>"), "x"),
        task_static_details(hostile_task(), f"t@manual-{KEY.lower()}"),
        push_summary(f"t@manual-{KEY.lower()}"),
    ],
    ids=["job_summary", "job_static_details", "ranking", "task_summary", "task_job_type", "task_details", "push"],
)
def test_no_value_renders_as_markup(markdown: str) -> None:
    assert shown(markdown).tags <= OWN_MARKUP, markdown  # no a, img, h1, b …


def test_a_jobs_values_show_as_written() -> None:
    inp = hostile_input()
    summary = shown(job_summary(inp.model_copy(update={"targets": inp.targets[:2]}))).text
    assert "target [click](http://evil.test/x): [click](http://evil.test/x) AND 風景" in summary
    assert "schedule night`ly<b>" in summary
    details = shown(job_static_details(inp))
    assert {"plan`[p](http://evil.test/p)", "night`ly<b>"} <= set(details.codes)
    assert {f"target {as_one_line(text)}" for text in HOSTILE} <= set(details.codes)
    for text in HOSTILE:
        assert f"route {as_one_line(text)} (webhook)" in details.text


def test_a_tasks_values_show_as_written() -> None:
    job_id = f"t@manual-{KEY.lower()}"
    summary = shown(task_summary(hostile_task(), job_id)).text
    assert summary.startswith("candidate_search (temporal) — [t](http://evil.test/t): [click](http://evil.test/x) AND")
    assert all(as_one_line(text) in summary for text in HOSTILE)
    details = shown(task_static_details(hostile_task(), job_id))
    assert {job_id, KEY, "![c](http://127.0.0.1:1/c.png) `x`"} <= set(details.codes)
    assert "<img src=http://127.0.0.1:1/d.png> ms after admission" in details.text
    assert shown(push_summary(job_id)).codes == [job_id]


def test_plain_values_read_as_before() -> None:
    """Ids, tags and names holding no markdown give the text they always gave."""
    plain = JobInput(
        job_id="nightly@2025-01-01T0300",
        plan_id="nightly",
        schedule_id="nightly",
        trigger="schedule",
        created_at_ms=1_735_700_400_000,
        deadline_at_ms=1_735_702_200_000,
        targets=[
            TargetSpec(
                target_id="demo", query={"tags": ["風景", "空"]}, routes=[RouteRef(name="out", kind="directory")]
            )
        ],
    )
    assert job_summary(plain) == "candidate_search (schedule nightly) — demo: 風景 AND 空"
    assert (
        job_static_details(plain).splitlines()[0]
        == "**trigger** schedule · **plan** `nightly` · **schedule** `nightly`"
    )
    assert job_static_details(plain).splitlines()[-1] == "- `demo` → out (directory); scan ≤ 30 works"
    task = {
        "job_type": "candidate_search",
        "idempotency_key": "cli-1",
        "params": {"target_id": "demo", "query": {"tags": ["オリジナル"]}},
    }
    assert task_summary(task, "demo@manual-cli-1") == "candidate_search (temporal) — demo: オリジナル"
    assert task_static_details(task, "demo@manual-cli-1") == (
        "**trigger** temporal · **job** `demo@manual-cli-1` · **idempotency key** `cli-1`"
    )


def test_a_long_summary_is_cut_at_its_limit() -> None:
    tags = ["[x](y)" * 40] * 5
    inp = hostile_input(targets=[TargetSpec(target_id="t", query={"tags": tags})])
    assert len(job_summary(inp)) == SUMMARY_LIMIT
    assert shown(job_summary(inp)).tags <= OWN_MARKUP


@pytest.mark.parametrize(
    ("plan_id", "cron"),
    [("_daily_", ["*/5 * * * *"]), ("__nightly__", ["0 3 * * MON#2", "30 1 1/2 * *"]), ("a_b_c", ["@every 1h"])],
)
def test_a_schedules_occurrence_summary_shows_its_plan_as_text(plan_id: str, cron: list[str]) -> None:
    """The schedule's action gives each occurrence's trampoline its static summary, which
    the UI renders as markdown: the plan's id and cron strings (the configuration's:
    ``[A-Za-z0-9_-]``, cron fields of ``*?/,#-``) show as written — ``_daily_`` was
    emphasis, the id shown as *daily*."""
    from curaflow.config import ScheduleConfig, Settings
    from curaflow.schedules import build_schedule

    settings = Settings(schedules=[ScheduleConfig(id=plan_id, cron=cron, timezone="Asia/Tokyo", target_ids=["demo"])])
    action = build_schedule(settings, settings.schedules[0]).action
    summary = shown(action.static_summary)  # type: ignore[union-attr]
    assert summary.tags <= {"p"}, action.static_summary  # type: ignore[union-attr]
    assert summary.text.strip() == f"occurrence of plan {plan_id} ({', '.join(cron)} Asia/Tokyo)"
