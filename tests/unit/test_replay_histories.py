"""Replay recorded histories against today's workflow code: an incompatible change fails here.

The histories in ``tests/histories/`` were recorded from real runs by
``scripts/record_histories.py`` (see its doc for when to re-record). Replaying needs no
server: the :class:`~temporalio.worker.Replayer` runs the workflow code over each
recorded event list and fails with a non-determinism error when the code would now
issue different commands (a removed activity, a reordered step, a new timer…) — the
change must then go behind ``workflow.patched`` (docs/operations.md "Upgrading").
"""

from __future__ import annotations

import base64
import json
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from temporalio.client import WorkflowHistory
from temporalio.worker import Replayer

from curaflow.process.worker import sandbox_runner
from curaflow.temporal.connection import DATA_CONVERTER
from examples.child_job import OneNewWork
from workflows.event_push import EventPushWorkflow
from workflows.job import (
    CANCEL_REPORTING_RUN,
    CANCELLED_END,
    FINISH_REPORTING_RUN,
    FOREIGN_INPUT,
    JOB_INPUT_REPORTING_RUN,
    LATE_REPORTING_RUN,
    NO_CRON,
    ONE_MEANING,
    OWN_JOB_ONLY,
    OWN_RUN_ADMITTED_LATE,
    PAUSED_STEPS,
    PAUSED_STEPS_UNANSWERED,
    PUSH_BOUND,
    REPORTING_RUN_ATTRIBUTES,
    REPORTING_RUN_CANCEL,
    RUN_LIMIT,
    STARTER_ATTRIBUTES,
    JobWorkflow,
)
from workflows.presentation_frozen import ESCAPED_METADATA
from workflows.scheduled import ScheduledJobWorkflow

HISTORIES = sorted((Path(__file__).resolve().parents[1] / "histories").glob("*.json"))


def test_there_are_recorded_histories_of_each_workflow() -> None:
    types = set()
    for path in HISTORIES:
        first = json.loads(path.read_text())["events"][0]
        types.add(first["workflowExecutionStartedEventAttributes"]["workflowType"]["name"])
    # OneNewWork (examples/child_job.py): a user's workflow running a job with run_job
    assert types == {"JobWorkflow", "ScheduledJobWorkflow", "EventPushWorkflow", "OneNewWork"}


def test_histories_of_every_job_shape_are_kept() -> None:
    """Executions started before core v2 (no patch marker), after it (``core-v2``, one
    marker per later change) and from core v3 on (``core-v3`` alone) all replay."""

    def shape(path: Path) -> str:
        found = patches(path)
        return "v3" if "core-v3" in found else "v2" if "core-v2" in found else "v1"

    assert {shape(path) for path in HISTORIES if job_history(path)} == {"v1", "v2", "v3"}
    for path in HISTORIES:
        if job_history(path) and shape(path) == "v3":
            # one marker for every change since core v2; the changes asked only where their
            # input came (foreign input, a copy's JobInput, a run added under an ended job,
            # search attributes its starter set, a cron schedule, a short run timeout, a
            # callback's end, a start input with no one meaning) add their own
            own = {
                PUSH_BOUND,
                FOREIGN_INPUT,
                OWN_JOB_ONLY,
                JOB_INPUT_REPORTING_RUN,
                STARTER_ATTRIBUTES,
                NO_CRON,
                RUN_LIMIT,
                CANCELLED_END,
                PAUSED_STEPS,
                ONE_MEANING,
                PAUSED_STEPS_UNANSWERED,
                REPORTING_RUN_CANCEL,
                CANCEL_REPORTING_RUN,
                LATE_REPORTING_RUN,
                REPORTING_RUN_ATTRIBUTES,
                FINISH_REPORTING_RUN,
                OWN_RUN_ADMITTED_LATE,
            }
            assert patches(path) - own == {"core-v3"}, path.name


def test_histories_of_both_trampoline_shapes_are_kept() -> None:
    """Occurrences started before the child got ``JOB_TASK_TIMEOUT`` (no marker) and after."""
    from workflows.scheduled import JOB_TASK_TIMEOUT_PATCH

    trampolines = [path for path in HISTORIES if workflow_type(path) == "ScheduledJobWorkflow"]
    shapes = {JOB_TASK_TIMEOUT_PATCH in patches(path) for path in trampolines}
    assert shapes == {True, False}


@pytest.mark.parametrize("name", ["scheduled_occurrence", "one_new_work"])
def test_histories_of_a_child_job_started_before_and_after_escaped_metadata_are_kept(name: str) -> None:
    """A schedule's trampoline and a user's workflow calling ``run_job`` whose job's tags
    (and the Task's key and correlation id) hold markdown: recorded before
    ``escaped-start-metadata`` they started the child with the text as it was — replayed on
    today's code (:func:`test_recorded_history_replays`) that branch runs again; from the
    patch on they record the marker and start it with the text escaped."""
    by_name = {path.stem: path for path in HISTORIES}
    before, after = by_name[f"{name}_before_escaped_metadata"], by_name[f"{name}_escaped_metadata"]
    assert ESCAPED_METADATA not in patches(before) and ESCAPED_METADATA in patches(after)
    summaries = {}
    for path in (before, after):
        events = json.loads(path.read_text())["events"]
        started = next(e for e in events if "startChildWorkflowExecutionInitiatedEventAttributes" in e)
        summaries[path.stem] = json.loads(base64.b64decode(started["userMetadata"]["summary"]["data"]))
    assert "[click](http://evil.test/x)" in summaries[before.stem]
    assert "\\[click\\]\\(http\\://evil.test/x\\)" in summaries[after.stem]


def test_histories_of_an_occurrence_cancelled_before_and_after_it_abandons_its_job_are_kept() -> None:
    """A trampoline cancelled while its job ran: recorded before
    ``occurrence-abandons-its-job`` it forwarded the cancel to the job (a
    ``RequestCancelExternal…`` command) and completed — replayed on today's code that branch
    runs again; from the patch on it records the marker, sends the job nothing and ends
    Canceled."""
    from workflows.scheduled import ABANDON_JOB_ON_CANCEL

    by_name = {path.stem: path for path in HISTORIES}
    before, after = by_name["scheduled_occurrence_cancelled_before_abandon"], by_name["scheduled_occurrence_cancelled"]
    assert ABANDON_JOB_ON_CANCEL not in patches(before) and ABANDON_JOB_ON_CANCEL in patches(after)
    types = {path.stem: [e["eventType"] for e in json.loads(path.read_text())["events"]] for path in (before, after)}
    assert "EVENT_TYPE_REQUEST_CANCEL_EXTERNAL_WORKFLOW_EXECUTION_INITIATED" in types[before.stem]
    assert types[before.stem][-1] == "EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED"
    assert "EVENT_TYPE_REQUEST_CANCEL_EXTERNAL_WORKFLOW_EXECUTION_INITIATED" not in types[after.stem]
    assert types[after.stem][-1] == "EVENT_TYPE_WORKFLOW_EXECUTION_CANCELED"


