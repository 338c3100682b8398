"""The ``directory`` route: artifact files and a JSON manifest, each written atomically.

Layout under the route's path::

    <work_id>/<work_id>_p<N>.<ext>     every page of the work
    <work_id>/manifest.json            written last; its presence means "delivered"

Every path is checked to stay under the route's directory (:func:`curaflow.paths.inside`):
a work id or file name that would leave it is refused for good (``delivery_rejected``).
Every file call of a delivery is then made relative to a handle of the work's folder
(:class:`WorkFolder`: opened one component at a time from the route's directory, never
through a symbolic link, and checked still at its name before each file takes its name
and before the report), the manifest read without following a link: a symbolic link met
on the way — a folder, the work's folder, its ``manifest.json``, there before the delivery
or put there while it writes — is the directory's state, the route's (``route_refused``,
answer ``directory symbolic link``: the work held back, never refused), and nothing is
written or read where it leads (:func:`_link_met`; until 2026-12-08 the folder was checked
once and written by path, a folder swapped for a link mid-delivery had the rest of the work
written wherever it pointed, reported ``written``).
Each file is written to a temporary name in the same directory, given the route's file
mode (``file_mode``, else what the process's umask gives a new file — the temporary file
itself is private, ``0600``, as ``mkstemp`` makes it), flushed with ``fsync``
and renamed into place (reference ``pixiv-and-delivery-apis.md`` §4.2), so a reader
never sees a partial file and a crash leaves no half-delivered manifest; the manifest
takes its name by a hard link, never over one another delivery wrote after this one
looked for it (:func:`~curaflow.routes.directory_files._publish`; a disk that makes no hard links has it renamed once a
look found the name free), and so does every page: a page's name already holding the
very bytes is kept, one holding anything else — a file of the directory's owner, another
delivery's — is never replaced (``route_refused``, naming the path: :func:`atomic_copy`). The work's
folder and the route's directory are synced after the manifest's rename, before the
delivery is reported (:func:`sync_folder`): a crash or a power cut after the report no
longer takes the renamed manifest back out of the directory (a manifest found — a
replay, a duplicate — is synced alike before it is reported; an ``EIO`` there is one
retried attempt, never a delivery). A delivery holds the work's folder while it writes
it, and first removes the temporary files an attempt killed mid-write left there
(:func:`_writing`; a delivery that finds the work's manifest, alike:
:func:`remove_leftovers_if_alone`). A manifest that
already carries this delivery's idempotency key is an idempotent replay; one written by
another delivery means the directory already has the work (duplicate). Only a manifest
read whole as a JSON object that curaflow wrote for this work (:func:`written_for`) decides
so: one that is no regular file (judged by what was opened, not by a look before), no JSON
object, not UTF-8, over :data:`MANIFEST_MAX_BYTES` or an object of another shape is
``route_refused`` (it says neither), an OS error looking for it or reading it
as any other — only "no such file" says there is none. A manifest of another work whose id
differs from this one's only in letter case says the disk keeps both in one folder (a
case-insensitive disk): the work is ``over_route_limit`` on this route (:func:`folded_work`).

The directory's OS errors have one owner, :func:`os_failure`: those that may pass
(:data:`PASSING_ERRORS`: ``EIO``, ``EMFILE``, ``EINTR``, ``ENOENT`` of a name removed
under the write, a network disk's broken connection …) are retried
(``delivery_failed``); every other (``EROFS``, ``EACCES``, ``ENOSPC``, ``EDQUOT``, a
file where the work's folder goes, ``ELOOP``, one never seen) is ``route_refused`` with
the errno's name as its answer, so several works refused alike pause the route. A work
whose names the disk would refuse as too long (``ENAMETOOLONG`` of its folder, a page or
its temporary name over the disk's ``NAME_MAX``, a path over ``PATH_MAX`` where ordinary
names fit: :func:`names_over_limit`) is refused on this route before anything is written
(``over_route_limit``, the work's on this route only; until 2026-12-07 the route's). A page
of the artifact curaflow cannot read is none of the directory's: retried, like on every
route (:func:`~curaflow.routes.base.page_unreadable`).
"""

from __future__ import annotations

import asyncio
import errno
import json
import os
import re
import stat
from pathlib import Path
from typing import Any, Literal

from pydantic import field_validator

