"""Answers nobody named, on the delivery side: each costs one attempt, never a work.

Probes of the defaults the route tables leave (DESIGN.md "Safe defaults at the edges: the
delivery side"): an OS error of curaflow's own disk before anything left, the directory
route's disk (its manifest, its links, its errors), a 2xx of the Bot API's envelope of an
unknown shape. The routes run against ``httpx.MockTransport``
speaking the platforms' wire formats (:mod:`tests.unit.test_route_answers`).
"""

from __future__ import annotations

import dataclasses
import errno
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any
from unittest import mock

import httpx
import pytest

from activities.deliver.sending import _guarded
from curaflow.domain.reasons import TerminalReason
from curaflow.domain.verdicts import delivery_verdict
from curaflow.routes.base import DeliveryRequest, RouteError
from curaflow.routes.directory import DirectoryRoute
from tests.unit.test_route_answers import discord, request_of, telegram, webhook


def verdict_of(err: RouteError, *, resend_safe: bool = False) -> Any:
    return delivery_verdict(
        reason=err.reason,
        permanent=err.permanent,
        ambiguous=err.ambiguous,
        resend_safe=resend_safe,
        attempt=1,
        max_attempts=5,
    )


# ---- curaflow's own files, read before anything leaves ------------------------------------------


@pytest.mark.parametrize("route_of", [telegram, discord, webhook], ids=["telegram", "discord", "webhook"])
async def test_an_artifact_page_unreadable_before_the_send_is_not_sent_and_retried(
    tmp_path: Path, route_of: Callable[[httpx.AsyncClient], Any]
) -> None:
    # A page of the artifact vanished (retention, a cleanup race) or cannot be opened
    # (EMFILE under load) between the claim and the send: nothing left, so the send is
    # neither ambiguous (on an at-most-once route that blocked the work there for good,
    # delivery_unknown) nor the work's; the next attempt restores the artifact.
    asked: list[httpx.Request] = []

    def answer(req: httpx.Request) -> httpx.Response:
        asked.append(req)
        return httpx.Response(500)

    request = request_of(tmp_path, pages=2)
    Path(request.artifact.files[1].path).unlink()
    async with httpx.AsyncClient(transport=httpx.MockTransport(answer)) as http:
        with pytest.raises(RouteError) as caught:
            await _guarded(route_of(http), request)  # as the deliver activity runs a route
    err = caught.value
    assert not asked, "nothing is sent"
    assert not err.ambiguous and not err.permanent and err.answer is None, str(err)
    assert err.reason == TerminalReason.DELIVERY_FAILED
    verdict = verdict_of(err)
    assert not verdict.final and not verdict.unknown and not verdict.remember_refusal
    assert "page 1" in str(err) and "nothing was sent" in str(err)


# ---- the directory route: the route's disk is the route's --------------------------------------


def dir_request(tmp_path: Path, work_id: str = "4242") -> DeliveryRequest:
    (tmp_path / "src").mkdir(exist_ok=True)
    request = request_of(Path(tempfile.mkdtemp(dir=tmp_path / "src")))
    work = request.work.model_copy(update={"work_id": work_id})
    return DeliveryRequest(
        job_id="j",
        target_id="t",
        route="out",
        idempotency_key=f"curaflow:out:illustration:{work_id}:j:t",
        work=work,
        artifact=request.artifact.model_copy(update={"work_id": work_id}),
    )


async def dir_failure(tmp_path: Path, request: DeliveryRequest | None = None) -> RouteError:
    route = DirectoryRoute("out", tmp_path / "out")
    with pytest.raises(RouteError) as caught:
        await _guarded(route, request or dir_request(tmp_path))
    return caught.value


def is_held_not_refused(err: RouteError) -> bool:
    verdict = verdict_of(err, resend_safe=True)
    return (
        err.reason == TerminalReason.ROUTE_REFUSED
        and err.answer is not None
        and verdict.hold
        and not verdict.remember_refusal
        and not verdict.unknown
    )


