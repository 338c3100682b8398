"""The directory route's disk work: the files of one delivery, written under a work folder's handle.

One job: put bytes on the route's disk safely — never what the route answers about them.
:class:`WorkFolder` is the handle of a work's folder (opened one component at a time,
never through a symbolic link: :class:`LinkMet`); :func:`atomic_copy` and
:func:`atomic_write_bytes` write a file to a temporary name (:func:`_temporary`), give it
the route's file mode (:func:`new_file_mode`, :func:`_set_mode`), ``fsync`` it and give it
its name by a hard link, never over another file (:func:`_publish`, :class:`NameTaken`);
:func:`sync_folder` syncs a folder after a rename; :func:`_writing` and
:func:`remove_leftovers_if_alone` hold the folder under ``flock`` and remove the temporary
files a killed attempt left. Every ``OSError`` goes up unchanged: whose it is — the
route's or the work's, retried or refused — is :func:`curaflow.routes.directory.os_failure`'s
decision (reference ``pixiv-and-delivery-apis.md`` §4.2 for the write-then-rename).
Split out of :mod:`curaflow.routes.directory` on 2026-12-08 (one module, one job); no
behaviour changed.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import re
import secrets
import stat
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from curaflow.paths import UNSYNCABLE, LinkEscape, inside, sync_file


def process_umask() -> int:
    """The process's umask, read without changing it where Linux tells it (``/proc``).

    Elsewhere it is set and restored at once, which a thread creating a file at that
    instant could observe; curaflow reads it once per route.
    """
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def new_file_mode() -> int:
    """The mode a file created now with the default ``0666`` would get (``0644`` under ``022``)."""
    return 0o666 & ~process_umask()


#: Answers of a ``chmod`` from a disk that keeps no permissions of its own (FAT, exFAT:
#: ``EPERM`` for a mode it cannot hold; some network shares and FUSE file systems).
_NO_MODES = frozenset({errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.ENOSYS})


def _set_mode(fd: int, mode: int | None, asked: bool) -> None:
    """Give the file ``fd`` its permission bits (``mode``; None → :func:`new_file_mode`).

    A mode no one asked for (``asked`` False: the route's ``file_mode`` unset) is what a new
    file gets under the umask, as ``cp`` gives it — a disk that keeps no permissions
    (:data:`_NO_MODES`) refuses it, and the file keeps the mode that disk gives. Until
    2026-12-06 that refusal was the route's (``EPERM``: ``route_refused``): a route
    directory on a FAT disk refused every work and paused, though every file could be
    written.

    Raises:
        OSError: the disk refused a mode that was asked for (``file_mode``), or refused
            otherwise.
    """
    try:
        os.fchmod(fd, new_file_mode() if mode is None else mode)
    except OSError as err:
        if asked or err.errno not in _NO_MODES:
            raise


#: Answers of a ``link`` from a disk that makes no hard links (FAT, exFAT: ``EPERM``; some
#: network shares and FUSE file systems): a file is published there by a rename, which
#: replaces a name taken meanwhile (:func:`_publish`).
_NO_LINKS = frozenset({errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.ENOSYS})


class NameTaken(Exception):
    """:func:`atomic_write_bytes` kept the file already at its name (``replace`` False):
    nothing was written; the ``FileExistsError`` is the cause."""


class LinkMet(Exception):
    """A name a delivery writes or reads through — a folder on the way from the route's
    directory to the work's, the work's folder, its ``manifest.json`` — is a symbolic link:
    never followed (:class:`WorkFolder`), the route's refusal (:func:`~curaflow.routes.directory._link_met`)."""

    def __init__(self, path: Path) -> None:
        super().__init__(str(path))
        self.path = path


#: Flags of a folder's handle: a directory opened for the ``*at`` calls alone where the
#: system has ``O_PATH`` (Linux: needs no read right on the folder — a drop-box route
#: directory, ``0333``, is opened so), else for reading.
_HANDLE = getattr(os, "O_PATH", os.O_RDONLY) | os.O_DIRECTORY | os.O_CLOEXEC


def _is_link(dir_fd: int, name: str) -> bool:
    """Whether ``name`` in the folder ``dir_fd`` is a symbolic link (an error looking: no)."""
    try:
        return stat.S_ISLNK(os.lstat(name, dir_fd=dir_fd).st_mode)
    except OSError:
        return False


def _open_below(dir_fd: int, name: str, flags: int, path: Path) -> int:
    """``name`` in the folder ``dir_fd`` opened with ``flags``, never through a symbolic
    link (``O_NOFOLLOW``; ``path`` names it in the messages).

    Raises:
        LinkMet: ``name`` is a symbolic link (Linux answers ``ELOOP``, or ``ENOTDIR`` for
            a folder's handle; the BSDs ``EMLINK``).
        OSError: the open failed otherwise.
    """
    try:
        return os.open(name, flags | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dir_fd)
    except OSError as err:
        if err.errno in (errno.ELOOP, errno.EMLINK, errno.ENOTDIR) and _is_link(dir_fd, name):
            raise LinkMet(path) from err
        raise


def _inside(root: Path, name: str) -> Path:
    """:func:`curaflow.paths.inside` of one name from data: a name that leaves ``root`` is
    the data's (:class:`~curaflow.paths.PathEscape`); one a symbolic link already on the
    disk takes out is the route's (:class:`LinkMet`, as a link met while writing)."""
    try:
        return inside(root, name)
    except LinkEscape as err:
        raise LinkMet(root / name) from err


class WorkFolder:
    """The work's folder of one delivery, held open: every file call of the delivery is made
    relative to its handle (``dir_fd``), so a folder on the way replaced by a symbolic link
    while the delivery writes never takes a page or the manifest where the link leads.

    Opened one component at a time from the route's directory (the operator's path,
    followed as configured), each made when missing and opened without following a link
    (:func:`_open_below`). Until 2026-12-08 the route checked once, before writing, that
    the folder lay inside its directory (:func:`curaflow.paths.inside`), then wrote by
    path: a folder replaced by a link mid-delivery had the remaining pages and the
    manifest written wherever it pointed, and the work reported ``written``.

    Attributes:
        path: the folder's path (messages and receipts only; never opened by it).
        fd: its handle.
    """

    def __init__(self, root: Path, parts: tuple[str, ...]) -> None:
        """Open (and make) the folder ``root / parts…``.

        Raises:
            LinkMet: a component is a symbolic link.
            OSError: the disk refused (``ENOTDIR``: a file where a folder goes).
        """
        root.mkdir(parents=True, exist_ok=True)  # the route's own directory: its path as configured
        self.path = root.joinpath(*parts)
        self._steps: list[tuple[int, str, Path, tuple[int, int]]] = []
        self._fds = [os.open(root, _HANDLE)]
        try:
            path = root
            for part in parts:
                path = path / part
                parent = self._fds[-1]
                with contextlib.suppress(FileExistsError):
                    os.mkdir(part, dir_fd=parent)
                self._fds.append(_open_below(parent, part, _HANDLE, path))
                opened = os.fstat(self._fds[-1])
                self._steps.append((parent, part, path, (opened.st_dev, opened.st_ino)))
        except BaseException:
            self.close()
            raise
        self.fd = self._fds[-1]

    def close(self) -> None:
        """Let every handle go."""
        for fd in reversed(self._fds):
            os.close(fd)
        self._fds = []

    def __enter__(self) -> WorkFolder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def still_there(self) -> None:
        """Check that each folder from the route's directory to the work's is still the one
        opened, at its name — before a name is given in it and before the delivery is
        reported.

        Raises:
            LinkMet: a name on the way is now a symbolic link.
            FileNotFoundError: a folder on the way was moved or removed (``ENOENT``: a
                consumer took it away under the write — retried, :data:`~curaflow.routes.directory.PASSING_ERRORS`;
                the next attempt makes it again). What is written into the folder between
                the check and the name stays in the folder moved, never where a link leads.
        """
        for parent, name, path, opened in self._steps:
            now = os.lstat(name, dir_fd=parent)
            if stat.S_ISLNK(now.st_mode):
                raise LinkMet(path)
            if (now.st_dev, now.st_ino) != opened:
                raise FileNotFoundError(errno.ENOENT, "the folder was moved away under the write", str(path))

    def reader(self) -> int:
        """A new descriptor of the folder for reading it (a ``flock``, an ``fsync``, a
        listing: a handle of ``O_PATH`` takes none of them); the caller closes it.

        Raises:
            OSError: the folder cannot be opened so (``EACCES`` of one this process may
                write in but not read).
        """
        return os.open(".", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=self.fd)


def _publish(folder: int, tmp: str, name: str) -> None:
    """Give the written temporary file ``tmp`` its name ``name`` in the folder ``folder``
    (a handle, :class:`WorkFolder`) unless that name is taken (a hard link, then the
    temporary name removed): the name is never replaced. A process killed between the two
    leaves the temporary name, a second link of the file: the work's next delivery removes
    it (:func:`_remove_leftovers`).

    A disk that makes no hard links (:data:`_NO_LINKS`) has the file renamed into place
    once a look found the name free (2026-12-07; until then renamed over whatever held
    it) — only what takes the name between the look and the rename is replaced there.

    Raises:
        NameTaken: ``name`` is taken (the temporary file is left to the caller).
        OSError: the disk refused otherwise.
    """
    try:
        os.link(tmp, name, src_dir_fd=folder, dst_dir_fd=folder, follow_symlinks=False)
    except FileExistsError as err:
        raise NameTaken(name) from err
    except OSError as err:
        if err.errno not in _NO_LINKS:
            raise
        try:
            os.lstat(name, dir_fd=folder)
        except FileNotFoundError:
            os.replace(tmp, name, src_dir_fd=folder, dst_dir_fd=folder)
            return
        raise NameTaken(name) from FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), name)
    with contextlib.suppress(FileNotFoundError):
        os.unlink(tmp, dir_fd=folder)


