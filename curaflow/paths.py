"""Safe paths: paths built from data stay under their root; private files stay private.

Work ids, page names and route paths combine configuration with values that came from
a third party. :func:`inside` joins them and refuses any result that is not strictly
under the root once ``..`` and symbolic links are resolved, or that an absolute part
would move elsewhere (``Path("/root") / "/etc"`` is ``/etc``).

The state directory (``state_dir``, ``.curaflow/`` by default) holds tokens, the dev
stack's ``stack.json`` (database URL), Temporal's ``temporal.db`` and the logs: on a host
shared with other users it is the owner's alone. One owner of those modes:
:func:`private_dir` (0700, also tightening a directory an older version created 0755),
:func:`write_private` / :func:`open_private` (0600 files, also tightening an existing one)
and :func:`secure_state_dir` (the state directory and what curaflow keeps at its top and in
``logs/``, on every start: an upgrade from a version that wrote them 0755 / 0644 is tightened).
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import tempfile
from pathlib import Path
from typing import BinaryIO

#: Mode of a private directory and of a private file.
PRIVATE_DIR = 0o700
PRIVATE_FILE = 0o600


class PathEscape(ValueError):
    """A path built from data would leave its root."""


class LinkEscape(PathEscape):
    """A path built from data would leave its root only through a symbolic link already
    on the disk (or a loop of them): the names themselves stay under it, so the disk's
    state leads out, not the data (a destination's directory holds such a link: its
    owner's doing, never the work's)."""


def inside(root: Path, *parts: str) -> Path:
    """``root / parts[0] / …``, guaranteed to lie under ``root``.

    Args:
        root: the directory the result must stay in (need not exist yet).
        parts: path components from data; each must be a relative path.

    Returns:
        The joined path (not resolved: symbolic links inside the root are kept as given).

    Raises:
        PathEscape: a part is empty, absolute, holds NUL or cannot be a file name (a
            lone surrogate), or the resolved result is ``root`` itself or outside it —
            :class:`LinkEscape` when the names alone stay under ``root`` and a symbolic
            link on the disk leads out.
        OSError: the path cannot be resolved — ``ELOOP`` for a loop of symbolic links
            (the disk's state, not the data's: a caller treats it as a filesystem
            refusing, as any other ``OSError`` of its disk).
    """
    for part in parts:
        if not part or Path(part).is_absolute() or "\x00" in part or not _encodable(part):
            raise PathEscape(f"refused path component {part!r} under {root}")
    candidate = root.joinpath(*parts)
    if all(_plain_name(part) for part in parts):
        # Names without a separator, none a dot name: the path lies under the root unless
        # one of them is a symbolic link (then the full check below). One lstat a name
        # instead of resolving both paths (every component, twice: ~90 µs against ~20,
        # ~20 calls a job, on the event loop).
        path = root
        for part in parts:
            path = path / part
            try:
                if stat.S_ISLNK(os.lstat(path).st_mode):
                    break
            except FileNotFoundError:
                return candidate  # nothing below it exists yet: no link to follow
            except OSError:
                break  # a name under a file, …: the full check says what
        else:
            return candidate
    try:
        base = root.resolve()
        resolved = candidate.resolve()
    except RuntimeError as err:  # Python < 3.13 reports a loop of symbolic links so
        raise OSError(errno.ELOOP, f"{candidate}: {err}") from None
    if resolved == base or not resolved.is_relative_to(base):
        named = Path(os.path.normpath(candidate))
        if named != Path(os.path.normpath(root)) and named.is_relative_to(os.path.normpath(root)):
            raise LinkEscape(f"{candidate} leads outside {root} through a symbolic link")
        raise PathEscape(f"{candidate} is outside {root}")
    return candidate


def _encodable(part: str) -> bool:
    """True when ``part`` can be a file name here (a lone surrogate, as JSON's ``"\\ud800"``
    decodes to, cannot: every file call on it would raise ``UnicodeEncodeError``)."""
    try:
        os.fsencode(part)
    except UnicodeError:
        return False
    return True


def _plain_name(part: str) -> bool:
    """True for one path component: no separator, not ``.`` or ``..``."""
    return part not in (".", "..") and os.sep not in part and (os.altsep is None or os.altsep not in part)


def private_dir(path: Path) -> Path:
    """Create ``path`` (and missing parents) and make it the owner's alone (0700), also
    when it already existed with a wider mode; returns ``path``.

    A directory that holds an entry of another user keeps the way through for others
    (0711: no listing, and every file curaflow keeps is 0600): run as root, the embedded
    PostgreSQL runs as the ``pgserver`` user, whose data directory sits in the state
    directory and is reached by its absolute path (a checkpoint opens
    ``global/pg_control`` so) — at 0700 PostgreSQL panics at its next checkpoint.
    """
    path.mkdir(parents=True, exist_ok=True, mode=PRIVATE_DIR)
    os.chmod(path, PRIVATE_DIR | THROUGH if _holds_another_users(path) else PRIVATE_DIR)
    return path


#: The search bits of group and others: a way through a directory, without listing it.
THROUGH = 0o011


def _holds_another_users(path: Path) -> bool:
    """Whether an entry directly inside ``path`` belongs to another user than this process's."""
    me = os.geteuid()
    for entry in path.iterdir():
        with contextlib.suppress(FileNotFoundError):
            if entry.lstat().st_uid != me:
                return True
    return False


