"""A job's state read from the ledger, and a cell's brief form, fit a Temporal payload
(:func:`curaflow.domain.state.fitted`, :meth:`curaflow.domain.models.CellSnapshot.brief`)."""

from __future__ import annotations

from curaflow.domain.models import (
    BRIEF_MESSAGE_CHARS,
    BRIEF_TITLE_CHARS,
    Artifact,
    ArtifactFile,
    CellSnapshot,
    JobRecord,
    RouteDelivery,
    Work,
    WorkPage,
)
from curaflow.domain.state import STATE_MAX_BYTES, fitted, job_state
from curaflow.domain.text import clipped


def record(cells: int, pages: int) -> JobRecord:
    """A finished job of ``cells`` submitted cells, each delivering a work of ``pages`` pages."""

    def cell(n: int) -> CellSnapshot:
        work_id = str(126872000 + n)
        work = Work(
            work_id=work_id,
            title=f"title {n}",
            url=f"https://www.pixiv.net/artworks/{work_id}",
            pages=[WorkPage(index=p, url=f"https://i.pximg.net/img-original/{work_id}_p{p}.png") for p in range(pages)],
        )
        files = [ArtifactFile(page=p, path=f"a/{work_id}_p{p}.png", mime="image/png", bytes=1) for p in range(pages)]
        return CellSnapshot(
            target_id=f"target-{n}",
            state="submitted",
            stage="done",
            work_id=work_id,
            work=work,
            artifact=Artifact(work_id=work_id, files=files),
            deliveries=[RouteDelivery(route="a", status="delivered", idempotency_key=f"k-{n}", work_id=work_id)],
        )

    return JobRecord(
        job_id="demo@manual-1",
        plan_id="p",
        created_at=1,
        updated_at=2,
        completed_at=2,
        cells=[cell(n) for n in range(cells)],
    )


def test_a_state_under_the_bound_is_whole() -> None:
    rec = record(3, 10)
    state = job_state(rec)
    assert state.cells == rec.cells


def test_a_state_over_the_bound_carries_its_cells_brief() -> None:
    rec = record(40, 200)
    assert len(job_state(rec.model_copy(update={"cells": rec.cells[:1]})).model_dump_json()) * 40 > STATE_MAX_BYTES
    state = job_state(rec)
    assert len(state.model_dump_json()) <= STATE_MAX_BYTES
    assert state.cells == [c.brief() for c in rec.cells]
    assert (state.status, state.business_status, len(state.deliveries)) == ("succeeded", "success", 40)


def test_a_state_whose_brief_cells_are_over_the_bound_drops_their_works() -> None:
    rec = record(40, 0)
    state = fitted(job_state(rec), limit=2_000)
    assert [(c.target_id, c.state, c.work_id, c.work) for c in state.cells] == [
        (c.target_id, "submitted", c.work_id, None) for c in rec.cells
    ]
    assert len(state.deliveries) == 40


def test_a_brief_cell_bounds_the_sources_text() -> None:
    work = Work(work_id="1", title="t" * 5000, url="https://example.net/" + "u" * 3000)
    cell = CellSnapshot(target_id="t", work_id="1", work=work, reason="route_refused", reason_message="m" * 9000)
    brief = cell.brief()
    assert brief.work is not None and brief.work.title == "t" * (BRIEF_TITLE_CHARS - 1) + "…"
    assert brief.work.url == "" and brief.reason_message == "m" * (BRIEF_MESSAGE_CHARS - 1) + "…"
    short = CellSnapshot(
        target_id="t", work_id="1", work=Work(work_id="1", title="a", url="https://x"), reason_message="m"
    )
    assert short.brief().work == short.work and short.brief().reason_message == "m"


def test_clipped_marks_a_cut() -> None:
    assert (clipped("abc", 3), clipped("abcd", 3)) == ("abc", "ab…")
