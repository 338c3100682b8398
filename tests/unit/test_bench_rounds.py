"""The throughput scenario's rounds (``bench/scenarios/throughput.py``): an engine's rounds
read as one run, as docs/performance.md ("Interleaved rounds") states."""

from __future__ import annotations

import pytest

from bench.counts import JobCounts
from bench.scenarios.throughput import Run, combine


def test_rates_are_over_the_summed_time_and_costs_are_the_rounds_means() -> None:
    # 200 jobs at 10/s (20 s) and 200 at 5/s (40 s): 400 jobs in 60 s, not the mean rate 7.5.
    fast = Run(10.0, 60.0, 50.0, 10.0, 200, counts=JobCounts(events=23), statements={"acquire": 30.0}, pages=9.0)
    slow = Run(5.0, 100.0, 70.0, 20.0, 199, counts=JobCounts(events=24), statements={"acquire": 32.0, "x": 2.0})
    both = combine([fast, slow])
    assert both.jobs_per_s == pytest.approx(400 / 60)
    assert (both.worker_cpu_ms, both.server_cpu_ms, both.postgres_cpu_ms) == (80.0, 60.0, 15.0)
    assert both.total_cpu_ms == 155.0
    assert both.succeeded == 399
    assert both.counts is not None and both.counts.events == 23.5
    # a step counted in one round only is averaged over the rounds that were counted
    assert both.statements == {"acquire": 31.0, "x": 1.0}
    assert both.transactions is None
    assert both.pages == 4.5


def test_one_round_is_itself() -> None:
    one = Run(8.0, 90.0, 60.0, 15.0, 30, counts=JobCounts(events=23))
    assert combine([one]).jobs_per_s == pytest.approx(8.0)
    assert combine([one]).total_cpu_ms == one.total_cpu_ms


def test_statements_come_from_the_counted_batch_and_cpu_from_the_rounds() -> None:
    # The rounds run on workers that do not count their statements (counting costs the
    # worker CPU); the counted batch's statements, slots and pages are the ones reported.
    from bench.scenarios.throughput import result

    rounds = Run(10.0, 70.0, 50.0, 10.0, 200, counts=JobCounts(events=23))
    counted = Run(4.0, 99.0, 99.0, 99.0, 50, statements={"acquire": 30.0, "admission": 5.0}, gate_slots=5.0, pages=4.0)
    same_io = Run(11.0, 60.0, 60.0, 0.0, 200)
    report = result(200, rounds, Run(20.0, 20.0, 40.0), same_io, counted)
    assert report.metrics["cpu_ms_per_job"]["curaflow"]["total"] == 130.0
    assert report.metrics["cpu_vs_same_io"] == round(130 / 120, 3)
    assert report.metrics["ledger_statements_per_job"] == 35.0
    assert report.metrics["ledger_statements_one_page_work"] == 32.0  # 3 slots beyond one search page and one image
    assert (report.metrics["rate_gate_slots_per_job"], report.metrics["pages_per_job"]) == (5.0, 4.0)


def test_the_ab_runs_alternate_which_side_goes_first() -> None:
    from pathlib import Path

    from bench.ab import run_order

    sides = {"this": Path("/a"), "other": Path("/b")}
    assert [[name for name, _ in run_order(sides, r)] for r in (1, 2, 3)] == [
        ["this", "other"],
        ["other", "this"],
        ["this", "other"],
    ]