def open_private(path: Path, *, append: bool = True) -> BinaryIO:
    """Open ``path`` for binary writing (appending, or truncated) as a private file (0600):
    created so, or tightened when it exists (a log an older version created 0644)."""
    flags = os.O_WRONLY | os.O_CREAT | (os.O_APPEND if append else os.O_TRUNC)
    fd = os.open(path, flags, PRIVATE_FILE)
    os.fchmod(fd, PRIVATE_FILE)
    return os.fdopen(fd, "ab" if append else "wb")


#: Errors of an ``fsync`` that say this disk cannot sync what it was given: a file system
#: that does not sync a directory, or a file (``EINVAL`` — "fd is bound to a special file
#: which does not support synchronization", fsync(2): a VirtualBox shared folder answers
#: it for every file —, ``EOPNOTSUPP`` / ``ENOTSUP`` of a network share or a FUSE file
#: system). What it holds is as durable as that disk makes it; nothing more can be done,
#: and failing the write for it would fail every write to that disk for good
#: (:func:`sync_file`; the ``directory`` route's folders alike,
#: :func:`curaflow.routes.directory_files.sync_folder`).
UNSYNCABLE = frozenset({errno.EINVAL, errno.ENOTSUP, errno.EOPNOTSUPP})


def sync_file(fd: int) -> None:
    """``fsync`` the written file ``fd`` before its rename, so its bytes are on the disk
    (blocking) — the one rule for every file curaflow completes by a rename: a page or an
    animation's GIF in the artifact store, the store's id, a file the ``directory`` route
    delivers, a private file of the state directory.

    A disk that cannot sync a file (:data:`UNSYNCABLE`) is no failure: the bytes are as
    durable as that disk makes them, as a folder's names are. Until 2026-12-07 its
    ``EINVAL`` / ``EOPNOTSUPP`` was the ``directory`` route's ``route_refused`` for every
    work (the route paused after three, again after every resume); in the artifact store
    it failed every page and every GIF (curaflow's error, retried alike on every attempt:
    each job ``internal_error``), and a worker whose artifacts directory was such a disk
    could not name its store and did not start.

    Raises:
        OSError: the sync failed otherwise (``EIO``: the bytes may be lost; ``ENOSPC``,
            ``EDQUOT`` …): the caller's disk's owner says whose.
    """
    try:
        os.fsync(fd)
    except OSError as err:
        if err.errno not in UNSYNCABLE:
            raise


def write_private(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` atomically (a temporary file renamed over it), readable by
    its owner only (0600); its directory is made private (0700) first."""
    private_dir(path.parent)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        os.fchmod(fd, PRIVATE_FILE)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            sync_file(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def secure_state_dir(state_dir: Path) -> Path:
    """Make ``state_dir`` private: the directory 0700, the regular files at its top and in
    its ``logs/`` and ``pixiv/`` folders 0600 (group and other bits removed; other folders
    — the embedded PostgreSQL's, the artifacts — are behind the 0700 directory). Run at
    every start of a process that keeps state there; returns ``state_dir``."""
    private_dir(state_dir)
    for folder in (state_dir, state_dir / "logs", state_dir / "pixiv"):
        if folder != state_dir and not folder.is_dir():
            continue
        if folder != state_dir:
            private_dir(folder)
        for entry in folder.iterdir():
            info = entry.lstat()
            if stat.S_ISREG(info.st_mode) and info.st_mode & 0o077:
                os.chmod(entry, stat.S_IMODE(info.st_mode) & ~0o077)
    return state_dir