#: Errors opening a name without following a symbolic link that say it is one (Linux's
#: ``ELOOP``, the BSDs' ``EMLINK``) or a socket (``ENXIO``): no regular file.
_NOT_A_FILE = frozenset({errno.ELOOP, errno.EMLINK, errno.ENXIO})


def _same_bytes(folder: int, tmp: str, name: str) -> bool:
    """Whether ``name`` in the folder ``folder`` (a handle) is a regular file — its own,
    not one a symbolic link leads to — holding exactly the bytes of the written temporary
    file ``tmp`` beside it (blocking; read in chunks of one MiB, stopped at the first
    difference).

    Anything else at the name — a folder, a device, a FIFO, a socket, a link — is no
    regular file: False, judged by a look (a device is never opened) and again by what was
    opened, whose descriptor is closed before anything else is asked of it. Until
    2026-12-07 a folder there was opened and handed to Python as a file, which refused it
    (``EISDIR``) with the descriptor left open: the refusal an errno's, naming no path
    (not ``directory page name taken``), one descriptor lost each attempt.

    Raises:
        OSError: looking, opening or reading either failed (:func:`~curaflow.routes.directory.os_failure` says whose).
    """
    if not stat.S_ISREG(os.lstat(name, dir_fd=folder).st_mode):
        return False
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC, dir_fd=folder)
    except OSError as err:
        if err.errno in _NOT_A_FILE or err.errno == errno.EISDIR:
            return False
        raise
    try:
        regular = stat.S_ISREG(os.fstat(fd).st_mode)
    except BaseException:
        os.close(fd)
        raise
    if not regular:  # swapped in after the look
        os.close(fd)
        return False
    with os.fdopen(fd, "rb") as theirs:
        mine_fd = os.open(tmp, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=folder)
        with os.fdopen(mine_fd, "rb") as mine:
            if os.fstat(theirs.fileno()).st_size != os.fstat(mine.fileno()).st_size:
                return False
            while chunk := mine.read(1 << 20):
                if theirs.read(len(chunk)) != chunk:
                    return False
            return not theirs.read(1)