def test_histories_of_a_reporting_run_sent_cancel_before_and_after_it_ends_are_kept() -> None:
    """A signal-with-start of ``cancel`` under a cancelled job's id: recorded before
    ``reporting-run-cancel`` the run reported the job and waited, open (replayed on today's
    code that branch runs again); from the patch on it records the marker, asks Temporal to
    cancel it and ends Canceled."""
    by_name = {path.stem: path for path in HISTORIES}
    before = by_name["job_reporting_run_cancel_signal_before_end_core_v3"]
    after = by_name["job_reporting_run_cancel_signal_core_v3"]
    assert REPORTING_RUN_CANCEL not in patches(before) and REPORTING_RUN_CANCEL in patches(after)
    types = {path.stem: [e["eventType"] for e in json.loads(path.read_text())["events"]] for path in (before, after)}
    assert "EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED" in types[before.stem]
    assert types[before.stem][-1] != "EVENT_TYPE_WORKFLOW_EXECUTION_CANCELED"
    assert types[after.stem][-1] == "EVENT_TYPE_WORKFLOW_EXECUTION_CANCELED"


def test_histories_of_a_job_input_run_sent_cancel_under_an_ended_jobs_id_are_kept() -> None:
    """A run added with a job's ``JobInput`` under an ended job's id, sent ``cancel`` before
    its first step: recorded before ``cancel-reporting-run`` it published the job's
    ``JobStatus``; from the patch on it records the marker and publishes none."""
    by_name = {path.stem: path for path in HISTORIES}
    before = by_name["job_input_cancel_signal_before_reporting_core_v3"]
    after = by_name["job_input_cancel_signal_reporting_core_v3"]
    assert CANCEL_REPORTING_RUN not in patches(before) and CANCEL_REPORTING_RUN in patches(after)

    assert "JobStatus" in upserted_attributes(before) and "JobStatus" not in upserted_attributes(after)


def test_histories_of_a_job_input_run_past_its_deadline_under_an_ended_jobs_id_are_kept() -> None:
    """A run added with a job's ``JobInput`` whose deadline was behind it (a reset of an
    ended job's run past its deadline): recorded before ``late-reporting-run`` it published
    the job's ``JobStatus``; from the patch on it asks ``ended_elsewhere`` and publishes none."""
    by_name = {path.stem: path for path in HISTORIES}
    before = by_name["job_input_past_deadline_before_reporting_core_v3"]
    after = by_name["job_input_past_deadline_reporting_core_v3"]
    assert LATE_REPORTING_RUN not in patches(before) and LATE_REPORTING_RUN in patches(after)

    assert "JobStatus" in upserted_attributes(before) and "JobStatus" not in upserted_attributes(after)


def test_histories_of_a_reset_past_the_first_step_of_an_ended_jobs_run_are_kept() -> None:
    """A ``temporal workflow reset`` of a failed job's closed run to the workflow task after
    its first ``acquire``: recorded before ``finish-reporting-run`` the new run published the
    job's end (``JobStatus = failed``) as its own; from the patch on ``finish`` answers
    ``FinishedElsewhere``, the run records the marker, removes the ``JobStatus`` the reset
    copied and publishes none."""
    by_name = {path.stem: path for path in HISTORIES}
    before = by_name["job_reset_past_first_step_before_reporting_core_v3"]
    after = by_name["job_reset_past_first_step_reporting_core_v3"]
    assert FINISH_REPORTING_RUN not in patches(before) and FINISH_REPORTING_RUN in patches(after)

    def last_job_status(path: Path) -> str | None:
        found = [
            fields["JobStatus"]
            for event in json.loads(path.read_text())["events"]
            if "JobStatus"
            in (
                fields := event.get("upsertWorkflowSearchAttributesEventAttributes", {})
                .get("searchAttributes", {})
                .get("indexedFields", {})
            )
        ]
        data = found[-1].get("data") if found else None
        return json.loads(base64.b64decode(data)) if data else None

    assert last_job_status(before) == "failed" and last_job_status(after) is None


def test_histories_of_a_reset_of_a_jobs_open_run_the_reconciler_ended_are_kept() -> None:
    """``temporal workflow reset --type FirstWorkflowTask`` of a Task job's open run after the
    reconciler ended the job (no worker could run it): recorded before
    ``own-run-admitted-late`` the new run admitted its Task, found the job ended and only
    reported it (no ``JobStatus``: the failed jobs' list named the expired job zero times);
    from the patch on admission answers ``own_run``, the run records the marker and publishes
    the job's end."""
    by_name = {path.stem: path for path in HISTORIES}
    before = by_name["job_reset_open_run_ended_before_own_run_core_v3"]
    after = by_name["job_reset_open_run_ended_own_run_core_v3"]
    assert OWN_RUN_ADMITTED_LATE not in patches(before) and OWN_RUN_ADMITTED_LATE in patches(after)
    assert "JobStatus" not in upserted_attributes(before) and "JobStatus" in upserted_attributes(after)
    for path in (before, after):
        assert json.loads(path.read_text())["events"][-1]["eventType"] == "EVENT_TYPE_WORKFLOW_EXECUTION_FAILED"


def test_an_admission_writes_the_own_run_flag_only_when_set() -> None:
    """``Admitted.own_run`` is new: every other admission keeps its bytes, and admissions
    recorded before it decode as False (the run only reports an ended job, as it did)."""
    from curaflow.domain.messages import Admitted, JobInput, JobState

    converter = DATA_CONVERTER.payload_converter
    inp = JobInput(job_id="demo@manual-k", plan_id="p", created_at_ms=1, deadline_at_ms=2, targets=[])
    plain = Admitted(job_input=inp, created=False, final=JobState(job_id="demo@manual-k"))
    [payload] = converter.to_payloads([plain])
    assert set(json.loads(payload.data)) == {"job_input", "created", "final"}
    assert converter.from_payloads([payload], [Admitted])[0].own_run is False
    [flagged] = converter.to_payloads([plain.model_copy(update={"own_run": True})])
    assert json.loads(flagged.data)["own_run"] is True
    assert converter.from_payloads([flagged], [Admitted])[0].own_run is True


