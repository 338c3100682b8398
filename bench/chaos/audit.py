"""The truth audit of a chaos scenario: what the routes received against what curaflow says.

Pure functions over four views, gathered after every job of the scenario ended (or was
declared stuck):

* **at the routes** — every request the recording webhook receiver got
  (:mod:`bench.chaos.receiver`) and every ``manifest.json`` a directory route holds;
* **the ledger** — every delivery intent of the scenario's jobs;
* **the jobs** — each job as ``GET /jobs/{id}`` reports it: its deliveries, in
  ``result.deliveries`` (succeeded) or ``error.detail.deliveries`` (any other terminal
  status), whatever the status (docs/http-api.md "Cancellation, liveness and the outcome record").

The rules (each count should be 0):

* **cross-job duplicate** — one (route, work) reached by more than one job (at the
  receiver, or ``delivered`` in the ledger for more than one job). A re-send of one
  delivery (the same ``webhook-id``) is not a duplicate: it is counted as a re-send;
* **missing at the route** — an intent the ledger holds ``delivered`` whose work the
  route does not have (for that job);
* **phantom delivery** — a (route, work) the route has from a job that does not report
  it (in any status), or from a job curaflow does not know;
* **understated** — a job reports a delivery the route has as ``released``, ``failed``,
  ``pending`` or ``sending`` (it says the work did not land, or never settled);
* **send after cancel** — an intent claimed for sending (``sent_at``) after its job's
  cancel was recorded in the ledger (``cancel_requested_at``).
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

#: Statuses a job may report for a delivery the route really has.
LANDED_OK = {"delivered", "duplicate", "unknown"}
#: Statuses that say the work did not land (or a delivery that never settled).
NOT_LANDED = {"released", "failed", "pending", "sending"}


@dataclass(frozen=True)
class Arrival:
    """One delivery found at a route: (route, work) from a job.

    Attributes:
        key: the delivery's identity at the route (the ``webhook-id``; the manifest's
            idempotency key for a directory).
    """

    route: str
    work_id: str
    job_id: str
    key: str
    kind: str


def job_deliveries(job: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The deliveries a protocol Job reports: ``result.deliveries`` or ``error.detail.deliveries``."""
    result = job.get("result") or {}
    if isinstance(result, dict) and isinstance(result.get("deliveries"), list):
        return list(result["deliveries"])
    error = job.get("error") or {}
    detail = error.get("detail") if isinstance(error, dict) else None
    if isinstance(detail, dict) and isinstance(detail.get("deliveries"), list):
        return list(detail["deliveries"])
    return []


def webhook_arrivals(received: Iterable[Mapping[str, Any]], routes: set[str]) -> list[Arrival]:
    """The receiver's records of ``routes`` as arrivals (one per request, re-sends included)."""
    return [
        Arrival(str(r.get("route")), str(r.get("work_id")), str(r.get("job_id")), str(r.get("webhook_id")), "webhook")
        for r in received
        if r.get("route") in routes
    ]