def put_manifest(root: Path, how: str) -> None:
    folder = root / "4242"
    folder.mkdir(parents=True)
    manifest = folder / "manifest.json"
    if how == "a-directory":
        manifest.mkdir()
    elif how == "not-json":
        manifest.write_bytes(b"\x00\x00\x00 half a manifest")
    else:
        manifest.write_text(how)


@pytest.mark.parametrize(
    "how", ["a-directory", "not-json", "[]", "null", '"x"'], ids=["a-directory", "not-json", "list", "null", "string"]
)
async def test_a_manifest_curaflow_cannot_read_is_never_a_delivery(tmp_path: Path, how: str) -> None:
    # manifest.json is the directory's word "delivered"; one curaflow cannot read (a
    # directory in its place, bytes that are no JSON object, an I/O error) says nothing:
    # it was taken for "the directory already has the work" (duplicate: the intent
    # delivered for good, nothing written) or crashed the route (internal_error).
    put_manifest(tmp_path / "out", how)
    err = await dir_failure(tmp_path)
    assert is_held_not_refused(err), (err.reason, str(err))
    assert "manifest" in str(err)


async def test_a_manifest_that_cannot_be_read_for_an_os_error_is_never_a_delivery(tmp_path: Path) -> None:
    put_manifest(tmp_path / "out", '{"idempotency_key": "another"}')
    real = os.read

    def eio(fd: int, n: int) -> bytes:
        if os.readlink(f"/proc/self/fd/{fd}").endswith("/manifest.json"):
            raise OSError(errno.EIO, os.strerror(errno.EIO))
        return real(fd, n)

    with mock.patch.object(os, "read", eio):
        err = await dir_failure(tmp_path)
    assert err.reason == TerminalReason.DELIVERY_FAILED and not err.permanent and not err.ambiguous


async def test_a_readable_manifest_still_decides(tmp_path: Path) -> None:
    route = DirectoryRoute("out", tmp_path / "out")
    request = dir_request(tmp_path)
    assert (await route.deliver(request)).remote_status == "written"
    assert (await route.deliver(request)).remote_status == "replayed"
    other = DeliveryRequest(**{**request.__dict__, "idempotency_key": "curaflow:out:illustration:4242:j2:t"})
    assert (await route.deliver(other)).duplicate


@pytest.mark.parametrize("where", ["work-folder", "page", "dangling"])
async def test_a_symbolic_link_of_the_routes_directory_is_the_routes_not_the_works(tmp_path: Path, where: str) -> None:
    # A link in the route's directory that leads out of it is the directory's state: the
    # work's id is a plain name. It refused the work for good (delivery_rejected).
    root, elsewhere = tmp_path / "out", tmp_path / "elsewhere"
    root.mkdir()
    elsewhere.mkdir()
    if where == "work-folder":
        (root / "4242").symlink_to(elsewhere)
    elif where == "page":
        (root / "4242").mkdir()
        (root / "4242" / "4242_p0.jpg").symlink_to(elsewhere / "x.jpg")
    else:
        (root / "4242").symlink_to(elsewhere / "gone")
    err = await dir_failure(tmp_path)
    assert is_held_not_refused(err), (err.reason, str(err))
    assert not list(elsewhere.iterdir()), "nothing written outside the route's directory"


@pytest.mark.parametrize("work_id", ["..", "a/../../x"])
async def test_a_work_id_that_would_leave_the_directory_is_still_the_works(tmp_path: Path, work_id: str) -> None:
    err = await dir_failure(tmp_path, dir_request(tmp_path, work_id))
    assert err.reason == TerminalReason.DELIVERY_REJECTED and err.permanent


def failing_mkstemp(code: int) -> Any:
    """The route's temporary files refused with ``code`` (made in the work's folder by its
    handle since 2026-12-08: ``directory_files._temporary``, ``directory._temporary`` before the
    disk work left the route's module the same day; ``tempfile.mkstemp`` until then)."""

    def temporary(*_args: Any, **_kwargs: Any) -> Any:
        raise OSError(code, os.strerror(code))

    return mock.patch("curaflow.routes.directory_files._temporary", temporary)