def test_histories_of_a_job_input_reporting_run_started_plainly_before_and_after_it_carries_the_job_are_kept() -> None:
    """A run added by a plain start with an ended job's ``JobInput`` (no search attributes at
    its start): recorded before ``reporting-run-attributes`` it reported the job without
    ``JobType`` (read as a run that held no job); from the patch on it upserts the job's
    ``JobType`` / ``TargetIds``, never its state."""
    by_name = {path.stem: path for path in HISTORIES}
    before, after = by_name["job_input_reporting_cancelled_core_v3"], by_name["job_input_reporting_attributes_core_v3"]
    assert REPORTING_RUN_ATTRIBUTES not in patches(before) and REPORTING_RUN_ATTRIBUTES in patches(after)

    assert "JobType" not in upserted_attributes(before)
    assert {"JobType", "TargetIds"} <= upserted_attributes(after) and "JobStatus" not in upserted_attributes(after)


def test_histories_before_and_after_the_source_heartbeat_are_kept() -> None:
    """Jobs admitted before a source step's heartbeat timeout was the lease (no marker, no
    ``source_heartbeat_timeout_ms``) replay as before; jobs after it carry the marker."""
    from workflows.job import SOURCE_HEARTBEAT

    shapes = {
        SOURCE_HEARTBEAT in patches(path) for path in HISTORIES if job_history(path) and "core-v2" in patches(path)
    }
    assert shapes == {True, False}


def workflow_type(path: Path) -> str:
    first = json.loads(path.read_text())["events"][0]
    return str(first["workflowExecutionStartedEventAttributes"]["workflowType"]["name"])


def job_history(path: Path) -> bool:
    first = json.loads(path.read_text())["events"][0]
    return bool(first["workflowExecutionStartedEventAttributes"]["workflowType"]["name"] == "JobWorkflow")


def patches(path: Path) -> set[str]:
    """The ``workflow.patched`` ids recorded in a history."""
    found = set()
    for event in json.loads(path.read_text())["events"]:
        if event.get("markerRecordedEventAttributes", {}).get("markerName") == "core_patch":
            payload = event["markerRecordedEventAttributes"]["details"]["patch-data"]["payloads"][0]["data"]
            found.add(json.loads(base64.b64decode(payload))["id"])
    return found


def upserted_attributes(path: Path) -> set[str]:
    """The names of the search attributes a history's workflow upserted (set or removed)."""
    return {
        name
        for event in json.loads(path.read_text())["events"]
        for name in event.get("upsertWorkflowSearchAttributesEventAttributes", {})
        .get("searchAttributes", {})
        .get("indexedFields", {})
    }


@pytest.mark.parametrize("path", HISTORIES, ids=[p.stem for p in HISTORIES])
async def test_recorded_history_replays(path: Path) -> None:
    history = WorkflowHistory.from_json(path.stem, path.read_text())
    replayer = Replayer(
        workflows=[JobWorkflow, ScheduledJobWorkflow, EventPushWorkflow, OneNewWork],
        data_converter=DATA_CONVERTER,
        workflow_runner=sandbox_runner(),
    )
    result = await replayer.replay_workflow(history, raise_on_replay_failure=False)
    assert result.replay_failure is None, f"{path.name}: {result.replay_failure}"


def test_a_cell_payload_keeps_the_field_names_histories_hold() -> None:
    """``CellSnapshot.fallback_pass`` travels as ``fallback_stage``, the name recorded
    histories (and workers from before the rename) use; both names are read."""
    from curaflow.domain.models import CellSnapshot

    converter = DATA_CONVERTER.payload_converter
    [payload] = converter.to_payloads([CellSnapshot(target_id="t", fallback_pass=2)])
    body = json.loads(payload.data)
    assert body["fallback_stage"] == 2 and "fallback_pass" not in body
    [back] = converter.from_payloads([payload], [CellSnapshot])
    assert back.fallback_pass == 2
    assert CellSnapshot.model_validate({"target_id": "t", "fallback_pass": 3}).fallback_pass == 3


def test_a_step_result_writes_the_another_run_flag_only_when_set() -> None:
    """``CellUpdate.ended_in_another_run`` is new: a result without it keeps the bytes every
    step result had (a normal job's history does not grow), and results recorded before it
    decode as False."""
    from curaflow.domain.messages import CellUpdate
    from curaflow.domain.models import CellSnapshot

    converter = DATA_CONVERTER.payload_converter
    plain = CellUpdate(cell=CellSnapshot(target_id="t"))
    [payload] = converter.to_payloads([plain])
    assert set(json.loads(payload.data)) == {"cell", "retry_stage", "cancel_requested", "deadline_passed", "delivery"}
    [back] = converter.from_payloads([payload], [CellUpdate])
    assert back.ended_in_another_run is False
    [flagged] = converter.to_payloads([plain.model_copy(update={"ended_in_another_run": True})])
    assert json.loads(flagged.data)["ended_in_another_run"] is True
    assert converter.from_payloads([flagged], [CellUpdate])[0].ended_in_another_run is True


def test_histories_of_the_temporal_client_shapes_are_kept() -> None:
    """A job started by update-with-start (admission update, ``admit``, ``cell_progress``),
    an HTTP job whose live state followed ``cell_progress``, and a refused input."""
    by_name = {path.stem: path for path in HISTORIES}
    client_job = json.loads(by_name["job_temporal_client_v3"].read_text())["events"]
    kinds = {next(k for k in event if k.endswith("EventAttributes")) for event in client_job}
    assert "workflowExecutionUpdateAcceptedEventAttributes" in kinds
    assert "workflowExecutionSignaledEventAttributes" in kinds
    assert patches(by_name["job_temporal_client_v3"]) >= {"core-v2", "cell-progress"}
    assert patches(by_name["job_succeeded_v3"]) >= {"core-v2", "cell-progress"}
    refused = json.loads(by_name["job_refused_input_v3"].read_text())["events"]
    failure = refused[-1]["workflowExecutionFailedEventAttributes"]["failure"]
    assert failure["applicationFailureInfo"]["type"] == "invalid_params"
    assert failure["message"] == "request body must be a JSON object"