from curaflow.domain.reasons import TerminalReason
from curaflow.domain.text import setting_path
from curaflow.outbound import Destinations
from curaflow.paths import PathEscape
from curaflow.routes.base import DeliveryReceipt, DeliveryRequest, RouteError, RouteSettings, page_unreadable
from curaflow.routes.directory_files import (
    LinkMet,
    NameTaken,
    SourceUnreadable,
    WorkFolder,
    _inside,
    _open_below,
    _writing,
    atomic_copy,
    atomic_write_bytes,
    new_file_mode,
    remove_leftovers_if_alone,
    sync_folder,
)
from curaflow.routes.registry import RouteContext, register_route


class DirectoryRouteConfig(RouteSettings):
    """Deliver into a directory: the artifact files and a JSON manifest, written atomically.

    Every route kind also takes ``task_queue``: run this route's deliveries on their own
    task queue (e.g. on workers that can reach the destination). Workers serve the route
    queues of their configuration; a delivery no worker picks up within the stall budget
    ends ``delivery_abandoned``.

    Attributes:
        path: the directory; ``~`` expanded and a relative path resolved against the
            current directory when the settings load, so every process of one stack
            writes to the same place (a symbolic link is followed then: re-pointed, it
            takes effect at a process's next start).
        file_mode: permission bits of the delivered files and manifests, in octal
            (``"0640"``); None → what the process's umask gives a new file (``0644``
            under the usual ``022``), as ``cp`` would.
    """

    kind: Literal["directory"] = "directory"
    path: Path
    file_mode: str | None = None

    @field_validator("path", mode="before")
    @classmethod
    def _path_given(cls, value: Any) -> Any:
        return setting_path(value)

    @field_validator("path")
    @classmethod
    def _absolute(cls, value: Path) -> Path:
        return value.expanduser().resolve()

    def destinations(self) -> Destinations:
        """None: the route writes files and talks to no one."""
        return Destinations(origins=())

    @field_validator("file_mode")
    @classmethod
    def _octal_mode(cls, value: str | None) -> str | None:
        if value is not None and not re.fullmatch(r"0?[0-7]{3}", value.strip()):
            raise ValueError(f"file_mode {value!r}: an octal permission such as '0640'")
        return value.strip() if value is not None else None

    @property
    def mode(self) -> int | None:
        """``file_mode`` as an int (``0o640``), or None."""
        return int(self.file_mode, 8) if self.file_mode is not None else None


#: The most bytes of a ``manifest.json`` read (one MiB): a manifest curaflow writes is a
#: few KiB (a page is one entry of ~200 bytes); a larger file at that name is none of its
#: manifests, and is never read whole into the worker's memory.
MANIFEST_MAX_BYTES = 1 << 20


NETWORK_ERRORS = frozenset(
    {
        errno.ECONNRESET,
        errno.ECONNABORTED,
        errno.ECONNREFUSED,
        errno.EHOSTDOWN,
        errno.EHOSTUNREACH,
        errno.ENETDOWN,
        errno.ENETUNREACH,
        errno.ENETRESET,
        errno.ENOTCONN,
        errno.ENOLINK,
        errno.ECOMM,
        errno.EREMOTEIO,
    }
)
#: OS errors of the destination's disk that may pass by themselves (an interrupted call,
#: a busy or stale handle, an I/O error or a broken connection of a network disk,
#: :data:`NETWORK_ERRORS`, this process out of files or
#: memory, a name removed under the write — ``ENOENT``: a consumer moved the work's folder
#: away, the next attempt makes it again; route_refused until 2026-12-06): retried,
#: ``delivery_failed``. Every other error — a read-only or full disk,
#: no rights, a name in the way, a name too long, one never seen — refuses every work
#: alike until someone fixes the directory: the route's (``route_refused``).
PASSING_ERRORS = (
    frozenset(
        {
            errno.EINTR,
            errno.ENOENT,
            errno.EAGAIN,
            errno.EBUSY,
            errno.EIO,
            errno.ESTALE,
            errno.ETIMEDOUT,
            errno.EMFILE,
            errno.ENFILE,
            errno.ENOMEM,
            errno.ENOLCK,
            errno.EDEADLK,
            errno.ETXTBSY,
        }
    )
    | NETWORK_ERRORS
)
#: Errors of a disk that is full: the hint says to free space.
FULL_ERRORS = frozenset({errno.ENOSPC, errno.EDQUOT})


