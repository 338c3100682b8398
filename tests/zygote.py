"""Worker processes for the suite, forked from a process that has already imported them.

A worker process spends about a second of CPU importing its modules (temporalio's
protobufs, pydantic models, httpx) before it does anything; the suite starts ~130 of
them. A *zygote* — one per test process, started on first use — imports
:mod:`curaflow.process.worker` once and then forks on request, as gunicorn's
``preload_app`` does: each child is a real, separate worker process with its own
environment, working directory, log file, pid and signals, and runs the worker's own
:func:`curaflow.process.worker.main` from its start (settings, logging, connections,
Temporal workers). Only the imports are shared.

The zygote has no thread when it forks (it serves requests on one thread, ``selectors``)
and reaps its children; a test's :class:`ForkedProcess` gets the exit status over the
request's connection. A worker on a "host" of its own (the scale-out test's mount
namespace with a private tmpfs) makes its namespace itself before it starts. A worker under
a wrapper command and the tests whose subject is how a process starts (a stop while it
loads its modules, ``python -m …``, ``curaflow dev`` as a process group, the README) still
spawn a fresh interpreter.

A ``curaflow`` command a test runs to its end and reads the output of (``curaflow
status``, ``schedules list`` …) is forked the same way (:func:`curaflow_command`, the
:func:`subprocess.run` of ``curaflow <args>`` with its output captured as text): the
child runs the console entry point (:func:`curaflow.cli.main.main`) with its own
``argv``, environment, working directory and standard streams (pipes of the test's,
passed over the connection). So is a service the test stops itself (``curaflow api``:
:func:`curaflow_process`, its output in a file) and a command the test talks to while it
runs (``curaflow pixiv login``: :func:`curaflow_pipes`). A quick command spent ~0.9 s of CPU importing the command
line in a fresh interpreter (docs/testing.md "Time").

Protocol (one Unix-socket connection per child): the test sends one JSON line
``{"env": {...}, "cwd": str | null, "log": str | null}`` (a command: also ``"argv"``, and
its stdin, stdout and stderr as descriptors with the line, ``SCM_RIGHTS``); the zygote
answers ``{"pid": n}`` and, when the child has ended, ``{"returncode": n}`` (``-signal``
when a signal ended it, as :attr:`subprocess.Popen.returncode`).
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import io
import json
import locale
import os
import selectors
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from curaflow.devstack.processes import WorkerProcess, die_with_parent

#: Environment switch: ``CURAFLOW_TEST_FORK_WORKERS=0`` spawns every worker afresh.
SWITCH = "CURAFLOW_TEST_FORK_WORKERS"


class ForkedProcess:
    """The :class:`subprocess.Popen` surface the suite uses, for a child of the zygote.

    ``pid``, ``returncode``, ``poll()``, ``wait(timeout)`` (seconds; raises
    :class:`subprocess.TimeoutExpired`), ``send_signal``, ``terminate``, ``kill``.
    """

    def __init__(self, conn: socket.socket, pid: int) -> None:
        self._conn = conn
        self._buffer = b""
        self.pid = pid
        self.returncode: int | None = None
        self.args = ["<forked worker>", str(pid)]

    def _read(self, timeout: float | None) -> None:
        self._conn.settimeout(timeout)
        try:
            while b"\n" not in self._buffer:
                chunk = self._conn.recv(4096)
                if not chunk:  # the zygote died: its children died with it (SIGTERM)
                    self.returncode = -signal.SIGTERM
                    return
                self._buffer += chunk
        except (TimeoutError, BlockingIOError):
            return
        line, _, self._buffer = self._buffer.partition(b"\n")
        self.returncode = int(json.loads(line)["returncode"])
        self._conn.close()

    def poll(self) -> int | None:
        """The exit status, or None while the child runs."""
        if self.returncode is None:
            self._read(0)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        """Wait up to ``timeout`` seconds (None: for ever) for the child to end."""
        if self.returncode is None:
            self._read(timeout)
        if self.returncode is None:
            raise subprocess.TimeoutExpired(self.args, timeout or 0)
        return self.returncode

    def send_signal(self, sig: int) -> None:
        """Signal the child, unless it has been seen to end (its pid may be reused)."""
        if self.poll() is None:
            os.kill(self.pid, sig)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


class ForkedWorkerProcess(WorkerProcess):
    """A :class:`WorkerProcess` forked by this test process's zygote (same surface).

    Args:
        private_tmpfs: a directory the worker sees as a tmpfs of its own, in a mount
            namespace of its own (:func:`private_tmpfs_wrapper`'s, made by the child itself).
    """

    def __init__(
        self,
        env: dict[str, str],
        log_file: Path | None = None,
        cwd: Path | None = None,
        zygote: Zygote | None = None,
        private_tmpfs: Path | None = None,
    ) -> None:
        super().__init__(env, log_file, cwd)
        self.zygote = zygote or ZYGOTE
        self.private_tmpfs = private_tmpfs

    def start(self) -> ForkedWorkerProcess:
        self.process = self.zygote.spawn(  # type: ignore[assignment]
            self.env, self.log_file, self.cwd, private_tmpfs=self.private_tmpfs
        )
        return self


#: Runs its arguments with the directory ``$0`` a private tmpfs (a mount namespace of its own).
_MOUNT_PRIVATE = 'mkdir -p "$0" && mount -t tmpfs -o size=256m curaflow-artifacts "$0" && exec "$@"'


def private_tmpfs_wrapper(directory: Path) -> list[str]:
    """The command that runs its arguments in a mount namespace of their own (every mount
    private) with ``directory`` a tmpfs of 256 MiB no other process sees: a "host" of its
    own for the worker under it (the scale-out test's)."""
    return ["unshare", "--mount", "--propagation", "private", "sh", "-c", _MOUNT_PRIVATE, str(directory)]


def worker_process(
    env: dict[str, str], log: Path | None, wrapper: list[str] | None = None, private_tmpfs: Path | None = None
) -> WorkerProcess:
    """A started worker process: forked by the zygote, or spawned afresh under ``wrapper``
    or when ``CURAFLOW_TEST_FORK_WORKERS=0``.

    Args:
        private_tmpfs: the worker's own tmpfs on this directory, in a mount namespace of its
            own (:func:`private_tmpfs_wrapper`; forked: made by the child before the worker
            starts).
    """
    if wrapper or not Zygote.enabled():
        if private_tmpfs is not None:
            wrapper = [*(wrapper or []), *private_tmpfs_wrapper(private_tmpfs)]
        return WorkerProcess(env, log, wrapper=wrapper).start()
    return ForkedWorkerProcess(env, log, private_tmpfs=private_tmpfs).start()


class Zygote:
    """A zygote process (started on first :meth:`spawn`); :data:`ZYGOTE` is this test
    process's."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.process: subprocess.Popen[bytes] | None = None
        self._path: Path | None = None

    @staticmethod
    def enabled() -> bool:
        """Whether workers are forked (Linux, unless ``CURAFLOW_TEST_FORK_WORKERS=0``)."""
        return os.environ.get(SWITCH, "1") != "0" and sys.platform == "linux"

    def _ensure(self) -> Path:
        with self._lock:
            if self.process is not None and self.process.poll() is None and self._path is not None:
                return self._path
            if self._path is not None:  # the zygote before it died: its directory goes
                shutil.rmtree(self._path.parent, ignore_errors=True)
                self._path = None
            directory = Path(tempfile.mkdtemp(prefix="curaflow-zygote-"))
            path = directory / "zygote.sock"
            ready = directory / "ready"
            self.process = subprocess.Popen(
                [sys.executable, "-u", "-m", "tests.zygote", str(path), str(ready)],
                cwd=Path(__file__).resolve().parent.parent,
                preexec_fn=die_with_parent,
            )
            atexit.register(self.stop)
            for _ in range(600):  # up to 60 s: the imports
                if ready.exists():
                    break
                if self.process.poll() is not None:
                    raise RuntimeError(f"the worker zygote exited ({self.process.returncode})")
                threading.Event().wait(0.1)
            else:
                raise RuntimeError("the worker zygote did not start within 60 s")
            self._path = path
            return path

    def stop(self) -> None:
        """SIGTERM the zygote (it wakes and SIGTERMs its children), wait up to 10 s, and
        remove the temporary directory of its socket."""
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(10)
        if self._path is not None:
            shutil.rmtree(self._path.parent, ignore_errors=True)
            self._path = None

    def spawn(
        self,
        env: dict[str, str],
        log: Path | None,
        cwd: Path | None,
        *,
        argv: Sequence[str] | None = None,
        stdio: Sequence[int] = (),
        private_tmpfs: Path | None = None,
    ) -> ForkedProcess:
        """Fork a worker with ``env``, its output appended to ``log``, in ``cwd``; with
        ``argv``, the ``curaflow`` command ``argv`` on the descriptors ``stdio`` (its
        stdin, stdout and stderr) instead; with ``private_tmpfs``, in a mount namespace of
        its own where that directory is a tmpfs of its own (:func:`private_tmpfs_wrapper`)."""
        path = self._ensure()
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        conn.connect(str(path))
        request: dict[str, Any] = {"env": env, "log": str(log) if log else None, "cwd": str(cwd) if cwd else None}
        if argv is not None:
            request["argv"] = list(argv)
        if private_tmpfs is not None:
            request["private_tmpfs"] = str(private_tmpfs)
        socket.send_fds(conn, [json.dumps(request).encode() + b"\n"], list(stdio))
        buffer = b""
        conn.settimeout(30)
        while b"\n" not in buffer:
            chunk = conn.recv(4096)
            if not chunk:
                raise RuntimeError("the worker zygote closed the connection before forking")
            buffer += chunk
        line, _, rest = buffer.partition(b"\n")
        process = ForkedProcess(conn, int(json.loads(line)["pid"]))
        process._buffer = rest
        return process


#: This test process's zygote.
ZYGOTE = Zygote()

#: The ``curaflow`` console script of this interpreter's environment.
CURAFLOW = str(Path(sys.executable).parent / "curaflow")


def curaflow_command(
    args: Sequence[str],
    *,
    env: Mapping[str, str] | None = None,
    cwd: Path | str | None = None,
    input: str | None = None,
    timeout: float | None = None,
) -> subprocess.CompletedProcess[str]:
    """``subprocess.run([curaflow, *args], capture_output=True, text=True, ...)``: the
    command forked by this test process's zygote (module doc), or spawned afresh where
    workers are (:meth:`Zygote.enabled`).

    Args:
        env: the command's whole environment (None: this process's).
        input: written to its stdin, which is then closed (None: an empty stdin).
        timeout: seconds; past it the command is killed and
            :class:`subprocess.TimeoutExpired` raised, as :func:`subprocess.run` does.
    """
    argv = [CURAFLOW, *args]
    if not Zygote.enabled():
        return subprocess.run(
            argv, env=env, cwd=cwd, input=input, capture_output=True, text=True, timeout=timeout, check=False
        )
    deadline = None if timeout is None else time.monotonic() + timeout
    in_r, in_w = os.pipe()
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    try:
        process = ZYGOTE.spawn(
            dict(os.environ if env is None else env),
            None,
            Path(cwd) if cwd is not None else Path.cwd(),
            argv=argv,
            stdio=(in_r, out_w, err_w),
        )
    except BaseException:
        for fd in (in_w, out_r, err_r):
            os.close(fd)
        raise
    finally:
        for fd in (in_r, out_w, err_w):
            os.close(fd)
    output = {out_r: bytearray(), err_r: bytearray()}
    try:
        with selectors.DefaultSelector() as selector:
            for fd in output:
                selector.register(fd, selectors.EVENT_READ)
            stdin = (input or "").encode(locale.getpreferredencoding(False))
            if stdin:
                os.set_blocking(in_w, False)
                selector.register(in_w, selectors.EVENT_WRITE)
            else:
                os.close(in_w)
                in_w = -1
            while selector.get_map():
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    process.kill()
                    process.wait()
                    raise subprocess.TimeoutExpired(argv, timeout or 0, bytes(output[out_r]), bytes(output[err_r]))
                for key, _ in selector.select(left):
                    fd = key.fd
                    if fd == in_w:
                        try:
                            stdin = stdin[os.write(fd, stdin[: 1 << 16]) :]
                        except BrokenPipeError:
                            stdin = b""
                        if not stdin:
                            selector.unregister(fd)
                            os.close(fd)
                            in_w = -1
                        continue
                    chunk = os.read(fd, 1 << 16)
                    if chunk:
                        output[fd] += chunk
                    else:
                        selector.unregister(fd)
        left = None if deadline is None else max(deadline - time.monotonic(), 0.0)
        try:
            returncode = process.wait(left)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
            raise subprocess.TimeoutExpired(argv, timeout or 0, bytes(output[out_r]), bytes(output[err_r])) from None
    finally:
        for fd in (in_w, out_r, err_r):
            if fd >= 0:
                os.close(fd)
    return subprocess.CompletedProcess(argv, returncode, _text(output[out_r]), _text(output[err_r]))


def curaflow_process(
    args: Sequence[str], *, env: Mapping[str, str], cwd: Path, log: Path
) -> ForkedProcess | subprocess.Popen[bytes]:
    """``subprocess.Popen([curaflow, *args], stdout=log, stderr=STDOUT, stdin=DEVNULL)``:
    a ``curaflow`` service (``curaflow api`` …) that runs until the test stops it, forked
    by this test process's zygote (module doc), or spawned afresh where workers are
    (:meth:`Zygote.enabled`).

    Args:
        env: the command's whole environment.
        cwd: its working directory.
        log: the file its stdout and stderr are written to (created or truncated).

    Returns:
        The running process (``pid``, ``poll``, ``wait``, ``send_signal``, ``terminate``,
        ``kill``; its ``returncode`` as :class:`subprocess.Popen`'s).
    """
    argv = [CURAFLOW, *args]
    if not Zygote.enabled():
        with open(log, "wb") as out:
            return subprocess.Popen(
                argv, env=dict(env), cwd=cwd, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT
            )
    stdin = os.open(os.devnull, os.O_RDONLY)
    try:
        out = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            return ZYGOTE.spawn(dict(env), None, Path(cwd), argv=argv, stdio=(stdin, out, out))
        finally:
            os.close(out)
    finally:
        os.close(stdin)


@dataclass
class PipedProcess:
    """A running ``curaflow`` command and the test's ends of its standard streams
    (binary files: write ``stdin``, read ``stdout`` and ``stderr``)."""

    process: ForkedProcess | subprocess.Popen[bytes]
    stdin: IO[bytes]
    stdout: IO[bytes]
    stderr: IO[bytes]


def curaflow_pipes(args: Sequence[str], *, env: Mapping[str, str], cwd: Path | str | None = None) -> PipedProcess:
    """``subprocess.Popen([curaflow, *args], stdin=PIPE, stdout=PIPE, stderr=PIPE)``: a
    command a test talks to while it runs (``curaflow pixiv login`` prints a URL and reads
    the address pasted back), forked by this test process's zygote (module doc), or spawned
    afresh where workers are (:meth:`Zygote.enabled`).

    Args:
        env: the command's whole environment.
        cwd: its working directory (None: this process's).
    """
    argv = [CURAFLOW, *args]
    if not Zygote.enabled():
        spawned = subprocess.Popen(
            argv, env=dict(env), cwd=cwd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        assert spawned.stdin is not None and spawned.stdout is not None and spawned.stderr is not None
        return PipedProcess(spawned, spawned.stdin, spawned.stdout, spawned.stderr)
    in_r, in_w = os.pipe()
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    try:
        process = ZYGOTE.spawn(
            dict(env), None, Path(cwd) if cwd is not None else Path.cwd(), argv=argv, stdio=(in_r, out_w, err_w)
        )
    except BaseException:
        for fd in (in_w, out_r, err_r):
            os.close(fd)
        raise
    finally:
        for fd in (in_r, out_w, err_w):
            os.close(fd)
    return PipedProcess(process, open(in_w, "wb", buffering=0), open(out_r, "rb"), open(err_r, "rb"))


def _text(data: bytes | bytearray) -> str:
    """Bytes of a captured stream as :func:`subprocess.run` gives them with ``text=True``
    (the locale's encoding, universal newlines)."""
    return io.TextIOWrapper(io.BytesIO(bytes(data)), encoding=locale.getpreferredencoding(False)).read()


# ---- the zygote itself ----------------------------------------------------------------


def _child(
    request: dict[str, Any], closing: list[socket.socket], stdio: list[int], others: list[int]
) -> None:  # pragma: no cover - in the child
    code = 1
    try:
        for sock in closing:
            sock.close()
        for fd in others:
            os.close(fd)
        signal.set_wakeup_fd(-1)
        for sig in (signal.SIGCHLD, signal.SIGTERM):
            signal.signal(sig, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        die_with_parent()
        os.environ.clear()
        os.environ.update(request["env"])
        if request["cwd"]:
            os.chdir(request["cwd"])
        if request["log"]:
            fd = os.open(request["log"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
            os.fchmod(fd, 0o600)
            os.dup2(fd, 1)
            os.dup2(fd, 2)
            os.close(fd)
        if request.get("private_tmpfs"):
            _private_tmpfs(request["private_tmpfs"])
        if "argv" in request:
            _command_streams(stdio)
            sys.argv = list(request["argv"])
            # As the console script's: a file run as ``__main__`` (click names the program
            # from it — ``curaflow``, not ``python -m tests.zygote``).
            script = type(sys)("__main__")
            script.__file__ = sys.argv[0]
            sys.modules["__main__"] = script
            from curaflow.cli.main import main

            main()  # ends the process itself (os._exit)
        from curaflow.process import worker

        worker.main()  # ends the process itself (os._exit)
        code = 0
    except SystemExit as exit_:
        if isinstance(exit_.code, int) or exit_.code is None:
            code = exit_.code or 0
        else:
            print(exit_.code, file=sys.stderr)
    except KeyboardInterrupt:
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
    except BaseException:  # noqa: BLE001 - as the interpreter does: a traceback, status 1
        traceback.print_exc()
    finally:
        with contextlib.suppress(Exception):
            atexit._run_exitfuncs()
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)


#: ``unshare(2)`` / ``mount(2)`` flags (linux/sched.h, linux/mount.h).
_CLONE_NEWNS = 0x00020000
_MS_REC = 0x4000
_MS_PRIVATE = 1 << 18


def _private_tmpfs(directory: str) -> None:  # pragma: no cover - in the child
    """In this process, what :func:`private_tmpfs_wrapper` does for the command under it: a
    mount namespace of its own, every mount in it private, and a tmpfs of 256 MiB on
    ``directory`` (made if missing)."""
    libc = ctypes.CDLL(None, use_errno=True)

    def check(result: int, call: str) -> None:
        if result != 0:
            code = ctypes.get_errno()
            raise OSError(code, f"{call}: {os.strerror(code)}")

    check(libc.unshare(_CLONE_NEWNS), "unshare(CLONE_NEWNS)")
    check(libc.mount(b"none", b"/", None, _MS_REC | _MS_PRIVATE, None), "mount(/, MS_REC | MS_PRIVATE)")
    os.makedirs(directory, exist_ok=True)
    check(libc.mount(b"curaflow-artifacts", directory.encode(), b"tmpfs", 0, b"size=256m"), f"mount({directory})")


def _command_streams(stdio: list[int]) -> None:  # pragma: no cover - in the child
    """Make ``stdio`` (stdin, stdout, stderr) the child's descriptors 0-2 and its
    ``sys.stdin`` / ``sys.stdout`` / ``sys.stderr`` new streams on them, as a fresh
    interpreter's: the locale's encoding, stdout buffered unless a terminal, stderr
    line-buffered with ``backslashreplace``."""
    for target, fd in enumerate(stdio):
        os.dup2(fd, target)
        os.close(fd)
    encoding = locale.getpreferredencoding(False)
    binary = [open(fd, mode, closefd=False) for fd, mode in ((0, "rb"), (1, "wb"), (2, "wb"))]  # noqa: SIM115
    sys.stdin = io.TextIOWrapper(binary[0], encoding=encoding)
    sys.stdout = io.TextIOWrapper(binary[1], encoding=encoding, line_buffering=os.isatty(1))
    sys.stderr = io.TextIOWrapper(binary[2], encoding=encoding, errors="backslashreplace", line_buffering=True)


#: What a worker of the suite imports once it runs, imported by the zygote too: the
#: command line (:func:`curaflow_command`'s children), the replay
#: source of most tests' workers (FastAPI and its app), uvicorn's protocols and anyio's
#: asyncio backend (the replay's server), the Pixiv source and login, Temporal profiles.
PRELOADED = (
    "curaflow.cli.app",
    "curaflow.sources.pixiv.replay.app",
    "curaflow.sources.pixiv.source",
    "curaflow.sources.pixiv.login",
    "curaflow.temporal.profile",
    "anyio._backends._asyncio",
    "uvicorn.protocols.http.auto",
    "uvicorn.protocols.websockets.auto",
)


def _settle() -> None:  # pragma: no cover - the zygote process
    """Import what every child would, then make what the zygote holds cheap to fork.

    The Temporal SDK names a worker without a deployment by a hash of every loaded
    module's bytecode (``load_default_build_id``, memoized per process): computed once
    here, each child's workers take it instead of hashing again (~0.2 s of CPU a worker).
    Then everything alive is frozen (:func:`gc.freeze`, as the :mod:`gc` documentation
    advises before a fork): a child's collections — its ``settle_heap`` at start first —
    walk only what the child made, not the zygote's heap.
    """
    import gc
    import importlib

    import curaflow.process.worker  # noqa: F401 - the point: imported once, before any fork

    for name in PRELOADED:
        with contextlib.suppress(ImportError):
            importlib.import_module(name)
    with contextlib.suppress(ImportError, AttributeError):
        from temporalio.worker._worker import load_default_build_id

        load_default_build_id()
    gc.collect()
    gc.freeze()


def _serve(path: str, ready: str) -> None:  # pragma: no cover - the zygote process
    _settle()

    assert threading.active_count() == 1, "a zygote must not hold threads when it forks"
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    children: dict[int, socket.socket] = {}

    def leave(*_: object) -> None:
        # A child stopped by its test (SIGSTOP) would keep its parent-death SIGTERM pending
        # for ever: wake every child, then ask it to stop.
        for pid in children:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGCONT)
                os.kill(pid, signal.SIGTERM)
        sys.exit(0)

    signal.signal(signal.SIGTERM, leave)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(64)
    selector = selectors.DefaultSelector()
    selector.register(listener, selectors.EVENT_READ, "accept")
    selector.register(wake_r, selectors.EVENT_READ, "wake")
    pending: dict[socket.socket, bytes] = {}
    passed: dict[socket.socket, list[int]] = {}  # descriptors a command's request carried
    Path(ready).touch()
    while True:
        for key, _ in selector.select():
            if key.data == "accept":
                conn, _addr = listener.accept()
                pending[conn] = b""
                selector.register(conn, selectors.EVENT_READ, "request")
            elif key.data == "request":
                conn = key.fileobj  # type: ignore[assignment]
                chunk, fds, _flags, _addr = socket.recv_fds(conn, 1 << 20, 3)
                passed.setdefault(conn, []).extend(fds)
                if not chunk:
                    selector.unregister(conn)
                    pending.pop(conn, None)
                    for fd in passed.pop(conn, []):
                        os.close(fd)
                    conn.close()
                    continue
                pending[conn] += chunk
                if b"\n" not in pending[conn]:
                    continue
                selector.unregister(conn)
                request = json.loads(pending.pop(conn).partition(b"\n")[0])
                stdio = passed.pop(conn, [])
                others = [listener, *pending, *children.values()]
                pid = os.fork()
                if pid == 0:
                    selector.close()
                    os.close(wake_r)
                    os.close(wake_w)
                    _child(request, [*others, conn], stdio, [fd for fds in passed.values() for fd in fds])
                for fd in stdio:  # the child's alone: its readers see their end when it ends
                    os.close(fd)
                children[pid] = conn
                with contextlib.suppress(OSError):
                    conn.sendall(json.dumps({"pid": pid}).encode() + b"\n")
            else:
                with contextlib.suppress(BlockingIOError):
                    os.read(wake_r, 4096)
                while children:
                    try:
                        pid, status = os.waitpid(-1, os.WNOHANG)
                    except ChildProcessError:
                        break
                    if pid == 0:
                        break
                    conn = children.pop(pid, None)
                    if conn is not None:
                        code = os.waitstatus_to_exitcode(status)
                        with contextlib.suppress(OSError):
                            conn.sendall(json.dumps({"returncode": code}).encode() + b"\n")
                        conn.close()


if __name__ == "__main__":
    _serve(sys.argv[1], sys.argv[2])