@pytest.mark.parametrize(("name", "kind"), [("job_no_candidate_v3", "job_failed"), ("job_deadline_v3", "job_expired")])
def test_histories_of_failed_jobs_failing_their_execution_are_kept(name: str, kind: str) -> None:
    """A job that ends failed / expired fails its execution (``failed-execution``), its
    final state in the failure's details."""
    path = next(p for p in HISTORIES if p.stem == name)
    assert "failed-execution" in patches(path)
    last = json.loads(path.read_text())["events"][-1]
    failure = last["workflowExecutionFailedEventAttributes"]["failure"]
    assert failure["applicationFailureInfo"]["type"] == kind
    assert failure["applicationFailureInfo"]["nonRetryable"] is True
    detail = failure["applicationFailureInfo"]["details"]["payloads"][0]["data"]
    assert json.loads(base64.b64decode(detail))["status"] == kind.removeprefix("job_")


@pytest.mark.parametrize(("name", "ended"), [("deadline", "job_expired"), ("target_left_out", "job_failed")])
def test_histories_of_a_forged_job_input_run_before_and_after_its_finish_is_refused_are_kept(
    name: str, ended: str
) -> None:
    """A ``JobInput`` run started under an admitted job's id with an earlier deadline (one
    behind it) or with its target left out: recorded before 2026-12-07 its ``finish`` ended
    the job (``expired``, ``failed``) and the execution failed so; after it, ``finish`` is
    refused (``foreign_caller``: the run's input is not the job's stored input) and the
    execution fails with the refusal. The workflow sends its input with ``finish``'s facts —
    a local activity's input, which its marker does not hold — so both replay on today's
    code (the parametrized test), with the same commands."""
    by_name = {path.stem: path for path in HISTORIES}
    before = json.loads(by_name[f"job_forged_{name}_before_refusal_core_v3"].read_text())["events"]
    after = json.loads(by_name[f"job_forged_{name}_core_v3"].read_text())["events"]

    def failure_type(events: list[dict[str, object]]) -> object:
        failure = events[-1]["workflowExecutionFailedEventAttributes"]["failure"]  # type: ignore[index]
        return failure["applicationFailureInfo"]["type"]  # type: ignore[index]

    assert (failure_type(before), failure_type(after)) == (ended, "foreign_caller")

    def markers(events: list[dict[str, object]]) -> list[object]:
        return [
            e["markerRecordedEventAttributes"]["markerName"] for e in events if "markerRecordedEventAttributes" in e
        ]  # type: ignore[index]

    assert markers(before) == markers(after)  # the same local activities, finish's last


def test_histories_of_a_two_target_cancel_before_and_after_the_cancel_rule_are_kept() -> None:
    """The same two-target job cancelled once one cell delivered and while the other's send
    was out: recorded before the rule (finish said ``succeeded``: the execution completed)
    and after it (``cancelled``: Canceled). No workflow code changed — the end follows the
    ``finish`` local activity's recorded result — so both replay (the parametrized test)."""
    by_name = {path.stem: path for path in HISTORIES}
    ends = {}
    for name in ("job_cancel_two_targets_v2", "job_cancel_two_targets_v3"):
        events = json.loads(by_name[name].read_text())["events"]
        signals = [
            e["workflowExecutionSignaledEventAttributes"]["signalName"]
            for e in events
            if "workflowExecutionSignaledEventAttributes" in e
        ]
        assert "cancel" in signals, name
        ends[name] = events[-1]["eventType"]
    assert ends == {
        "job_cancel_two_targets_v2": "EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED",
        "job_cancel_two_targets_v3": "EVENT_TYPE_WORKFLOW_EXECUTION_CANCELED",
    }


def test_histories_of_foreign_input_are_kept() -> None:
    """A job sent a forged terminal ``cell_progress`` snapshot (dropped) and one whose
    ``acquire`` an operator completed with junk (the step counted as failed): both record
    ``foreign-input`` where it came, and end."""
    by_name = {path.stem: path for path in HISTORIES}
    for name, last in (
        ("job_foreign_input_core_v3", "workflowExecutionCompletedEventAttributes"),
        ("job_foreign_result_core_v3", "workflowExecutionFailedEventAttributes"),
    ):
        assert patches(by_name[name]) == {"core-v3", FOREIGN_INPUT}, name
        events = json.loads(by_name[name].read_text())["events"]
        assert last in events[-1], name
        assert not any("workflowTaskFailedEventAttributes" in event for event in events), name


def test_histories_of_a_step_paused_at_the_deadline_before_and_after_paused_steps_are_kept() -> None:
    """A job whose ``deliver`` an operator paused (the attempt ended by the receiver's 503,
    the next one held) until the deadline: recorded on the commit before ``paused-steps``
    it cancelled the step at once and finished (no marker); from the patch on it records
    the marker and asks ``paused_steps`` (a local activity) before the cancel. Both replay
    on today's code (:func:`test_recorded_history_replays`) and end failed."""
    by_name = {path.stem: path for path in HISTORIES}
    before = by_name["job_paused_at_deadline_before_paused_steps_core_v3"]
    after = by_name["job_paused_at_deadline_core_v3"]
    assert patches(before) == {"core-v3"}
    assert patches(after) == {"core-v3", PAUSED_STEPS}
    for path, asked in ((before, 0), (after, 1)):
        events = json.loads(path.read_text())["events"]
        assert "workflowExecutionFailedEventAttributes" in events[-1], path.name
        cancel = next(i for i, e in enumerate(events) if "activityTaskCancelRequestedEventAttributes" in e)
        markers = [e for e in events[:cancel] if "markerRecordedEventAttributes" in e]
        local = [m for m in markers if m["markerRecordedEventAttributes"]["markerName"] == "core_local_activity"]
        assert len(local) == asked, path.name


