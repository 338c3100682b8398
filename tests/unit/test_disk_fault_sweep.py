"""Every errno at every file-system call of a job's path, and whose failure it is.

Two disks with two owners: the artifact store's (curaflow's own working disk — a failure
there is curaflow's, retried, never the work's nor the source's: DESIGN.md "Work-owned
failures and the decode budget", :func:`~curaflow.sources.decoding.machine_error`) and the
``directory`` route's (the destination's — the route's, :func:`~curaflow.routes.directory.os_failure`;
a page of the artifact it cannot read is curaflow's, retried). Each sweep first runs the
step once, counting its calls (:class:`tests.faultdisk.FaultyDisk`), then runs it again for
every call index with that call failing with each errno of :data:`tests.faultdisk.ERRNOS`,
and asserts for every injection:

* **blame**: the store raises the machine's ``OSError`` as it came (never
  :class:`~curaflow.sources.errors.WorkUnavailable`, never a ``SourceError``) — but a file
  over the size this machine takes (``EFBIG``), the work ``too_large`` *here*, not
  recognised (held back briefly: :func:`~curaflow.artifacts.store.over_file_size_limit`); the route
  raises a :class:`~curaflow.routes.base.RouteError` whose owner is never the work and whose
  verdict never remembers a refusal; an error that may pass (``EINTR``, ``EAGAIN``, ``EIO``,
  ``ESTALE``, ``EMFILE``, ``ENFILE``) is retried, never ``permanent``;
* **nothing half-written visible**: a file under its final name is whole, a manifest names
  only files that are there;
* **recovery**: the same step run again on a sound disk succeeds and leaves exactly the
  final files (no part file, no temporary file, no frames zip), each described fully
  (its pixel size read — a machine error while describing is raised, never "no size").
"""

from __future__ import annotations

import errno
import io
import json
import shutil
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from activities.deliver.sending import _guarded
from curaflow.artifacts import ArtifactStore
from curaflow.artifacts.files import describe
from curaflow.domain.models import Artifact, Work, WorkPage
from curaflow.domain.reasons import REASONS, Owner
from curaflow.routes.base import DeliveryRequest, RouteError
from curaflow.routes.directory import DirectoryRoute
from curaflow.sources.animation import Animation, AnimationFrame
from curaflow.sources.decoding import machine_error
from curaflow.sources.errors import SourceError, WorkUnavailable
from tests.faultdisk import ERRNOS, FaultyDisk, leftovers, scratch
from tests.unit.test_decode_budget import OneFile
from tests.unit.test_unknown_is_cheap_at_routes import dir_request, verdict_of

#: ~2 800 injections, ~35 s of one core: the full suite's, not the fast lane's (docs/testing.md).
pytestmark = pytest.mark.slow

#: Errors that may pass by themselves: never a permanent verdict on the directory.
PASSING = frozenset(
    {
        errno.EINTR,
        errno.EAGAIN,
        errno.EIO,
        errno.ESTALE,
        errno.EMFILE,
        errno.ENFILE,
        errno.ENOMEM,
        errno.EBUSY,
        errno.ETXTBSY,
    }
)
ERRNO_IDS = [errno.errorcode[code] for code in ERRNOS]


@pytest.fixture
def folder(tmp_path: Path) -> Iterator[Path]:
    """The sweep's folder: in memory where the machine has one (:func:`tests.faultdisk.scratch`)."""
    with scratch(tmp_path) as path:
        yield path


def _png(shade: int) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (32, 24), (shade, 10, 20)).save(buf, format="PNG")
    return buf.getvalue()


PAGES = {f"https://i.pximg.net/img-original/img/42_p{i}.png": _png(i * 40) for i in range(2)}
WORK = Work(
    work_id="42",
    url="https://www.pixiv.net/artworks/42",
    page_count=2,
    pages=[WorkPage(index=i, url=url) for i, url in enumerate(PAGES)],
)


def _ugoira() -> tuple[bytes, Animation]:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as archive:
        for i in range(2):
            frame = io.BytesIO()
            Image.new("RGB", (16, 12), (i * 90, 0, 0)).save(frame, format="PNG")
            archive.writestr(f"{i:06d}.png", frame.getvalue())
    meta = Animation(
        zip_url="https://i.pximg.net/img-zip-ugoira/img/7_ugoira600x600.zip",
        frames=[AnimationFrame(file=f"{i:06d}.png", delay_ms=100) for i in range(2)],
    )
    return buf.getvalue(), meta