def directory_arrivals(roots: Mapping[str, Path]) -> list[Arrival]:
    """One arrival per ``<root>/<work_id>/manifest.json`` of each directory route (name → root)."""
    out: list[Arrival] = []
    for route, root in roots.items():
        if not root.is_dir():
            continue
        for manifest in sorted(root.glob("*/manifest.json")):
            try:
                doc = json.loads(manifest.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                doc = {}
            work_id = str((doc.get("work") or {}).get("work_id") or manifest.parent.name)
            out.append(Arrival(route, work_id, str(doc.get("job_id")), str(doc.get("idempotency_key")), "directory"))
    return out


@dataclass
class Audit:
    """The audit's counts (see the module doc) and a few examples of each finding."""

    webhook_requests: int = 0
    webhook_deliveries: int = 0
    resends: int = 0
    bad_signatures: int = 0
    directory_deliveries: int = 0
    ledger_delivered: int = 0
    at_route: int = 0
    reported_deliveries: int = 0
    cross_job_duplicates: int = 0
    missing_at_route: int = 0
    phantoms: int = 0
    understated: int = 0
    sends_after_cancel: int = 0
    examples: dict[str, list[Any]] = field(default_factory=dict)

    def note(self, kind: str, example: Any, limit: int = 5) -> None:
        bucket = self.examples.setdefault(kind, [])
        if len(bucket) < limit:
            bucket.append(example)

    @property
    def findings(self) -> int:
        """Every count that should be 0, summed."""
        return (
            self.cross_job_duplicates
            + self.missing_at_route
            + self.phantoms
            + self.understated
            + self.sends_after_cancel
        )

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def audit(
    arrivals: Sequence[Arrival],
    intents: Sequence[Mapping[str, Any]],
    reported: Mapping[str, Sequence[Mapping[str, Any]]],
    cancels: Mapping[str, int | None] | None = None,
) -> Audit:
    """Compare the routes with the ledger and the jobs.

    Args:
        arrivals: what the routes have (:func:`webhook_arrivals`, :func:`directory_arrivals`).
        intents: the scenario's delivery intents (``job_id``, ``route``, ``work_id``,
            ``status``, ``sent_at`` in epoch ms).
        reported: job id → the deliveries its Job reports (every job of the scenario;
            a job missing here is unknown to curaflow).
        cancels: job id → ``cancel_requested_at`` (epoch ms) for jobs with a recorded cancel.
    """
    out = Audit()
    webhook = [a for a in arrivals if a.kind == "webhook"]
    out.webhook_requests = len(webhook)
    seen_keys: set[tuple[str, str]] = set()
    for a in webhook:
        if (a.route, a.key) in seen_keys:
            out.resends += 1
        seen_keys.add((a.route, a.key))
    out.webhook_deliveries = len(seen_keys)
    out.directory_deliveries = sum(1 for a in arrivals if a.kind == "directory")

    # One (route, work) from more than one job, at the route or in the ledger.
    jobs_at_route: dict[tuple[str, str], set[str]] = defaultdict(set)
    for a in arrivals:
        jobs_at_route[(a.route, a.work_id)].add(a.job_id)
    delivered_by: dict[tuple[str, str], set[str]] = defaultdict(set)
    for i in intents:
        if i["status"] == "delivered":
            delivered_by[(str(i["route"]), str(i["work_id"]))].add(str(i["job_id"]))
    out.ledger_delivered = sum(len(v) for v in delivered_by.values())
    for pair in sorted(set(jobs_at_route) | set(delivered_by)):
        jobs = jobs_at_route.get(pair, set()) | delivered_by.get(pair, set())
        if len(jobs) > 1:
            out.cross_job_duplicates += 1
            out.note("cross_job_duplicates", {"route": pair[0], "work_id": pair[1], "jobs": sorted(jobs)})

    # Ledger → route: every delivered intent is at its route, from its job.
    at_route = {(a.route, a.work_id, a.job_id) for a in arrivals}
    out.at_route = len(at_route)
    for i in intents:
        triple = (str(i["route"]), str(i["work_id"]), str(i["job_id"]))
        if i["status"] == "delivered" and triple not in at_route:
            out.missing_at_route += 1
            out.note("missing_at_route", dict(zip(("route", "work_id", "job_id"), triple, strict=True)))

    # Route → job: everything at a route is reported by its job, and not as "did not land".
    report_of: dict[tuple[str, str, str], str] = {}
    for job_id, deliveries in reported.items():
        for d in deliveries:
            report_of[(str(d.get("route")), str(d.get("work_id")), job_id)] = str(d.get("status"))
        out.reported_deliveries += len(deliveries)
    for triple in sorted(at_route):
        route, work_id, job_id = triple
        example = {"route": route, "work_id": work_id, "job_id": job_id}
        if triple not in report_of:
            out.phantoms += 1
            out.note("phantoms", {**example, "job_known": job_id in reported})
        elif report_of[triple] in NOT_LANDED:
            out.understated += 1
            out.note("understated", {**example, "reported": report_of[triple]})

    # No send claimed after the job's cancel was recorded.
    for i in intents:
        cancel_at = (cancels or {}).get(str(i["job_id"]))
        sent_at = i.get("sent_at")
        if cancel_at is not None and sent_at is not None and int(sent_at) > int(cancel_at):
            out.sends_after_cancel += 1
            out.note(
                "sends_after_cancel",
                {"job_id": i["job_id"], "route": i["route"], "sent_at": sent_at, "cancel_requested_at": cancel_at},
            )
    return out