def test_histories_of_a_deadline_whose_paused_steps_went_unanswered_are_kept() -> None:
    """A job at its deadline with its search in flight whose ``paused_steps`` local activity
    failed (Temporal's describe unanswered): recorded before ``paused-steps-unanswered`` the
    failure — the activity's ``ApplicationError``, not the ``ActivityError`` the workflow
    caught — failed the run with it, nothing cancelled, no finish; it replays so on today's
    code (:func:`test_recorded_history_replays`). From the patch on the run records the
    marker, names no pause, stops the step and finishes: ``job_expired``."""
    by_name = {path.stem: path for path in HISTORIES}
    before = by_name["job_paused_steps_unanswered_before_caught_core_v3"]
    after = by_name["job_paused_steps_unanswered_core_v3"]
    assert (patches(before), patches(after)) == (
        {"core-v3", PAUSED_STEPS},
        {"core-v3", PAUSED_STEPS, PAUSED_STEPS_UNANSWERED},
    )
    ends = {}
    for path in (before, after):
        events = json.loads(path.read_text())["events"]
        local = [
            json.loads(base64.b64decode(e["markerRecordedEventAttributes"]["details"]["data"]["payloads"][0]["data"]))[
                "activity_type"
            ]
            for e in events
            if e.get("markerRecordedEventAttributes", {}).get("markerName") == "core_local_activity"
        ]
        cancelled = any("activityTaskCancelRequestedEventAttributes" in e for e in events)
        failure = events[-1]["workflowExecutionFailedEventAttributes"]["failure"]
        ends[path.stem] = (local, cancelled, failure["applicationFailureInfo"]["type"])
    assert ends == {
        "job_paused_steps_unanswered_before_caught_core_v3": (["paused_steps"], False, "RPCError"),
        "job_paused_steps_unanswered_core_v3": (["paused_steps", "finish"], True, "job_expired"),
    }


def test_histories_from_before_foreign_input_are_kept() -> None:
    """Recorded on the commit before ``foreign-input``: a job that *took* a forged terminal
    ``cell_progress`` snapshot (the live state said ``submitted``) and a job cancelled by a
    ``cancel`` signal with its one argument. Neither records the marker; both replay on
    today's code (:func:`test_recorded_history_replays`): the forged snapshot is taken
    again, the cancel cancels again."""
    by_name = {path.stem: path for path in HISTORIES}
    forged = by_name["job_forged_progress_before_foreign_input_v3"]
    cancelled = by_name["job_cancel_signal_before_foreign_input_v3"]
    for path, last in (
        (forged, "workflowExecutionCompletedEventAttributes"),
        (cancelled, "workflowExecutionCanceledEventAttributes"),
    ):
        assert patches(path) == {"core-v3"}, path.name
        assert last in json.loads(path.read_text())["events"][-1], path.name
    signals = {
        event["workflowExecutionSignaledEventAttributes"]["signalName"]: json.loads(
            base64.b64decode(event["workflowExecutionSignaledEventAttributes"]["input"]["payloads"][0]["data"])
        )
        for path in (forged, cancelled)
        for event in json.loads(path.read_text())["events"]
        if "workflowExecutionSignaledEventAttributes" in event
        and event["workflowExecutionSignaledEventAttributes"]["signalName"] in ("cell_progress", "cancel")
    }
    assert signals["cell_progress"]["state"] == "submitted" and signals["cancel"] == {"reason": "operator"}


def test_histories_of_a_job_input_under_another_id_are_kept() -> None:
    """A copy of a job's ``JobInput`` started under another workflow id: recorded before
    ``own-job-only`` it ran the job's steps (``acquire``, the ``finish`` local activity)
    and completed — it replays so on today's code (:func:`test_recorded_history_replays`);
    from the patch on it records the marker, runs nothing and fails ``invalid_params``
    (``workflow_id``)."""
    by_name = {path.stem: path for path in HISTORIES}
    before = by_name["job_input_under_another_id_before_refusal_core_v3"]
    assert patches(before) == {"core-v3"}
    events = json.loads(before.read_text())["events"]
    started = events[0]["workflowExecutionStartedEventAttributes"]
    job_input = json.loads(base64.b64decode(started["input"]["payloads"][0]["data"]))
    assert job_input["job_id"] != started["workflowId"]
    scheduled = [
        e["activityTaskScheduledEventAttributes"]["activityType"]["name"]
        for e in events
        if "activityTaskScheduledEventAttributes" in e
    ]
    assert scheduled == ["acquire"] and "workflowExecutionCompletedEventAttributes" in events[-1]

    after = json.loads(by_name["job_input_under_another_id_core_v3"].read_text())["events"]
    assert patches(by_name["job_input_under_another_id_core_v3"]) == {OWN_JOB_ONLY, "core-v3"}
    assert not any("activityTaskScheduledEventAttributes" in e for e in after)
    failure = after[-1]["workflowExecutionFailedEventAttributes"]["failure"]
    assert failure["applicationFailureInfo"]["type"] == "invalid_params"
    detail = json.loads(base64.b64decode(failure["applicationFailureInfo"]["details"]["payloads"][0]["data"]))
    assert detail["detail"]["field"] == "workflow_id"


def state_upserts(events: list[dict[str, object]]) -> list[dict[str, object]]:
    """Each ``JobStatus`` / ``BusinessStatus`` upsert of a history (None: unset), in order."""
    return owned_upserts(events, names=("JobStatus", "BusinessStatus"))


def test_histories_of_a_run_added_under_an_ended_http_jobs_id_are_kept() -> None:
    """``temporal workflow reset --type FirstWorkflowTask`` of a failed job admitted over
    HTTP (its input a ``JobInput``): recorded before ``job-input-reporting-run``, the new
    run published ``running`` then ``failed`` (the failed jobs' list named the job twice) —
    it replays so on today's code (:func:`test_recorded_history_replays`); from the patch on
    it records the marker, removes the ``queued`` it was started with and publishes no job
    state. Both ran the one ``acquire`` (it found the job ended) and the ``finish`` marker,
    and fail ``job_failed`` as the job did."""
    by_name = {path.stem: path for path in HISTORIES}
    before = by_name["job_input_added_run_before_reporting_core_v3"]
    after = by_name["job_input_added_run_core_v3"]
    assert (patches(before), patches(after)) == ({"core-v3"}, {"core-v3", JOB_INPUT_REPORTING_RUN})
    shapes = {}
    for path in (before, after):
        events = json.loads(path.read_text())["events"]
        started = events[0]["workflowExecutionStartedEventAttributes"]
        job_input = json.loads(base64.b64decode(started["input"]["payloads"][0]["data"]))
        assert job_input["job_id"] == started["workflowId"], path.name  # the job's own input, under its id
        assert any("workflowTaskFailedEventAttributes" in e for e in events), path.name  # the reset
        scheduled = [
            e["activityTaskScheduledEventAttributes"]["activityType"]["name"]
            for e in events
            if "activityTaskScheduledEventAttributes" in e
        ]
        assert scheduled == ["acquire"], path.name
        failure = events[-1]["workflowExecutionFailedEventAttributes"]["failure"]
        assert failure["applicationFailureInfo"]["type"] == "job_failed", path.name
        shapes[path.stem] = state_upserts(events)
    assert shapes == {
        "job_input_added_run_before_reporting_core_v3": [
            {"JobStatus": "running"},
            {"JobStatus": "failed", "BusinessStatus": "no_candidate"},
        ],
        "job_input_added_run_core_v3": [{"JobStatus": None}],
    }