ZIP, META = _ugoira()
UGOIRA = Work(
    work_id="7",
    url="https://www.pixiv.net/artworks/7",
    page_count=1,
    kind="ugoira",
    pages=[WorkPage(index=0, url="https://i.pximg.net/img-original/img/7_p0.png")],
)


class Pages:
    """A source of ``PAGES`` (each URL its own body)."""

    def download(self, url: str) -> Any:
        return OneFile(PAGES[url]).download(url)

    async def animation(self, work: Work) -> None:
        return None


def _source(case: str) -> tuple[Any, Work]:
    return (Pages(), WORK) if case.startswith("pages") else (OneFile(ZIP, META), UGOIRA)


async def _fetch(store: ArtifactStore, case: str, disk: FaultyDisk | None, monkeypatch: pytest.MonkeyPatch) -> Any:
    """The store's fetch of ``case``'s work, under ``disk`` when given: the artifact or the error raised."""
    source, work = _source(case)
    if disk is None:
        return await store.fetch(source, work, "job@1", "t")
    with disk.armed(monkeypatch):
        try:
            return await store.fetch(source, work, "job@1", "t")
        except Exception as err:  # noqa: BLE001 - judged by the caller
            return err


def _whole(artifact: Artifact, case: str) -> list[str]:
    """What is wrong with a complete artifact: a page not the source's bytes, a size not read."""
    wrong = []
    for f in artifact.files:
        if case.startswith("pages") and Path(f.path).read_bytes() != PAGES[WORK.pages[f.page].url]:
            wrong.append(f"page {f.page} is not the source's bytes")
        if f.width is None or f.height is None:
            wrong.append(f"page {f.page} described without its size")
    return wrong


def _final_files(folder: Path, case: str) -> set[str]:
    return {"42_p0.png", "42_p1.png"} if case.startswith("pages") else {"7_ugoira.gif"}


