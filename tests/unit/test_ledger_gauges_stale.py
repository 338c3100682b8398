"""A process's ledger gauges once its reading is old (no database: the collector alone).

Every process with a ledger pool exports the same gauges, and the alert rules aggregate
them with ``max``. A process that can no longer read the ledger (its refresh fails: a
partition, the 5 s statement timeout under load) kept exporting its last reading for as
long as it lived: ``curaflow_jobs_stuck 1`` from an hour ago outvoted the fresh 0 of every
other process, and ``CuraflowJobsStuck`` paged on jobs that had ended, while
``CuraflowLedgerGaugesStale`` (the *youngest* reading's age) stayed silent.
"""

from __future__ import annotations

import time

from prometheus_client import CollectorRegistry

from curaflow.ledger import gauges as module
from curaflow.ledger.gauges import LedgerGauges, LedgerSnapshot
from curaflow.observability.metrics import LEDGER_GAUGE_FAMILIES

AGE = "curaflow_ledger_gauges_age_seconds"


def reading(age_s: float) -> LedgerSnapshot:
    return LedgerSnapshot(
        taken_at_ms=1_700_000_000_000,
        taken_monotonic=time.monotonic() - age_s,
        open_jobs={"queued": 0, "running": 2},
        oldest_open_age_s=9000.0,
        stuck={"past_deadline": 0, "queued_too_long": 0, "no_heartbeat": 1},
        dead_letters=4,
        pushes_pending=1,
        cooldown_s={"default": 600.0},
        deliveries={("out", "delivered"): 3},
        jobs_failed_last_s=1_699_999_000.0,
        cells_failed_last_s={"auth_failed": 1_699_999_000.0},
        deliveries_last_s={("out", "failed"): 1_699_999_000.0},
        routes_paused_until_s={"out": 1_700_003_600.0},
        schedule_missed_last_s={("nightly", "skipped_overlap"): 1_699_999_000.0},
    )


def exported(gauges: LedgerGauges) -> dict[str, list[float]]:
    registry = CollectorRegistry()
    registry.register(gauges)
    return {family.name: [sample.value for sample in family.samples] for family in registry.collect()}


def test_a_fresh_reading_exports_every_gauge() -> None:
    gauges = LedgerGauges()
    gauges.snapshot = reading(age_s=5)
    families = exported(gauges)
    assert set(families) == set(LEDGER_GAUGE_FAMILIES)
    assert families["curaflow_jobs_stuck"] == [0, 0, 1]
    assert families["curaflow_jobs_failed_last_seconds"] == [1_699_999_000.0]
    assert families["curaflow_route_paused_until_seconds"] == [1_700_003_600.0]
    assert families[AGE][0] >= 5


def test_a_fact_the_ledger_does_not_hold_has_no_series() -> None:
    """No failed job, no pause: no ``…_last_seconds`` series (a 0 would read as 1970, and an
    alert's ``> time() - window`` must never meet a made-up time)."""
    gauges = LedgerGauges()
    gauges.snapshot = LedgerSnapshot(taken_at_ms=1_700_000_000_000, taken_monotonic=time.monotonic())
    families = exported(gauges)
    for name in (
        "curaflow_jobs_failed_last_seconds",
        "curaflow_cells_failed_last_seconds",
        "curaflow_deliveries_last_seconds",
        "curaflow_route_paused_until_seconds",
        "curaflow_schedule_missed_last_seconds",
    ):
        assert families[name] == [], name


def test_a_reading_older_than_the_bound_exports_only_its_age() -> None:
    gauges = LedgerGauges()
    gauges.snapshot = reading(age_s=121)  # CuraflowLedgerGaugesStale's bound: 120 s
    families = exported(gauges)
    # what this process does not know any more it does not say: only how old its reading is
    assert {name: values for name, values in families.items() if values} == {AGE: families[AGE]}
    assert families[AGE][0] > 120


def test_the_bound_is_the_stale_alerts_unless_the_refresh_interval_is_longer() -> None:
    # CuraflowLedgerGaugesStale reads an age above 120 s as no reading
    assert module.STALE_AFTER_S == 120
    assert module.stale_after_s(15_000) == 120
    # three intervals: a process refreshing every 5 minutes is not stale between refreshes
    assert module.stale_after_s(300_000) == 900


def test_a_process_that_never_read_the_ledger_exports_how_long_it_has_not() -> None:
    """A process whose refresh fails from its start (the ledger unreachable or timing out
    since it started, a role without rights on a table the reading needs) exported nothing
    at all — not even an age — so ``CuraflowLedgerGaugesStale`` (the youngest reading's age)
    stayed silent, and every alert on a ledger fact was blind with nothing saying so, as
    long as such processes were the only ones running (all restarted during the outage).
    Until its first reading it now exports only its age: the time since it began to read."""
    gauges = LedgerGauges()
    gauges.started_monotonic -= 300  # began to read five minutes ago, never succeeded
    families = exported(gauges)
    assert {name: values for name, values in families.items() if values} == {AGE: families[AGE]}
    assert families[AGE][0] >= 300


def test_a_process_that_just_began_to_read_is_not_stale() -> None:
    families = exported(LedgerGauges())
    assert {name: values for name, values in families.items() if values} == {AGE: families[AGE]}
    assert families[AGE][0] < 120
