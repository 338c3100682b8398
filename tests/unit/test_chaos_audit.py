"""The chaos suite's truth audit (bench/chaos/audit.py): each rule on the smallest case."""

from __future__ import annotations

import json
from pathlib import Path

from bench.chaos.audit import Arrival, audit, directory_arrivals, job_deliveries, webhook_arrivals


def hook(work: str, job: str, key: str | None = None, route: str = "hook") -> Arrival:
    return Arrival(route, work, job, key or f"curaflow:{route}:illust:{work}:{job}:t", "webhook")


def intent(work: str, job: str, status: str = "delivered", route: str = "hook", sent_at: int = 1) -> dict[str, object]:
    return {"job_id": job, "route": route, "work_id": work, "status": status, "sent_at": sent_at}


def report(work: str, status: str = "delivered", route: str = "hook") -> dict[str, str]:
    return {"target_id": "t", "route": route, "work_id": work, "status": status}


def test_an_honest_run_has_no_finding() -> None:
    found = audit([hook("1", "a")], [intent("1", "a")], {"a": [report("1")]})

    assert found.findings == 0
    assert (found.webhook_requests, found.webhook_deliveries, found.resends) == (1, 1, 0)
    assert (found.ledger_delivered, found.at_route) == (1, 1)


def test_a_resend_with_the_same_webhook_id_is_counted_but_is_not_a_duplicate() -> None:
    found = audit([hook("1", "a"), hook("1", "a")], [intent("1", "a")], {"a": [report("1")]})

    assert found.resends == 1
    assert found.webhook_deliveries == 1
    assert found.cross_job_duplicates == 0


def test_one_work_reaching_a_route_from_two_jobs_is_a_cross_job_duplicate() -> None:
    found = audit(
        [hook("1", "a"), hook("1", "b")], [intent("1", "a"), intent("1", "b")], {"a": [report("1")], "b": [report("1")]}
    )

    assert found.cross_job_duplicates == 1
    assert found.examples["cross_job_duplicates"] == [{"route": "hook", "work_id": "1", "jobs": ["a", "b"]}]


def test_two_jobs_delivered_in_the_ledger_is_a_duplicate_even_if_the_route_has_one() -> None:
    found = audit([hook("1", "a")], [intent("1", "a"), intent("1", "b")], {"a": [report("1")], "b": [report("1")]})

    assert found.cross_job_duplicates == 1
    assert found.missing_at_route == 1  # b's "delivered" is not at the route


def test_a_delivery_at_the_route_its_job_does_not_report_is_a_phantom() -> None:
    found = audit([hook("1", "a"), hook("2", "x")], [intent("1", "a")], {"a": []})

    assert found.phantoms == 2
    assert {e["work_id"]: e["job_known"] for e in found.examples["phantoms"]} == {"1": True, "2": False}


def test_reported_as_released_or_failed_while_at_the_route_is_understated_unknown_is_honest() -> None:
    arrivals = [hook("1", "a"), hook("2", "a"), hook("3", "a")]
    reports = {"a": [report("1", "released"), report("2", "failed"), report("3", "unknown")]}

    found = audit(arrivals, [], reports)

    assert found.understated == 2
    assert found.phantoms == 0


def test_a_send_claimed_after_the_recorded_cancel_is_counted() -> None:
    found = audit(
        [hook("1", "a")],
        [intent("1", "a", sent_at=2000), intent("2", "b", status="released", sent_at=500)],
        {"a": [report("1")], "b": []},
        cancels={"a": 1000, "b": 1000},
    )

    assert found.sends_after_cancel == 1
    assert found.examples["sends_after_cancel"][0]["job_id"] == "a"


def test_views_are_read_from_the_receiver_log_directories_and_both_job_shapes(tmp_path: Path) -> None:
    received = [
        {"route": "hook", "work_id": "1", "job_id": "a", "webhook_id": "k1"},
        {"route": "other", "work_id": "9", "job_id": "z", "webhook_id": "k9"},
    ]
    folder = tmp_path / "dir" / "1"
    folder.mkdir(parents=True)
    (folder / "manifest.json").write_text(
        json.dumps({"job_id": "a", "idempotency_key": "k", "route": "dir", "work": {"work_id": "1"}})
    )
    (tmp_path / "dir" / "2").mkdir()  # pages without a manifest: not delivered

    assert webhook_arrivals(received, {"hook"}) == [Arrival("hook", "1", "a", "k1", "webhook")]
    assert directory_arrivals({"dir": tmp_path / "dir", "gone": tmp_path / "missing"}) == [
        Arrival("dir", "1", "a", "k", "directory")
    ]
    assert job_deliveries({"status": "succeeded", "result": {"deliveries": [report("1")]}}) == [report("1")]
    assert job_deliveries({"status": "cancelled", "error": {"detail": {"deliveries": [report("2")]}}}) == [report("2")]
    assert job_deliveries({"status": "failed", "error": {"code": "x"}}) == []


def test_a_cancelled_job_may_fail_only_on_its_own() -> None:
    from bench.chaos.harness import failed_on_its_own

    assert failed_on_its_own("failed", "delivery_failed")  # the route refused: the truth
    assert not failed_on_its_own("failed", "delivery_abandoned")  # a stop: the cancel was lost
    assert not failed_on_its_own("failed", "internal_error")
    assert not failed_on_its_own("failed", None)
    assert not failed_on_its_own("expired", "execution_timeout")
