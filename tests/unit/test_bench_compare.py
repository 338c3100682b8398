"""The regression guard (``curaflow bench --compare REF.json``) on two benchmark results."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from bench.compare import compare, direction, figures, regressions, render
from curaflow.cli.app import app


def run(jobs_per_s: float, worker_ms: float, events: float, statements: float, *, met: bool) -> dict[str, Any]:
    """A benchmark document as ``curaflow bench`` writes it (one scenario, one target)."""
    return {
        "started_at": "2026-12-03T00:00:00+00:00",
        "mode": "quick",
        "machine": {"cpus": 2},
        "results": [
            {
                "name": "throughput",
                "params": {"jobs": 30},
                "metrics": {
                    "curaflow_jobs_per_s": jobs_per_s,
                    "same_io_jobs_per_s": 20.0,
                    "ratio_vs_same_io": round(jobs_per_s / 20.0, 3),
                    "cpu_ms_per_job": {"curaflow": {"worker": worker_ms}, "same_io": {"worker": 47.5}},
                    "history_events_per_job": events,
                    "ledger_statements_per_job": statements,
                    "admission": {"p99": 12.0, "n": 1000},
                },
                "checks": [{"name": "history events per one-cell job", "value": events, "ok": met}],
                "skipped": None,
                "seconds": 60.0,
            },
            {"name": "scale", "params": {}, "metrics": {}, "checks": [], "skipped": "failed: boom", "seconds": 1},
        ],
    }


def test_each_figure_is_compared_with_the_way_it_should_move() -> None:
    reference = run(14.0, 61.8, 30, 71.3, met=False)
    current = run(14.1, 70.0, 23, 44.0, met=True)
    rows = {row.key: row for row in compare(current, reference)}
    assert rows["throughput.curaflow_jobs_per_s"].verdict == "same"  # under 5 %
    assert rows["throughput.cpu_ms_per_job.curaflow.worker"].verdict == "worse"  # a cost went up
    assert round(rows["throughput.cpu_ms_per_job.curaflow.worker"].change or 0, 3) == round(70.0 / 61.8 - 1, 3)
    assert rows["throughput.history_events_per_job"].verdict == "better"
    assert rows["throughput.ledger_statements_per_job"].verdict == "better"
    assert rows["throughput.target: history events per one-cell job"].verdict == "better"  # now met
    assert rows["throughput.cpu_ms_per_job.same_io.worker"].verdict == "same"  # a baseline: context only
    assert [row.key for row in regressions(list(rows.values()))] == ["throughput.cpu_ms_per_job.curaflow.worker"]
    assert not [key for key in rows if key.startswith("scale")]  # a skipped scenario has no figures


def test_figures_new_and_gone_and_the_text() -> None:
    reference = run(14.0, 61.8, 30, 71.3, met=False)
    current = run(14.0, 61.8, 30, 71.3, met=False)
    current["results"][0]["metrics"]["billable_actions_per_job"] = 8.0
    del current["results"][0]["metrics"]["ledger_statements_per_job"]
    rows = {row.key: row for row in compare(current, reference)}
    assert rows["throughput.billable_actions_per_job"].verdict == "new"
    assert rows["throughput.ledger_statements_per_job"].verdict == "gone"
    lines = render(list(rows.values()))
    assert lines[0].split() == ["figure", "reference", "this", "run", "change", "verdict"]
    assert any("billable_actions_per_job" in line and line.endswith("new") for line in lines)
    assert figures(current)["throughput.admission.p99"] == 12.0


def test_which_way_is_better() -> None:
    assert direction("throughput.curaflow_jobs_per_s") == 1
    assert direction("throughput.ratio_vs_same_io") == 1
    assert direction("admission.new_latency.p99") == -1
    assert direction("throughput.ledger_statements_by_step.acquire") == -1
    assert direction("throughput.temporal_per_job.curaflow.history.signals") == -1
    assert direction("throughput.bare_jobs_per_s") == 0  # the no-op engine's own rate
    assert direction("throughput.params_unknown") == 0


def test_the_command_compares_two_kept_runs(tmp_path: Path) -> None:
    ref, now = tmp_path / "ref.json", tmp_path / "now.json"
    ref.write_text(json.dumps(run(14.0, 61.8, 30, 71.3, met=False)))
    now.write_text(json.dumps(run(14.0, 70.0, 23, 44.0, met=True)))
    result = CliRunner().invoke(app, ["bench", "--compare", str(ref), "--current", str(now)])
    assert result.exit_code == 0, result.output
    assert "throughput.cpu_ms_per_job.curaflow.worker" in result.output
    assert "1 figure(s) moved the wrong way" in result.output
    missing = CliRunner().invoke(app, ["bench", "--current", str(now)])
    assert missing.exit_code != 0 and "--compare" in missing.output