async def _sweep_fetch(tmp_path: Path, case: str, code: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Sweep ``case``'s fetch (a ``-kept`` case: a fetch over the files a sound fetch of
    the work left, fetched once and copied under each injection's store: what the store
    reads of them is on the disk, and a copy holds the same bytes, names and modes)."""
    counted = FaultyDisk()
    store = ArtifactStore(tmp_path / "count")
    sound = tmp_path / "sound"
    if case.endswith("kept"):
        await _fetch(store, case, None, monkeypatch)
        shutil.copytree(store.root, sound)
    assert isinstance(await _fetch(store, case, counted, monkeypatch), Artifact)
    assert len(counted.calls) > 10, counted.calls
    wrong: list[str] = []
    for at in range(len(counted.calls)):
        store = ArtifactStore(tmp_path / str(at))
        if case.endswith("kept"):
            shutil.copytree(sound, store.root)
        disk = FaultyDisk(fail_at=at, code=code)
        got = await _fetch(store, case, disk, monkeypatch)
        said = f"call {at} ({disk.failed}) {errno.errorcode[code]}"
        if isinstance(got, Artifact):
            wrong += [f"{said}: {w}" for w in _whole(got, case)]
        elif code == errno.EFBIG:
            # A file over what this machine takes: held back briefly here, never the work's verdict.
            if not isinstance(got, WorkUnavailable) or got.recognised or str(got.kind) != "too_large":
                wrong.append(f"{said}: raised {type(got).__name__}: {got} — not too_large held back briefly")
        elif isinstance(got, WorkUnavailable | SourceError) or not machine_error(got):
            wrong.append(f"{said}: raised {type(got).__name__}: {got} — not the machine's error as it came")
        folder = store.folder("job@1", "t")
        if folder.exists() and case.startswith("pages"):
            for page in folder.iterdir():
                if page.name in _final_files(folder, case) and _whole(
                    Artifact(work_id="42", files=[_described(page)]), case
                ):
                    wrong.append(f"{said}: {page.name} visible under its final name, not whole")
        again = await _fetch(store, case, None, monkeypatch)
        wrong += [f"{said}, then a sound disk: {w}" for w in _whole(again, case)]
        left = {p.name for p in folder.iterdir()}
        if left != _final_files(folder, case):
            wrong.append(f"{said}, then a sound disk: the folder holds {sorted(left)}")
    assert not wrong, "\n".join(wrong)


def _described(page: Path) -> Any:
    return describe(page, int(page.stem.rsplit("_p", 1)[1]))


@pytest.mark.parametrize("code", ERRNOS, ids=ERRNO_IDS)
@pytest.mark.parametrize("case", ["pages", "pages-kept", "ugoira", "ugoira-kept"])
async def test_a_failing_artifact_disk_is_curaflows_and_leaves_nothing_half_written(
    folder: Path, case: str, code: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    await _sweep_fetch(folder, case, code, monkeypatch)


# ---- the directory route: the destination's disk is the route's --------------------------------


async def _deliver(
    route: DirectoryRoute, request: DeliveryRequest, disk: FaultyDisk | None, monkeypatch: pytest.MonkeyPatch
) -> Any:
    if disk is None:
        return await _guarded(route, request)
    with disk.armed(monkeypatch):
        try:
            return await _guarded(route, request)  # as the deliver activity runs a route
        except Exception as err:  # noqa: BLE001 - judged by the caller
            return err


def _half_visible(root: Path, request: DeliveryRequest) -> list[str]:
    folder = root / request.work.work_id
    if not folder.exists():
        return []
    pages = {Path(f.path).name: Path(f.path).read_bytes() for f in request.artifact.files}
    wrong = [
        f"{p.name} visible, not whole" for p in folder.iterdir() if p.name in pages and p.read_bytes() != pages[p.name]
    ]
    manifest = folder / "manifest.json"
    if manifest.exists():
        named = [f["name"] for f in json.loads(manifest.read_bytes())["files"]]
        wrong += [f"the manifest names {name}, not there" for name in named if not (folder / name).is_file()]
    return wrong


@pytest.mark.parametrize("code", ERRNOS, ids=ERRNO_IDS)
@pytest.mark.parametrize("case", ["new-directory", "directory-there", "replay"])
async def test_a_failing_route_disk_is_the_routes_never_the_works(
    folder: Path, case: str, code: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    # One artifact for every injection: the route only reads it (copies of its files go
    # to the destination), so each injection's delivery reads the same bytes.
    request = dir_request(folder)

    def fresh(name: str) -> tuple[DirectoryRoute, DeliveryRequest, Path]:
        base = folder / name
        base.mkdir()
        root = base / "out"
        if case != "new-directory":
            root.mkdir()
        return DirectoryRoute("out", root), request, root

    async def prepared(name: str) -> tuple[DirectoryRoute, DeliveryRequest, Path]:
        route, request, root = fresh(name)
        if case == "replay":
            assert (await _deliver(route, request, None, monkeypatch)).remote_status == "written"
        return route, request, root

    route, request, _ = await prepared("count")
    counted = FaultyDisk()
    assert not isinstance(await _deliver(route, request, counted, monkeypatch), Exception)
    assert len(counted.calls) > 10, counted.calls
    wrong: list[str] = []
    for at in range(len(counted.calls)):
        route, request, root = await prepared(str(at))
        disk = FaultyDisk(fail_at=at, code=code)
        got = await _deliver(route, request, disk, monkeypatch)
        said = f"call {at} ({disk.failed}) {errno.errorcode[code]}"
        if isinstance(got, Exception):
            if not isinstance(got, RouteError):
                wrong.append(f"{said}: raised {type(got).__name__}: {got} — unclassified")
            else:
                if REASONS[got.reason].owner == Owner.WORK or verdict_of(got, resend_safe=True).remember_refusal:
                    wrong.append(f"{said}: {got.reason} — the work blamed")
                if code in PASSING and got.permanent:
                    wrong.append(f"{said}: {got.reason} permanent for an error that may pass")
        wrong += [f"{said}: {w}" for w in _half_visible(root, request)]
        again = await _deliver(route, request, None, monkeypatch)
        assert again.remote_status in ("written", "replayed"), said
        wrong += [f"{said}, then a sound disk: {w}" for w in _half_visible(root, request)]
        if left := leftovers(root):
            wrong.append(f"{said}, then a sound disk: left {left}")
    assert not wrong, "\n".join(wrong)
