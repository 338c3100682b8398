"""The alert rules and the Grafana dashboard shipped in ``deploy/``.

Always: every PromQL expression names only series curaflow exports
(:func:`curaflow.observability.metrics.exported_metric_names`). With ``promtool`` (Debian package
``prometheus``; ``.ci/run`` installs it when it runs as root): ``promtool check rules``,
``promtool check config`` and one ``promtool test rules`` scenario per alert — the alert
fires on the series that should page an operator and stays silent before.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from curaflow.observability.metrics import LEDGER_GAUGE_FAMILIES, exported_metric_names
from tests.source_kinds import kinds_said

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "deploy" / "prometheus" / "alerts.yml"
PROMETHEUS = ROOT / "deploy" / "prometheus" / "prometheus.yml"
DASHBOARD = ROOT / "deploy" / "grafana" / "curaflow-dashboard.json"
PROMTOOL = shutil.which("promtool")
needs_promtool = pytest.mark.skipif(
    PROMTOOL is None, reason="promtool is not installed (Debian: apt-get install -y prometheus)"
)

#: alert → (input series, eval time, labels it fires with, an earlier time when it is silent)
SCENARIOS: dict[str, dict[str, Any]] = {
    # a job ended failed at 300 s (5m): the ledger's time of it, read by every process
    "CuraflowJobsFailed": {
        "series": [
            ('curaflow_jobs_failed_last_seconds{instance="api"}', "-86400x5 300x10"),
            ('curaflow_jobs_failed_last_seconds{instance="w1"}', "-86400x5 300x10"),
        ],
        "at": "8m",
        "labels": {"severity": "page"},
        "silent_at": "4m",
    },
    "CuraflowJobsStuck": {
        "series": [
            ('curaflow_jobs_stuck{why="no_heartbeat",instance="api"}', "0 0 1x15"),
            ('curaflow_jobs_stuck{why="no_heartbeat",instance="w1"}', "0 0 1x15"),
            ('curaflow_jobs_stuck{why="past_deadline",instance="api"}', "0x17"),
        ],
        "at": "10m",
        "labels": {"severity": "page", "why": "no_heartbeat"},
        "silent_at": "5m",
    },
    "CuraflowCallbackDeadLetters": {
        "series": [
            ('curaflow_callback_dead_letters{instance="api"}', "2x10 3x10"),
            ('curaflow_callback_dead_letters{instance="w1"}', "2x10 3x10"),
        ],
        "at": "15m",
        "labels": {"severity": "warning"},
        "silent_at": "8m",
    },
    # Pushes owed to the consumers' receivers, more than 10 from 3m on: none drained for 30 minutes.
    "CuraflowCallbackPushesPending": {
        "series": [
            ('curaflow_callback_pushes_pending{instance="api"}', "0x3 12+2x40"),
            ('curaflow_callback_pushes_pending{instance="w1"}', "0x3 12+2x40"),
        ],
        "at": "34m",
        "labels": {"severity": "warning"},
        "silent_at": "32m",
    },
    "CuraflowSourceAccessRefused": {
        "series": [
            ('curaflow_cells_failed_last_seconds{reason="account_restricted",instance="w1"}', "_x3 180x10"),
            ('curaflow_cells_failed_last_seconds{reason="auth_failed",instance="w1"}', "-86400x13"),
        ],
        "at": "6m",
        "labels": {"severity": "page", "reason": "account_restricted"},
        "silent_at": "2m",
    },
    "CuraflowOldestOpenJob": {
        "series": [('curaflow_oldest_open_job_age_seconds{instance="api"}', "7000+60x20")],
        "at": "15m",
        "labels": {"severity": "warning"},
        "silent_at": "3m",
    },
    "CuraflowNoWorker": {
        "series": [('curaflow_worker_up{instance="w1"}', "1x5 0x10")],
        "at": "12m",
        "labels": {"severity": "page"},
        "silent_at": "4m",
    },
    "CuraflowNoApi": {
        "series": [('curaflow_api_up{instance="api"}', "1x5 stale")],
        "at": "9m",
        "labels": {"severity": "page"},
        "silent_at": "6m",
    },
    "CuraflowLedgerGaugesStale": {
        "series": [
            ('curaflow_ledger_gauges_age_seconds{instance="api"}', "10x4 10+60x12"),
            ('curaflow_ledger_gauges_age_seconds{instance="w1"}', "10x4 10+60x12"),
        ],
        "at": "12m",
        "labels": {"severity": "warning"},
        "silent_at": "4m",
    },
    # The ledger failing every minute from 3 min on (a full disk: the gauges' reads still work).
    "CuraflowLedgerUnavailable": {
        "series": [
            ('curaflow_ledger_unavailable_last_seconds{where="activity",instance="w1"}', "_x3 180+60x15"),
            ('curaflow_ledger_unavailable_last_seconds{where="api",instance="api"}', "-86400x19"),
        ],
        "at": "14m",
        "labels": {"severity": "page", "where": "activity"},
        "silent_at": "8m",
    },
    "CuraflowSourceCoolingDown": {
        "series": [('curaflow_source_cooldown_seconds{account="default",instance="w1"}', "0x3 900-1x20")],
        "at": "20m",
        "labels": {"severity": "warning", "account": "default"},
        "silent_at": "8m",
    },
    "CuraflowDeliveriesRefused": {
        "series": [
            ('curaflow_deliveries_last_seconds{route="hook",status="failed",instance="w1"}', "_x3 180x10"),
            ('curaflow_deliveries_last_seconds{route="hook",status="delivered",instance="w1"}', "0+60x13"),
            ('curaflow_deliveries_last_seconds{route="tg",status="unknown",instance="w1"}', "-86400x13"),
        ],
        "at": "6m",
        "labels": {"severity": "warning", "route": "hook"},
        "silent_at": "2m",
    },
    "CuraflowSourceAnswersUnrecognised": {
        "series": [
            (
                'curaflow_source_unrecognised_answers_total{account="default",kind="gone",instance="w1"}',
                "_x3 1x10",
            ),
            (
                'curaflow_source_unrecognised_answers_total{account="default",kind="not_an_image",instance="w1"}',
                "_x3 0x10",
            ),
            ('process_start_time_seconds{instance="w1"}', "_x3 170x10"),
        ],
        "at": "6m",
        "labels": {"severity": "warning", "account": "default", "kind": "gone"},
        "silent_at": "2m",
    },
    # A degraded finish (a counter: initialised at 0, then 1).
    "CuraflowFinishDegraded": {
        "series": [
            ('curaflow_finish_degraded_total{value="cell",result="degraded",instance="w1"}', "_x3 0 1x9"),
            ('curaflow_finish_degraded_total{value="event",result="not_stored",instance="w1"}', "_x3 0x10"),
            ('process_start_time_seconds{instance="w1"}', "-86400x13"),
        ],
        "at": "6m",
        "labels": {"severity": "page", "value": "cell", "result": "degraded"},
        "silent_at": "2m",
    },
    "CuraflowRoutePaused": {
        "series": [
            ('curaflow_route_paused_until_seconds{route="tg",instance="w1"}', "_x3 3780x10"),
            ('curaflow_route_paused_until_seconds{route="hook",instance="w1"}', "-86400x13"),
        ],
        "at": "6m",
        "labels": {"severity": "page", "route": "tg"},
        "silent_at": "2m",
    },
    "CuraflowScheduleBroken": {
        "series": [
            ('curaflow_schedule_broken{schedule_id="nightly",why="not_found",instance="w1"}', "0x3 1x20"),
            ('curaflow_schedule_broken{schedule_id="nightly",why="action_not_a_plan",instance="w1"}', "0x23"),
            ('curaflow_schedule_broken{schedule_id="hourly",why="not_found",instance="w1"}', "0x23"),
        ],
        "at": "15m",
        "labels": {"severity": "warning", "schedule_id": "nightly", "why": "not_found"},
        "silent_at": "10m",
    },
    "CuraflowScheduleOccurrencesMissed": {
        "series": [
            (
                'curaflow_schedule_occurrences_missed_total{schedule_id="nightly",why="skipped_outage",instance="w1"}',
                "0x3 1x10",
            ),
            (
                'curaflow_schedule_occurrences_missed_total{schedule_id="nightly",why="skipped_overlap",instance="w1"}',
                "0x13",
            ),
        ],
        "at": "6m",
        "labels": {"severity": "warning", "schedule_id": "nightly", "why": "skipped_outage"},
        "silent_at": "2m",
    },
    # A long-running worker's first mismatch: the gauge's series appears with the time it
    # was met (a counter's series born at 1 would show no increase).
    "CuraflowConfigurationMismatch": {
        "series": [
            ('curaflow_config_mismatch_last_seconds{kind="route",name="hook-new",instance="w1"}', "_x3 180x10"),
            ('curaflow_config_mismatch_last_seconds{kind="route",name="hook-old",instance="w2"}', "-3600x13"),
        ],
        "at": "6m",
        "labels": {"severity": "page", "kind": "route", "name": "hook-new"},
        "silent_at": "2m",
    },
    # The API answered a request 500 (a bug; the counter exists at 0 from the process's start).
    "CuraflowApiInternalErrors": {
        "series": [
            ('curaflow_api_internal_errors_total{instance="api"}', "0x3 1x10"),
            ('process_start_time_seconds{instance="api"}', "-86400x13"),
        ],
        "at": "6m",
        "labels": {"severity": "warning"},
        "silent_at": "2m",
    },
    # The reconciler failing on Temporal every minute from 3 min on (a proxy answering INTERNAL
    # to every describe: each tick refused every request about a job's execution).
    "CuraflowTemporalUnavailable": {
        "series": [
            ('curaflow_temporal_unavailable_last_seconds{where="reconciler",instance="api"}', "_x3 180+60x15"),
            ('curaflow_temporal_unavailable_last_seconds{where="reconciler",instance="w1"}', "-86400x19"),
        ],
        "at": "9m",
        "labels": {"severity": "page", "where": "reconciler"},
        "silent_at": "7m",
    },
    # A worker whose loop cannot recover (it exits 3 every 5 minutes or so) and comes back:
    # its start time changes at 5m, 12m and 19m (one scrape missed at each exit).
    "CuraflowProcessRestarting": {
        "series": [
            ('process_start_time_seconds{instance="w1"}', "-86400x3 stale 230x5 stale 590x5 stale 950x10"),
            ('curaflow_worker_up{instance="w1"}', "1x3 stale 1x5 stale 1x5 stale 1x10"),
            ('process_start_time_seconds{instance="temporal"}', "-86400x25"),
        ],
        "at": "20m",
        "labels": {"severity": "warning", "instance": "w1"},
        "silent_at": "17m",
    },
}


#: A process that counted its first failure before its first scrape: the series appears
#: at 1 (``process_start_time_seconds`` says it started 10 s before); a series initialised
#: at 0 at start is the other shape, in :data:`SCENARIOS`. Values: ``_`` is no sample. Only
#: the alerts that still read a counter (a fact the ledger does not hold).
FIRST_FAILURE: dict[str, dict[str, Any]] = {
    "CuraflowApiInternalErrors": {
        "series": [
            ('curaflow_api_internal_errors_total{instance="api2"}', "_x3 1x10"),
            ('process_start_time_seconds{instance="api2"}', "_x3 170x10"),
        ],
        "at": "6m",
        "labels": {"severity": "warning"},
        "silent_at": "2m",
    },
    "CuraflowFinishDegraded": {
        "series": [
            ('curaflow_finish_degraded_total{value="outcome",result="degraded",instance="w2"}', "_x3 1x10"),
            ('process_start_time_seconds{instance="w2"}', "_x3 170x10"),
        ],
        "at": "6m",
        "labels": {"severity": "page", "value": "outcome", "result": "degraded"},
        "silent_at": "2m",
    },
    "CuraflowScheduleOccurrencesMissed": {
        "series": [
            (
                'curaflow_schedule_occurrences_missed_total{schedule_id="nightly",why="skipped_overlap",instance="w2"}',
                "_x3 1x10",
            ),
            ('process_start_time_seconds{instance="w2"}', "_x3 170x10"),
        ],
        "at": "6m",
        "labels": {"severity": "warning", "schedule_id": "nightly", "why": "skipped_overlap"},
        "silent_at": "2m",
    },
}


#: The counter alerts (the facts the ledger does not hold): (alert, alerted series, window in
#: minutes, labels they fire with, the count within the window that fires them).
COUNTER_ALERTS = (
    ("CuraflowApiInternalErrors", 'curaflow_api_internal_errors_total{instance="w1"}', 60, {"severity": "warning"}, 1),
    (
        "CuraflowFinishDegraded",
        'curaflow_finish_degraded_total{value="cell",result="degraded",instance="w1"}',
        60,
        {"severity": "page", "value": "cell", "result": "degraded"},
        1,
    ),
    (
        "CuraflowScheduleOccurrencesMissed",
        'curaflow_schedule_occurrences_missed_total{schedule_id="nightly",why="skipped_outage",instance="w1"}',
        60,
        {"severity": "warning", "schedule_id": "nightly", "why": "skipped_outage"},
        1,
    ),
    (
        "CuraflowSourceAnswersUnrecognised",
        'curaflow_source_unrecognised_answers_total{account="default",kind="not_an_image",instance="w1"}',
        60,
        {"severity": "warning", "account": "default", "kind": "not_an_image"},
        1,
    ),
)
START = 'process_start_time_seconds{instance="w1"}'
#: A process that started a day before the scenario.
LONG_AGO = "-86400x240"


def counter_cases() -> list[dict[str, Any]]:
    """Each counter alert under missed scrapes, an outage, counter resets and restarts.

    A failure counted long ago never pages again, whatever happens to the scrapes; a
    failure counted by a restarted process pages once, whether its series comes back at
    0 and steps to 1, at a higher value, or at the very value it had before the restart.
    """
    cases: list[dict[str, Any]] = []
    for alert, series, w, labels, n in COUNTER_ALERTS:
        cases += [
            {  # one failed scrape (a GC pause, a SIGSTOP, a scrape timeout) of a process with an old failure
                "name": f"{alert}: a missed scrape",
                "alert": alert,
                "series": [(series, f"{n}x119 stale {n}x100"), (START, LONG_AGO)],
                "expect": [(f"{t}m", None) for t in (119, 120, 121, 125, 120 + w, 121 + w, 130 + w, 200)],
            },
            {  # Prometheus (or the process's network) away 30 minutes, longer than the lookback
                "name": f"{alert}: Prometheus away",
                "alert": alert,
                "series": [(series, f"{n}x59 _x30 {n}x100"), (START, LONG_AGO)],
                "expect": [(f"{t}m", None) for t in (90, 91, 95, 90 + w, 91 + w, 150)],
            },
            {  # a failure right after a missed scrape
                "name": f"{alert}: a failure after a missed scrape",
                "alert": alert,
                "series": [(series, f"0x29 stale 0x4 {n}x60"), (START, LONG_AGO)],
                "expect": [("35m", None), ("36m", labels), (f"{35 + w}m", labels), (f"{36 + w + 5}m", None)],
            },
            {  # a restart: the counter resets to 0 (initialised at start), no new failure
                "name": f"{alert}: a restart resets the counter",
                "alert": alert,
                "series": [(series, f"{2 * n}x59 _x2 0x100"), (START, "-86400x59 _x2 3650x100")],
                "expect": [(f"{t}m", None) for t in (61, 62, 65, 60 + w, 90, 150)],
            },
            {  # a restart and a failure before the first scrape: back at 1, below the old value
                "name": f"{alert}: a restart, back at 1",
                "alert": alert,
                "series": [(series, f"{2 * n}x59 _x2 {n}x100"), (START, "-86400x59 _x2 3650x100")],
                "expect": [("61m", None), ("62m", labels), (f"{60 + w}m", labels), (f"{62 + w + 3}m", None)],
            },
            {  # a restart and as many failures before its first scrape as the old process had counted
                "name": f"{alert}: a restart, back at the same value",
                "alert": alert,
                "series": [(series, f"{n}x59 _x2 {n}x100"), (START, "-86400x59 _x2 3650x100")],
                "expect": [("61m", None), ("62m", labels), (f"{60 + w}m", labels), (f"{62 + w + 3}m", None)],
            },
            {  # a restart back at the value it had (no step: only the start time tells), then a
                # missed scrape, then Prometheus away 3 minutes: one page, not a page per gap
                "name": f"{alert}: a restart back at the same value, then missed scrapes",
                "alert": alert,
                "series": [
                    (series, f"{n}x59 _x2 {n}x4 stale {n}x10 _x3 {n}x100"),
                    (START, "-86400x59 _x2 3650x4 stale 3650x10 _x3 3650x100"),
                ],
                "expect": [("62m", labels), ("66m", labels), ("67m", labels), ("80m", labels), (f"{60 + w}m", labels)],
            },
            {  # a brand-new process (a new instance) whose first scrape shows a failure
                "name": f"{alert}: a new process, first scrape at 1",
                "alert": alert,
                "series": [
                    (series, f"{n}x59 stale"),
                    (START, "-86400x59 stale"),
                    (series.replace('instance="w1"', 'instance="w9"'), f"_x61 {n}x100"),
                    ('process_start_time_seconds{instance="w9"}', "_x61 3650x100"),
                ],
                "expect": [("60m", None), ("61m", labels), (f"{60 + w}m", labels), (f"{62 + w + 3}m", None)],
            },
        ]
    return cases


#: The reconciler's Temporal outage, as the API's process exports it (its last failure's time).
TEMPORAL_DOWN = 'curaflow_temporal_unavailable_last_seconds{where="reconciler",instance="api"}'
TEMPORAL_PAGE = {"severity": "page", "where": "reconciler"}

#: The gauge alerts under one missed scrape: it neither pages nor delays a page.
GAUGE_CASES: list[dict[str, Any]] = [
    {
        "name": "CuraflowJobsStuck: a missed scrape inside its for",
        "alert": "CuraflowJobsStuck",
        "series": [('curaflow_jobs_stuck{why="no_heartbeat",instance="w1"}', "0 0 1x3 stale 1x15")],
        "expect": [("6m", None), ("7m", {"severity": "page", "why": "no_heartbeat"})],
    },
    {
        "name": "CuraflowCallbackDeadLetters: a missed scrape, an outage, a restart",
        "alert": "CuraflowCallbackDeadLetters",
        "series": [
            ('curaflow_callback_dead_letters{instance="api"}', "2x10 stale 2x10 _x10 2x30"),
            ('curaflow_callback_dead_letters{instance="w1"}', "2x10 stale 2x10 _x5 2x35"),
        ],
        "expect": [(f"{t}m", None) for t in (10, 11, 12, 21, 25, 32, 33, 40, 60)],
    },
    {
        "name": "CuraflowCallbackDeadLetters: a dead letter after a prune",
        "alert": "CuraflowCallbackDeadLetters",
        "series": [('curaflow_callback_dead_letters{instance="api"}', "10x9 5x10 6x40")],
        "expect": [("15m", None), ("21m", {"severity": "warning"}), ("52m", None)],
    },
    {
        "name": "CuraflowCallbackPushesPending: a missed scrape inside its for",
        "alert": "CuraflowCallbackPushesPending",
        "series": [('curaflow_callback_pushes_pending{instance="api"}', "0x3 12+2x20 stale 54+2x20")],
        "expect": [("33m", None), ("34m", {"severity": "warning"})],
    },
    {  # a burst of jobs ending at once: hundreds owed for minutes, pushed, then the usual few
        "name": "CuraflowCallbackPushesPending: a burst that drains never pages",
        "alert": "CuraflowCallbackPushesPending",
        "series": [('curaflow_callback_pushes_pending{instance="api"}', "0x3 500-40x12 3x40")],
        "expect": [(f"{t}m", None) for t in (5, 15, 30, 40, 55)],
    },
    {  # the receivers (or the push queue's workers) back at 40m: the pushes owed are sent
        "name": "CuraflowCallbackPushesPending: the pushes are sent again",
        "alert": "CuraflowCallbackPushesPending",
        "series": [('curaflow_callback_pushes_pending{instance="api"}', "0x3 40x37 0x20")],
        "expect": [("34m", {"severity": "warning"}), ("40m", {"severity": "warning"}), ("42m", None)],
    },
    {
        "name": "CuraflowOldestOpenJob: a missed scrape inside its for",
        "alert": "CuraflowOldestOpenJob",
        "series": [('curaflow_oldest_open_job_age_seconds{instance="api"}', "7000+60x6 stale 7480+60x20")],
        "expect": [("6m", None), ("10m", {"severity": "warning"})],
    },
    {
        "name": "CuraflowNoWorker: one missed scrape of the only worker",
        "alert": "CuraflowNoWorker",
        "series": [('curaflow_worker_up{instance="w1"}', "1x10 stale 1x10")],
        "expect": [(f"{t}m", None) for t in (10, 11, 12, 13)],
    },
    {
        "name": "CuraflowNoApi: one missed scrape of the only API",
        "alert": "CuraflowNoApi",
        "series": [('curaflow_api_up{instance="api"}', "1x10 stale 1x10")],
        "expect": [(f"{t}m", None) for t in (10, 11, 12, 13)],
    },
    {
        "name": "CuraflowLedgerUnavailable: a blip of the ledger never pages",
        "alert": "CuraflowLedgerUnavailable",
        "series": [('curaflow_ledger_unavailable_last_seconds{where="api",instance="api"}', "_x3 180x10 stale 180x20")],
        "expect": [(f"{t}m", None) for t in (5, 8, 10, 13, 14, 20, 30)],
    },
    {
        "name": "CuraflowTemporalUnavailable: a missed scrape inside its for",
        "alert": "CuraflowTemporalUnavailable",
        "series": [(TEMPORAL_DOWN, "_x3 180+60x4 stale 480+60x15")],
        "expect": [("7m", None), ("8m", TEMPORAL_PAGE), ("9m", TEMPORAL_PAGE), ("15m", TEMPORAL_PAGE)],
    },
    {
        "name": "CuraflowLedgerGaugesStale: a missed scrape inside its for",
        "alert": "CuraflowLedgerGaugesStale",
        "series": [
            ('curaflow_ledger_gauges_age_seconds{instance="api"}', "10x4 10+60x12"),
            ('curaflow_ledger_gauges_age_seconds{instance="w1"}', "10x4 10+60x2 stale 250+60x8"),
        ],
        "expect": [("8m", None), ("9m", {"severity": "warning"})],
    },
    {
        "name": "CuraflowLedgerGaugesStale: the fresh process misses a scrape",
        "alert": "CuraflowLedgerGaugesStale",
        "series": [
            ('curaflow_ledger_gauges_age_seconds{instance="api"}', "10+60x20"),
            ('curaflow_ledger_gauges_age_seconds{instance="w1"}', "10x9 stale 10x2 stale stale 10x6"),
        ],
        "expect": [(f"{t}m", None) for t in (10, 11, 12, 13, 14, 15, 16, 17)],
    },
    {  # the only process restarted during an outage and never read: its age counts from its start
        "name": "CuraflowLedgerGaugesStale: a process that never read",
        "alert": "CuraflowLedgerGaugesStale",
        "series": [
            ('curaflow_ledger_gauges_age_seconds{instance="api"}', "10x4 10+60x3 stale"),
            ('curaflow_ledger_gauges_age_seconds{instance="w1"}', "_x8 0+60x15"),
        ],
        "expect": [("8m", None), ("12m", None), ("13m", {"severity": "warning"}), ("20m", {"severity": "warning"})],
    },
    {
        "name": "CuraflowSourceCoolingDown: a missed scrape inside its for",
        "alert": "CuraflowSourceCoolingDown",
        "series": [('curaflow_source_cooldown_seconds{account="default",instance="w1"}', "0x3 900-1x8 stale 890-1x20")],
        "expect": [("12m", None), ("14m", {"severity": "warning", "account": "default"})],
    },
    {  # the watch's lock moves to another worker: the first clears its series, the second sets its own
        "name": "CuraflowScheduleBroken: the watch moves to another process inside its for",
        "alert": "CuraflowScheduleBroken",
        "series": [
            ('curaflow_schedule_broken{schedule_id="nightly",why="not_found",instance="w1"}', "1x5 stale"),
            ('curaflow_schedule_broken{schedule_id="nightly",why="not_found",instance="w2"}', "_x6 1x2 stale 1x12"),
        ],
        "expect": [("9m", None), ("11m", {"severity": "warning", "schedule_id": "nightly", "why": "not_found"})],
    },
    {  # one missed scrape neither pages nor delays the page; the page clears 15 minutes after the last mismatch
        "name": "CuraflowConfigurationMismatch: a missed scrape, then the rollout finished",
        "alert": "CuraflowConfigurationMismatch",
        "series": [
            (
                'curaflow_config_mismatch_last_seconds{kind="source",name="second",instance="w1"}',
                "_x3 180x2 stale 300x30",
            ),
        ],
        "expect": [
            ("2m", None),
            ("5m", {"severity": "page", "kind": "source", "name": "second"}),
            ("6m", {"severity": "page", "kind": "source", "name": "second"}),
            ("19m", {"severity": "page", "kind": "source", "name": "second"}),
            ("21m", None),
            ("30m", None),
        ],
    },
    {  # made-up names past the process's bound page under one series, and clear like any
        # (curaflow.observability.metrics.CONFIG_MISMATCH_OTHER)
        "name": "CuraflowConfigurationMismatch: names past the bound page as (other)",
        "alert": "CuraflowConfigurationMismatch",
        "series": [
            ('curaflow_config_mismatch_last_seconds{kind="route",name="(other)",instance="w1"}', "_x3 180x20"),
        ],
        "expect": [
            ("2m", None),
            ("5m", {"severity": "page", "kind": "route", "name": "(other)"}),
            ("19m", None),
        ],
    },
    {  # the worker that met it restarted with the new configuration: its series is gone
        "name": "CuraflowConfigurationMismatch: the old worker restarted",
        "alert": "CuraflowConfigurationMismatch",
        "series": [('curaflow_config_mismatch_last_seconds{kind="route",name="hook",instance="w1"}', "0x5 stale")],
        "expect": [("4m", {"severity": "page", "kind": "route", "name": "hook"}), ("8m", None)],
    },
    {  # repaired (`schedules sync`): the process holding the lock says 0
        "name": "CuraflowScheduleBroken: repaired",
        "alert": "CuraflowScheduleBroken",
        "series": [('curaflow_schedule_broken{schedule_id="nightly",why="not_found",instance="w1"}', "1x15 0x10")],
        "expect": [("14m", {"severity": "warning", "schedule_id": "nightly", "why": "not_found"}), ("18m", None)],
    },
]


#: A cooldown as the gauge shows it: what is left of it, counting down 60 s a minute from
#: the ladder's step (60 s, 120 s, 240 s, 480 s, then the 900 s cap, ``curaflow.domain.ratelimit``);
#: the account asks once when one ends, and a limit still running starts the next at once.
#: ``900-60x14`` is one capped cooldown: 900, 840, … 60 (15 minutes).
COOLDOWN = 'curaflow_source_cooldown_seconds{account="default",instance="w1"}'
COOLING = {"severity": "warning", "account": "default"}
COOLDOWN_CASES: list[dict[str, Any]] = [
    {  # the account limited without end: the ladder climbs to its cap and stays there
        "name": "CuraflowSourceCoolingDown: a rate limit that does not end, the ladder at its cap",
        "alert": "CuraflowSourceCoolingDown",
        "series": [(COOLDOWN, "0x3 60 120-60x1 240-60x3 480-60x7 " + " ".join(["900-60x14"] * 5))],
        # the 480 s step starts at 11m: more than 5 minutes left from then on, for 10 minutes
        "expect": [("10m", None), ("20m", None), ("21m", COOLING), ("40m", COOLING), ("60m", COOLING)],
    },
    {  # the same under a missed scrape inside the for, and one at the turn of a cooldown
        "name": "CuraflowSourceCoolingDown: capped cooldowns under missed scrapes",
        "alert": "CuraflowSourceCoolingDown",
        "series": [(COOLDOWN, "0x3 900-60x4 stale 540-60x8 stale " + " ".join(["900-60x14"] * 3))],
        "expect": [("13m", None), ("14m", COOLING), ("19m", COOLING), ("30m", COOLING)],
    },
    {  # a short streak: the 480 s step, then the account answers again
        "name": "CuraflowSourceCoolingDown: one cooldown of 8 minutes",
        "alert": "CuraflowSourceCoolingDown",
        "series": [(COOLDOWN, "0x3 480-60x7 0x40")],
        "expect": [(f"{t}m", None) for t in (5, 10, 13, 14, 20, 30)],
    },
    {  # one capped cooldown, then the account answers again: pages while it holds, then clears
        "name": "CuraflowSourceCoolingDown: one capped cooldown, then it ends",
        "alert": "CuraflowSourceCoolingDown",
        "series": [(COOLDOWN, "0x3 900-60x14 0x40")],
        "expect": [("13m", None), ("14m", COOLING), ("19m", COOLING), ("22m", None), ("30m", None)],
    },
]


#: What curaflow's processes do in an outage (docs/operations.md "No background loop dies
#: silently"): a loop that cannot reach PostgreSQL or Temporal for ``supervision.fatal_after_ms``
#: (5 min) makes its process exit 3, and each restart exits 2 while the service is still away,
#: before it serves any metrics: its target vanishes (a compose replica leaves Docker's DNS, a
#: failed scrape is marked stale at once: ``stale`` below) until the service is back. Every
#: alert read from the processes' series then resolves, or never fires; a page must fire at
#: every minute of ``paged`` (first, last) all the same. ``firing``: each alert that fires
#: (labels, first minute, last minute); every other alert of the file is silent at every minute.
API_UP = 'curaflow_api_up{instance="api"}'
WORKER_UP = 'curaflow_worker_up{instance="w1"}'
#: a target gone 30 minutes (from minute 8 to 37), then back
GONE = "stale _x29"
PAGE = {"severity": "page"}


def restarting(per_minute: list[str], every: int = 6, upto: int = 47) -> str:
    """A process that exits every ``every`` minutes and is back a minute later: its values
    (one a minute, the last repeated) with a ``stale`` in place of every ``every``-th."""
    values = [per_minute[min(m, len(per_minute) - 1)] for m in range(upto + 1)]
    return " ".join("stale" if m % every == every - 1 else v for m, v in enumerate(values))


OUTAGES: list[dict[str, Any]] = [
    {  # the processes exit at 7m; a job had ended failed at 1m, which paged
        "name": "PostgreSQL down: every process exits and cannot start again for 30 minutes",
        "series": [
            (API_UP, f"1x7 {GONE} 1x10"),
            (WORKER_UP, f"1x7 {GONE} 1x10"),
            ('curaflow_ledger_gauges_age_seconds{instance="api"}', f"10 10+60x6 {GONE} 10x10"),
            ('curaflow_ledger_gauges_age_seconds{instance="w1"}', f"10 10+60x6 {GONE} 10x10"),
            ('curaflow_ledger_unavailable_last_seconds{where="gauges",instance="api"}', f"_ 60+60x6 {GONE}"),
            ('curaflow_ledger_unavailable_last_seconds{where="activity",instance="w1"}', f"_ 60+60x6 {GONE}"),
            ('curaflow_jobs_failed_last_seconds{instance="api"}', f"_ 60x6 {GONE} 60x10"),
            ('curaflow_jobs_failed_last_seconds{instance="w1"}', f"_ 60x6 {GONE} 60x10"),
        ],
        "firing": {
            "CuraflowJobsFailed": (PAGE, 1, 9),  # 6 minutes before its window ends: handed over
            "CuraflowLedgerGaugesStale": ({"severity": "warning"}, 5, 9),
            "CuraflowNoWorker": (PAGE, 10, 37),
            "CuraflowNoApi": (PAGE, 10, 37),
        },
        "paged": (1, 37),
    },
    {  # too many connections: the API cannot open its own (its LISTEN connection, its pool)
        # while the workers keep theirs; it answers 503 ledger_unavailable, exits at 7m
        "name": "the API alone cannot reach the ledger: it exits and cannot start again for 30 minutes",
        "series": [
            (API_UP, f"1x7 {GONE} 1x10"),
            (WORKER_UP, "1x47"),
            ('curaflow_ledger_gauges_age_seconds{instance="api"}', f"10 10+60x6 {GONE} 10x10"),
            ('curaflow_ledger_gauges_age_seconds{instance="w1"}', "10x47"),
            ('curaflow_ledger_unavailable_last_seconds{where="api",instance="api"}', f"_ 60+60x6 {GONE}"),
            ('curaflow_ledger_unavailable_last_seconds{where="gauges",instance="api"}', f"_ 60+60x6 {GONE}"),
        ],
        "firing": {"CuraflowNoApi": (PAGE, 10, 37)},
        "paged": (10, 37),
    },
    {  # the workers' Temporal probe fails for 5 minutes: they exit; the API keeps serving reads
        "name": "Temporal down: the workers exit and cannot start again for 30 minutes",
        "series": [
            (API_UP, "1x47"),
            (WORKER_UP, f"1x7 {GONE} 1x10"),
            ('curaflow_ledger_gauges_age_seconds{instance="api"}', "10x47"),
            ('curaflow_ledger_gauges_age_seconds{instance="w1"}', f"10x7 {GONE} 10x10"),
        ],
        "firing": {"CuraflowNoWorker": (PAGE, 10, 37)},
        "paged": (10, 37),
    },
    {  # a standby after a failover: connections and reads work, every write fails; each
        # process exits on its failing loops and its restart serves again a minute later.
        # A source answer not recognised at 2m (a counter): one page, through the restarts
        # that reset the counter to 0 (each restart's start time is recent).
        "name": "the ledger refuses writes for 40 minutes: every process exits and restarts, again and again",
        "series": [
            (API_UP, restarting(["1"])),
            (WORKER_UP, restarting(["1"])),
            ('curaflow_ledger_gauges_age_seconds{instance="api"}', restarting(["10"])),
            ('curaflow_ledger_gauges_age_seconds{instance="w1"}', restarting(["10"])),
            (
                'curaflow_ledger_unavailable_last_seconds{where="activity",instance="w1"}',
                restarting([str(60 * min(m, 40)) for m in range(48)]),
            ),
            (
                'curaflow_source_unrecognised_answers_total{account="default",kind="gone",instance="w1"}',
                restarting(["0", "0", "1", "1", "1", "1", "0"]),
            ),
            (START, restarting([str(60 * 6 * (m // 6) - 60) if m >= 6 else "-86400" for m in range(48)])),
        ],
        "firing": {
            "CuraflowLedgerUnavailable": ({"severity": "page", "where": "activity"}, 10, 44),
            "CuraflowSourceAnswersUnrecognised": (
                {"severity": "warning", "account": "default", "kind": "gone"},
                2,
                47,
            ),
            # its third restart (18m) that served a scrape; the API's start time is not in the series
            "CuraflowProcessRestarting": ({"severity": "warning", "instance": "w1"}, 18, 47),
        },
        "paged": (10, 44),
    },
]


#: A curaflow process's restarts, as Prometheus scrapes its ``process_start_time_seconds``
#: (``stale``: the scrape that found it gone). ``w1`` is a worker (``curaflow_worker_up``),
#: ``api`` the API; ``temporal`` another program's process on the same Prometheus.
RESTART_LABELS = {"severity": "warning", "instance": "w1"}
W1_UP = ('curaflow_worker_up{instance="w1"}', "1x200")
RESTART_CASES: list[dict[str, Any]] = [
    {  # a loop that cannot recover (a bug on a row, a store it cannot write): exit 3 every
        # 6 minutes, restarted a minute later by Docker / systemd / Kubernetes, for 40 minutes
        "name": "CuraflowProcessRestarting: a worker that exits again and again",
        "alert": "CuraflowProcessRestarting",
        "series": [
            (
                START,
                restarting([str(60 * 6 * (m // 6) - 60) if m >= 6 else "-86400" for m in range(48)], upto=47)
                + " 2820x100",
            ),
            W1_UP,
        ],
        "expect": [
            ("5m", None),
            ("12m", None),  # two restarts: a deploy and a manual one are no page
            ("18m", RESTART_LABELS),
            ("47m", RESTART_LABELS),
            ("94m", RESTART_LABELS),  # the last restarts: 36m, 42m, 48m (fixed then)
            ("96m", None),  # the third last an hour ago
        ],
    },
    {  # a rolling deploy, then a missed scrape, then a restart after an OOM kill: two restarts
        "name": "CuraflowProcessRestarting: a deploy, missed scrapes and one more restart",
        "alert": "CuraflowProcessRestarting",
        "series": [(START, "-86400x10 stale 600x5 stale 600x20 _x5 600x10 stale 3000x60"), W1_UP],
        "expect": [(f"{m}m", None) for m in (11, 17, 40, 52, 60, 100)],
    },
    {  # PostgreSQL away 30 minutes: exits 3, every restart exits 2 before serving metrics
        "name": "CuraflowProcessRestarting: an outage keeps the process away, then it starts once",
        "alert": "CuraflowProcessRestarting",
        "series": [
            (START, "-86400x8 stale _x29 2280x60"),
            ('curaflow_worker_up{instance="w1"}', "1x8 stale _x29 1x60"),
        ],
        "expect": [(f"{m}m", None) for m in (9, 30, 40, 60, 90)],
    },
    {  # another program scraped by the same Prometheus restarts every minute: not curaflow's
        "name": "CuraflowProcessRestarting: another program's restarts",
        "alert": "CuraflowProcessRestarting",
        "series": [('process_start_time_seconds{instance="temporal"}', "0+60x60"), W1_UP, (START, "-86400x60")],
        "expect": [(f"{m}m", None) for m in (5, 30, 60)],
    },
    {  # the API restarting too: each process is named
        "name": "CuraflowProcessRestarting: the API exits again and again",
        "alert": "CuraflowProcessRestarting",
        "series": [
            ('process_start_time_seconds{instance="api"}', "-86400x2 100x5 400x5 700x5 1000x20"),
            ('curaflow_api_up{instance="api"}', "1x40"),
            (START, "-86400x40"),
            W1_UP,
        ],
        "expect": [
            ("11m", None),
            ("17m", {"severity": "warning", "instance": "api"}),
            ("30m", {"severity": "warning", "instance": "api"}),
        ],
    },
]


#: The reconciler failing on Temporal (``curaflow_temporal_unavailable_last_seconds``: each
#: failed tick's time, one a minute in these series): it pages once its ticks have failed
#: within every 3 minutes for 5, through the exits and restarts the failure causes; a blip
#: (Temporal restarting) never pages.
TEMPORAL_CASES: list[dict[str, Any]] = [
    {  # Temporal restarting: the reconciler's ticks fail for a minute, then it answers again
        "name": "CuraflowTemporalUnavailable: a blip of Temporal never pages",
        "alert": "CuraflowTemporalUnavailable",
        "series": [(TEMPORAL_DOWN, "_x3 180 240x30")],
        "expect": [(f"{t}m", None) for t in (3, 5, 7, 8, 10, 20)],
    },
    {  # every tick fails for as long as the proxy refuses: the process exits 3 every
        # supervision.fatal_after_ms and its restart, serving again at once, fails the same way
        "name": "CuraflowTemporalUnavailable: through the process's exits and restarts",
        "alert": "CuraflowTemporalUnavailable",
        "series": [(TEMPORAL_DOWN, restarting([str(60 * m) for m in range(48)]))],
        "expect": [("4m", None), *((f"{t}m", TEMPORAL_PAGE) for t in range(5, 48))],
    },
    {  # Temporal answers again (the last failure at 13m): the page clears
        "name": "CuraflowTemporalUnavailable: Temporal answers again",
        "alert": "CuraflowTemporalUnavailable",
        "series": [(TEMPORAL_DOWN, "_x3 180+60x10 780x20")],
        "expect": [("12m", TEMPORAL_PAGE), ("15m", TEMPORAL_PAGE), ("16m", None), ("30m", None)],
    },
]


def outage_cases() -> list[dict[str, Any]]:
    """Every alert of the file, at every minute of each outage: firing as :data:`OUTAGES` says, else silent."""
    cases: list[dict[str, Any]] = []
    for outage in OUTAGES:
        for rule in rules():
            alert = rule["alert"]
            labels, first, last = outage["firing"].get(alert, (None, -1, -2))
            cases.append(
                {
                    "name": f"{alert}: {outage['name']}",
                    "alert": alert,
                    "series": outage["series"],
                    "expect": [(f"{m}m", labels if first <= m <= last else None) for m in range(48)],
                }
            )
    return cases


#: The alerts on a fact the ledger holds: (alert, its gauge's series on the API, window in
#: minutes, labels they fire with).
LEDGER_FACT_ALERTS = (
    ("CuraflowJobsFailed", 'curaflow_jobs_failed_last_seconds{instance="api"}', 15, {"severity": "page"}),
    (
        "CuraflowSourceAccessRefused",
        'curaflow_cells_failed_last_seconds{reason="auth_failed",instance="api"}',
        30,
        {"severity": "page", "reason": "auth_failed"},
    ),
    (
        "CuraflowDeliveriesRefused",
        'curaflow_deliveries_last_seconds{route="hook",status="unknown",instance="api"}',
        30,
        {"severity": "warning", "route": "hook"},
    ),
    (
        "CuraflowRoutePaused",
        'curaflow_route_paused_until_seconds{route="tg",instance="api"}',
        30,
        {"severity": "page", "route": "tg"},
    ),
    (
        "CuraflowScheduleOccurrencesMissed",
        'curaflow_schedule_missed_last_seconds{schedule_id="nightly",why="skipped_overlap",instance="api"}',
        60,
        {"severity": "warning", "schedule_id": "nightly", "why": "skipped_overlap"},
    ),
)


def ledger_fact_cases() -> list[dict[str, Any]]:
    """Each alert on a ledger gauge under missed scrapes, an outage and restarts: a fact older
    than the window never pages; a fact within it pages from the first reading that shows it
    until the window has passed, whichever process reports it and whatever their scrapes do."""
    cases: list[dict[str, Any]] = []
    for alert, series, w, labels in LEDGER_FACT_ALERTS:
        w2 = series.replace('instance="api"', 'instance="w2"')
        cases += [
            {  # an old fact, every scrape of it missed once, the API away, a worker restarted
                "name": f"{alert}: an old fact, missed scrapes, an outage, a restart",
                "alert": alert,
                "series": [(series, "-86400x20 stale -86400x10 _x30 -86400x40"), (w2, "-86400x40 _x3 -86400x60")],
                "expect": [(f"{t}m", None) for t in (20, 21, 22, 41, 43, 45, 61, 100)],
            },
            {  # a fact at 30m; the only reading process misses scrapes, restarts, then another reports it
                "name": f"{alert}: a fresh fact through missed scrapes and a restart",
                "alert": alert,
                "series": [(series, "_x30 1800x3 stale 1800x2 _x3 1800x120"), (w2, f"_x{30 + w - 2} 1800x60")],
                "expect": [
                    ("29m", None),
                    ("30m", labels),
                    ("34m", labels),
                    ("38m", labels),
                    (f"{30 + w - 1}m", labels),
                    (f"{30 + w + 1}m", None),
                ],
            },
        ]
    return cases


#: A route resumed by an operator (``curaflow routes resume``): its pause leaves the ledger.
ROUTE_RESUMED: dict[str, Any] = {
    "name": "CuraflowRoutePaused: resumed",
    "alert": "CuraflowRoutePaused",
    "series": [('curaflow_route_paused_until_seconds{route="tg",instance="api"}', "_x3 3780x10 stale")],
    "expect": [("12m", {"severity": "page", "route": "tg"}), ("16m", None)],
}


#: A fact the ledger holds whose counting process died before its next scrape (SIGKILL, OOM,
#: a host lost): its counter never shows the increment — the target is gone, or its
#: replacement starts at 0 — while the ledger gauges every surviving process exports
#: (:mod:`curaflow.ledger.gauges`) show it. The failure happened at 300 s (5m); values are
#: Unix seconds on the ledger's clock; ``_`` is no sample (no such fact: no series).
W1_DIED = ('process_start_time_seconds{instance="w1"}', "-86400x5 stale")
W1_RESTARTED = ('process_start_time_seconds{instance="w1"}', "-86400x5 _x2 410x80")
LEDGER_FACTS: list[dict[str, Any]] = [
    {
        "name": "CuraflowJobsFailed: the worker that ended the job failed was killed; it restarts at 0",
        "alert": "CuraflowJobsFailed",
        "series": [
            (
                'curaflow_jobs_terminal_total{business_status="failed",status="failed",trigger="schedule",instance="w1"}',
                "0x5 _x2 0x80",
            ),
            W1_RESTARTED,
            ('curaflow_jobs_failed_last_seconds{instance="api"}', "-86400x5 300x80"),
            ('curaflow_jobs_failed_last_seconds{instance="w1"}', "-86400x5 _x2 300x80"),
        ],
        "expect": [("4m", None), ("6m", {"severity": "page"}), ("19m", {"severity": "page"}), ("21m", None)],
    },
    {
        "name": "CuraflowJobsFailed: the worker's host is lost; only the API remains",
        "alert": "CuraflowJobsFailed",
        "series": [
            (
                'curaflow_jobs_terminal_total{business_status="failed",status="expired",trigger="protocol",instance="w1"}',
                "0x5 stale",
            ),
            W1_DIED,
            ('curaflow_jobs_failed_last_seconds{instance="api"}', "_x5 300x80"),
        ],
        "expect": [("4m", None), ("6m", {"severity": "page"}), ("19m", {"severity": "page"}), ("21m", None)],
    },
    {
        "name": "CuraflowSourceAccessRefused: the worker that failed the cell was killed",
        "alert": "CuraflowSourceAccessRefused",
        "series": [
            ('curaflow_cells_terminal_total{reason="auth_failed",state="failed",instance="w1"}', "0x5 stale"),
            W1_DIED,
            ('curaflow_cells_failed_last_seconds{reason="auth_failed",instance="api"}', "_x5 300x80"),
            ('curaflow_cells_failed_last_seconds{reason="account_restricted",instance="api"}', "-86400x85"),
        ],
        "expect": [
            ("4m", None),
            ("6m", {"severity": "page", "reason": "auth_failed"}),
            ("34m", {"severity": "page", "reason": "auth_failed"}),
            ("36m", None),
        ],
    },
    {
        "name": "CuraflowDeliveriesRefused: the worker that recorded the refusal was killed; it restarts at 0",
        "alert": "CuraflowDeliveriesRefused",
        "series": [
            (
                'curaflow_delivery_results_total{route="hook",kind="webhook",result="rejected",instance="w1"}',
                "0x5 _x2 0x80",
            ),
            W1_RESTARTED,
            ('curaflow_deliveries_last_seconds{route="hook",status="failed",instance="api"}', "_x5 300x80"),
            ('curaflow_deliveries_last_seconds{route="hook",status="delivered",instance="api"}', "0+60x85"),
        ],
        "expect": [
            ("4m", None),
            ("6m", {"severity": "warning", "route": "hook"}),
            ("34m", {"severity": "warning", "route": "hook"}),
            ("36m", None),
        ],
    },
    {
        "name": "CuraflowRoutePaused: the worker that paused the route was killed",
        "alert": "CuraflowRoutePaused",
        "series": [
            ('curaflow_route_pauses_total{route="tg",kind="telegram",instance="w1"}', "0x5 stale"),
            W1_DIED,
            # paused at 300 s for an hour (delivery.route_pause_ms)
            ('curaflow_route_paused_until_seconds{route="tg",instance="api"}', "_x5 3900x120"),
        ],
        "expect": [
            ("4m", None),
            ("6m", {"severity": "page", "route": "tg"}),
            ("59m", {"severity": "page", "route": "tg"}),
            ("94m", {"severity": "page", "route": "tg"}),
            ("96m", None),
        ],
    },
    {
        "name": "CuraflowScheduleOccurrencesMissed: the watch that named the miss was killed",
        "alert": "CuraflowScheduleOccurrencesMissed",
        "series": [
            (
                'curaflow_schedule_occurrences_missed_total{schedule_id="nightly",why="skipped_outage",instance="w1"}',
                "0x5 stale",
            ),
            W1_DIED,
            (
                'curaflow_schedule_missed_last_seconds{schedule_id="nightly",why="skipped_outage",instance="api"}',
                "_x5 300x80",
            ),
        ],
        "expect": [
            ("4m", None),
            ("6m", {"severity": "warning", "schedule_id": "nightly", "why": "skipped_outage"}),
            ("64m", {"severity": "warning", "schedule_id": "nightly", "why": "skipped_outage"}),
            ("66m", None),
        ],
    },
]


def rules() -> list[dict[str, Any]]:
    document = yaml.safe_load(RULES.read_text())
    return [rule for group in document["groups"] for rule in group["rules"]]


def metric_names(expr: str) -> set[str]:
    """Series names a PromQL expression selects (``curaflow_*`` / ``temporal_*`` identifiers)."""
    return set(re.findall(r"\b((?:curaflow|temporal)_[a-z0-9_]+)\b", expr))


def render(template: str, labels: dict[str, str]) -> str:
    """Expand ``{{ $labels.name }}`` (the only templating the annotations use)."""
    return re.sub(r"\{\{\s*\$labels\.(\w+)\s*\}\}", lambda m: labels.get(m.group(1), ""), template)


def test_every_rule_names_only_metrics_curaflow_exports() -> None:
    exported = exported_metric_names()
    for rule in rules():
        names = metric_names(rule["expr"])
        assert names, rule["alert"]
        assert names <= exported, (rule["alert"], names - exported)
        assert rule["labels"]["severity"] in ("page", "warning")
        assert "$value" not in json.dumps(rule.get("annotations", {}))


def test_no_alert_says_a_source_kind_its_expression_does_not_select() -> None:
    """A report never says more than what happened: an account of any source kind (a Pixiv
    account, a ``[sources]`` instance) pages the source alerts, and no series they read
    carries the kind (``curaflow_source_*{account}``, ``curaflow_cells_failed_last_seconds{reason}``),
    so an annotation names a kind only where its expression selects it. Until 2026-12-07
    ``CuraflowSourceAccessRefused`` said "Pixiv refused the account" and
    ``CuraflowSourceCoolingDown`` "Pixiv account … is rate limited" of any source's account."""
    from curaflow.sources.registry import kinds

    known = set(kinds())
    assert "pixiv" in known  # the built-in kind: the test reads the registry, not a list
    wrong = {
        (rule["alert"], key, kind)
        for rule in rules()
        for key, text in rule.get("annotations", {}).items()
        for kind in kinds_said(text, known)
        if not re.search(rf'=~?"[^"]*\b{re.escape(kind)}\b', rule["expr"])
    }
    assert wrong == set()