def os_failure(err: OSError, doing: str) -> RouteError:
    """The failure an OS error of the route's own directory means — the one owner of that
    classification (DESIGN.md "Safe defaults at the edges: the delivery side"): an error
    of :data:`PASSING_ERRORS` is retried (``delivery_failed``, no answer); any other —
    ``EROFS``, ``EACCES``, ``ENOSPC``, ``ENOTDIR``, ``EEXIST`` of a file where a folder
    goes, ``ELOOP``, an errno never seen — is ``route_refused`` with the errno's name as
    its answer, so the work is held back (never refused: the work is not the cause) and
    several works refused alike pause the route. Until 2026-12-05 every OS error was
    retried through the attempt budget, job after job, with no pause and no alert.

    Args:
        err: the error.
        doing: what was being done, for the message ("writing a page" …).
    """
    name = errno.errorcode.get(err.errno, f"errno {err.errno}") if err.errno is not None else type(err).__name__
    said = err.strerror or type(err).__name__
    if err.errno in PASSING_ERRORS:
        return RouteError(TerminalReason.DELIVERY_FAILED, f"directory: {doing} failed: {said} ({name}); retried")
    hint = (
        "the route's disk is full: free space on it"
        if err.errno in FULL_ERRORS
        else "the route's directory refuses the write (its rights, a read-only disk, a name in the way): fix it"
    )
    return RouteError(
        TerminalReason.ROUTE_REFUSED,
        f"directory: {doing} failed: {said} ({name}); {hint}",
        permanent=True,
        answer=f"directory {name}",
    )


#: Bytes a written file's temporary name adds to its own (:func:`atomic_copy`,
#: :func:`atomic_write_bytes`: ``.<name>.`` + ``mkstemp``'s eight characters + ``.tmp``).
TEMP_NAME_EXTRA = 14
#: The shortest names every work's delivery writes (a one-character work id's folder and
#: page), for telling a path too long for any work (the route's) from one too long for
#: this work's names (:func:`names_over_limit`).
_SHORTEST_FOLDER, _SHORTEST_PAGE = "0", "0_p0.jpg"
#: The name of the manifest every delivery writes in the work's folder.
MANIFEST_NAME = "manifest.json"


def disk_limits(path: Path) -> tuple[int, int]:
    """The route's disk's longest name and longest path, bytes (``pathconf``'s ``NAME_MAX``
    and ``PATH_MAX`` of ``path`` or, before it exists, of its nearest existing parent);
    Linux's 255 and 4096 when the disk does not say."""
    probe = path
    while not probe.exists() and probe.parent != probe:
        probe = probe.parent
    limits = []
    for key, default in (("PC_NAME_MAX", 255), ("PC_PATH_MAX", 4096)):
        try:
            value = os.pathconf(probe, key)
        except (OSError, ValueError):
            value = -1
        limits.append(value if value > 0 else default)
    return limits[0], limits[1]


def names_over_limit(root: Path, folder: Path, pages: list[Path]) -> str | None:
    """Why the names a delivery of one work writes do not fit the route's disk, or None.

    A name longer than the disk's ``NAME_MAX`` — the work's folder and each folder it lies
    in under ``root`` (a work id of several components, ``a/b``: until 2026-12-07 only
    the last was weighed, and a longer one before it was the disk's ``ENAMETOOLONG``, the
    route's), a page, or a page's temporary name (:data:`TEMP_NAME_EXTRA` bytes more) — or
    a path longer than its ``PATH_MAX`` — a page's or the manifest's, under its temporary
    name — where every path a work of the shortest names writes fits (its page's and its
    manifest's: until 2026-12-07 the page's alone, so where only every work's manifest was
    over, a work of long names was refused as its own) (:func:`disk_limits`): the
    disk would answer ``ENAMETOOLONG`` for this work's names alone, never for a work of
    ordinary names — the work on this route, not the route (a path too long for any work
    is the route's: left to the write, :func:`os_failure`).

    Args:
        root: the route's directory.
        folder: the work's folder in it.
        pages: where the work's pages go, in the folder.
    """
    name_max, path_max = disk_limits(root)
    try:
        folders = list(folder.relative_to(root).parts)
    except ValueError:  # not under root (inside() never gives one): its own name alone
        folders = [folder.name]
    for name, extra in [(part, 0) for part in folders] + [(page.name, TEMP_NAME_EXTRA) for page in pages]:
        size = len(os.fsencode(name)) + extra
        if size > name_max:
            what = "the work's folder name" if extra == 0 else f"page {name!r}'s name, written under a temporary name,"
            return f"{what} is {size} bytes, over the {name_max} bytes the route's disk takes in a name"
    # The longest path a work of the shortest names writes: its page's or its manifest's,
    # each under its temporary name (until 2026-12-07 the page's alone: where only the
    # manifest's path of every work was over, a work of long names was refused as its own).
    shortest = max(
        len(os.fsencode(str(root / _SHORTEST_FOLDER / name))) + TEMP_NAME_EXTRA
        for name in (_SHORTEST_PAGE, MANIFEST_NAME)
    )
    for path in [*pages, folder / MANIFEST_NAME]:
        size = len(os.fsencode(str(path))) + TEMP_NAME_EXTRA
        if size >= path_max and shortest < path_max:
            return f"the path of {path.name!r} is {size} bytes, over the {path_max} bytes the route's disk takes"
    return None