def owned_upserts(
    events: list[dict[str, object]],
    names: tuple[str, ...] = ("JobStatus", "BusinessStatus", "JobType", "TargetIds", "ScheduleId"),
) -> list[dict[str, object]]:
    """Each upsert of curaflow's own search attributes (``names``) in a history (None:
    unset), in order."""
    found = []
    for event in events:
        attrs = event.get("upsertWorkflowSearchAttributesEventAttributes")
        if not isinstance(attrs, dict):
            continue
        fields = attrs["searchAttributes"]["indexedFields"]
        said = {
            name: json.loads(base64.b64decode(value["data"])) if value.get("data") else None
            for name, value in fields.items()
            if name in names
        }
        if said:
            found.append(said)
    return found


@pytest.mark.parametrize("shape", ["refused", "job"])
def test_histories_of_runs_started_with_forged_attributes_are_kept(shape: str) -> None:
    """A Task started with curaflow's search attributes set by its starter (``JobStatus``,
    ``BusinessStatus``, ``JobType``, ``TargetIds``, ``ScheduleId``): recorded before
    ``starter-attributes`` the run kept them — a refused run carried its forged ``JobType``
    and ``JobStatus`` to its end, a job's run its forged ``ScheduleId`` — and replays so on
    today's code (:func:`test_recorded_history_replays`); from the patch on the run records
    the marker and removes them in its first workflow task, before its admission's own."""
    by_name = {path.stem: path for path in HISTORIES}
    middle = "refused_" if shape == "refused" else ""
    before = by_name[f"job_forged_attributes_{middle}before_owning_core_v3"]
    after = by_name[f"job_forged_attributes_{middle}core_v3"]
    assert (patches(before), patches(after)) == ({"core-v3"}, {"core-v3", STARTER_ATTRIBUTES})
    for path in (before, after):
        started = json.loads(path.read_text())["events"][0]["workflowExecutionStartedEventAttributes"]
        assert set(started["searchAttributes"]["indexedFields"]) >= {"JobStatus", "JobType", "ScheduleId"}
    removed = dict.fromkeys(("BusinessStatus", "JobStatus", "JobType", "ScheduleId", "TargetIds"))
    before_upserts = owned_upserts(json.loads(before.read_text())["events"])
    after_upserts = owned_upserts(json.loads(after.read_text())["events"])
    if shape == "refused":
        assert (before_upserts, after_upserts) == ([], [removed])
    else:
        assert after_upserts[0] == removed
        assert after_upserts[1] == {"JobStatus": "queued", "JobType": "candidate_search", "TargetIds": ["demo"]}
        assert before_upserts == after_upserts[1:]


def test_histories_of_a_cron_scheduled_start_are_kept() -> None:
    """A Task started with a cron schedule: recorded before ``no-cron`` its first run
    admitted the Task and ran the job to its end (Temporal then started the schedule's next
    run) — it replays so on today's code (:func:`test_recorded_history_replays`); from the
    patch on the run records the marker, runs no step, asks for its own cancel (the
    ``request_cancel`` marker) and ends ``Canceled``, so no next run starts."""
    by_name = {path.stem: path for path in HISTORIES}
    before = json.loads(by_name["job_cron_before_refusal_core_v3"].read_text())["events"]
    after = json.loads(by_name["job_cron_refused_core_v3"].read_text())["events"]
    for events in (before, after):
        assert events[0]["workflowExecutionStartedEventAttributes"]["cronSchedule"]
    assert patches(by_name["job_cron_before_refusal_core_v3"]) == {"core-v3"}
    assert "activityTaskScheduledEventAttributes" in json.dumps(before)
    assert "workflowExecutionCompletedEventAttributes" in before[-1]
    assert patches(by_name["job_cron_refused_core_v3"]) == {"core-v3", NO_CRON}
    assert not any("activityTaskScheduledEventAttributes" in e for e in after)
    assert any("workflowExecutionCancelRequestedEventAttributes" in e for e in after)
    assert "workflowExecutionCanceledEventAttributes" in after[-1]


def test_histories_of_a_task_whose_json_has_no_one_meaning_are_kept() -> None:
    """A Task started by the ``temporal`` CLI with a member twice (``"limit":0,"limit":2``):
    recorded before ``one-meaning-input`` the run admitted it under the last ``limit`` and
    ran the job to its end — it replays so on today's code (:func:`test_recorded_history_replays`:
    the payload converter now marks that input, and the unpatched branch takes its lenient
    reading as before); from the patch on the run records the marker, runs nothing and fails
    with ``POST /jobs``'s refusal of that text (``duplicate_member``)."""
    by_name = {path.stem: path for path in HISTORIES}
    before = by_name["job_ambiguous_task_before_refusal_core_v3"]
    after = by_name["job_ambiguous_task_core_v3"]
    assert (patches(before), patches(after)) == ({"core-v3"}, {"core-v3", ONE_MEANING})
    for path in (before, after):
        started = json.loads(path.read_text())["events"][0]["workflowExecutionStartedEventAttributes"]
        assert b'"limit":0,"limit":2' in base64.b64decode(started["input"]["payloads"][0]["data"]), path.name
    events = json.loads(before.read_text())["events"]
    assert "activityTaskScheduledEventAttributes" in json.dumps(events)
    assert "workflowExecutionCompletedEventAttributes" in events[-1]
    events = json.loads(after.read_text())["events"]
    kinds = [next(k for k in e if k.endswith("EventAttributes")) for e in events]
    assert "activityTaskScheduledEventAttributes" not in kinds  # nothing ran: no step, no admit, no finish
    markers = [e["markerRecordedEventAttributes"]["markerName"] for e in events if "markerRecordedEventAttributes" in e]
    assert set(markers) == {"core_patch"}  # the two patches; no local activity (admit, finish)
    failure = events[-1]["workflowExecutionFailedEventAttributes"]["failure"]
    detail = json.loads(base64.b64decode(failure["applicationFailureInfo"]["details"]["payloads"][0]["data"]))
    assert (detail["code"], detail["detail"]) == ("invalid_params", {"reason": "duplicate_member", "member": "limit"})


