"""The date_desc head phase at its page boundaries, resumed mid-way and from old checkpoints.

Head pages after the first are asked one place early (the previous page's last item must
start the next); an item the source should never have sent that sits at the boundary was
counted ``invalid`` twice and, its id missing from the parsed works, kept the head from
moving job after job (found by a review of the head phase, 2026-12-05). Scans run against
the replay app in process (a DeepSet listing, new works appearing between jobs).
"""

from __future__ import annotations

import asyncio

import httpx

from curaflow.domain.messages import TargetFilters, TargetQuery, TargetSpec
from curaflow.domain.tally import Tally
from curaflow.sources.pixiv.client import PixivClient
from curaflow.sources.pixiv.frontier import Frontier
from curaflow.sources.pixiv.replay.app import create_replay_app
from curaflow.sources.pixiv.replay.data import DeepSet
from curaflow.sources.pixiv.scan import ScanCheckpoint, scan
from tests.fakes.replay import Faults

TAG = "frontier-review-fr4"


def _target() -> TargetSpec:
    return TargetSpec(
        target_id="t", query=TargetQuery(tags=[TAG], sort="date_desc"), filters=TargetFilters(), scan_limit=1
    )


async def _scans(steps, *, mutate=None, interrupt=None, strip=()):
    """steps: (deep, verdicts, cap). Returns per scan (cands, tally, frontier, pages, report, cp).
    interrupt[i] = n: scan i's attempt fails after its n-th checkpoint and is resumed from it."""
    faults = Faults(deep=steps[0][0])
    faults.mutate = dict(mutate or {})
    app = create_replay_app(faults)
    out = []
    frontier = Frontier(sort="date_desc")
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://replay") as http:
        client = PixivClient(http, refresh_token="r", api_url="http://replay", auth_url="http://replay")
        for i, (deep, verdicts, cap) in enumerate(steps):
            faults.deep = deep

            async def known(ids, verdicts=verdicts):
                return {w: verdicts[w] for w in ids if w in verdicts}

            saved: list[ScanCheckpoint] = []
            stop_at = (interrupt or {}).get(i)

            class Stop(Exception):
                pass

            async def hook(cp, saved=saved, stop_at=stop_at):
                saved.append(cp.model_copy(deep=True))
                if stop_at is not None and len(saved) == stop_at:
                    raise Stop

            before = sum(1 for e in faults.log if e.kind == "search")
            kw = dict(
                scan_limit=1,
                known=known,
                on_page=hook,
                max_examined=cap,
                frontier=frontier,
                settled_before="2100-01-01",
            )
            try:
                result = await scan(client, _target(), **kw)
            except Stop:
                dumped = saved[-1].model_dump(mode="json")
                for f in strip:
                    dumped["walk"].pop(f, None)
                cp = ScanCheckpoint.model_validate(dumped)
                result = await scan(client, _target(), checkpoint=cp, **{**kw, "on_page": lambda cp: asyncio.sleep(0)})
            pages = sum(1 for e in faults.log if e.kind == "search") - before
            frontier = Frontier.model_validate(result.frontier)
            out.append(
                (
                    [w.work_id for w in result.candidates],
                    Tally.of(result.report),
                    frontier,
                    pages,
                    result.report,
                    result,
                )
            )
    return out


def _dup(deep, but=()):
    v = {deep.work_id(r): "duplicate" for r in range(deep.count)}
    for b in but:
        del v[deep.work_id(b)]
    return v


OLD = DeepSet(tag=TAG, count=80, per_day=40, last_day="2025-02-04")
NEW = DeepSet(tag=TAG, count=120, per_day=40, last_day="2025-02-05")


