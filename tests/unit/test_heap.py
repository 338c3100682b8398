"""The worker's collector settings (curaflow.process.heap): what :func:`settle_heap` does to
a process's collector, in a process of its own (it changes the whole interpreter)."""

from __future__ import annotations

import json
import subprocess
import sys

SCRIPT = """
import gc, json
from curaflow.process.heap import THRESHOLDS, TUNED, settle_heap
before = {"frozen": gc.get_freeze_count(), "threshold": gc.get_threshold()}
settle_heap()
after = {"frozen": gc.get_freeze_count(), "threshold": gc.get_threshold()}

class Node:
    def __init__(self):
        self.other = None

def cycles(n):
    for _ in range(n):
        a, b = Node(), Node()
        a.other, b.other = b, a

cycles(1000)  # garbage made after the start is still found and freed
settled = THRESHOLDS if TUNED else before["threshold"]
facts = {"before": before, "after": after, "settled": settled, "tuned": TUNED, "collected": gc.collect()}
print(json.dumps(facts))
"""


def test_settle_heap_freezes_the_start_and_makes_young_collections_rarer_not_full_ones() -> None:
    out = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, check=True, timeout=60)
    facts = json.loads(out.stdout.splitlines()[-1])  # after the process.heap_settled log line
    assert facts["before"]["frozen"] == 0
    assert facts["after"]["frozen"] > 1_000  # the modules, classes and objects of the start
    assert facts["after"]["threshold"] == facts["settled"]
    if facts["tuned"]:  # CPython before 3.14 (curaflow.process.heap.TUNED)
        young, middle, full = facts["after"]["threshold"]
        before_young, before_middle, before_full = facts["before"]["threshold"]
        assert young > before_young  # rarer young collections
        # ... and cyclic garbage waits no more allocations than with the defaults before a full
        # collection may find it (10 000 * 3 * 1 <= 700 * 10 * 10)
        assert young * middle * full <= before_young * before_middle * before_full
    assert facts["collected"] >= 2_000  # two objects a cycle, and their __dict__s