@pytest.mark.parametrize("name", ["job_reporting_cancelled", "job_input_reporting_cancelled"])
def test_histories_of_a_run_reporting_a_cancelled_job_are_kept(name: str) -> None:
    """A run added under the id of a job that was terminated (the ledger's ``cancelled /
    execution_terminated``) — a Task started with Temporal's default reuse policy, a start
    with the job's ``JobInput``: recorded before ``cancelled-end`` it only reported the job
    and *completed* with the cancelled state — it replays so on today's code
    (:func:`test_recorded_history_replays`); from the patch on the run records the marker,
    asks for its own cancel (the ``request_cancel`` marker, nothing written) and ends
    ``Canceled``, as the job did. Neither publishes a job state."""
    by_name = {path.stem: path for path in HISTORIES}
    before = json.loads(by_name[f"{name}_before_end_core_v3"].read_text())["events"]
    after = json.loads(by_name[f"{name}_core_v3"].read_text())["events"]
    assert CANCELLED_END not in patches(by_name[f"{name}_before_end_core_v3"])
    assert CANCELLED_END in patches(by_name[f"{name}_core_v3"])
    result = before[-1]["workflowExecutionCompletedEventAttributes"]["result"]["payloads"][0]["data"]
    assert json.loads(base64.b64decode(result))["status"] == "cancelled"
    assert not any("workflowExecutionCancelRequestedEventAttributes" in e for e in before)
    assert any("workflowExecutionCancelRequestedEventAttributes" in e for e in after)
    assert "workflowExecutionCanceledEventAttributes" in after[-1]
    for events in (before, after):
        assert all(value is None for said in state_upserts(events) for value in said.values())


def test_a_cancel_request_writes_the_no_job_flag_only_when_set() -> None:
    """``CancelRequest.no_job`` is new: every cancel a job records keeps its bytes."""
    from curaflow.domain.messages import CancelRequest

    converter = DATA_CONVERTER.payload_converter
    [plain] = converter.to_payloads([CancelRequest()])
    assert json.loads(plain.data) == {"reason": "cancelled_by_consumer"}
    [flagged] = converter.to_payloads([CancelRequest(reason="r", no_job=True)])
    [back] = converter.from_payloads([flagged], [CancelRequest])
    assert back.no_job and json.loads(flagged.data) == {"reason": "r", "no_job": True}


def test_histories_of_a_run_timeout_a_starter_set_are_kept() -> None:
    """A Task started with a short run timeout and a workflow retry policy: recorded before
    ``run-limit`` the run was timed out by Temporal in the middle of its download (a retry
    then ran the job again in a new run) — it replays so on today's code
    (:func:`test_recorded_history_replays`); from the patch on the run records the marker,
    its job's deadline comes before the run's end, and the job expires in its one run (the
    execution fails ``job_expired``, which no retry follows)."""
    by_name = {path.stem: path for path in HISTORIES}
    before = json.loads(by_name["job_run_limit_before_core_v3"].read_text())["events"]
    after = json.loads(by_name["job_run_limit_core_v3"].read_text())["events"]
    for events in (before, after):
        started = events[0]["workflowExecutionStartedEventAttributes"]
        assert started["workflowRunTimeout"] and started["retryPolicy"]
    assert patches(by_name["job_run_limit_before_core_v3"]) == {"core-v3"}
    assert "workflowExecutionTimedOutEventAttributes" in before[-1]
    assert patches(by_name["job_run_limit_core_v3"]) == {"core-v3", RUN_LIMIT}
    failed = after[-1]["workflowExecutionFailedEventAttributes"]["failure"]
    assert failed["applicationFailureInfo"]["type"] == "job_expired"


def test_a_submission_writes_the_run_limit_only_when_set() -> None:
    """``SubmitInput.run_limit`` is new: every other admission keeps its bytes."""
    from curaflow.domain.messages import RunLimit, SubmitInput

    converter = DATA_CONVERTER.payload_converter
    [plain] = converter.to_payloads([SubmitInput(task={"a": 1}, workflow_id="w")])
    assert json.loads(plain.data) == {"task": {"a": 1}, "workflow_id": "w"}
    limited = SubmitInput(task={}, workflow_id="w", run_limit=RunLimit(ends_at_ms=5, timeout="run_timeout"))
    [payload] = converter.to_payloads([limited])
    [back] = converter.from_payloads([payload], [SubmitInput])
    assert back == limited


def test_histories_of_a_callback_jobs_end_before_and_after_the_push_bound_are_kept() -> None:
    """Recorded before ``push-bound`` (no marker, no timer): a job whose pushes settled at
    once, and one whose receiver was down for 8 s after ``finish`` — the end waited for it
    (a 1 s push, so today's bound is 6 s). After it: a job whose pushes settled within the
    bound (the ``callback pushes`` timer left pending) and one whose receiver stayed down —
    the push cancelled at the bound and the execution completed. All replay
    (:func:`test_recorded_history_replays`)."""
    by_name = {path.stem: path for path in HISTORIES}

    def kinds(name: str) -> list[str]:
        return [e["eventType"].removeprefix("EVENT_TYPE_") for e in json.loads(by_name[name].read_text())["events"]]

    for name in ("job_callback_before_push_bound_core_v3", "job_callback_slow_receiver_before_push_bound_core_v3"):
        assert patches(by_name[name]) == {"core-v3"}, name
        assert kinds(name).count("TIMER_STARTED") == 1, name  # the job's deadline only
        assert kinds(name)[-1] == "WORKFLOW_EXECUTION_COMPLETED", name
    slow = json.loads(by_name["job_callback_slow_receiver_before_push_bound_core_v3"].read_text())["events"]
    finish = next(
        e for e in slow if e.get("markerRecordedEventAttributes", {}).get("markerName") == "core_local_activity"
    )
    waited = datetime.fromisoformat(slow[-1]["eventTime"]) - datetime.fromisoformat(finish["eventTime"])
    assert waited > timedelta(seconds=7)
    for name in ("job_callback_core_v3", "job_callback_handed_over_core_v3"):
        assert patches(by_name[name]) == {"core-v3", PUSH_BOUND}, name
        assert kinds(name).count("TIMER_STARTED") == 2, name  # the deadline's and the pushes'
    handed_over = kinds("job_callback_handed_over_core_v3")
    assert handed_over[-2:] == ["ACTIVITY_TASK_CANCEL_REQUESTED", "WORKFLOW_EXECUTION_COMPLETED"]
    assert "ACTIVITY_TASK_CANCEL_REQUESTED" not in kinds("job_callback_core_v3")