def written_for(manifest: dict[str, Any], work_id: str) -> bool:
    """Whether ``manifest`` (a ``manifest.json`` read as a JSON object) is one curaflow
    wrote for the work ``work_id`` — by any delivery: a delivery's ``idempotency_key``
    (non-empty text) and ``work.work_id`` that work's id, as every manifest
    :class:`DirectoryRoute` has written since the first. Only such a manifest says the
    directory has the work; any other object (``{}``, a consumer's own
    ``{"status": "processed"}``, another work's manifest copied there) says nothing of it.
    Until 2026-12-07 any JSON object did: the work recorded delivered (duplicate) for good
    on the route, nothing written."""
    key, work = manifest.get("idempotency_key"), manifest.get("work")
    return isinstance(key, str) and bool(key) and isinstance(work, dict) and work.get("work_id") == work_id


def folded_work(manifest: dict[str, Any], work_id: str) -> str | None:
    """The id of the other work whose manifest ``manifest`` is (one curaflow wrote:
    :func:`written_for`) when it differs from ``work_id`` only in letter case — the disk
    keeps both works' folders as one (a case-insensitive disk: macOS's, Windows'
    defaults) — else None. Work ids are ASCII (:data:`curaflow.sources.paging.WORK_ID`;
    Pixiv's are digits), so no Unicode normalisation folds two."""
    work = manifest.get("work")
    other = work.get("work_id") if isinstance(work, dict) else None
    if isinstance(other, str) and other != work_id and other.lower() == work_id.lower():
        return other if written_for(manifest, other) else None
    return None


def _folded_folder(work_id: str, other: str) -> RouteError:
    """The refusal of work ``work_id`` on this route only, whose folder the route's disk
    keeps as work ``other``'s (:func:`folded_work`): the disk cannot hold it apart, like a
    name over its limit (2026-12-07; until then ``route_refused`` — held back for good,
    three such works pausing the route for works it takes)."""
    return RouteError(
        TerminalReason.OVER_ROUTE_LIMIT,
        f"directory: not written by curaflow: the route's disk keeps work {work_id!r}'s folder as work {other!r}'s "
        "(their ids differ only in letter case, and the disk does not tell them apart); this work cannot be "
        "written apart from it on this route",
        permanent=True,
    )


def _page_name_taken(dest: Path) -> RouteError:
    """The route's refusal of a page whose name ``dest`` holds a file of other bytes, or no
    regular file (:func:`atomic_copy`): curaflow never replaces a file this delivery did
    not write — the directory's owner's file, another delivery's other bytes (2026-12-07:
    renamed over it). The work is held back, never refused: it is delivered once the name
    is free.

    Its message says what the file may be, curaflow's own among them: an earlier delivery
    of this work stopped after the page, before its manifest (a kill, attempts run out),
    and the work fetched again later with other bytes (its artist replaced the image, an
    animation encoded by another version) — such a page was never reported delivered, no
    ``manifest.json`` beside it, and nothing tells it from the owner's file. Until
    2026-12-07 the message said "a file curaflow did not write": the operator was told
    the page was someone else's, not that removing it lets the work through."""
    return RouteError(
        TerminalReason.ROUTE_REFUSED,
        f"directory: {dest} holds other bytes than this delivery's page, or no regular file — a file of the "
        "directory's owner, another delivery's, or this page from an earlier delivery of this work that stopped "
        "before its manifest while the work changed at its source; a delivery never replaces it: move it away, or "
        "delete it when no manifest.json beside it says the work was delivered",
        permanent=True,
        answer="directory page name taken",
    )