def test_every_counter_alert_is_tried_under_missed_scrapes_and_restarts() -> None:
    """An alert on a counter (a ``_total`` series) is one of :data:`COUNTER_ALERTS` and
    :data:`FIRST_FAILURE`, so its expression meets the missed-scrape, outage and restart
    cases; none uses ``unless … offset``, which pages on a scrape missed a window ago."""
    counter_rules = {r["alert"] for r in rules() if any(n.endswith("_total") for n in metric_names(r["expr"]))}
    assert counter_rules == {alert for alert, *_ in COUNTER_ALERTS}
    # CuraflowSourceAnswersUnrecognised's scenario (SCENARIOS) is itself a first failure
    assert counter_rules - {"CuraflowSourceAnswersUnrecognised"} <= set(FIRST_FAILURE)
    assert not [r["alert"] for r in rules() if "offset" in r["expr"]]


def test_the_alerts_the_issue_asks_for_exist() -> None:
    by_metric = {name: rule["alert"] for rule in rules() for name in metric_names(rule["expr"])}
    assert "curaflow_jobs_failed_last_seconds" in by_metric  # failed outcomes, from the ledger
    assert "curaflow_jobs_stuck" in by_metric  # stuck jobs
    assert "curaflow_callback_dead_letters" in by_metric  # dead letters
    assert "curaflow_callback_pushes_pending" in by_metric  # pushes owed to the consumers piling up
    assert "curaflow_oldest_open_job_age_seconds" in by_metric  # oldest open job
    refused = next(r for r in rules() if r["alert"] == "CuraflowSourceAccessRefused")
    assert "auth_failed" in refused["expr"] and "account_restricted" in refused["expr"]  # restricted / auth
    assert set(SCENARIOS) == {r["alert"] for r in rules()}  # every alert has a scenario below