def test_invalid_work_last_on_a_head_page_is_counted_once() -> None:
    # 40 new works, all delivered; the listing's work at place 29 (new rank 29) is unusable
    # (a field of the wrong type): counted invalid. The overlap page asks place 29 again.
    bad = {NEW.work_id(29): {"width": "wide"}}
    verdicts = _dup(NEW, but=(29,))
    seen = asyncio.run(_scans([(OLD, verdicts, 1000), (NEW, verdicts, 1000), (NEW, verdicts, 1000)], mutate=bad))
    _, tally, _, _, report, _ = seen[1]
    assert report.reasons.get("invalid") == 1 and tally.examined == 40, (report.reasons, tally.examined)


def test_invalid_work_last_on_a_head_page_keeps_the_head_below_it() -> None:
    # A work listed in a shape curaflow does not recognise is no verdict on the work
    # (``invalid`` does not last since 2026-12-05): the head moves up over the lasting run
    # below it, never over it, so the next job reads it again.
    bad = {NEW.work_id(29): {"width": "wide"}}
    verdicts = _dup(NEW, but=(29,))
    seen = asyncio.run(_scans([(OLD, verdicts, 1000), (NEW, verdicts, 1000), (NEW, verdicts, 1000)], mutate=bad))
    frontier = seen[1][2]
    assert frontier.head is not None and NEW.rank_of(frontier.head.work_id) == 30, NEW.rank_of(frontier.head.work_id)


def test_overlap_page_counts_days_once() -> None:
    verdicts = _dup(NEW)
    seen = asyncio.run(_scans([(OLD, verdicts, 1000), (NEW, verdicts, 1000)]))
    assert seen[1][1].examined == 40


def test_resume_mid_head_phase_reads_each_work_once_and_moves_the_head() -> None:
    # 80 new works (3 head pages), all delivered; the attempt fails after its first
    # checkpoint and is resumed from it.
    new = DeepSet(tag=TAG, count=160, per_day=40, last_day="2025-02-06")
    verdicts = _dup(new)
    seen = asyncio.run(_scans([(OLD, verdicts, 1000), (new, verdicts, 1000)], interrupt={1: 1}))
    _, tally, frontier, _, _, _ = seen[1]
    assert tally.examined == 80, tally
    assert new.rank_of(frontier.head.work_id) == 0


def test_invalid_work_at_a_page_boundary_is_read_again_by_every_job_at_the_cost_of_the_region_above_it() -> None:
    # As a held work: each later job reads the head region down to the work again (30
    # works), never more, and examines the work each time (until its shape is one curaflow
    # reads). Before 2026-12-05 the head moved over it: no job read it again.
    bad = {NEW.work_id(29): {"width": "wide"}}
    verdicts = _dup(NEW, but=(29,))
    seen = asyncio.run(_scans([(OLD, verdicts, 1000)] + [(NEW, verdicts, 1000)] * 3, mutate=bad))
    assert [(s[1].examined, s[4].reasons.get("invalid")) for s in seen[1:]] == [(40, 1), (30, 1), (30, 1)], [
        (s[1].examined, s[3], NEW.rank_of(s[2].head.work_id)) for s in seen[1:]
    ]


def test_a_placeholder_hiding_the_work_from_the_account_at_a_page_boundary_is_read_again_by_every_job() -> None:
    # ``limit_sanity_level`` (the account's "sensitive content" setting off): as a held or an
    # invalid work, each later job reads the head region down to the work again (30 works),
    # never more, and examines it each time — once the account's settings show it, the next
    # job finds it. Before 2026-12-06 it was ``unavailable``, lasting: the head moved over it
    # and no job read it again.
    from curaflow.sources.pixiv.replay.data import deep_works, placeholder

    verdicts = _dup(NEW, but=(29,))
    ph = placeholder(deep_works(NEW)[29])
    seen = asyncio.run(_scans([(OLD, verdicts, 1000)] + [(NEW, verdicts, 1000)] * 3, mutate={NEW.work_id(29): ph}))
    assert [(s[1].examined, s[4].reasons.get("hidden")) for s in seen[1:]] == [(40, 1), (30, 1), (30, 1)], [
        (s[1].examined, dict(s[4].reasons), NEW.rank_of(s[2].head.work_id)) for s in seen[1:]
    ]


