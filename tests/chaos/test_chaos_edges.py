"""The hostile-party chaos scenario: ``curaflow chaos --only edges`` (about a minute).

One job per hostile party, each on its own target, all at once (a 20 s deadline for the
two that can only expire, a minute for the others): a webhook receiver trickling its 200
at 1 KiB/s (every send cut at the route's timeout, reported unknown), one answering
100 MiB, one redirecting to an internal address, one answering 429 then 503
(``Retry-After`` as seconds, then as a date) before it accepts; a Telegram Bot API
rate-limiting as a 429 and as a 400's text; a ``callback_url`` whose allowed host name
resolves to 127.0.0.1; an endless image, a trickling image, an image URL answering JSON,
an image URL on an internal service; a search page answering 500, 500, then an empty 200;
a 50 MiB search page; decode bombs (a GIF of thousands of 1×1 frames on a large canvas, a
few frames on a canvas near a page's bound, an ugoira whose later frames are huge) and
unusable animations (a zip URL that is not one, no frames, a frame without a delay), each
listed before a plain work, sizes and variants drawn from the run's seed; the classes of
an unknown answer — a webhook receiver and a Telegram Bot API refusing with a 4xx status
and words drawn from the run's seed, a receiver and a Discord webhook answering 429
without a delay and then an HTML 429 (Cloudflare's 1015 page). The command checks each
job's end against its case, the deadline, the hostile connections, the internal service,
that every bomb and unusable animation was remembered unavailable within seconds of being
served (the account's slot free, the plain work delivered in the same job), that no work
was refused for good and no undeclared delay was retried within 5 s, the workers' memory
and the usual truth audit, and exits 1 when a check fails. Deselect with ``-m "not chaos"``.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bench.chaos.edges import EDGE_CASES

pytestmark = pytest.mark.chaos


@pytest.mark.timeout(360)
def test_hostile_parties_cost_only_their_own_attempt_and_are_blamed_right(tmp_path: Path) -> None:
    out = tmp_path / "chaos.json"
    exe = Path(sys.executable).parent / "curaflow"
    began = time.monotonic()
    done = subprocess.run(
        [str(exe), "chaos", "--only", "edges", "--json", str(out)], capture_output=True, text=True, timeout=340
    )
    seconds = time.monotonic() - began
    print(f"curaflow chaos --only edges: {seconds:.0f} s\n{done.stdout[-6000:]}")

    assert out.exists(), done.stdout[-3000:] + done.stderr[-3000:]
    report = json.loads(out.read_text())
    [r] = report["results"]
    assert r["name"] == "edges" and r["error"] is None, r["error"]
    assert r["submitted"] == len(EDGE_CASES) and r["terminal"] == r["submitted"], r["stuck_details"]
    checks, edges = r["checks"], r["edges"]
    # every case's job ended as its case says, by its deadline
    assert set(edges["ends"]) == {c.name for c in EDGE_CASES}
    assert checks["unexpected_end"] == 0 and checks["overran_deadline"] == 0, r["edge_findings"]
    # no hostile connection outlived its job; nothing reached the internal service
    assert checks["open_connections"] == 0 and checks["internal_reached"] == 0, r["edge_findings"]
    assert edges["streams"] and edges["internal_hits"] == 0
    # no hostile image was delivered; Telegram has the work once, after both rate limits
    assert checks["hostile_delivered"] == 0 and checks["telegram_duplicates"] == 0, r["edge_findings"]
    assert edges["telegram_posts"] == 1 and sum(edges["telegram_requests"].values()) >= 3
    # the trickling receiver's every send was cut at the route's timeout, and is reported unknown
    assert checks["slow_send_not_cut"] == 0, r["edge_findings"]
    # the rate-limiting receiver has the work once, after its 429 and its 503
    assert checks["not_delivered_once"] == 0 and sum(edges["hook_requests"].values()) >= 3, r["edge_findings"]
    # the source's 500, 500, empty 200 was asked again, not taken as the end of results
    # (page 2 is asked one place early, at 29: its first work must be page 1's last; the
    # empty 200 is stepped back over — page 1 asked again, then page 2 — since 2026-12-05f)
    page_two = sum(n for asked, n in edges["searches"].items() if asked.startswith("source@") and asked != "source@0")
    assert edges["source_faults"] == ["500", "500", "empty 200"] and page_two >= 4, edges["searches"]
    # an unknown refusal is the route's: the job fails route_refused, no work is refused for good
    assert checks["work_refused_for_good"] == 0, r["edge_findings"]
    assert edges["refusals"] and {x["party"].split()[0] for x in edges["refusals"]} == {"hook", "telegram"}
    # an undeclared delay is a backoff from 5 s: no party asked again sooner, each took the work once
    assert checks["retried_too_soon"] == 0, r["edge_findings"]
    assert edges["discord_posts"] == 1 and all(len(asked) == 3 for asked in edges["asked_ms"].values())
    # every decode bomb and unusable animation is the work's: unavailable within seconds
    # of being served, and the plain work after them delivered in the same job
    assert checks["not_unavailable"] == 0 and checks["slot_held"] == 0, r["edge_findings"]
    assert len(edges["unusable_works"]) == 6 and all(w["unavailable"] for w in edges["unusable_works"].values())
    assert checks["memory_unbounded"] == 0, edges["rss_mib"]
    for key in ("lost", "stuck", "cross_job_duplicates", "phantoms", "missing_at_route", "understated"):
        assert checks[key] == 0, (key, r["audit"]["examples"])
    assert report["ok"] is True and done.returncode == 0, done.stdout[-3000:]