#: The characters of a temporary name's eight random ones (as ``tempfile.mkstemp``'s).
_TEMP_CHARS = "abcdefghijklmnopqrstuvwxyz0123456789_"


def _temporary(folder: int, name: str) -> tuple[int, str]:
    """A new private file (``0600``, opened for writing) in the folder ``folder`` (a
    handle) named ``.<name>.<8 characters>.tmp``, as ``tempfile.mkstemp`` makes one in a
    folder given by its path; its descriptor and name.

    Raises:
        OSError: the disk refused (a name taken is tried again with another).
    """
    for _ in range(tempfile.TMP_MAX):
        tmp = f".{name}.{''.join(secrets.choice(_TEMP_CHARS) for _ in range(8))}.tmp"
        try:
            flags = os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
            return os.open(tmp, flags, 0o600, dir_fd=folder), tmp
        except FileExistsError:
            continue
    raise FileExistsError(errno.EEXIST, "no temporary name free", name)


def _drop(folder: int, tmp: str) -> None:
    """Remove the temporary name ``tmp`` of the folder ``folder`` (gone already: nothing)."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(tmp, dir_fd=folder)


def atomic_write_bytes(
    folder: WorkFolder,
    name: str,
    data: bytes,
    mode: int | None = None,
    *,
    mode_asked: bool = True,
    replace: bool = True,
) -> None:
    """Write ``data`` as ``name`` in ``folder`` via a temp file, fsync and rename.

    Args:
        mode: permission bits of the file; None → :func:`new_file_mode`.
        mode_asked: the mode was asked for (the route's ``file_mode``); else a disk that
            keeps no permissions gives its own (:func:`_set_mode`). None ``mode`` is never
            asked for.
        replace: False → a file already at ``name`` is kept (:func:`_publish`).

    Raises:
        NameTaken: ``replace`` is False and ``name`` is taken (nothing written).
        LinkMet: a folder on the way became a symbolic link (:meth:`WorkFolder.still_there`).
    """
    fd, tmp = _temporary(folder.fd, name)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            _set_mode(fh.fileno(), mode, mode_asked and mode is not None)
            fh.flush()
            sync_file(fh.fileno())
        folder.still_there()
        if replace:
            os.replace(tmp, name, src_dir_fd=folder.fd, dst_dir_fd=folder.fd)
        else:
            _publish(folder.fd, tmp, name)
    except BaseException:
        _drop(folder.fd, tmp)
        raise


#: Errors opening a folder to sync it that say this process may write in it but not open it
#: (a drop-box directory, ``0333``): its names are left to the disk, as above.
_UNOPENABLE = frozenset({errno.EACCES, errno.EPERM})


def sync_folder(folder: Path | WorkFolder) -> None:
    """``fsync`` the folder ``folder`` (the route's directory by its path, the work's by its
    handle), so the names created and renamed in it are on the disk, not only in the page
    cache (blocking).

    A file's own ``fsync`` makes its bytes durable, not its name: until its folder is
    synced, a crash or a power cut can take a renamed file back out of the folder.

    Raises:
        OSError: the open or the sync failed otherwise (``EIO``: the names may be lost;
            ``ENOSPC``, ``EROFS`` …) — :func:`~curaflow.routes.directory.os_failure` says whose. A disk that does not
            sync a directory (:data:`~curaflow.paths.UNSYNCABLE`) or a folder this process may not open
            (:data:`_UNOPENABLE`) is no failure.
    """
    try:
        fd = folder.reader() if isinstance(folder, WorkFolder) else os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    except OSError as err:
        if err.errno in _UNOPENABLE:
            return
        raise
    try:
        os.fsync(fd)
    except OSError as err:
        if err.errno not in UNSYNCABLE:
            raise
    finally:
        os.close(fd)


#: The name of a temporary file :func:`atomic_copy` / :func:`atomic_write_bytes` write
#: (``tempfile.mkstemp``'s eight characters between the target's name and ``.tmp``).
_LEFTOVER = re.compile(r"\.(?P<name>.+)\.[a-z0-9_]{8}\.tmp")


class SourceUnreadable(Exception):
    """:func:`atomic_copy` could not read its source (curaflow's own file, not the
    destination's disk); the ``OSError`` is the cause."""


def atomic_copy(src: Path, folder: WorkFolder, name: str, mode: int | None = None, *, mode_asked: bool = True) -> None:
    """Copy ``src`` as ``name`` into ``folder`` via a temp file, fsync and a name never given
    over another file (:func:`_publish`).

    A regular file already at ``name`` holding the very bytes (:func:`_same_bytes`: a
    killed attempt's page, another delivery's of the same artifact) is kept as it is —
    nothing of it is lost — and the copy dropped. Until 2026-12-07 the copy was renamed
    over whatever ``dest`` held: a file of the directory's owner, another delivery's.

    Args:
        mode: permission bits of the copy; None → :func:`new_file_mode`.
        mode_asked: as :func:`atomic_write_bytes`.

    Raises:
        SourceUnreadable: opening or reading ``src`` failed (nothing is left at ``name``).
        NameTaken: ``name`` holds other bytes, or no regular file (left as it is).
        LinkMet: a folder on the way became a symbolic link (:meth:`WorkFolder.still_there`).
        OSError: the destination's disk refused (its folder, the temp file, the link).
    """
    try:
        inp = open(src, "rb")  # noqa: SIM115 - closed below; opened first: its error is the source's
    except OSError as err:
        raise SourceUnreadable(str(src)) from err
    with inp:
        fd, tmp = _temporary(folder.fd, name)
        try:
            with os.fdopen(fd, "wb") as out:
                while True:
                    try:
                        chunk = inp.read(1024 * 1024)
                    except OSError as err:
                        raise SourceUnreadable(str(src)) from err
                    if not chunk:
                        break
                    out.write(chunk)
                _set_mode(out.fileno(), mode, mode_asked and mode is not None)
                out.flush()
                sync_file(out.fileno())
            folder.still_there()
            try:
                _publish(folder.fd, tmp, name)
            except NameTaken:
                if not _same_bytes(folder.fd, tmp, name):
                    raise
                os.unlink(tmp, dir_fd=folder.fd)
        except BaseException:
            _drop(folder.fd, tmp)
            raise


#: A network disk's connection to its server broken, refused or unreachable (an SMB share
#: answers ``EHOSTDOWN`` while its session reconnects; NFS, FUSE and network block
#: devices a reset, an unreachable network, a remote I/O error): the disk comes back by
#: itself, like the ``EIO``, ``ETIMEDOUT`` and ``ESTALE`` of the same disks. Until
#: 2026-12-07 they were ``route_refused``: the cell failed unretried, the work held back,
#: three works in a row paused the route as broken.
def _remove_leftovers(folder: int, names: set[str]) -> None:
    """Remove the temporary files an earlier attempt left in the work's folder (``folder``,
    open for reading; blocking; best effort: an error here is left to the writes that
    follow). Call it only holding the folder alone (:func:`_alone_removing_leftovers`).

    Only the names :func:`atomic_copy` and :func:`atomic_write_bytes` give them
    (:data:`_LEFTOVER`) of the files this delivery writes (``names``): a file the
    directory's owner named is never touched."""
    try:
        with os.scandir(folder) as entries:
            for entry in entries:
                left = _LEFTOVER.fullmatch(entry.name)
                if left is not None and left["name"] in names and not entry.is_dir(follow_symlinks=False):
                    os.unlink(entry.name, dir_fd=folder)
    except OSError:
        pass


#: How long a delivery waits for the shared lock of the work's folder, seconds: another
#: delivery holds it exclusively only while it removes leftovers (:func:`_writing`:
#: milliseconds, seconds on a slow network disk); a lock held longer is another program's
#: (:func:`_lock_shared`).
FOLDER_LOCK_WAIT_S = 10.0
#: The step of that wait, seconds.
_LOCK_STEP_S = 0.05


def _lock_shared(fd: int) -> None:
    """Take a shared ``flock`` of the work's folder ``fd`` (blocking, at most
    :data:`FOLDER_LOCK_WAIT_S`); a folder where this process cannot lock (``ENOLCK`` of
    some network file systems) is written without one.

    Raises:
        OSError: ``EAGAIN`` when the folder stays locked exclusively past the wait —
            another program holds it (a consumer working the folder under ``flock``):
            the route's, for a while (:data:`~curaflow.routes.directory.PASSING_ERRORS`: retried). Until 2026-12-07
            the wait had no bound: the delivery hung on a thread no cancel stops, and
            every retry left one more, until the process's threads for file work were
            gone.
    """
    deadline = time.monotonic() + FOLDER_LOCK_WAIT_S
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if time.monotonic() >= deadline:
                raise OSError(
                    errno.EAGAIN, f"the work's folder stayed locked by another process for {FOLDER_LOCK_WAIT_S:g} s"
                ) from None
            time.sleep(_LOCK_STEP_S)
        except OSError:
            return  # no locks here


def _alone_removing_leftovers(fd: int, names: set[str]) -> None:
    """Remove the leftovers of the work's folder (open for reading as ``fd``) if no one else holds
    it: its exclusive ``flock`` taken without waiting (blocking only while it removes);
    another delivery writing it (``EWOULDBLOCK``), or a disk without locks, removes none."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return  # another delivery is writing it (EWOULDBLOCK), or no locks here
    _remove_leftovers(fd, names)


def remove_leftovers_if_alone(folder: WorkFolder, names: set[str]) -> None:
    """:func:`_alone_removing_leftovers` of the work's ``folder`` for a delivery that
    writes nothing (a manifest found), the lock let go at once; a folder this process
    cannot open is left as it is. Until 2026-12-07 a delivery that found the manifest
    removed nothing: a process killed between the manifest's link and its temporary
    name's removal (:func:`_publish`) left that name in the directory for good."""
    try:
        fd = folder.reader()
    except OSError:
        return
    try:
        _alone_removing_leftovers(fd, names)
    finally:
        os.close(fd)


@contextlib.contextmanager
def _writing(folder: WorkFolder, names: set[str]) -> Iterator[None]:
    """Hold the work's ``folder`` while a delivery writes it (blocking), after removing the
    temporary files an earlier attempt left there when no one else is writing it.

    Such a file outlives its attempt only when the process died mid-write (SIGKILL, the
    OOM killer); until 2026-12-06 each death left one — a page's bytes — in the route's
    directory for good. Every delivery holds a shared ``flock`` of the folder while it
    writes (released with the descriptor, also by the kernel when its process dies); the
    leftovers are removed only under an exclusive lock taken without waiting, so the
    temporary file of a writer still alive — an attempt whose send lease lapsed while it
    hung, a second route configured on the same path — is never one. A folder this process
    cannot open or lock (``EACCES``, ``ENOLCK`` of some network file systems) is written
    as before, nothing removed; one another program holds locked past
    :data:`FOLDER_LOCK_WAIT_S` is not written (:func:`_lock_shared`: ``EAGAIN``, retried).
    """
    try:
        fd = folder.reader()
    except OSError:
        yield
        return
    try:
        _alone_removing_leftovers(fd, names)
        _lock_shared(fd)  # another's cleanup waits no more than its own removal
        yield
    finally:
        os.close(fd)