def test_histories_of_a_mixed_input_before_explicit_submission_are_kept() -> None:
    """A ``core-v2`` execution started with a ``JobInput`` that also holds a Task's member,
    before ``explicit-submission``: it ran the input as the admitted job (no ``admit``,
    no marker). Recorded from the patch's old branch (tests/workflow/test_versions.py)."""
    from workflows.job import EXPLICIT_SUBMISSION

    path = next(p for p in HISTORIES if p.stem == "job_mixed_input_before_explicit_submission_v2")
    assert patches(path) == {"core-v2"} and EXPLICIT_SUBMISSION not in patches(path)
    events = json.loads(path.read_text())["events"]
    [payload] = events[0]["workflowExecutionStartedEventAttributes"]["input"]["payloads"]
    body = json.loads(base64.b64decode(payload["data"]))
    assert "protocol_version" in body and "job_id" in body and "targets" in body
    kinds = [next(k for k in event if k.endswith("EventAttributes")) for event in events]
    assert "workflowExecutionCompletedEventAttributes" in kinds


def test_histories_of_a_reporting_run_before_and_after_reporting_run_are_kept() -> None:
    """A ``core-v2`` run a client added under an ended job's id: before ``reporting-run``
    it published the job's ``JobStatus`` / ``BusinessStatus`` as if it were the job (no
    marker; recorded from the patch's old branch, tests/workflow/test_versions.py), after
    it only reports (``job_reporting_run_v4``)."""
    from workflows.job import REPORTING_RUN

    by_name = {path.stem: path for path in HISTORIES}
    before, after = by_name["job_reporting_run_before_reporting_v2"], by_name["job_reporting_run_v4"]
    assert patches(before) == {"core-v2"} and REPORTING_RUN in patches(after)
    upserts = [
        event["upsertWorkflowSearchAttributesEventAttributes"]["searchAttributes"]["indexedFields"]
        for event in json.loads(before.read_text())["events"]
        if "upsertWorkflowSearchAttributesEventAttributes" in event
    ]
    assert any("JobStatus" in fields for fields in upserts), upserts


@pytest.mark.parametrize(
    ("name", "patch", "before_ran"),
    [
        ("event_push_ambiguous_input", "push-one-meaning-input", "ACTIVITY_TASK_SCHEDULED"),
        ("scheduled_occurrence_ambiguous_input", "occurrence-one-meaning-input", "START_CHILD_WORKFLOW"),
    ],
)
def test_histories_of_a_push_or_an_occurrence_whose_json_has_no_one_meaning_are_kept(
    name: str, patch: str, before_ran: str
) -> None:
    """A push run started with ``{"job_id":…,"job_id":…}`` and a trampoline whose text names
    ``schedule_id`` twice: recorded before their workflow's patch the run took the last
    member and went on (pushed that job's events; admitted and ran that plan's job) — it
    replays so on today's code (:func:`test_recorded_history_replays`: the unpatched branch
    reads the payload converter's ``AmbiguousObject`` leniently, as before); from the patch
    on the run records the marker, runs nothing and fails naming ``POST /jobs``'s refusal."""
    from workflows.event_push import PUSH_ONE_MEANING
    from workflows.scheduled import OCCURRENCE_ONE_MEANING

    assert patch in {PUSH_ONE_MEANING, OCCURRENCE_ONE_MEANING}
    by_name = {path.stem: path for path in HISTORIES}
    before, after = by_name[f"{name}_before_refusal"], by_name[name]
    assert patch not in patches(before) and patches(after) == {patch}
    for path in (before, after):
        started = json.loads(path.read_text())["events"][0]["workflowExecutionStartedEventAttributes"]
        text = base64.b64decode(started["input"]["payloads"][0]["data"])
        assert b'"job_id":' in text or b'"schedule_id":' in text, path.name
        assert text.count(b'"job_id":') + text.count(b'"schedule_id":') == 2, text
    kinds = [e["eventType"] for e in json.loads(before.read_text())["events"]]
    assert any(before_ran in kind for kind in kinds) and kinds[-1] == "EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED"
    events = json.loads(after.read_text())["events"]
    assert not any("ACTIVITY_TASK" in e["eventType"] or "CHILD_WORKFLOW" in e["eventType"] for e in events)
    failure = events[-1]["workflowExecutionFailedEventAttributes"]["failure"]
    assert failure["applicationFailureInfo"]["type"] in {"invalid_push_input", "invalid_occurrence_input"}
    assert "more than once in one object" in failure["message"]


def test_histories_of_a_reset_occurrence_whose_job_runs_before_and_after_it_follows_it_are_kept() -> None:
    """``temporal workflow reset --type FirstWorkflowTask`` of a trampoline while its job
    ran: recorded before ``occurrence-follows-its-own-job`` the new run's child start was
    refused and it completed at once ``duplicate=True`` — replayed on today's code that
    branch runs again; from the patch on it records the marker, asks whose the job's run is
    (``occurrence_job_run``: its own), waits for it (``follow_own_job``) and completes with
    the job's outcome (tests/integration/test_job_identity.py)."""
    from workflows.scheduled import FOLLOWS_ITS_OWN_JOB

    by_name = {path.stem: path for path in HISTORIES}
    before = by_name["scheduled_occurrence_reset_own_job_before_follow"]
    after = by_name["scheduled_occurrence_reset_own_job"]
    assert FOLLOWS_ITS_OWN_JOB not in patches(before) and FOLLOWS_ITS_OWN_JOB in patches(after)
    results = {}
    for path in (before, after):
        events = json.loads(path.read_text())["events"]
        kinds = [e["eventType"] for e in events]
        assert "EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_FAILED" in kinds, path.name
        completed = events[-1]["workflowExecutionCompletedEventAttributes"]
        results[path.stem] = json.loads(base64.b64decode(completed["result"]["payloads"][0]["data"]))
        activities = [
            e["activityTaskScheduledEventAttributes"]["activityType"]["name"]
            for e in events
            if "activityTaskScheduledEventAttributes" in e
        ]
        own = ["occurrence_job_run", "follow_own_job"] if path == after else []
        assert activities == ["admit_occurrence", *own], path.name
    assert (results[before.stem]["duplicate"], results[before.stem]["status"]) == (True, None)
    assert (results[after.stem]["duplicate"], results[after.stem]["status"]) == (False, "succeeded")