def _link_met(path: Path) -> RouteError:
    """The route's refusal of a symbolic link met where a delivery writes or reads (a
    folder on the way to the work's, the work's folder, its ``manifest.json``: never
    followed, :class:`WorkFolder`): the work is held back, never refused — its id is a plain
    name — and nothing is written where the link leads. The advice is the link's removal:
    the link lies inside the route's directory, where curaflow makes the work's folder
    itself (until 2026-12-08 the message also said to point the route at the directory
    the link leads to — the route pointed at a folder of its own works).

    Its answer counts toward the route's pause as every refusal of its directory."""
    return RouteError(
        TerminalReason.ROUTE_REFUSED,
        f"directory: {path} is a symbolic link (or lies under one): a delivery never writes or reads through a link "
        "in the route's directory, wherever it leads; remove the link (curaflow makes the work's folder and files "
        "itself), and move what it leads to in its place if that belongs there",
        permanent=True,
        answer="directory symbolic link",
    )


def _unreadable_manifest(what: str) -> RouteError:
    return RouteError(
        TerminalReason.ROUTE_REFUSED,
        f"directory: the work's manifest.json is {what}: it says neither delivered nor not; move it away, or "
        "delete it if the work is not there",
        permanent=True,
        answer="directory manifest unreadable",
    )


