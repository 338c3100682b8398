"""The chaos suite's quick mode, as CI runs it: ``curaflow chaos --quick`` (about 2 minutes).

Real faults on separate processes (worker SIGKILLs, PostgreSQL fast stop and SIGKILL,
a Temporal dev server stop, a cancel storm over the three cancel paths with kills); the
command audits what the routes received against the ledger and every job's report and
exits 1 when a check fails. Deselect with ``-m "not chaos"``.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.chaos


@pytest.mark.timeout(540)
def test_the_quick_chaos_run_loses_nothing_and_tells_the_truth(tmp_path: Path) -> None:
    out = tmp_path / "chaos.json"
    exe = Path(sys.executable).parent / "curaflow"
    began = time.monotonic()
    done = subprocess.run(
        [str(exe), "chaos", "--quick", "--json", str(out)], capture_output=True, text=True, timeout=520
    )
    seconds = time.monotonic() - began
    print(f"curaflow chaos --quick: {seconds:.0f} s\n{done.stdout[-6000:]}")

    assert out.exists(), done.stdout[-3000:] + done.stderr[-3000:]
    report = json.loads(out.read_text())
    results = {r["name"]: r for r in report["results"]}
    assert set(results) == {"kills", "postgres", "temporal", "pg_hang", "cancel_kills"}
    for name, r in results.items():
        checks = r["checks"]
        assert r["error"] is None, (name, r["error"])
        assert r["submitted"] > 0 and r["terminal"] == r["submitted"], (name, r["stuck"], r["stuck_details"])
        assert checks["lost"] == 0, (name, r["lost"])
        assert checks["stuck"] == 0, (name, r["stuck_details"])
        assert checks["cross_job_duplicates"] == 0, (name, r["audit"]["examples"])
        assert checks["phantoms"] == 0, (name, r["audit"]["examples"])
        assert checks["missing_at_route"] == 0 and checks["understated"] == 0, (name, r["audit"]["examples"])
        assert checks["sends_after_cancel"] == 0 and checks["late_steps"] == 0, (name, r["late_steps"])
        assert checks["unexpected_status"] == 0, (name, r["unexpected_status"])
    for name in ("kills", "postgres", "temporal", "pg_hang"):
        r = results[name]
        # every job submitted once a fault began (during or after a restart, under kills) succeeded
        assert r["after_fault"] > 0 and r["after_fault_not_succeeded"] == [], (name, r["after_fault_not_succeeded"])
    assert results["kills"]["kills"] >= 2
    assert results["cancel_kills"]["kills"] >= 1 and results["cancel_kills"]["cancels"]
    for fault in results["postgres"]["faults"] + results["temporal"]["faults"] + results["pg_hang"]["faults"]:
        assert fault["ready_s"] is not None and fault["first_job_s"] is not None, fault
    # a PostgreSQL hang with the source-queue owner frozen: it rejoins as a standby
    [hang] = results["pg_hang"]["faults"]
    assert "source-queue owner" in hang["kind"] and hang["owners_s"] is not None, hang
    assert results["pg_hang"]["checks"]["owners"] == 0, results["pg_hang"]["owner_findings"]
    assert report["ok"] is True and done.returncode == 0, done.stdout[-3000:]
