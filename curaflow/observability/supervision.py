"""Supervision of background loops: none dies silently, none lives on doing nothing.

Every long-running background task of a process runs under one :class:`Supervisor`
(DESIGN.md decision 13). In a worker: the source-queue owners, the reconciler, the
schedule watcher, the push sweeper, the Temporal probe, the health/metrics server and
the Temporal workers themselves; in the API: the reconciler, the ``LISTEN`` connection,
the workflow starter and the Temporal connection. The rule:

* A **loop** is an async function ``body(beat)`` that runs until the process stops and
  calls ``beat.ok()`` whenever it has done a unit of useful work (a tick, a liveness
  check that passed). Any exception that escapes it — asyncpg's ``InterfaceError``,
  ``InternalClientError``, ``ConnectionDoesNotExistError``, a Temporal ``RPCError``, a
  bug — is logged with its traceback (``background.loop_failed``), counted in
  ``curaflow_background_errors_total{loop}`` and the body is started again after a
  backoff doubling from ``supervision.initial_backoff_ms`` up to
  ``supervision.max_backoff_ms``. A body that returns while the process runs is
  restarted the same way, unless the loop is ``finite`` (it ends when its work is done,
  e.g. connecting to Temporal).
* A loop that has not been healthy for ``supervision.fatal_after_ms`` (no ``ok()`` since
  its failures began: counted from its first failure after its last ``ok()``, not from that
  ``ok()`` — a loop ticking less often than the bound, the worker's hourly retention pass,
  exited the process on one failed tick until 2026-12-07) cannot recover by itself: the supervisor logs
  ``background.loop_unrecoverable`` and fails the process, which exits with status
  :data:`EXIT_LOOP_FAILED` (3) so that its own supervisor (Docker, systemd, Kubernetes,
  ``curaflow dev``) restarts it — or :data:`EXIT_CONFIGURATION` (2) when the loop's last
  failure is a refusal of the process's configuration, which no restart changes
  (:func:`exit_status_of`: Temporal refusing its access or namespace, PostgreSQL its login
  or database; since 2026-12-07). Loops declared ``fatal=False`` are only counted and
  reported (the API keeps serving reads from the ledger while Temporal is away).
* A **critical task** (:meth:`Supervisor.critical`) — a Temporal ``Worker.run`` — is not
  restarted: if it ends before the process stops, whatever the reason, the process
  fails at once.

:meth:`Supervisor.checks` describes every loop for readiness (``GET /ready``): a loop is
ready while it runs and its last attempt did not fail.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
import time
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

from curaflow.observability import metrics
from curaflow.observability.logs import get_logger
from curaflow.observability.secrets import redacted

log = get_logger("curaflow.observability.supervision")

#: Exit status of a process whose background loop could not recover (2 is configuration).
EXIT_LOOP_FAILED = 3
#: Exit status of a service process (``api``, ``worker``, ``dev``) that could not start:
#: its configuration is invalid or incomplete, a port it must listen on is taken, or
#: Temporal / PostgreSQL did not answer at start (docs/operations.md, "Exit status").
EXIT_CANNOT_START = 2
#: Exit status of a process (or command) whose configuration cannot work: the same 2 as
#: one that cannot start — also a running process whose loop could not recover from a
#: refusal of its configuration (:func:`exit_status_of`).
EXIT_CONFIGURATION = 2
#: What the reason of such a failure adds, after the setting to change
#: (:func:`configuration_refused_reason`).
CONFIGURATION_REFUSED = (
    "a refusal of this process's configuration (its Temporal credentials, permissions or namespace; "
    "its PostgreSQL login or database): a restart alone does not help: fix "
)


def configuration_refused_reason(setting: str) -> str:
    """What the reason of a failure that is a refusal of the configuration adds: that a
    restart alone does not help, and ``setting`` — the environment variable / configuration
    key to change (:func:`curaflow.process.refusals.refused_setting`; until 2026-12-08 the
    reason said "the configuration or the credentials it reads", and named none)."""
    return f"{CONFIGURATION_REFUSED}{setting}"


def exit_status_of(error: BaseException | None, refused_setting: Callable[[BaseException], str | None] | None) -> int:
    """The exit status of a process failed by a loop whose last failure is ``error``:
    :data:`EXIT_CONFIGURATION` when ``refused_setting`` reads it as a refusal of the
    process's configuration (it names the setting to change) — Temporal's of its access or
    namespace, PostgreSQL's of its login or database
    (:func:`curaflow.process.refusals.refused_setting`, handed in by the process that owns
    the supervisor: this layer knows neither service) — which no restart changes; else
    :data:`EXIT_LOOP_FAILED` ("restart me": an outage, a bug; also every failure when no
    reading is handed in). Until 2026-12-07 every such failure exited 3, and the reconciler
    refused its namespace was restarted into the same refusal every
    ``supervision.fatal_after_ms``."""
    if error is not None and refused_setting is not None and refused_setting(error) is not None:
        return EXIT_CONFIGURATION
    return EXIT_LOOP_FAILED


def error_text(error: BaseException) -> str:
    """``<type>: <message>`` of a loop's failure, as ``/ready``, the log and the exit reason
    say it: secrets redacted, on one line — PostgreSQL puts its ``DETAIL:`` on a line of
    its own, and a process's last words on stderr were two lines, the setting to fix on the
    second (until 2026-12-08)."""
    text = redacted(f"{type(error).__name__}: {error}")
    return " ".join(line.strip() for line in text.splitlines() if line.strip())


#: After a failure, a process that has not finished its graceful shutdown within this
#: many seconds is ended with :func:`os._exit` (a hung shutdown must not keep it alive).
HARD_EXIT_AFTER_S = 60.0


class LoopFailed(Exception):
    """A background loop could not recover: the process must exit ``status``
    (:data:`EXIT_LOOP_FAILED`, or :data:`EXIT_CONFIGURATION`: :func:`exit_status_of`)."""

    def __init__(self, reason: str, status: int = EXIT_LOOP_FAILED) -> None:
        super().__init__(reason)
        self.status = status


@dataclass(frozen=True)
class SupervisionPolicy:
    """Backoff and the bound of recovery, in seconds.

    Attributes:
        initial_backoff_s: wait before the first restart of a failed loop.
        max_backoff_s: cap of the doubling backoff.
        fatal_after_s: a loop failing for longer than this (no ``ok()`` since its first
            failure after its last one) fails the process.
    """

    initial_backoff_s: float = 0.5
    max_backoff_s: float = 30.0
    fatal_after_s: float = 300.0

    def backoff(self, failures: int) -> float:
        """Seconds to wait after the ``failures``-th consecutive failure (1-based): the
        doubling, at most ``max_backoff_s`` at any count (the power is taken at most to 62:
        ``2 ** 1024`` is no float, and a loop failing for hours under a long
        ``fatal_after_ms`` raised ``OverflowError`` in its own restart until 2026-12-06)."""
        return min(self.max_backoff_s, self.initial_backoff_s * 2 ** min(max(0, failures - 1), 62))

    @classmethod
    def from_settings(cls, settings: Any) -> SupervisionPolicy:
        """The policy of ``settings.supervision`` (milliseconds in the configuration)."""
        s = settings.supervision
        return cls(
            initial_backoff_s=s.initial_backoff_ms / 1000,
            max_backoff_s=s.max_backoff_ms / 1000,
            fatal_after_s=s.fatal_after_ms / 1000,
        )


@dataclass
class LoopState:
    """What the supervisor knows about one loop (monotonic times, seconds).

    Attributes:
        healthy_at: the last ``ok()`` (or the start).
        failing_since: the first failure since the last ``ok()`` (None while none): what
            ``supervision.fatal_after_ms`` is counted from.
        failures: consecutive failures since the last ``ok()``.
        errors: every failure since the start.
        last_error: ``Type: message`` of the latest failure.
        running: the body is running (not waiting for a restart).
        done: a finite loop finished its work.
        fatal: whether not recovering fails the process.
        detail: a word the loop sets about itself.
        describe: while the loop runs and has not failed, its own readiness entry
            ``{ok, detail}`` (a source-queue owner's lease state), so that ``/ready`` has
            one entry per loop and never two that contradict each other.
    """

    name: str
    fatal: bool = True
    healthy_at: float = field(default_factory=time.monotonic)
    failing_since: float | None = None
    failures: int = 0
    errors: int = 0
    last_error: str | None = None
    running: bool = False
    done: bool = False
    detail: str | None = None
    describe: Callable[[], dict[str, Any]] | None = None

    def check(self) -> dict[str, Any]:
        """The readiness entry ``{ok, detail?}`` of this loop."""
        if self.running and self.failures == 0 and self.describe is not None:
            return dict(self.describe())
        ok = (self.running or self.done) and self.failures == 0
        out: dict[str, Any] = {"ok": ok}
        if self.failures:
            out["detail"] = f"failing ({self.failures}x): {self.last_error}"
        elif not ok:
            out["detail"] = "not running"
        elif self.detail:
            out["detail"] = self.detail
        return out


class Beat:
    """What a loop body reports through: ``ok()`` after useful work, ``detail`` for readiness."""

    def __init__(self, state: LoopState) -> None:
        self._state = state

    def ok(self, detail: str | None = None) -> None:
        """The loop did a unit of useful work: it is healthy now."""
        self._state.healthy_at = time.monotonic()
        self._state.failing_since = None
        self._state.failures = 0
        self._state.detail = detail if detail is not None else self._state.detail


LoopBody = Callable[[Beat], Awaitable[None]]


class Supervisor:
    """Runs the background loops of one process under the rule of the module doc.

    Args:
        stop: set when the process stops; loops end, and no failure counts after it.
        policy: backoff and recovery bound.
        on_fatal: called once, with the reason, when the process must fail (a worker sets
            its stop event; ``curaflow api`` asks uvicorn to shut down). Without it a
            failure is only logged and the loops keep restarting (nobody could restart
            the process).
        refused_setting: the setting to change when a loop's last failure is a refusal of the
            process's configuration (None when it is not), which makes :attr:`exit_status`
            :data:`EXIT_CONFIGURATION` and the reason name the setting (:func:`exit_status_of`);
            None: every failure exits :data:`EXIT_LOOP_FAILED`. A refusal's failures are
            logged without a traceback: they are an answer, not a fault of the code.
    """

    def __init__(
        self,
        stop: asyncio.Event,
        policy: SupervisionPolicy | None = None,
        *,
        on_fatal: Callable[[str], None] | None = None,
        refused_setting: Callable[[BaseException], str | None] | None = None,
    ) -> None:
        self.stop = stop
        self.policy = policy or SupervisionPolicy()
        self.failure: str | None = None
        #: The status the process exits with once failed (:func:`exit_status_of`).
        self.exit_status = EXIT_LOOP_FAILED
        self._on_fatal = on_fatal
        self._refused_setting = refused_setting
        self._loops: dict[str, LoopState] = {}
        self._tasks: list[asyncio.Task[None]] = []

    # ---- starting loops -------------------------------------------------------------

    def loop(
        self,
        name: str,
        body: LoopBody,
        *,
        finite: bool = False,
        fatal: bool = True,
        describe: Callable[[], dict[str, Any]] | None = None,
    ) -> LoopState:
        """Run ``body`` as a supervised loop in a task of its own; returns its state.

        ``describe``: the loop's own readiness entry while it runs without failing
        (:attr:`LoopState.describe`)."""
        state = self._register(name, fatal)
        state.describe = describe
        self._tasks.append(asyncio.create_task(self._supervise(state, body, finite), name=f"loop:{name}"))
        return state

    def every(
        self,
        name: str,
        interval_s: float,
        tick: Callable[[], Awaitable[Any]],
        *,
        timeout_s: float | None = None,
        fatal: bool = True,
    ) -> LoopState:
        """Run ``tick()`` every ``interval_s`` seconds as a supervised loop (see :meth:`run_every`)."""
        state = self._register(name, fatal)
        body = self._ticking(interval_s, tick, timeout_s)
        self._tasks.append(asyncio.create_task(self._supervise(state, body, False), name=f"loop:{name}"))
        return state

    async def run_every(
        self,
        name: str,
        interval_s: float,
        tick: Callable[[], Awaitable[Any]],
        *,
        timeout_s: float | None = None,
        fatal: bool = True,
    ) -> None:
        """Tick every ``interval_s`` seconds in the calling task until ``stop`` is set.

        Each tick is bounded by ``timeout_s`` (default ``max(60, 10 × interval)``): a tick
        hung on a dead connection is a failure like any other, not a silent stop.
        """
        state = self._register(name, fatal)
        await self._supervise(state, self._ticking(interval_s, tick, timeout_s), False)

    def critical(self, name: str, run: Coroutine[Any, Any, Any]) -> LoopState:
        """Run ``run`` (a Temporal ``Worker.run()``) for the life of the process.

        When it ends before ``stop`` is set — raising or not — the process fails at once.
        """
        state = self._register(name, True)

        async def watch() -> None:
            state.running = True
            try:
                await run
                error = "ended"
                cause: BaseException | None = None
            except asyncio.CancelledError:
                raise
            except Exception as err:
                cause = err
                error = error_text(err)  # /ready and the exit reason say it
                if not self.stop.is_set():
                    log.error(
                        "background.loop_failed",
                        loop=name,
                        error=error,
                        exc_info=None if self._refused(err) is not None else err,
                    )
            finally:
                state.running = False
            if self.stop.is_set():
                state.done = True
                return
            state.errors += 1
            state.failures += 1
            state.last_error = error
            metrics.record_background_error(name)
            self.fail(name, f"{name} {error}", cause)

        self._tasks.append(asyncio.create_task(watch(), name=f"critical:{name}"))
        return state

    # ---- state ----------------------------------------------------------------------

    def checks(self) -> dict[str, dict[str, Any]]:
        """``{"loop:<name>": {ok, detail?}}`` for every loop (readiness)."""
        return {f"loop:{name}": state.check() for name, state in self._loops.items()}

    @property
    def loops(self) -> dict[str, LoopState]:
        """Every loop's state by name."""
        return dict(self._loops)

    async def sleep(self, seconds: float) -> bool:
        """Wait ``seconds`` or until ``stop``; True when the process is stopping."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.stop.wait(), timeout=max(0.0, seconds))
        return self.stop.is_set()

    def fail(self, loop: str, reason: str, error: BaseException | None = None) -> None:
        """Fail the process (once): log, call ``on_fatal``, arm the hard-exit timer.

        Args:
            error: the loop's last failure, which decides :attr:`exit_status`
                (:func:`exit_status_of`; a refusal of the configuration says so in the reason).
        """
        if self.failure is not None:
            return
        setting = self._refused(error)
        self.exit_status = exit_status_of(error, self._refused_setting)
        if setting is not None:
            reason = f"{reason} — {configuration_refused_reason(setting)}"
        self.failure = reason
        log.error("background.loop_unrecoverable", loop=loop, reason=reason, exit_status=self.exit_status)
        if self._on_fatal is not None:
            self._on_fatal(reason)

    async def close(self, grace_s: float = 0.0, timeout_s: float = 10.0) -> None:
        """End every loop: wait up to ``grace_s`` for them to finish by themselves (``stop``
        is set: a source-queue owner shuts its Temporal worker down gracefully), then cancel
        the rest and wait up to ``timeout_s``."""
        pending = [task for task in self._tasks if not task.done()]
        if pending and grace_s > 0:
            _, still = await asyncio.wait(pending, timeout=grace_s)
            pending = list(still)
        for task in pending:
            task.cancel()
        if pending:
            await asyncio.wait(pending, timeout=timeout_s)
        self._tasks = []

    # ---- internals --------------------------------------------------------------------

    def _refused(self, error: BaseException | None) -> str | None:
        """The setting to change when ``error`` is a refusal of the configuration, else None."""
        if error is None or self._refused_setting is None:
            return None
        return self._refused_setting(error)

    def _register(self, name: str, fatal: bool) -> LoopState:
        if name in self._loops:
            raise ValueError(f"a loop named {name!r} is already supervised")
        state = LoopState(name=name, fatal=fatal)
        self._loops[name] = state
        return state

    def _ticking(self, interval_s: float, tick: Callable[[], Awaitable[Any]], timeout_s: float | None) -> LoopBody:
        limit = timeout_s if timeout_s is not None else max(60.0, 10 * interval_s)

        async def body(beat: Beat) -> None:
            while not self.stop.is_set():
                await asyncio.wait_for(tick(), timeout=limit)
                beat.ok()
                if await self.sleep(interval_s):
                    return

        return body

    async def _supervise(self, state: LoopState, body: LoopBody, finite: bool) -> None:
        while not self.stop.is_set() and not (self.failure is not None and self._on_fatal is not None):
            state.running = True
            error: BaseException | None = None
            try:
                await body(Beat(state))
            except asyncio.CancelledError:
                state.running = False
                raise
            except Exception as err:  # noqa: BLE001 - the point: any exception is survived
                error = err
            state.running = False
            if self.stop.is_set():
                return  # failures while stopping are the shutdown's, not the loop's
            if error is None and finite:
                state.done = True
                return
            state.errors += 1
            state.failures += 1
            state.last_error = (  # /ready says it (no token asked), and the exit reason
                error_text(error) if error is not None else "returned while the process runs"
            )
            metrics.record_background_error(state.name)
            # Down since the failures began, not since the last ok(): a loop that ticks less
            # often than fatal_after_s (the hourly retention pass) was past it at its first
            # failure, however short the blip.
            now = time.monotonic()
            if state.failing_since is None:
                state.failing_since = now
            down_s = now - state.failing_since
            retry_in = self.policy.backoff(state.failures)
            log.warning(
                "background.loop_failed",
                loop=state.name,
                error=state.last_error,
                failures=state.failures,
                down_s=round(down_s, 3),
                retry_in_s=retry_in,
                # A refusal of the configuration is an answer (its error says it), not a fault of
                # the code: no traceback for it, at any of its retries.
                exc_info=None if self._refused(error) is not None else error,
            )
            if state.fatal and down_s > self.policy.fatal_after_s:
                self.fail(state.name, f"{state.name} has not recovered for {down_s:.0f} s: {state.last_error}", error)
                if self._on_fatal is not None:
                    return  # the process is going down; without a handler, keep trying
            if await self.sleep(retry_in):
                return


def arm_hard_exit(status: int = EXIT_LOOP_FAILED, after_s: float = HARD_EXIT_AFTER_S) -> threading.Timer:
    """End the process with ``status`` after ``after_s`` seconds unless it exited before.

    Called once a process has failed: its graceful shutdown (Temporal workers draining,
    pools closing) may hang on the very fault that failed it.
    """
    timer = threading.Timer(after_s, os._exit, (status,))
    timer.daemon = True
    timer.start()
    return timer