def test_the_dashboard_queries_only_metrics_curaflow_exports() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    exported = exported_metric_names()
    exprs = [t["expr"] for panel in dashboard["panels"] for t in panel.get("targets", [])]
    assert len(exprs) >= 8
    used: set[str] = set()
    for expr in exprs:
        names = {n for n in metric_names(expr) if n.startswith("curaflow_")}
        assert names <= exported, (expr, names - exported)
        used |= names
    for gauge in (
        "curaflow_jobs_open",
        "curaflow_jobs_stuck",
        "curaflow_oldest_open_job_age_seconds",
        "curaflow_callback_dead_letters",
        "curaflow_source_cooldown_seconds",
        "curaflow_deliveries",
    ):
        assert gauge in used, gauge
    assert dashboard["uid"] and dashboard["title"] and dashboard["schemaVersion"] >= 30
    assert {v["name"] for v in dashboard["templating"]["list"]} >= {"datasource"}


@needs_promtool
def test_promtool_accepts_the_rules_and_the_scrape_config() -> None:
    assert PROMTOOL is not None
    for args in (["check", "rules", str(RULES)], ["check", "config", str(PROMETHEUS)]):
        done = subprocess.run([PROMTOOL, *args], capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stdout + done.stderr


def promtool_cases(tmp_path: Path, cases: list[dict[str, Any]]) -> subprocess.CompletedProcess[str]:
    """``promtool test rules`` of the shipped rules, one test group per case.

    A case is ``{"alert", "series": [(series, values)], "expect": [(eval_time, labels | None)]}``:
    at each time the alert fires with exactly those labels (and its rendered
    annotations), or, for None, is silent.

    Each alert's cases run against the shipped file cut to that alert's rule (its group and
    the group's settings kept): promtool evaluates every rule of its rule files at every
    step of every test group, and no rule reads another's output (no recording rule, no
    ``ALERTS``), so the other twelve rules only cost time — the counter cases' 49 groups
    took 10 s against all thirteen, 2.5 s against their own. One promtool run reads every
    alert's test file.
    """
    assert PROMTOOL is not None
    shipped = yaml.safe_load(RULES.read_text())
    annotations = {r["alert"]: r.get("annotations", {}) for r in rules()}
    tests: dict[str, list[dict[str, Any]]] = {}
    for case in cases:
        alert = case["alert"]
        checks = []
        for eval_time, labels in case["expect"]:
            expected = []
            if labels is not None:
                rendered = {k: render(v, labels) for k, v in annotations[alert].items()}
                expected = [{"exp_labels": labels, "exp_annotations": rendered}]
            checks.append({"eval_time": eval_time, "alertname": alert, "exp_alerts": expected})
        tests.setdefault(alert, []).append(
            {
                "name": case.get("name", alert),
                "interval": "1m",
                "input_series": [{"series": s, "values": v} for s, v in case["series"]],
                "alert_rule_test": checks,
            }
        )
    files = []
    for alert, groups in tests.items():
        own = [
            {**group, "rules": [r for r in group["rules"] if r.get("alert") == alert]}
            for group in shipped["groups"]
            if any(r.get("alert") == alert for r in group["rules"])
        ]
        assert own, f"{alert} is not in {RULES.name}"
        (tmp_path / f"{alert}.yml").write_text(yaml.safe_dump({**shipped, "groups": own}))
        (tmp_path / f"{alert}.test.yml").write_text(yaml.safe_dump({"rule_files": [f"{alert}.yml"], "tests": groups}))
        files.append(f"{alert}.test.yml")
    return subprocess.run(
        [PROMTOOL, "test", "rules", *files], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )


def promtool_scenarios(tmp_path: Path, scenarios: dict[str, dict[str, Any]]) -> subprocess.CompletedProcess[str]:
    """``promtool test rules`` of the shipped rules: each alert silent at ``silent_at``, firing at ``at``."""
    cases = [
        {"alert": alert, "series": case["series"], "expect": [(case["silent_at"], None), (case["at"], case["labels"])]}
        for alert, case in scenarios.items()
    ]
    return promtool_cases(tmp_path, cases)


@needs_promtool
def test_each_alert_fires_on_its_scenario_and_not_before(tmp_path: Path) -> None:
    done = promtool_scenarios(tmp_path, SCENARIOS)
    assert done.returncode == 0, done.stdout + done.stderr


@needs_promtool
def test_the_counter_alerts_fire_on_a_processs_first_failure(tmp_path: Path) -> None:
    """A counter series that appears at 1 (no 0 before it) is a failure: ``increase()`` alone reads 0."""
    done = promtool_scenarios(tmp_path, FIRST_FAILURE)
    assert done.returncode == 0, done.stdout + done.stderr


@needs_promtool
def test_the_counter_alerts_never_page_on_missed_scrapes_and_page_once_after_a_restart(tmp_path: Path) -> None:
    """Stale samples, an outage, resets and restarts: a page only for a failure within the window."""
    done = promtool_cases(tmp_path, counter_cases())
    assert done.returncode == 0, done.stdout + done.stderr


@needs_promtool
def test_a_fact_of_the_ledger_pages_when_the_process_that_counted_it_died_before_its_scrape(tmp_path: Path) -> None:
    """The pager reads what the ledger holds, not what a process's memory counted: a process
    killed between its count and Prometheus' next scrape loses the increment for good."""
    done = promtool_cases(tmp_path, LEDGER_FACTS)
    assert done.returncode == 0, done.stdout + done.stderr


@needs_promtool
def test_the_ledger_fact_alerts_ride_out_missed_scrapes_outages_and_restarts(tmp_path: Path) -> None:
    """A fact older than the window never pages; a fact within it pages for the window, once."""
    done = promtool_cases(tmp_path, [*ledger_fact_cases(), ROUTE_RESUMED])
    assert done.returncode == 0, done.stdout + done.stderr


def test_every_alert_on_a_ledger_fact_reads_a_ledger_gauge() -> None:
    """The alerts whose fact the ledger holds read the ledger (any process reports it), not a
    counter a killed process takes with it; only the four counter alerts keep a counter."""
    ledger = set(LEDGER_GAUGE_FAMILIES)
    by_alert = {r["alert"]: metric_names(r["expr"]) for r in rules()}
    for alert, *_ in LEDGER_FACT_ALERTS:
        assert by_alert[alert] & ledger, alert
    assert by_alert["CuraflowCallbackDeadLetters"] <= ledger
    with_counter = {alert for alert, names in by_alert.items() if any(n.endswith("_total") for n in names)}
    assert with_counter == {
        "CuraflowApiInternalErrors",  # a 500 answered: nothing of it is written
        "CuraflowScheduleOccurrencesMissed",
        "CuraflowSourceAnswersUnrecognised",
        "CuraflowFinishDegraded",  # not_stored wrote nothing; degraded wrote only a marker text
    }


@needs_promtool
def test_a_process_that_restarts_again_and_again_pages_and_one_restart_does_not(tmp_path: Path) -> None:
    """A process whose background loop cannot recover exits 3 (``background.loop_unrecoverable``)
    and is restarted, serving again within seconds: ``CuraflowNoWorker`` / ``CuraflowNoApi``
    (2 minutes of absence) never see it, and nothing else paged while it went on for hours.
    Three restarts of one process within an hour warn; a deploy, a restart after an outage,
    missed scrapes and another program's restarts do not."""
    done = promtool_cases(tmp_path, RESTART_CASES)
    assert done.returncode == 0, done.stdout + done.stderr


@needs_promtool
def test_a_reconciler_failing_on_temporal_pages_within_minutes_and_a_blip_does_not(tmp_path: Path) -> None:
    """A reconciler whose every tick fails on Temporal (an outage status, or every request about
    a job's execution refused: a proxy answering ``INTERNAL`` to each describe) converges no
    job; until 2026-12-07 only ``CuraflowJobsStuck`` paged, past the jobs' deadlines. Now
    ``CuraflowTemporalUnavailable`` pages 5 minutes in, through the exits and restarts the
    failure causes, and clears when Temporal answers again; Temporal restarting does not page."""
    done = promtool_cases(tmp_path, TEMPORAL_CASES)
    assert done.returncode == 0, done.stdout + done.stderr


@needs_promtool
def test_the_gauge_alerts_ride_out_a_missed_scrape(tmp_path: Path) -> None:
    """One failed scrape neither pages nor resets a pending ``for:``; a prune then a dead letter still pages."""
    done = promtool_cases(tmp_path, GAUGE_CASES)
    assert done.returncode == 0, done.stdout + done.stderr


def per_minute(values: str) -> list[str]:
    """A promtool series' values, one per minute (its expanding notation: ``a+bxn`` is n + 1
    values, ``axn`` n + 1, ``_xn`` n missing samples)."""
    out: list[str] = []
    for token in values.split():
        if missing := re.fullmatch(r"_x(\d+)", token):
            out += ["_"] * int(missing.group(1))
        elif steps := re.fullmatch(r"(-?[\d.]+)([+-][\d.]+)x(\d+)", token):
            start, step, n = float(steps.group(1)), float(steps.group(2)), int(steps.group(3))
            out += [repr(start + step * i) for i in range(n + 1)]
        elif same := re.fullmatch(r"(-?[\d.]+|stale)x(\d+)", token):
            out += [same.group(1)] * (int(same.group(2)) + 1)
        else:
            assert re.fullmatch(r"-?[\d.]+|_|stale", token), token
            out.append(token)
    return out


def test_per_minute_reads_promtools_notation() -> None:
    assert per_minute("0x2 12+2x2 _x2 stale 900-60x1 5") == [
        *("0", "0", "0", "12.0", "14.0", "16.0", "_", "_", "stale", "900.0", "840.0", "5")
    ]


def missed_scrape_cases() -> list[dict[str, Any]]:
    """Every alert's scenario (:data:`SCENARIOS`) with one scrape of every series missed — at
    the minute it fires, the minute before, or the minute it is silent: Prometheus marks a
    failed scrape's series stale at once. The alert fires at the same minute all the same, and
    stays silent where it was: one missed scrape neither pages, delays a page nor resolves one
    (the rule of the gauge alerts' ``last_over_time``, the counter alerts' ``increase``, the
    absences' ``for``). A new alert meets this with its scenario, whatever its expression."""
    cases: list[dict[str, Any]] = []
    for alert, scenario in SCENARIOS.items():
        at, silent = (int(scenario[key].removesuffix("m")) for key in ("at", "silent_at"))
        for missed, expect in ((at, scenario["labels"]), (at - 1, scenario["labels"]), (silent, None)):
            series = []
            for name, values in scenario["series"]:
                minutes = per_minute(values)
                if missed < len(minutes) and minutes[missed] != "_":
                    minutes[missed] = "stale"
                series.append((name, " ".join(minutes)))
            cases.append(
                {
                    "name": f"{alert}: the scrape of minute {missed} missed",
                    "alert": alert,
                    "series": series,
                    "expect": [(f"{at if expect else silent}m", expect)],
                }
            )
    return cases


@needs_promtool
def test_no_alert_pages_on_one_missed_scrape_nor_loses_its_page(tmp_path: Path) -> None:
    done = promtool_cases(tmp_path, missed_scrape_cases())
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr


@needs_promtool
def test_the_cooldown_alert_pages_on_a_rate_limit_that_holds_the_account(tmp_path: Path) -> None:
    """The gauge counts a cooldown down (60 s a minute) and the ladder caps one at 15 min: an
    account kept in long cooldowns pages 10 minutes after the first of them began, however
    the cooldowns follow one another; one short cooldown does not page, nor one that ended."""
    done = promtool_cases(tmp_path, COOLDOWN_CASES)
    assert done.returncode == 0, done.stdout + done.stderr


def test_a_page_stands_while_an_outage_keeps_the_processes_away() -> None:
    """In each of :data:`OUTAGES` the alerts of the file expected to page cover every minute
    of it: an alert read from the processes' series that resolves when they exit hands over
    to one that fires (checked against promtool by the next test)."""
    severity = {r["alert"]: r["labels"]["severity"] for r in rules()}
    unpaged = {}
    for outage in OUTAGES:
        first, last = outage["paged"]
        paging = [(start, end) for alert, (_, start, end) in outage["firing"].items() if severity.get(alert) == "page"]
        silent = [m for m in range(first, last + 1) if not any(start <= m <= end for start, end in paging)]
        if silent:
            unpaged[outage["name"]] = f"no page at minutes {silent[0]}..{silent[-1]}"
    assert not unpaged, unpaged
    for outage in OUTAGES:
        assert set(outage["firing"]) <= set(severity), (outage["name"], set(outage["firing"]) - set(severity))


@needs_promtool
def test_the_alerts_through_outages_that_make_the_processes_exit(tmp_path: Path) -> None:
    """Every alert, every minute of each outage of :data:`OUTAGES`: it fires exactly as expected."""
    done = promtool_cases(tmp_path, outage_cases())
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr


@needs_promtool
def test_the_dashboards_queries_are_valid_promql(tmp_path: Path) -> None:
    """Each query, with Grafana's ``$__rate_interval`` as ``5m``, as a recording rule for promtool."""
    assert PROMTOOL is not None
    dashboard = json.loads(DASHBOARD.read_text())
    exprs = [t["expr"] for panel in dashboard["panels"] for t in panel.get("targets", [])]
    group = {
        "name": "dashboard",
        "rules": [
            {"record": f"dashboard:query{n}", "expr": e.replace("$__rate_interval", "5m")} for n, e in enumerate(exprs)
        ],
    }
    (tmp_path / "queries.yml").write_text(yaml.safe_dump({"groups": [group]}))
    done = subprocess.run([PROMTOOL, "check", "rules", "queries.yml"], cwd=tmp_path, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


def test_a_process_exposes_the_alerted_counter_series_at_zero_from_its_start() -> None:
    """What a scrape right after start sees: the series an alert watches exist, at 0."""
    from prometheus_client import CollectorRegistry, generate_latest
    from prometheus_client.parser import text_string_to_metric_families

    from curaflow.observability import metrics

    registry = CollectorRegistry()
    for counter in (
        metrics.JOBS_TERMINAL,
        metrics.CELLS_TERMINAL,
        metrics.DELIVERY_RESULTS,
        metrics.ROUTE_PAUSES,
        metrics.SOURCE_UNRECOGNISED_ANSWERS,
        metrics.SCHEDULE_MISSED,
        metrics.FINISH_DEGRADED,
        metrics.API_INTERNAL_ERRORS,  # no label: at 0 from the import
    ):
        registry.register(counter)
    before = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(generate_latest(registry).decode())
        for s in family.samples
    }
    metrics.initialise_series([("hook", "webhook"), ("tg", "telegram")], ["default", "second"], ["nightly"])
    after = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(generate_latest(registry).decode())
        for s in family.samples
        if s.name.endswith("_total")
    }
    expected = [
        ("curaflow_jobs_terminal_total", {"business_status": "failed", "status": "failed", "trigger": "schedule"}),
        ("curaflow_jobs_terminal_total", {"business_status": "failed", "status": "expired", "trigger": "protocol"}),
        ("curaflow_cells_terminal_total", {"state": "failed", "reason": "auth_failed"}),
        ("curaflow_cells_terminal_total", {"state": "failed", "reason": "account_restricted"}),
        ("curaflow_delivery_results_total", {"route": "tg", "kind": "telegram", "result": "rejected"}),
        ("curaflow_delivery_results_total", {"route": "hook", "kind": "webhook", "result": "unknown"}),
        ("curaflow_route_pauses_total", {"route": "tg", "kind": "telegram"}),
        ("curaflow_source_unrecognised_answers_total", {"account": "second", "kind": "gone"}),
        ("curaflow_source_unrecognised_answers_total", {"account": "default", "kind": "not_an_image"}),
        # a source that does not say raises any kind; the image host's refused address is unusable_url
        ("curaflow_source_unrecognised_answers_total", {"account": "default", "kind": "unusable_url"}),
        ("curaflow_source_unrecognised_answers_total", {"account": "second", "kind": "no_file"}),
        # items of a search page curaflow does not read (the scan's invalid rejections)
        ("curaflow_source_unrecognised_answers_total", {"account": "default", "kind": "invalid"}),
        ("curaflow_schedule_occurrences_missed_total", {"schedule_id": "nightly", "why": "skipped_outage"}),
        ("curaflow_schedule_occurrences_missed_total", {"schedule_id": "nightly", "why": "skipped_overlap"}),
        ("curaflow_schedule_occurrences_missed_total", {"schedule_id": "nightly", "why": "missed_catchup_window"}),
        ("curaflow_finish_degraded_total", {"value": "cell", "result": "degraded"}),
        ("curaflow_finish_degraded_total", {"value": "event", "result": "not_stored"}),
        ("curaflow_api_internal_errors_total", {}),
    ]
    for name, labels in expected:
        key = (name, tuple(sorted(labels.items())))
        assert key in after, key
        assert after[key] == before.get(key, 0.0)  # created at 0; a value already counted is kept


