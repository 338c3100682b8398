"""The ``edges`` scenario: one job per hostile party (:mod:`bench.chaos.hostile` plays them),
each with the end its case allows (:data:`EDGE_CASES`), blamed on its real owner."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import httpx

from bench.chaos.audit import directory_arrivals, job_deliveries, webhook_arrivals
from bench.chaos.harness import Scenario
from bench.chaos.receiver import read_received
from bench.chaos.stack import SECRET

#: The deadline of every ``edges`` job that ends on its own: a minute, so a loaded machine
#: never makes one of them expire.
EDGE_DEADLINE_MS = 60_000
#: The deadline of the cases that end only at their deadline (a send or a download that
#: never completes): long enough for several attempts, each cut at its own bound (a
#: route's ``timeout_ms`` of 5 s), short enough that the run does not wait a minute.
EDGE_EXPIRY_DEADLINE_MS = 20_000


@dataclass(frozen=True)
class EdgeCase:
    """One hostile party of the ``edges`` scenario: a target of its own, one job.

    Attributes:
        name: the case (the table's and the report's name).
        word: the search word the hostile source answers for it (``edges-<word>``).
        hook: how its webhook route's receiver behaves: ``""`` the recording receiver,
            else the hostile party's ``/hook/<hook>`` (``slow``, ``huge``, ``redirect``,
            ``ratelimit``, ``refusal``, ``nodelay``).
        telegram: it also delivers to a Telegram route on the hostile Bot API.
        telegram_api: the path of that Bot API on the hostile party (``""``: the
            rate-limiting one; ``/tg/refusal``: one refusing with random words).
        discord: it also delivers to a Discord route on the hostile party's webhook
            (429 without a delay, then Cloudflare's 1015 page, then accepted).
        callback: its job's ``callback_url`` points at the internal service through an
            allowed host name (``localhost``).
        min_bookmarks: the target's filter (the source case: page 1 is all filtered out).
        expected: the job's allowed ends (``status`` or ``status/reason``).
        deadline_ms: its job's ``deadline_ms``: a case that can only end at its deadline
            gets :data:`EDGE_EXPIRY_DEADLINE_MS` (the run waits for it), every other case
            :data:`EDGE_DEADLINE_MS` (it ends on its own, long before).
    """

    name: str
    word: str = "plain"
    hook: str = ""
    telegram: bool = False
    telegram_api: str = ""
    discord: bool = False
    callback: bool = False
    min_bookmarks: int | None = None
    expected: tuple[str, ...] = ("succeeded",)
    deadline_ms: int = EDGE_DEADLINE_MS


#: The ``edges`` cases, target ``edges<i>`` each (:mod:`bench.chaos.hostile` plays the parties).
EDGE_CASES: tuple[EdgeCase, ...] = (
    EdgeCase(
        "receiver streams its 200 at 1 KiB/s", hook="slow", expected=("expired",), deadline_ms=EDGE_EXPIRY_DEADLINE_MS
    ),
    EdgeCase("receiver answers 100 MiB", hook="huge"),
    EdgeCase("receiver redirects to an internal address", hook="redirect", expected=("failed/route_refused",)),
    EdgeCase("Telegram: 429, then 400 'Too Many Requests: retry after 1'", telegram=True),
    EdgeCase("callback_url: allowed name resolving to 127.0.0.1", callback=True),
    EdgeCase("endless image", word="endless"),
    EdgeCase("image trickling 1 B / 2 s", word="trickle", expected=("expired",), deadline_ms=EDGE_EXPIRY_DEADLINE_MS),
    EdgeCase("image URL answering JSON", word="json"),
    EdgeCase("image URL on an internal service", word="internal"),
    EdgeCase("search page 2: 500, 500, empty 200", word="source", min_bookmarks=1),
    EdgeCase("receiver: 429 Retry-After 1, then 503 Retry-After as a date", hook="ratelimit"),
    EdgeCase("search page of 50 MiB", word="hugepage", expected=("failed/remote_http_error",)),
    EdgeCase("decode bombs: thousands of GIF frames, a huge canvas, an ugoira's huge later frame", word="bomb"),
    EdgeCase("unusable animations: a zip URL that is not one, no frames, a frame without a delay", word="animation"),
    # The classes of an unknown answer: each run draws other members (the run's seed).
    EdgeCase(
        "receiver: an unknown refusal (a random 4xx and words)", hook="refusal", expected=("failed/route_refused",)
    ),
    EdgeCase(
        "Telegram: an unknown refusal (a random 4xx and words)",
        telegram=True,
        telegram_api="/tg/refusal",
        expected=("failed/route_refused",),
    ),
    EdgeCase("receiver: 429 without a delay, then an HTML 429", hook="nodelay"),
    EdgeCase("Discord: 429 without a delay, then Cloudflare's 1015 page", discord=True),
)
#: The cases whose listed hostile works must each be remembered unavailable (and the plain
#: work after them delivered in the same job).
EDGE_UNAVAILABLE_WORDS = ("bomb", "animation")
#: How long after the hostile party served a bomb (or an unusable animation's metadata)
#: the work must be remembered unavailable: the account's only source slot is free again.
EDGE_SLOT_FREE_MS = 10_000
#: The shortest wait allowed before asking again a party that rate-limited without a
#: delay: the backoff's first step (curaflow.domain.ratelimit.UNSTATED_BASE_MS), less the
#: clocks' slack.
EDGE_MIN_BACKOFF_MS = 4_500
#: How far past its deadline a job may end, and how long a hostile connection may stay
#: open after its job ended (or past its route's timeout).
EDGE_GRACE_MS = 5_000
#: ``timeout_ms`` of every webhook route of the scenario.
EDGE_HOOK_TIMEOUT_MS = 5_000
#: How much a worker's resident memory may grow during the scenario.
EDGE_RSS_GROWTH_MIB = 200
#: The hostile party's streamed answers → the case whose job they belong to.
EDGE_STREAMS = {
    "slow hook": "receiver streams its 200 at 1 KiB/s",
    "huge hook": "receiver answers 100 MiB",
    "endless image": "endless image",
    "trickling image": "image trickling 1 B / 2 s",
    "huge search page": "search page of 50 MiB",
}


def edges_config(receiver_url: str, root: Path, hostile_url: str, internal_url: str) -> dict[str, Any]:
    """The ``edges`` stack's targets and routes (one per :data:`EDGE_CASES` entry), and
    the source, image host and callback settings that point at the hostile party: the
    Pixiv API and image host are the hostile source in front of the replay; callbacks
    may go to ``localhost`` on any port, signed, with loopback not allowed for data
    destinations (``outbound.private_networks`` empty)."""
    routes: dict[str, Any] = {}
    targets = []
    for i, case in enumerate(EDGE_CASES):
        hook, folder = f"edges-hook{i}", f"edges-dir{i}"
        url = f"{hostile_url}/hook/{case.hook}/{i}" if case.hook else f"{receiver_url}/edges/{i}?delay_ms=150"
        routes[hook] = {"kind": "webhook", "url": url, "secret": SECRET, "timeout_ms": EDGE_HOOK_TIMEOUT_MS}
        routes[folder] = {"kind": "directory", "path": str(root / "routes" / "edges" / str(i))}
        names = [hook, folder]
        if case.telegram:
            routes[f"edges-tg{i}"] = {
                "kind": "telegram", "bot_token": f"{900 + i}:hostile-bot", "chat_id": "-100",
                "api_url": hostile_url + case.telegram_api, "timeout_ms": 10_000,
            }  # fmt: skip
            names.append(f"edges-tg{i}")
        if case.discord:
            routes[f"edges-dc{i}"] = {
                "kind": "discord",
                "url": f"{hostile_url}/api/webhooks/{i}/nodelay",
                "timeout_ms": 10_000,
            }
            names.append(f"edges-dc{i}")
        target: dict[str, Any] = {
            "id": f"edges{i}",
            "query": {"mode": "search", "tags": [f"edges-{case.word}"]},
            "routes": names,
        }
        if case.min_bookmarks is not None:
            target["filters"] = {"min_bookmarks": case.min_bookmarks}
        targets.append(target)
    return {
        "routes": routes,
        "targets": targets,
        "pixiv": {"api_url": hostile_url, "auth_url": hostile_url, "image_url": f"{hostile_url}/i"},
        "outbound": {"download_timeout_ms": 15_000},
        # No worker is killed here: a long heartbeat timeout (20 s) keeps a starved machine
        # from losing attempts (a lost attempt after a send is reported unknown; 6 s lost a
        # Telegram send at a load average of 11). Cancels still reach a step within about a
        # second: heartbeats go to Temporal at most every second whatever the interval.
        "budgets": {"heartbeat_interval_ms": 10_000},
        "api": {
            "callback_allowed_hosts": ["localhost:*"],
            "callback_secret": SECRET,
            "callback_max_attempts": 2,
            "callback_timeout_ms": 2000,
        },
    }


def rss_mib(pid: int) -> float | None:
    """A process's resident memory (``VmRSS`` of ``/proc/<pid>/status``) in MiB; None if gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


async def edges(s: Scenario) -> None:
    """One job per hostile party (:data:`EDGE_CASES`), all at once, each with its case's
    deadline, while every worker's memory is sampled; once they ended and every hostile
    connection closed (or :data:`EDGE_GRACE_MS` passed), the case checks: each job's end
    is one its case allows, no job ended more than :data:`EDGE_GRACE_MS` past its
    deadline, no hostile connection outlived its job by more, the internal service was
    never reached, no hostile work was delivered, Telegram and Discord have each accepted
    post once, the rate-limiting receivers accepted the work once, the trickling
    receiver's every send was cut at its route's timeout and is reported ``unknown`` (it
    may have landed), no party that rate-limited without a delay was asked again within
    :data:`EDGE_MIN_BACKOFF_MS`, no work was refused for good (no hostile answer names a
    work), every decode bomb and unusable animation is remembered unavailable within
    :data:`EDGE_SLOT_FREE_MS` of being served (the account's source slot is free again:
    the job went on to the next work), and no worker grew by more than
    :data:`EDGE_RSS_GROWTH_MIB`."""
    stack = s.stack
    async with httpx.AsyncClient(timeout=120) as http:  # the bombs of this run, from its seed
        seeded = await http.post(f"{stack.hostile_url}/_chaos/seed", json={"seed": s.rng.randrange(2**31)})
        seeded.raise_for_status()
    internal_port = stack.internal_url.rsplit(":", 1)[1]
    for i, case in enumerate(EDGE_CASES):
        fields: dict[str, Any] = {"deadline_ms": case.deadline_ms}
        if case.callback:
            fields["callback_url"] = f"http://localhost:{internal_port}/callback"
        s.task_fields[f"edges{i}"] = fields
    pids = {w.name: w.popen.pid for w in stack.workers if w.popen is not None}
    baseline = {name: rss_mib(pid) or 0.0 for name, pid in pids.items()}
    peak = dict(baseline)
    stop = asyncio.Event()

    async def sample() -> None:
        while not stop.is_set():
            for name, pid in pids.items():
                peak[name] = max(peak[name], rss_mib(pid) or 0.0)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), 0.25)

    sampler = asyncio.create_task(sample())
    await s.load(asyncio.Event(), len(EDGE_CASES))
    await s.drain()
    async with httpx.AsyncClient(timeout=10) as http:
        grace_end = time.monotonic() + EDGE_GRACE_MS / 1000
        while True:  # a connection that outlives its job by more than the grace is a finding
            state = (await http.get(f"{stack.hostile_url}/_chaos/state")).json()
            if state["open_streams"] == 0 or time.monotonic() >= grace_end:
                break
            await asyncio.sleep(0.25)
    stop.set()
    await sampler
    case_of = {f"edges{i}": case for i, case in enumerate(EDGE_CASES)}
    rows = await stack.fetch(
        "SELECT job_id, created_at, completed_at, deadline_at FROM jobs WHERE job_id = ANY($1::text[])",
        list(s.jobs),
    )
    rows = [{**dict(row), "target_id": s.jobs[row["job_id"]].target_id} for row in rows]
    found: dict[str, list[Any]] = {
        "unexpected_end": [],
        "overran_deadline": [],
        "open_connections": [],
        "internal_reached": list(state["internal_hits"]),
        "hostile_delivered": [],
        "telegram_duplicates": [],
        "not_delivered_once": [],
        "slow_send_not_cut": [],
        "memory_unbounded": [],
        "retried_too_soon": [],
        "work_refused_for_good": [],
        "not_unavailable": [],
        "slot_held": [],
    }
    telegram_delivered = 0
    discord_delivered = 0
    ends: dict[str, dict[str, Any]] = {}
    async with stack.http() as api:
        for row in rows:
            case = case_of[row["target_id"]]
            view = (await api.get(f"/jobs/{row['job_id']}")).json()
            reason = ((view.get("error") or {}).get("detail") or {}).get("internal_code")
            end = view["status"] + (f"/{reason}" if reason else "")
            took = (row["completed_at"] - row["created_at"]) if row["completed_at"] else None
            ends[case.name] = {"end": end, "seconds": round(took / 1000, 1) if took else None}
            if view["status"] not in case.expected and end not in case.expected:
                found["unexpected_end"].append({"case": case.name, "end": end, "job_id": row["job_id"]})
            deadline_at = row["deadline_at"] or row["created_at"] + case.deadline_ms
            if row["completed_at"] is None or row["completed_at"] > deadline_at + EDGE_GRACE_MS:
                found["overran_deadline"].append({"case": case.name, "job_id": row["job_id"], "seconds": took})
            for d in job_deliveries(view):
                if d.get("status") != "delivered":
                    continue
                telegram_delivered += str(d.get("route", "")).startswith("edges-tg")
                discord_delivered += str(d.get("route", "")).startswith("edges-dc")
    # Each post the hostile Telegram / Discord accepted is a delivery a job reports, once.
    if len(state["telegram_posts"]) != telegram_delivered:
        found["telegram_duplicates"].append(
            {"accepted_posts": state["telegram_posts"], "reported_delivered": telegram_delivered}
        )
    if state["discord_posts"] != discord_delivered or discord_delivered != sum(c.discord for c in EDGE_CASES):
        found["not_delivered_once"].append(
            {"party": "discord", "accepted": state["discord_posts"], "reported_delivered": discord_delivered}
        )
    ends = {c.name: ends[c.name] for c in EDGE_CASES if c.name in ends}
    hook_intents = {
        (row["job_id"], row["route"]): row["status"]
        for row in await stack.fetch(
            "SELECT job_id, route, status FROM delivery_intents WHERE job_id = ANY($1::text[])", list(s.jobs)
        )
    }
    job_of = {s.jobs[j].target_id: j for j in s.jobs}
    for i, case in enumerate(EDGE_CASES):
        accepted = state["hook_accepted"].get(str(i), 0)
        if case.hook in ("ratelimit", "nodelay") and accepted != 1:
            found["not_delivered_once"].append({"case": case.name, "accepted": accepted})
        if case.hook == "slow":
            # every attempt cut at the route's timeout (none outlives it by the grace), and
            # the send reported unknown: it may have landed
            sends = [stream for stream in state["streams"] if stream["what"] == f"slow hook {i}"]
            bound = EDGE_HOOK_TIMEOUT_MS + EDGE_GRACE_MS
            uncut = [x for x in sends if x["closed_ms"] is None or x["closed_ms"] - x["opened_ms"] > bound]
            status = hook_intents.get((job_of.get(f"edges{i}", ""), f"edges-hook{i}"))
            if not sends or uncut or status != "unknown":
                found["slow_send_not_cut"].append({"case": case.name, "sends": sends, "intent": status})
    # A rate limit without a delay is a backoff from 5 s, never a constant.
    for party, asked in state["asked_ms"].items():
        gaps = [b - a for a, b in itertools.pairwise(asked)]
        if any(gap < EDGE_MIN_BACKOFF_MS for gap in gaps):
            found["retried_too_soon"].append({"party": party, "gaps_ms": gaps})
    # An answer curaflow does not know never refuses a work for good.
    edge_routes = [name for i in range(len(EDGE_CASES)) for name in (f"edges-hook{i}", f"edges-tg{i}", f"edges-dc{i}")]
    refused = await stack.fetch(
        "SELECT route, work_id, reason, error FROM route_refusals WHERE route = ANY($1::text[]) AND until IS NULL",
        edge_routes,
    )
    found["work_refused_for_good"] = [dict(r) for r in refused]
    completed = {case_of[r["target_id"]].name: r["completed_at"] for r in rows}
    for stream in state["streams"]:
        owner = next((c for prefix, c in EDGE_STREAMS.items() if stream["what"].startswith(prefix)), None)
        ended = completed.get(owner) if owner else None
        closed = stream["closed_ms"]
        if closed is None or (ended is not None and closed > ended + EDGE_GRACE_MS):
            found["open_connections"].append({**stream, "job_completed_ms": ended})
    hostile_works = set(state["hostile_works"])
    hooks = {f"edges-hook{i}" for i in range(len(EDGE_CASES))}
    dirs = {f"edges-dir{i}": stack.root / "routes" / "edges" / str(i) for i in range(len(EDGE_CASES))}
    arrivals = webhook_arrivals(read_received(stack.received_log), hooks) + directory_arrivals(dirs)
    found["hostile_delivered"] = [asdict(a) for a in arrivals if a.work_id in hostile_works]
    remembered = {
        row["work_id"]: row["seen_at"]
        for row in await stack.fetch(
            "SELECT work_id, seen_at FROM unavailable_works WHERE work_id = ANY($1::text[])", list(hostile_works)
        )
    }
    unusable = {w: kind for w, kind in state["hostile_works"].items() if kind.split("/")[0] in EDGE_UNAVAILABLE_WORDS}
    found["not_unavailable"] = [{"work_id": w, "kind": k} for w, k in unusable.items() if w not in remembered]
    served = [
        {**x, "unavailable_after_ms": remembered[x["work_id"]] - x["at_ms"] if x["work_id"] in remembered else None}
        for x in state["served"]
    ]
    found["slot_held"] = [x for x in served if (x["unavailable_after_ms"] or 0) > EDGE_SLOT_FREE_MS]
    growth = {name: round(peak[name] - baseline[name], 1) for name in pids}
    found["memory_unbounded"] = [{n: g} for n, g in growth.items() if g > EDGE_RSS_GROWTH_MIB]
    s.result.edges = {
        "ends": ends,
        "rss_mib": {n: {"start": round(baseline[n], 1), "peak": round(peak[n], 1)} for n in pids},
        "streams": state["streams"],
        "telegram_requests": state["telegram_requests"],
        "hook_requests": state["hook_requests"],
        "telegram_posts": len(state["telegram_posts"]),
        "discord_posts": state["discord_posts"],
        "refusals": state["refusals"],
        "asked_ms": state["asked_ms"],
        "source_faults": state["source_faults"],
        "searches": state["searches"],
        "internal_hits": len(state["internal_hits"]),
        "seed": state["seed"],
        "unusable_works": {
            w: {"kind": k, "unavailable": w in remembered} for w, k in sorted(unusable.items(), key=lambda i: i[1])
        },
        "served": served,
    }
    s.result.edge_findings = found
