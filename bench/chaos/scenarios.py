"""The chaos scenarios' catalogue: each scenario's plan per mode (:func:`plans`), its targets
and routes (:func:`scenario_config`) and its runner (:data:`RUNNERS`: :mod:`bench.chaos.faults`,
:mod:`bench.chaos.edges`, on the harness of :mod:`bench.chaos.harness`). Load, real faults,
then the truth audit.

Each scenario has its own targets and routes (a webhook route on the recording receiver
and a directory route per target), so its deliveries and its audit are its own; in the
full mode each also runs on a fresh stack. Jobs are submitted like a careful consumer
does: ``POST /jobs`` retried with the same idempotency key while the answer is a 5xx or
nothing (so an ambiguous admission is never a lost job), and a few started from a
Temporal client with the same Task (``curaflow.jobs.submit.start_job``).

* ``kills`` — a SIGKILL storm: ≥ 2 workers, one killed at random every few seconds and
  started again, while the jobs run;
* ``postgres`` — PostgreSQL stopped (``pg_ctl -m fast stop``) and later killed (SIGKILL
  of the postmaster) mid-run, each time started again after a few seconds;
* ``temporal`` — the Temporal dev server stopped and started again (same port, same
  SQLite file) mid-run; in the full mode a second time with SIGKILL;
* ``pg_hang`` — PostgreSQL SIGSTOPped (sockets open, nothing answers) for longer than the
  source-queue lease, then again with the account's source-queue owner SIGSTOPped too and
  woken after PostgreSQL (it finds its lease taken and must stop its queue's worker): every
  process ready again, and each account with one owner and every other worker its
  standby (``owners``);
* ``cancel`` / ``cancel_kills`` — a cancel storm: every job cancelled at a random moment
  through one of the three paths (``POST /jobs/{id}/cancel``, ``temporal workflow signal
  --name cancel``, ``temporal workflow cancel``), without and with worker kills.

Recovery after each fault: seconds from the service being back until every process
answers ``/ready`` 200, and until the first job admitted after it (a probe submitted at
once) is terminal.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench.chaos.edges import EDGE_CASES, edges, edges_config
from bench.chaos.faults import cancel_storm, kills, pg_hang, postgres, temporal
from bench.chaos.harness import Runner
from bench.chaos.plan import Plan
from bench.chaos.stack import SECRET


def plans(quick: bool) -> dict[str, Plan]:
    """Scenario name → its plan, in the order they run (quick: fewer jobs, shorter outages)."""
    if quick:
        return {
            "kills": Plan(targets=2, jobs=10, interval_s=1.0, temporal_every=4, kill_every_s=2.0, drain_s=60),
            "postgres": Plan(
                targets=2, interval_s=1.0, down_s=2.0, fault_kinds=("fast stop", "SIGKILL"), lead_s=2, tail_s=1,
                drain_s=60,
            ),
            "temporal": Plan(
                targets=2, interval_s=1.0, temporal_every=4, down_s=3.0, fault_kinds=("stop",), lead_s=2, tail_s=1,
                drain_s=60,
            ),
            "pg_hang": Plan(
                targets=2, interval_s=1.0, down_s=8.0, fault_kinds=("hang with the owner",), lead_s=3, tail_s=2,
                drain_s=90,
            ),  # 8 s: longer than the quick stack's source-queue lease (QUICK_PIXIV)
            "cancel_kills": Plan(
                targets=2, jobs=12, interval_s=0.3, temporal_every=4, kill_every_s=3.0, cancel_within_s=6.0,
                receiver_delay_ms=1500, broken_targets=1, drain_s=60,
            ),
        }  # fmt: skip
    return {
        "kills": Plan(targets=4, jobs=50, interval_s=0.8, temporal_every=8, kill_every_s=3.0, drain_s=180),
        "postgres": Plan(
            targets=4, interval_s=1.0, temporal_every=10, down_s=5.0,
            fault_kinds=("fast stop", "SIGKILL", "fast stop", "SIGKILL"), drain_s=180,
        ),
        "temporal": Plan(
            targets=4, interval_s=1.0, temporal_every=6, down_s=8.0, fault_kinds=("stop", "SIGKILL"), drain_s=180
        ),
        "pg_hang": Plan(
            targets=3, interval_s=1.0, temporal_every=8, down_s=25.0, fault_kinds=("hang", "hang with the owner"),
            drain_s=180,
        ),
        "cancel": Plan(
            targets=3, jobs=45, interval_s=0.3, temporal_every=5, cancel_within_s=10.0, receiver_delay_ms=1500,
            broken_targets=1, drain_s=120,
        ),
        "cancel_kills": Plan(
            targets=3, jobs=45, interval_s=0.3, temporal_every=5, kill_every_s=4.0, cancel_within_s=10.0,
            receiver_delay_ms=1500, broken_targets=1, drain_s=180,
        ),
        "edges": Plan(targets=len(EDGE_CASES), jobs=len(EDGE_CASES), interval_s=0.2, drain_s=150),
    }  # fmt: skip


def scenario_config(
    name: str, plan: Plan, receiver_url: str, root: Path, hostile_url: str = "", internal_url: str = ""
) -> dict[str, Any]:
    """The routes and targets of one scenario: target ``<name><i>`` delivers to the webhook
    route ``<name>-hook<i>`` (the receiver, path ``/<name>/<i>``) and the directory route
    ``<name>-dir<i>`` (under a regular file for the last ``broken_targets``); every
    target takes the whole ranking (61 recorded works). The receiver answers that route
    after up to ``receiver_delay_ms``. ``edges`` is built by :func:`edges_config` (it
    needs the hostile party's ``hostile_url`` and ``internal_url``)."""
    if name == "edges":
        return edges_config(receiver_url, root, hostile_url, internal_url)
    routes: dict[str, Any] = {}
    targets = []
    for i in range(plan.targets):
        hook, folder = f"{name}-hook{i}", f"{name}-dir{i}"
        url = f"{receiver_url}/{name}/{i}?delay_ms={plan.receiver_delay_ms}"
        routes[hook] = {"kind": "webhook", "url": url, "secret": SECRET, "timeout_ms": 5000}
        path = root / "routes" / name / str(i)
        if i >= plan.targets - plan.broken_targets:
            blocker = root / "routes" / name / f"regular-file-{i}"
            blocker.parent.mkdir(parents=True, exist_ok=True)
            blocker.write_text("a directory route under a regular file can never write\n")
            path = blocker / "out"
        routes[folder] = {"kind": "directory", "path": str(path)}
        targets.append({"id": f"{name.replace('_', '')}{i}", "query": {"mode": "ranking"}, "routes": [hook, folder]})
    return {"routes": routes, "targets": targets}


RUNNERS: dict[str, Runner] = {
    "kills": kills,
    "postgres": postgres,
    "temporal": temporal,
    "pg_hang": pg_hang,
    "cancel": cancel_storm,
    "cancel_kills": cancel_storm,
    "edges": edges,
}
