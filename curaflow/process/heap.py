"""The cyclic garbage collector of a long-running service process (CPython's :mod:`gc`).

A service process (a worker, the API) allocates many short-lived objects a job
(payloads, pydantic models, workflow activations); with CPython's defaults (a young
collection every 700 net allocations, a middle one every 10 young ones, a full one every
10 middle ones) the collector took ~5 % of the worker's CPU in the throughput benchmark,
most of it full collections walking every object the process made at start — objects
that live as long as the process. :func:`settle_heap`, called once the process has
started (the worker when its Temporal workers are built, ``curaflow api`` when its app
is):

* moves everything alive then into the permanent generation (:func:`gc.freeze`, as the
  :mod:`gc` documentation suggests for a process that has finished starting): full
  collections no longer walk the modules, schemas and clients of the start;
* makes young collections rarer (every :data:`THRESHOLDS` ``[0]`` = 10 000 net
  allocations): short-lived objects die by reference counting before a collection sees
  them;
* and the older ones *not* rarer: a middle collection every 3 young ones and a full one
  after each middle one (CPython still holds a full collection back until the objects
  waiting for it reach a quarter of those that survived the last), so cyclic garbage
  waits no more allocations than with the defaults before a full collection may find
  it (30 000 against 70 000).
  With the young threshold alone, a worker holding 10 000 jobs in flight kept 470 MiB
  instead of 253 (garbage not found yet); with these, 254.

The thresholds were measured on CPython 3.11's generational collector (3.12 and 3.13 keep
its meaning); 3.14's collector is incremental and reads them otherwise, so there only the
freeze is done and its own thresholds stay (:data:`TUNED`).

Nothing is kept that would otherwise be freed: reference counting frees what it always
did; only cycles among objects allocated after the start wait for the collection that
finds them. Measured in docs/performance.md ("The collector settled").
"""

from __future__ import annotations

import gc
import sys

from curaflow.observability.logs import get_logger

log = get_logger("curaflow.process.heap")

#: ``gc.set_threshold`` after the start: net allocations between two young collections,
#: young collections between two middle ones, middle collections between two full ones
#: (CPython's defaults: 700, 10, 10).
THRESHOLDS = (10_000, 3, 1)
#: Whether :data:`THRESHOLDS` are set: on the generational collector they were measured on
#: (before CPython 3.14's incremental one).
TUNED = sys.version_info < (3, 14)


def settle_heap() -> int:
    """Collect once, freeze what survives, and set :data:`THRESHOLDS` (when :data:`TUNED`);
    logs ``process.heap_settled`` with the frozen objects and the thresholds in force.

    Call it once per process, after start-up (imports, clients, workers built) and before
    the work begins.

    Returns:
        How many objects are frozen (:func:`gc.get_freeze_count`).
    """
    gc.collect()
    gc.freeze()
    if TUNED:
        gc.set_threshold(*THRESHOLDS)
    frozen = gc.get_freeze_count()
    log.info("process.heap_settled", frozen_objects=frozen, thresholds=list(gc.get_threshold()))
    return frozen
