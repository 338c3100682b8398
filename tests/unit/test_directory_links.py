"""The ``directory`` route writes a delivery only where it is: never through a symbolic link.

The route checked once, before writing, that the work's folder lies inside the route's
directory (:func:`curaflow.paths.inside`); every write after that went by the folder's
path. A folder replaced by a link while a delivery wrote its pages had the remaining pages
and ``manifest.json`` written wherever the link pointed — the delivery reported
``written`` — and a ``manifest.json`` that is a link to a manifest outside the directory
was read through it (a duplicate, nothing written). Each test failed first on that code.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from curaflow.domain.reasons import TerminalReason
from curaflow.routes import directory
from curaflow.routes.base import RouteError
from curaflow.routes.directory import DirectoryRoute
from tests.unit.test_route_answers import request_of


def _dirs(tmp_path: Path) -> tuple[Path, Path, Path]:
    src, root, outside = tmp_path / "src", tmp_path / "root", tmp_path / "outside"
    for d in (src, root, outside):
        d.mkdir()
    return src, root, outside


def _held_for_a_link(err: RouteError) -> None:
    assert err.reason == TerminalReason.ROUTE_REFUSED and err.permanent, (err.reason, str(err))
    assert "symbolic link" in str(err), str(err)
    assert "point the route at the directory it leads to" not in str(err), str(err)


def _swapping_after_first_page(monkeypatch: pytest.MonkeyPatch, swap: Any) -> None:
    """Run ``swap()`` before the route's second page copy, as another process would."""
    real = directory.atomic_copy
    calls = [0]

    def copy(*args: Any, **kwargs: Any) -> None:
        calls[0] += 1
        if calls[0] == 2:
            swap()
        real(*args, **kwargs)

    monkeypatch.setattr(directory, "atomic_copy", copy)


@pytest.mark.parametrize("folder", ["removed", "moved-out"])
async def test_a_work_folder_replaced_by_a_link_mid_delivery_is_never_written_through(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, folder: str
) -> None:
    # The folder removed (the hostile party's reproduction), or moved out of the route's
    # directory, and a link to ``outside`` put at its name before the second page.
    src, root, outside = _dirs(tmp_path)
    request = request_of(src, pages=2)

    def swap() -> None:
        if folder == "removed":
            shutil.rmtree(root / "4242")
        else:
            os.rename(root / "4242", outside / "moved")
        os.symlink(outside, root / "4242")

    _swapping_after_first_page(monkeypatch, swap)
    with pytest.raises(RouteError) as caught:
        await DirectoryRoute("r", root).deliver(request)
    assert caught.value.reason in (TerminalReason.DELIVERY_FAILED, TerminalReason.ROUTE_REFUSED), str(caught.value)
    # Only what was moved out is there: the page delivered before the move, nothing after
    # it (no page, no manifest, no temporary file) — neither at the link nor in the folder moved.
    moved = [] if folder == "removed" else ["moved", "moved/4242_p0.jpg"]
    assert sorted(str(p.relative_to(outside)) for p in outside.rglob("*")) == moved
    monkeypatch.undo()
    # The next attempt meets the link: the route's refusal, still nothing written outside.
    with pytest.raises(RouteError) as again:
        await DirectoryRoute("r", root).deliver(request)
    _held_for_a_link(again.value)
    assert sorted(str(p.relative_to(outside)) for p in outside.rglob("*")) == moved


async def test_a_folder_on_the_way_replaced_by_a_link_mid_delivery_is_never_written_through(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A route whose directory lies in a folder of its own (``root/deliveries``): the folder
    # under the route's directory a work's id names, ``a`` of ``a/4242``, swapped alike.
    src, root, outside = _dirs(tmp_path)
    request = request_of(src, pages=2)
    request.work = request.work.model_copy(update={"work_id": "a/4242"})

    def swap() -> None:
        shutil.rmtree(root / "a")
        (outside / "4242").mkdir()
        os.symlink(outside, root / "a")

    _swapping_after_first_page(monkeypatch, swap)
    with pytest.raises(RouteError):
        await DirectoryRoute("r", root).deliver(request)
    assert sorted(p.name for p in (outside / "4242").iterdir()) == [], "nothing written outside"


async def test_a_manifest_that_is_a_link_to_a_manifest_outside_is_never_read_through(tmp_path: Path) -> None:
    src, root, outside = _dirs(tmp_path)
    request = request_of(src)
    other = dataclasses.replace(request, idempotency_key="curaflow:r:illustration:4242:j2:t")
    assert (await DirectoryRoute("r", outside).deliver(other)).remote_status == "written"
    (root / "4242").mkdir()
    (root / "4242" / "manifest.json").symlink_to(outside / "4242" / "manifest.json")
    with pytest.raises(RouteError) as caught:
        await DirectoryRoute("r", root).deliver(request)
    _held_for_a_link(caught.value)
    assert json.loads((outside / "4242" / "manifest.json").read_bytes())["idempotency_key"] == other.idempotency_key


@pytest.mark.parametrize("leads", ["inside", "outside"])
async def test_a_work_folder_that_is_a_link_is_the_routes_refusal_with_advice_that_fits(
    tmp_path: Path, leads: str
) -> None:
    # A link met where the work's folder goes is the route's (held back): never followed —
    # also one leading to a folder inside the route — and its advice is to remove it, not
    # to point the route at a folder of the route.
    src, root, outside = _dirs(tmp_path)
    target = root / "elsewhere" if leads == "inside" else outside
    target.mkdir(exist_ok=True)
    (root / "4242").symlink_to(target)
    with pytest.raises(RouteError) as caught:
        await DirectoryRoute("r", root).deliver(request_of(src))
    _held_for_a_link(caught.value)
    assert list(target.iterdir()) == [], "nothing written through the link"
