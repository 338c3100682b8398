"""A chaos scenario's sizes for one mode (:class:`Plan`) and the quick mode's source-queue timings."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Plan:
    """A scenario's sizes for one mode.

    Attributes:
        targets: targets (each with a webhook and a directory route of its own).
        jobs: jobs to submit (``kills``, ``cancel*``); load scenarios submit until the
            last fault has recovered, every ``interval_s``.
        interval_s: seconds between two submissions.
        temporal_every: every n-th job is started from a Temporal client (0: none).
        kill_every_s: mean seconds between two worker kills (0: no kills).
        down_s: how long a stopped service stays down.
        fault_kinds: the faults of a service scenario, in order (``fast stop``,
            ``SIGKILL``, ``stop``).
        lead_s / tail_s: load before each fault, and after the last one recovered.
        cancel_within_s: a "random" cancel lands uniformly within this many seconds of
            admission (the others: "early", within 50 ms; "delivering", as soon as the
            webhook receiver has the job's request).
        receiver_delay_ms: the webhook receiver answers the scenario's routes after a
            random delay up to this (a request stays out that long).
        broken_targets: the last n targets' directory route lies under a regular file,
            so every write fails and is retried (a partial delivery: the
            webhook has the work, the directory never gets it, then the cancel comes).
        drain_s: how long to wait for the jobs to end before calling them stuck.
    """

    targets: int
    jobs: int = 0
    interval_s: float = 0.5
    temporal_every: int = 0
    kill_every_s: float = 0.0
    down_s: float = 5.0
    fault_kinds: tuple[str, ...] = ()
    lead_s: float = 4.0
    tail_s: float = 3.0
    cancel_within_s: float = 4.0
    receiver_delay_ms: int = 150
    broken_targets: int = 0
    drain_s: float = 120.0


#: The quick mode's source-queue lease and standby poll (the full mode keeps the defaults,
#: 10 s and 1 s): a killed or frozen owner is replaced within about 5.5 s, so the
#: ``pg_hang`` outage that must outlast the lease is 8 s instead of 15 s.
QUICK_PIXIV: dict[str, Any] = {"source_lease_ms": 5000, "source_standby_poll_ms": 500}
