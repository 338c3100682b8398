"""The cyclic garbage collector of a long-running worker process (CPython's :mod:`gc`).

A worker allocates many short-lived objects a job (payloads, pydantic models, workflow
activations); with CPython's defaults (a young collection every 700 net allocations) the
collector took ~5 % of the worker's CPU in the throughput benchmark, most of it full
collections walking every object the process imported at start — objects that live as
long as the process. :func:`settle_heap`, called once the worker has started:

* moves everything alive then into the permanent generation (:func:`gc.freeze`, as the
  :mod:`gc` documentation suggests for a process that has finished starting): full
  collections no longer walk the modules, schemas and clients of the start;
* makes young collections rarer (:data:`YOUNG_THRESHOLD` allocations instead of 700):
  short-lived objects die by reference counting before a collection sees them, so fewer
  survive into the older generations.

Nothing is kept that would otherwise be freed: reference counting frees what it always
did; only cycles among objects allocated after the start wait for the (rarer) collection
that finds them. Measured in docs/performance.md ("The collector").
"""

from __future__ import annotations

import gc

#: Net allocations between two young-generation collections (CPython's default: 700).
YOUNG_THRESHOLD = 10_000


def settle_heap() -> None:
    """Collect once, freeze what survives, and raise the young generation's threshold.

    Call it once per process, after start-up (imports, clients, workers built) and before
    the work begins; the older generations' thresholds stay CPython's.
    """
    gc.collect()
    gc.freeze()
    _, older, oldest = gc.get_threshold()
    gc.set_threshold(YOUNG_THRESHOLD, older, oldest)
