"""A disk that fails one chosen call: every file-system call curaflow makes on a job's path,
counted in order, the ``n``-th raising ``OSError(errno)`` as the kernel answers it.

Wrapped (while :meth:`FaultyDisk.armed`): ``os.open`` / ``read`` / ``write`` / ``close`` /
``fsync`` / ``fstat`` / ``stat`` / ``lstat`` / ``replace`` / ``rename`` / ``link`` / ``mkdir`` /
``rmdir`` / ``unlink`` / ``scandir`` / ``fchmod``, ``fcntl.flock``, ``mmap.mmap`` and
``open`` (``builtins`` and ``io``: ``pathlib``, ``os.fdopen``, ``tempfile`` and Pillow come
through them), and the methods of every file object ``open`` returns (``read``,
``readinto``, ``write``, ``writelines``, ``flush``, ``close``: a buffered write's ``ENOSPC``
comes at its flush or its close). Only calls made with a frame of curaflow's own code on
the stack count, so the test runner and the event loop never meet a failure — and a call
curaflow hands to a thread whole counts as curaflow's in that thread
(``asyncio.to_thread(open, …)``, ``to_thread(os.replace, …)``, ``to_thread(path.unlink,
True)``, ``to_thread(fh.read, …)``: every executor's ``submit`` made from curaflow's code —
``asyncio.to_thread``, ``loop.run_in_executor`` and any ``ThreadPoolExecutor`` go through
it — runs its call under :func:`_dispatched`). Until 2026-12-07 such a call had no frame of
curaflow's in its thread and was never counted, so never failed: 6 of the ugoira fetch's
96 calls (its frames zip's download and its removal after the GIF).

A call that fails as a close does closes first (the kernel frees a descriptor whose
``close`` reports an error): no descriptor leaks from the injection itself.

A sweep's files go to :func:`scratch`: a folder in memory where the machine has one.
"""

from __future__ import annotations

import builtins
import concurrent.futures
import contextlib
import errno
import fcntl
import io
import mmap
import os
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

#: Every errno the sweeps inject: a full disk, a quota, a read-only disk, an I/O error, no
#: descriptors left (the process's, the system's), no rights, a name too long, a name in
#: the way, a file where a folder goes and the reverse, a loop of links, a rename across
#: devices, a stale network handle, an interrupted call, a call that would block; a file
#: too large for the disk or the process (``EFBIG``), a size or offset past what a call
#: can say (``EOVERFLOW``), no memory, an argument the disk refuses (``EINVAL``: a
#: VirtualBox share's fsync, a FUSE disk's read), an operation it does not support, a busy
#: file or one being executed (2026-12-07: ``EINVAL`` on a page's read was the work's).
ERRNOS = (
    errno.ENOSPC,
    errno.EDQUOT,
    errno.EROFS,
    errno.EIO,
    errno.EMFILE,
    errno.ENFILE,
    errno.EACCES,
    errno.EPERM,
    errno.ENAMETOOLONG,
    errno.EEXIST,
    errno.ENOTDIR,
    errno.EISDIR,
    errno.ELOOP,
    errno.EXDEV,
    errno.ESTALE,
    errno.EINTR,
    errno.EAGAIN,
    errno.EFBIG,
    errno.EOVERFLOW,
    errno.ENOMEM,
    errno.EINVAL,
    errno.EOPNOTSUPP,
    errno.EBUSY,
    errno.ETXTBSY,
)

_OS_CALLS = (
    "open",
    "read",
    "write",
    "close",
    "fsync",
    "fstat",
    "stat",
    "lstat",
    "replace",
    "rename",
    "link",
    "mkdir",
    "rmdir",
    "unlink",
    "scandir",
    "fchmod",
)
_FILE_CALLS = ("read", "readinto", "write", "writelines", "flush", "close")
#: A memory file system most Linux machines mount (tmpfs), and the room a sweep wants on it.
MEMORY_DIR = Path("/dev/shm")
MEMORY_ROOM = 256 * 1024 * 1024

_ROOTS = tuple(
    os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), d) + os.sep
    for d in ("curaflow", "activities")
)


def _dispatched(call: Any, /, *args: Any, **kwargs: Any) -> Any:
    """Run ``call``, which curaflow's code handed to a thread: its frame on the thread's
    stack marks what runs under it as curaflow's (:func:`_ours`)."""
    return call(*args, **kwargs)


_DISPATCHED = _dispatched.__code__


def _ours() -> bool:
    """Whether a frame of curaflow's own code is on the caller's stack, or the caller runs
    in a thread curaflow's code handed the call to (:func:`_dispatched`)."""
    frame: Any = sys._getframe(2)
    while frame is not None:
        code = frame.f_code
        if code is _DISPATCHED or code.co_filename.startswith(_ROOTS):
            return True
        frame = frame.f_back
    return False