def test_a_placeholder_of_a_deleted_or_private_work_at_a_page_boundary_is_passed_for_good() -> None:
    # ``limit_unknown`` (deleted, or made private by its author): the work's own, a lasting
    # ``unavailable`` — the head moves over it and later jobs read nothing again.
    from curaflow.sources.pixiv.replay.data import deep_works, placeholder

    verdicts = _dup(NEW, but=(29,))
    ph = placeholder(deep_works(NEW)[29], "limit_unknown")
    seen = asyncio.run(_scans([(OLD, verdicts, 1000)] + [(NEW, verdicts, 1000)] * 3, mutate={NEW.work_id(29): ph}))
    assert seen[1][4].reasons.get("unavailable") == 1
    assert seen[3][1].examined <= 1, [
        (s[1].examined, dict(s[4].reasons), NEW.rank_of(s[2].head.work_id)) for s in seen[1:]
    ]


def test_resume_mid_head_phase_at_each_checkpoint() -> None:
    new = DeepSet(tag=TAG, count=160, per_day=40, last_day="2025-02-06")
    verdicts = _dup(new)
    for k in (1, 2, 3):
        seen = asyncio.run(_scans([(OLD, verdicts, 1000), (new, verdicts, 1000)], interrupt={1: k}))
        assert seen[1][1].examined == 80 and new.rank_of(seen[1][2].head.work_id) == 0, (k, seen[1][1])


def test_capped_resumed_head_phase_interrupted_and_resumed() -> None:
    new = DeepSet(tag=TAG, count=160, per_day=40, last_day="2025-02-06")
    verdicts = _dup(new, but=(70,))
    seen = asyncio.run(
        _scans([(OLD, verdicts, 1000), (new, verdicts, 45), (new, verdicts, 1000)], interrupt={1: 1, 2: 1})
    )
    assert seen[1][0] == [] and seen[1][2].head_sweep is not None
    assert seen[2][0] == [new.work_id(70)], [(s[0], s[1].examined, s[2].head_sweep) for s in seen]


def test_tally_found_equals_the_result_set_after_capped_head_jobs() -> None:
    old = DeepSet(tag=TAG, count=80, per_day=100, last_day="2025-02-04")
    new = DeepSet(tag=TAG, count=180, per_day=100, last_day="2025-02-05")
    verdicts = _dup(new)
    verdicts[new.work_id(45)] = "refused"
    seen = asyncio.run(_scans([(old, verdicts, 1000)] + [(new, verdicts, 30)] * 6 + [(new, verdicts, 1000)] * 2))
    rows = [
        (
            s[1].examined,
            s[1].known,
            s[1].found,
            new.rank_of(s[2].head.work_id),
            s[2].head_sweep and new.rank_of(s[2].head_sweep.work_id),
            s[2].tally,
        )
        for s in seen
    ]
    last = seen[-1][1]
    assert last.found == 180 and last.refused == 1, rows


def test_old_checkpoint_mid_head_phase_resumes_safely() -> None:
    new = DeepSet(tag=TAG, count=160, per_day=40, last_day="2025-02-06")
    verdicts = _dup(new, but=(70,))
    old_fields = ("head_whole", "head_edge", "head_stop", "head_resumed", "head_broken")
    for k in (1, 2):
        seen = asyncio.run(
            _scans(
                [(OLD, verdicts, 1000), (new, verdicts, 1000), (new, _dup(new), 1000), (new, _dup(new), 1000)],
                interrupt={1: k},
                strip=old_fields,
            )
        )
        assert seen[1][0] == [new.work_id(70)] and seen[1][1].examined == 71, (k, seen[1][1])
        heads = [new.rank_of(s[2].head.work_id) for s in seen[1:]]
        assert heads[-1] == 0, (k, heads)