@pytest.mark.parametrize(
    "code",
    [errno.EROFS, errno.EACCES, errno.EPERM, errno.ENOSPC, errno.EDQUOT, errno.ENAMETOOLONG, errno.EFBIG, 200],
    ids=["EROFS", "EACCES", "EPERM", "ENOSPC", "EDQUOT", "ENAMETOOLONG", "EFBIG", "an-errno-never-seen"],
)
async def test_the_routes_disk_refusing_is_the_routes_and_counted(tmp_path: Path, code: int) -> None:
    # A disk that refuses (read-only, full, no rights) refuses every work alike: the
    # route's (the work held back, the refusal streak pauses the route), not retried
    # through the attempt budget job after job with no pause and no alert.
    with failing_mkstemp(code):
        first = await dir_failure(tmp_path)
        second = await dir_failure(tmp_path, dir_request(tmp_path, "4343"))
    assert is_held_not_refused(first), (first.reason, str(first))
    assert first.answer == second.answer, "the same answer for every work: the streak counts it"


async def test_a_work_folder_in_the_way_is_the_routes(tmp_path: Path) -> None:
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "4242").write_text("a file where the work's folder goes")
    err = await dir_failure(tmp_path)
    assert is_held_not_refused(err), (err.reason, str(err))


@pytest.mark.parametrize(
    "code",
    [errno.EIO, errno.EMFILE, errno.ENFILE, errno.EINTR, errno.EAGAIN, errno.ESTALE, errno.EBUSY, errno.ENOMEM],
    ids=["EIO", "EMFILE", "ENFILE", "EINTR", "EAGAIN", "ESTALE", "EBUSY", "ENOMEM"],
)
async def test_an_os_error_that_may_pass_is_retried(tmp_path: Path, code: int) -> None:
    with failing_mkstemp(code):
        err = await dir_failure(tmp_path)
    assert err.reason == TerminalReason.DELIVERY_FAILED and not err.permanent and not err.ambiguous
    assert err.answer is None


async def test_the_artifact_unreadable_is_not_the_routes_disk(tmp_path: Path) -> None:
    # curaflow's own file gone: retried (the next attempt restores it), never a refusal
    # of the route counted in its streak.
    request = dir_request(tmp_path)
    Path(request.artifact.files[0].path).unlink()
    err = await dir_failure(tmp_path, request)
    assert err.reason == TerminalReason.DELIVERY_FAILED and not err.permanent and err.answer is None
    assert not (tmp_path / "out" / "4242" / "manifest.json").exists()


# ---- Telegram: a 2xx of the Bot API's envelope of an unknown shape ---------------------------------


@pytest.mark.parametrize("ok", ["true", 1, None, [], {"x": 1}], ids=["string", "one", "null", "list", "object"])
async def test_a_telegram_2xx_whose_ok_is_no_boolean_may_have_posted(tmp_path: Path, ok: Any) -> None:
    # Only `ok: true` / `ok: false` are the Bot API's words. A 2xx whose `ok` is another
    # value is an answer of an unknown shape that may follow a post: it was a refusal of
    # the route (route_refused), and the work, held for an hour, was posted again.
    body = {"ok": ok, "result": {"message_id": 7}}
    async with httpx.AsyncClient(transport=httpx.MockTransport(lambda _r: httpx.Response(200, json=body))) as http:
        with pytest.raises(RouteError) as caught:
            await telegram(http).deliver(request_of(tmp_path))
    err = caught.value
    assert err.ambiguous and err.reason != TerminalReason.ROUTE_REFUSED, (err.reason, str(err))
    assert verdict_of(err).unknown  # at most once: never posted again