class DirectoryRoute:
    """Deliver into a local directory (see the module doc).

    Args:
        name: route name.
        path: the destination directory (absolute).
        file_mode: permission bits of delivered files (``0o640``); None → what the
            process's umask gives a new file, read when the route is built (on a disk
            that keeps no permissions, what that disk gives: :func:`~curaflow.routes.directory_files._set_mode`).
    """

    kind = "directory"
    resend_safe = True

    def __init__(self, name: str, path: Path, *, file_mode: int | None = None) -> None:
        self.name = name
        self.path = path
        self.file_mode = new_file_mode() if file_mode is None else file_mode
        self._mode_asked = file_mode is not None

    def _deliver_sync(self, request: DeliveryRequest) -> DeliveryReceipt:
        folder = _inside(self.path, request.work.work_id)
        targets = [(Path(f.path), _inside(folder, Path(f.path).name)) for f in request.artifact.files]
        manifest_path = folder / MANIFEST_NAME
        too_long = names_over_limit(self.path, folder, [dest for _, dest in targets])
        if too_long is not None:
            # The disk would answer ENAMETOOLONG for this work's names alone: the work on
            # this route (nothing written; other routes still take it), never the route's
            # refusal — until 2026-12-07 it was, held back and counted toward the route's
            # pause for a name no other work has.
            raise RouteError(
                TerminalReason.OVER_ROUTE_LIMIT,
                f"directory: not written by curaflow: {too_long}",
                permanent=True,
            )
        names = {dest.name for _, dest in targets} | {manifest_path.name}
        # Every file call below is made relative to the folder's handle, opened one component
        # at a time without following a link (until 2026-12-08: by path, after one check).
        with WorkFolder(self.path, folder.relative_to(self.path).parts) as work_folder:
            if self._manifest_present(work_folder):
                receipt = self._found(request, work_folder)
                # The work's, found: what an attempt killed after its manifest's link left.
                remove_leftovers_if_alone(work_folder, names)
                return receipt
            with _writing(work_folder, names):
                return self._write_work(request, work_folder, targets)

    def _found(self, request: DeliveryRequest, folder: WorkFolder) -> DeliveryReceipt:
        """What a manifest found at the work's name says of this delivery: this one's
        (``replayed``), another delivery's of the work (a duplicate), another work's whose
        id differs only in letter case (the work's on this route: :func:`folded_work`),
        else the route's (:func:`_unreadable_manifest`) — synced before it is reported."""
        manifest_path = folder.path / MANIFEST_NAME
        existing = self._manifest(folder)
        replayed = existing.get("idempotency_key") == request.idempotency_key
        if not replayed and not written_for(existing, request.work.work_id):
            if (other := folded_work(existing, request.work.work_id)) is not None:
                raise _folded_folder(request.work.work_id, other)
            raise _unreadable_manifest(
                "no manifest curaflow wrote for this work (no delivery's key, or another work's)"
            )
        # What the directory has is on its disk before it is reported: a manifest
        # renamed by an attempt that died (or met EIO) before syncing it.
        folder.still_there()
        self._sync_names(folder)
        if replayed:
            return DeliveryReceipt(remote_id=str(manifest_path), remote_status="replayed")
        return DeliveryReceipt(duplicate=True, remote_id=str(manifest_path), remote_status="exists")

    def _write_work(
        self, request: DeliveryRequest, folder: WorkFolder, targets: list[tuple[Path, Path]]
    ) -> DeliveryReceipt:
        """The work's files, then its manifest, then their names synced (:meth:`_deliver_sync`)."""
        files: list[dict[str, Any]] = []
        for f, (src, dest) in zip(request.artifact.files, targets, strict=True):
            try:
                atomic_copy(src, folder, dest.name, self.file_mode, mode_asked=self._mode_asked)
            except SourceUnreadable as err:
                cause = err.__cause__
                assert isinstance(cause, OSError)
                raise page_unreadable(f, cause) from cause
            except NameTaken as err:
                raise _page_name_taken(dest) from err
            entry: dict[str, Any] = {
                "name": dest.name,
                "page": f.page,
                "bytes": f.bytes,
                "mime": f.mime,
                "sha256": f.sha256,
                "width": f.width,
                "height": f.height,
            }
            if f.frame_delays_ms:  # an animation: each frame's delay, ms, in order
                entry["frame_delays_ms"] = f.frame_delays_ms
            files.append(entry)
        work = request.work
        manifest = {
            "schema_version": 1,
            "idempotency_key": request.idempotency_key,
            "job_id": request.job_id,
            "target_id": request.target_id,
            "route": request.route,
            "work": {
                "work_id": work.work_id,
                "work_type": work.work_type,
                "title": work.title,
                "url": work.url,
                "author": work.author,
                "tags": work.tags,
                "create_date": work.create_date,
                "page_count": work.page_count,
            },
            "files": files,
        }
        try:
            atomic_write_bytes(
                folder,
                MANIFEST_NAME,
                json.dumps(manifest, ensure_ascii=False, indent=2).encode(),
                self.file_mode,
                mode_asked=self._mode_asked,
                replace=False,
            )
        except NameTaken:
            # Another delivery's manifest took the name after this one looked for it
            # (:meth:`_found` says what it is). Until 2026-12-07 the rename replaced it —
            # a second route on the same path, a work whose folder a case-insensitive disk
            # holds for another's — and both reported the work written, the directory
            # keeping one of the two manifests.
            return self._found(request, folder)
        folder.still_there()
        self._sync_names(folder)
        return DeliveryReceipt(remote_id=str(folder.path / MANIFEST_NAME), remote_status="written")

    def _sync_names(self, folder: WorkFolder) -> None:
        """Sync the work's folder (the pages' and the manifest's renames) and the route's
        directory (the folder's own name) before a delivery is reported
        (:func:`sync_folder`). Until 2026-12-06 only each file's bytes were synced: a
        crash or a power cut after the report could take the manifest back out of the
        directory — the work recorded delivered for good, the directory without it.

        Raises:
            OSError: as :func:`sync_folder` (``EIO``: retried, never a delivery)."""
        sync_folder(folder)
        sync_folder(self.path)

    @staticmethod
    def _manifest_present(folder: WorkFolder) -> bool:
        """Whether the work's ``manifest.json`` is in ``folder`` (a link counts: the read
        refuses it, :meth:`_manifest`). Only the disk's "no such file" (``ENOENT``) says
        there is none.

        Raises:
            RouteError: any other error of the look (``EIO`` of a network disk, ``EACCES``,
                an errno never seen), as :func:`os_failure` says — it tells nothing of
                whether the directory has the work. Until 2026-12-06 it was "no manifest"
                (``os.path.lexists`` answers False for every error): the work was written
                again over a delivery the directory already had, its manifest replaced by
                this delivery's, a duplicate reported delivered.
        """
        try:
            os.lstat(MANIFEST_NAME, dir_fd=folder.fd)
        except FileNotFoundError:
            return False
        except OSError as err:
            raise os_failure(err, "looking for the work's manifest.json") from err
        return True

    @staticmethod
    def _manifest(folder: WorkFolder) -> dict[str, Any]:
        """The manifest in ``folder`` (it exists) as the JSON object it must be.

        Raises:
            LinkMet: it is a symbolic link (never read through: 2026-12-08 — a link to a
                manifest outside the route's directory made the work a duplicate there).
            RouteError: ``route_refused`` when it is no regular file (as opened), no JSON
                object, not UTF-8 or over :data:`MANIFEST_MAX_BYTES`
                (:func:`_unreadable_manifest`); an OS error reading it as
                :func:`os_failure` says. Only a manifest read whole decides "delivered".
        """
        try:
            kind = os.lstat(MANIFEST_NAME, dir_fd=folder.fd).st_mode  # a device is never opened
            if stat.S_ISLNK(kind):
                raise LinkMet(folder.path / MANIFEST_NAME)
            if not stat.S_ISREG(kind):
                raise _unreadable_manifest("not a regular file")
            body = DirectoryRoute._read_regular(folder)
        except OSError as err:
            raise os_failure(err, "reading the work's manifest.json") from err
        if body is None:
            raise _unreadable_manifest("not a regular file")
        if len(body) > MANIFEST_MAX_BYTES:
            raise _unreadable_manifest(f"over {MANIFEST_MAX_BYTES} bytes")
        try:
            text = body.decode("utf-8")
        except UnicodeDecodeError:
            raise _unreadable_manifest("not UTF-8 text") from None
        try:
            existing = json.loads(text)
        except (ValueError, RecursionError):
            raise _unreadable_manifest("not JSON") from None
        if not isinstance(existing, dict):
            raise _unreadable_manifest("not a JSON object")
        return existing

    @staticmethod
    def _read_regular(folder: WorkFolder) -> bytes | None:
        """At most :data:`MANIFEST_MAX_BYTES` + 1 bytes of the manifest in ``folder``,
        judged by what was opened (never through a symbolic link): None when that is no
        regular file (a FIFO or a socket swapped in after the look — opened without
        blocking, never read). Until 2026-12-06 the look and the read were two calls on the
        name: a FIFO swapped in between blocked the read for good (an executor thread lost,
        the attempt hung) or fed it a forged manifest, and a huge file was read whole into
        memory.

        Raises:
            LinkMet: a symbolic link swapped in after the look.
            OSError: the open or the read failed (:func:`os_failure` says whose)."""
        try:
            fd = _open_below(
                folder.fd, MANIFEST_NAME, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY, folder.path / MANIFEST_NAME
            )
        except OSError as err:
            if err.errno == errno.ENXIO:  # a socket (or a device without its driver)
                return None
            raise
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                return None
            chunks: list[bytes] = []
            left = MANIFEST_MAX_BYTES + 1
            while left > 0 and (chunk := os.read(fd, min(left, 1 << 16))):
                chunks.append(chunk)
                left -= len(chunk)
            return b"".join(chunks)
        finally:
            os.close(fd)

    async def deliver(self, request: DeliveryRequest) -> DeliveryReceipt:
        """Write the work's files and manifest.

        Raises:
            RouteError: ``delivery_rejected`` (permanent) for a work id or file name that
                would leave the directory; ``route_refused`` for a symbolic link of the
                directory leading out of it, a ``manifest.json`` curaflow cannot read, or
                an OS error of the directory that does not pass (:func:`os_failure`);
                ``delivery_failed`` (retried) for one that may pass, or a page of the
                artifact curaflow cannot read (:func:`~curaflow.routes.base.page_unreadable`).
        """
        try:
            return await asyncio.to_thread(self._deliver_sync, request)
        except LinkMet as err:
            raise _link_met(err.path) from err
        except PathEscape as err:
            raise RouteError(TerminalReason.DELIVERY_REJECTED, f"directory: {err}", permanent=True) from err
        except OSError as err:
            raise os_failure(err, "writing the work") from err


def build_directory_route(name: str, config: DirectoryRouteConfig, context: RouteContext) -> DirectoryRoute:
    """The ``directory`` route ``name`` (its outbound client is not used)."""
    return DirectoryRoute(name, config.path, file_mode=config.mode)


register_route("directory", DirectoryRouteConfig, build_directory_route)