def test_every_process_exports_its_start_time_for_the_counter_alerts() -> None:
    """The counter alerts join ``process_start_time_seconds`` of the same target (prometheus-client's
    process collector, in the default registry the API's ``/metrics`` and a worker's metrics port serve)."""
    from prometheus_client.parser import text_string_to_metric_families

    from curaflow.observability.metrics import render_latest

    body, _ = render_latest()
    names = {family.name for family in text_string_to_metric_families(body.decode())}
    assert "process_start_time_seconds" in names
    other = {
        name
        for rule in rules()
        for name in re.findall(r"\b([a-z_]+_seconds)\b", rule["expr"])
        if not name.startswith(("curaflow_", "temporal_"))
    }
    assert other == {"process_start_time_seconds"}


#: How long one reading of the ledger gauges may take (its statements' 5 s timeout), s.
GAUGE_READ_S = 5


def largest_accepted_gauge_interval_ms() -> int:
    """The largest ``observability.ledger_gauges_interval_ms`` a process loads (bisected)."""
    from curaflow.config import ConfigError, load_settings

    def loads(value: int) -> bool:
        try:
            load_settings(observability={"ledger_gauges_interval_ms": value})
        except ConfigError:
            return False
        return True

    low, high = 15_000, 400 * 86_400_000  # loaded; refused (beyond every duration's ceiling)
    assert loads(low) and not loads(high)
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (middle, high) if loads(middle) else (low, middle)
    return low