async def test_a_telegram_4xx_whose_ok_is_no_boolean_is_the_routes(tmp_path: Path) -> None:
    body = {"ok": "false", "error_code": 400, "description": "Bad Request: file is too big"}
    async with httpx.AsyncClient(transport=httpx.MockTransport(lambda _r: httpx.Response(400, json=body))) as http:
        with pytest.raises(RouteError) as caught:
            await telegram(http).deliver(request_of(tmp_path))
    assert caught.value.reason == TerminalReason.ROUTE_REFUSED and not caught.value.ambiguous


def long_page_request(tmp_path: Path, stem: str) -> DeliveryRequest:
    """A work whose page file is named ``<stem>_p0.jpg`` (the artifact store names pages
    ``<work_id>_p<N>.<ext>``)."""
    request = dir_request(tmp_path, stem)
    [page] = request.artifact.files
    renamed = Path(page.path).with_name(f"{stem}_p0.jpg")
    Path(page.path).rename(renamed)
    files = [page.model_copy(update={"path": str(renamed)})]
    return dataclasses.replace(request, artifact=request.artifact.model_copy(update={"files": files}))


@pytest.mark.parametrize(
    "build",
    [
        lambda tmp: dir_request(tmp, "7" * 300),  # the work's folder: 300 bytes
        lambda tmp: long_page_request(tmp, "7" * 240),  # its page: 247 bytes, 261 written under a temporary name
        lambda tmp: dir_request(tmp, "7" * 300 + "/x"),  # a folder of its folder: 300 bytes
    ],
    ids=["folder", "page", "folder-of-its-folder"],
)
async def test_a_works_name_too_long_for_the_routes_disk_is_that_work_on_that_route(
    tmp_path: Path, build: Callable[[Path], DeliveryRequest]
) -> None:
    """A name is too long (``ENAMETOOLONG``) for the disk's name limit (``NAME_MAX``, 255
    bytes here) only for works of such names: the work on this route (``over_route_limit``:
    nothing written, remembered so later jobs pick another work for the route, other routes
    still take it), never the route's refusal, which held back and paused the route for
    every work (until 2026-12-07). The next work of an ordinary name is delivered."""
    route = DirectoryRoute("out", tmp_path / "out")
    with pytest.raises(RouteError) as caught:
        await _guarded(route, build(tmp_path))
    err = caught.value
    assert err.reason == TerminalReason.OVER_ROUTE_LIMIT and err.permanent, (err.reason, str(err))
    assert err.answer is None, "no answer of the route's: never counted toward its pause"
    assert "255" in str(err), str(err)  # the operator reads the disk's limit
    assert [p.name for p in (tmp_path / "out").iterdir()] == [] if (tmp_path / "out").exists() else True
    receipt = await _guarded(route, dir_request(tmp_path, "4343"))
    assert receipt.remote_status == "written"


def test_a_path_too_long_for_every_works_manifest_is_the_routes_not_the_works(tmp_path: Path) -> None:
    """Every delivery writes its manifest under a temporary name
    (``<folder>/.manifest.json.<8>.tmp``): on a disk whose ``PATH_MAX`` that path of the
    shortest work id is over, every work fails — the route's (left to the write,
    ``os_failure``), never the work with long names on this route (``over_route_limit``),
    which the shortest page's path alone made it."""
    from curaflow.routes import directory

    root = tmp_path / "out"
    root.mkdir()
    shortest_manifest = len(os.fsencode(str(root / "0" / ".manifest.json.abcdefgh.tmp")))
    long_id = "4" * 40
    folder = root / long_id
    pages = [folder / f"{long_id}_p0.jpg"]
    with mock.patch.object(directory, "disk_limits", return_value=(255, shortest_manifest)):
        # A path of PATH_MAX bytes or more is refused (its NUL does not fit): every work's manifest.
        assert directory.names_over_limit(root, folder, pages) is None
    with mock.patch.object(directory, "disk_limits", return_value=(255, shortest_manifest + 1)):
        # Every work's manifest fits; this work's page path does not: the work's on this route.
        assert directory.names_over_limit(root, folder, pages) is not None