@dataclass
class FaultyDisk:
    """Counts curaflow's file-system calls; the ``fail_at``-th (0-based) raises ``code``.

    Attributes:
        calls: the calls counted so far, ``"os.replace"``, ``"file.write"`` …, in order.
        failed: the call that failed (None: none did — fewer calls than ``fail_at``).
    """

    fail_at: int | None = None
    code: int = errno.EIO
    calls: list[str] = field(default_factory=list)
    failed: str | None = None
    _on: bool = False

    def _hit(self, name: str) -> bool:
        if not self._on or not _ours():
            return False
        index = len(self.calls)
        self.calls.append(name)
        if index == self.fail_at:
            self.failed = name
            return True
        return False

    def _error(self, name: str) -> OSError:
        return OSError(self.code, f"{os.strerror(self.code)} (injected at {name})")

    @contextlib.contextmanager
    def armed(self, monkeypatch: pytest.MonkeyPatch) -> Iterator[FaultyDisk]:
        """Wrap the calls (module doc) until the block ends."""
        with monkeypatch.context() as patch:
            for call in _OS_CALLS:
                patch.setattr(os, call, self._os_call(f"os.{call}", getattr(os, call)))
            patch.setattr(fcntl, "flock", self._os_call("fcntl.flock", fcntl.flock))
            patch.setattr(mmap, "mmap", self._os_call("mmap.mmap", mmap.mmap))
            opener = self._opener(builtins.open)
            patch.setattr(builtins, "open", opener)
            patch.setattr(io, "open", opener)
            patch.setattr(concurrent.futures.ThreadPoolExecutor, "submit", self._submitter())
            self._on = True
            try:
                yield self
            finally:
                self._on = False

    def _os_call(self, name: str, real: Any) -> Any:
        def call(*args: Any, **kwargs: Any) -> Any:
            if self._hit(name):
                if name == "os.close":
                    real(*args, **kwargs)
                raise self._error(name)
            return real(*args, **kwargs)

        return call

    def _submitter(self) -> Any:
        real = concurrent.futures.ThreadPoolExecutor.submit

        def submit(executor: Any, call: Any, /, *args: Any, **kwargs: Any) -> Any:
            if self._on and _ours():
                return real(executor, _dispatched, call, *args, **kwargs)
            return real(executor, call, *args, **kwargs)

        return submit

    def _opener(self, real: Any) -> Any:
        def opening(*args: Any, **kwargs: Any) -> Any:
            if self._hit("open"):
                raise self._error("open")
            return _File(real(*args, **kwargs), self)

        return opening


class _File:
    """A file object whose calls (module doc) count and may fail."""

    def __init__(self, real: Any, disk: FaultyDisk) -> None:
        self._real = real
        self._disk = disk

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._real, name)
        if name not in _FILE_CALLS:
            return attr

        def call(*args: Any, **kwargs: Any) -> Any:
            if self._disk._hit(f"file.{name}"):
                if name == "close":
                    attr(*args, **kwargs)
                raise self._disk._error(f"file.{name}")
            return attr(*args, **kwargs)

        return call

    def __iter__(self) -> Iterator[Any]:
        return iter(self._real)

    def __enter__(self) -> _File:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def leftovers(root: Path) -> list[str]:
    """Every temporary name under ``root`` (a part file, a ``.tmp``), relative to it."""
    return sorted(
        str(p.relative_to(root)) for p in root.rglob("*") if p.name.endswith((".part", ".tmp")) and p.is_file()
    )


@contextlib.contextmanager
def scratch(fallback: Path) -> Iterator[Path]:
    """A new empty folder for a sweep's stores and routes, removed when the block ends.

    In :data:`MEMORY_DIR` when it is a writable folder with :data:`MEMORY_ROOM` free, else
    ``fallback`` itself (a test's ``tmp_path``, left to pytest). A sweep makes and removes
    thousands of small files and folders: on the suite's disk (ext4 mounted with
    ``discard``) their ``mkdir``, ``open``, ``rename`` and ``unlink`` cost the kernel more
    than the steps under test cost Python (three cases' sweeps: 7.6 s of system CPU on
    ext4, 1.3 s in memory, of 14.5 and 7.4 s in all; 2026-12-06). What the sweep asserts
    does not depend on the disk beneath: every call it fails is failed by
    :class:`FaultyDisk` before it reaches the disk, and every other call succeeds on
    either.
    """
    try:
        stat = os.statvfs(MEMORY_DIR)
        roomy = os.access(MEMORY_DIR, os.W_OK) and stat.f_bavail * stat.f_frsize >= MEMORY_ROOM
    except OSError:
        roomy = False
    if not roomy:
        yield fallback
        return
    with tempfile.TemporaryDirectory(prefix="curaflow-sweep-", dir=MEMORY_DIR) as folder:
        yield Path(folder)
