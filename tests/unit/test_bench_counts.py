"""The benchmark's load-independent counts (``bench/counts.py``) on recorded histories."""

from __future__ import annotations

import json
from pathlib import Path

from bench.counts import delta, history_counts, label_value, mean_counts, parse_metrics

HISTORIES = Path(__file__).resolve().parents[1] / "histories"


def events(name: str) -> list[dict[str, object]]:
    return list(json.loads((HISTORIES / f"{name}.json").read_text())["events"])


def test_a_one_cell_job_before_and_after_one_marker_for_every_change() -> None:
    before = history_counts(events("job_succeeded_v3"))  # core-v2 + cell-progress, the signal
    assert before.events == 30 and before.patches == ["core-v2", "cell-progress"]
    assert (before.workflow_tasks, before.signals, before.timers) == (4, 1, 1)
    assert (before.upserts, before.change_version_upserts) == (4, 2)
    assert before.by_type["TIMER_CANCELED"] == 1
    # start, acquire, deliver, the timer, the signal, JobStatus running and the final
    # upsert, and one for the markers of each of three workflow tasks.
    assert before.actions == 10
    assert before.actions_by_kind == {"start": 1, "activity": 2, "timer": 1, "signal": 1, "upsert": 2, "markers": 3}

    quick = history_counts(events("job_quick_core_v3"))  # core-v3, a download over before the signal
    assert quick.events == 23 and quick.patches == ["core-v3"]
    assert (quick.workflow_tasks, quick.signals, quick.change_version_upserts) == (3, 0, 1)
    assert "TIMER_CANCELED" not in quick.by_type
    assert quick.actions == 8

    slow = history_counts(events("job_succeeded_core_v3"))  # core-v3, a download that outlasts the delay
    assert slow.events == 27 and slow.signals == 1 and slow.patches == ["core-v3"]
    assert slow.actions == 9


def test_an_update_with_start_counts_the_update_and_the_local_activities_once_per_task() -> None:
    counts = history_counts(events("job_temporal_client_v3"))
    assert counts.updates == 1 and counts.actions_by_kind["update"] == 1
    assert counts.local_activity_markers == 2  # admit and finish, in two workflow tasks
    assert counts.actions_by_kind["markers"] == 3  # the first task's patch marker shares its task with admit


def test_the_mean_over_jobs() -> None:
    mean = mean_counts([history_counts(events("job_succeeded_v3")), history_counts(events("job_quick_core_v3"))])
    assert mean.events == 26.5 and mean.signals == 0.5
    assert mean.by_type["TIMER_CANCELED"] == 0.5
    assert mean.summary()["billable_actions"] == 9.0
    assert mean_counts([]).events == 0


def test_prometheus_samples_and_their_increase() -> None:
    before = parse_metrics(
        '# HELP action x\naction{action_type="grpc_StartWorkflowExecution",namespace="default"} 2\n'
        'actions_other{a="b"} 9\n',
        "action",
    )
    after = parse_metrics(
        'action{action_type="grpc_StartWorkflowExecution",namespace="default"} 5\n'
        'action{action_type="command_StartTimer",namespace="default"} 3\nrequests 4\n',
        "action",
    )
    grown = delta(after, before)
    assert sorted(grown.values()) == [3.0, 3.0]
    assert {label_value(k, "action_type") for k in grown} == {"grpc_StartWorkflowExecution", "command_StartTimer"}
    assert label_value('step="acquire"', "step") == "acquire" and label_value("", "step") == ""
    assert parse_metrics("requests 4\n", "requests") == {"": 4.0}