def healthy_gauge_age(interval_s: float, minutes: int, failed_reads: tuple[int, ...] = ()) -> str:
    """``curaflow_ledger_gauges_age_seconds`` of a process refreshing every ``interval_s`` (each
    read taking :data:`GAUGE_READ_S`, the reads numbered in ``failed_reads`` failing), scraped
    every minute: the age counts from when the last read that completed began
    (:func:`curaflow.ledger.gauges.run_ledger_gauges`)."""
    starts = [k * (interval_s + GAUGE_READ_S) for k in range(int(minutes * 60 / interval_s) + 2)]
    ages = []
    for minute in range(minutes + 1):
        now = minute * 60
        read = [s for k, s in enumerate(starts) if s + GAUGE_READ_S <= now and k not in failed_reads]
        ages.append(str(round(now - read[-1] if read else now)))
    return " ".join(ages)


@needs_promtool
def test_a_healthy_ledger_read_at_the_largest_interval_a_process_loads_never_pages(tmp_path: Path) -> None:
    """``CuraflowLedgerGaugesStale`` calls a reading older than 2 minutes, for 2 minutes, no
    reading at all: whatever interval a process loads, the only process refreshing its gauges
    at it — every read answered, or one failing — never pages (until 2026-12-07 any interval
    up to a year loaded, and one of 5 minutes paged 'cannot read its ledger' every 5 minutes)."""
    interval_s = largest_accepted_gauge_interval_ms() / 1000
    minutes = 180
    cases = [
        {
            "name": f"CuraflowLedgerGaugesStale: one process reading every {interval_s} s{why}",
            "alert": "CuraflowLedgerGaugesStale",
            "series": [
                ('curaflow_ledger_gauges_age_seconds{instance="w1"}', healthy_gauge_age(interval_s, minutes, failed))
            ],
            "expect": [(f"{t}m", None) for t in range(minutes + 1)],
        }
        for failed, why in (((), ""), ((5,), ", its sixth read failing"))
    ]
    done = promtool_cases(tmp_path, cases)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr


RESTRICTED = {"severity": "page", "reason": "account_restricted"}
#: A restricted account's gate is paused (``source_gates.paused_until``, for
#: ``pixiv.restriction_pause_ms``; lifted by ``curaflow accounts resume``): every job of the
#: account fails at once meanwhile, and nothing is cured until an operator acts.
ACCOUNT_PAUSE_CASES: list[dict[str, Any]] = [
    {  # restricted at 0s, paused for 2 h, no job of the account since (a daily plan)
        "name": "CuraflowSourceAccessRefused: an account paused past the cell's 30 minutes",
        "alert": "CuraflowSourceAccessRefused",
        "series": [
            ('curaflow_cells_failed_last_seconds{reason="account_restricted",instance="api"}', "0x150"),
            ('curaflow_cells_failed_last_seconds{reason="account_restricted",instance="w1"}', "0x150"),
            ('curaflow_source_paused_until_seconds{account="default",instance="api"}', "7200x150"),
            (
                'curaflow_source_paused_until_seconds{account="default",instance="w1"}',
                "7200x60 stale 7200x20 _x5 7200x70",
            ),
        ],
        "expect": [(f"{t}m", RESTRICTED) for t in (1, 29, 31, 45, 60, 61, 62, 90, 119)]
        + [("121m", None), ("140m", None)],
    },
    {  # resumed at 40m: the pause's series goes (no row paused)
        "name": "CuraflowSourceAccessRefused: an account resumed",
        "alert": "CuraflowSourceAccessRefused",
        "series": [
            ('curaflow_cells_failed_last_seconds{reason="account_restricted",instance="api"}', "0x100"),
            ('curaflow_source_paused_until_seconds{account="default",instance="api"}', "7200x40"),
        ],
        "expect": [("35m", RESTRICTED), ("40m", RESTRICTED), ("43m", None), ("60m", None)],
    },
    {  # a pause that ended long ago, or never any: no page
        "name": "CuraflowSourceAccessRefused: a pause that ended",
        "alert": "CuraflowSourceAccessRefused",
        "series": [
            ('curaflow_cells_failed_last_seconds{reason="account_restricted",instance="api"}', "-86400x100"),
            ('curaflow_source_paused_until_seconds{account="default",instance="api"}', "-82800x100"),
        ],
        "expect": [(f"{t}m", None) for t in (0, 1, 30, 60, 100)],
    },
]


@needs_promtool
def test_a_restricted_account_pages_for_as_long_as_it_is_paused(tmp_path: Path) -> None:
    """A restricted account is paused (every job of it fails at once) until its pause ends or an
    operator resumes it: the page stands meanwhile, not only for 30 minutes after the cell that
    paused it (until 2026-12-07 it resolved then, the account still paused, and fired again with
    the next job's cell: a page per job of a held account, silent between)."""
    done = promtool_cases(tmp_path, ACCOUNT_PAUSE_CASES)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr
