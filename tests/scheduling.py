"""How ``pytest -n`` hands out the suite's tests: whole modules, the longest first, and a
crashed process's tests handed out again without the test that crashed it.

A plugin of its own (registered by ``tests/conftest.py``), light to import: the test of a
hung run (``tests/unit/test_suite_timeout.py``) runs it in a run of its own.
"""

from __future__ import annotations

from typing import Any

import pytest


@pytest.hookimpl(optionalhook=True)  # without xdist (``-p no:xdist``) the hook is unknown
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """``pytest -n 5`` hands out whole modules (``--dist loadfile``), in collection order.

    A module's tests share its module-scoped worker and services in one process, and the
    longest modules, collected first (:data:`LONGEST_FIRST`), start first: the last
    modules handed out are quick ones, so neither process is left running a long one
    alone at the end. An explicit ``--dist`` other than ``load`` (the default of ``-n``)
    is kept.
    """
    if config.getvalue("dist") != "load":
        return None
    config.option.loadscopereorder = False  # keep the order below, not "most tests first"
    return _modules_scheduler()(config, log)


def _modules_scheduler() -> type:
    """xdist's ``LoadFileScheduling`` whose crashed test is not handed out again.

    A test that passes pytest-timeout's limit ends its process (``timeout_method =
    "thread"``); xdist reports it failed ("worker crashed while running …"), starts a new
    process and hands out the rest of the crashed process's modules. xdist 3.8's
    ``LoadScopeScheduling.remove_node`` put the crashed test back among them, not
    completed: it ran again in the process that replaced the crashed one; and that process,
    handed a module of one test left, waited for a second that never came — the run hung
    (reproduced with a module whose second of three tests hangs at ``-n 3``: xdist's
    default ``load`` scheduling ends it). Here the crashed test is marked done before its
    module is handed out again, and a process is handed modules until it holds two tests:
    the run ends, that test failed, every other test run.
    """
    from xdist.scheduler import LoadFileScheduling

    class ModulesScheduling(LoadFileScheduling):  # type: ignore[misc]
        def remove_node(self, node: Any) -> str | None:
            workload = self.assigned_work.pop(node)
            pending = [nodeid for unit in workload.values() for nodeid, done in unit.items() if not done]
            if not pending:
                return None
            crashed: str = pending[0]  # the process runs its tests in order: the first not done
            for unit in workload.values():
                if crashed in unit:
                    unit[crashed] = True
            self.workqueue.update({scope: unit for scope, unit in workload.items() if not all(unit.values())})
            for other in self.assigned_work:
                self._reschedule(other)
            return crashed

        def _reschedule(self, node: Any) -> None:
            # xdist's hands one module to a process that has at most two tests left, and
            # waits for the next report to hand more. A process runs a test only once it
            # holds the one after it (or is told no more come): the process that replaced
            # a crashed one got a module of one test left, waited for a second, and no
            # report ever came — the run hung. Here a process is handed modules until it
            # holds two tests or none are left, and told so when none are.
            if node.shutting_down:
                return
            while self.workqueue and self._pending_of(self.assigned_work[node]) < 2:
                self._assign_work_unit(node)
            if not self.workqueue:
                node.shutdown()

    return ModulesScheduling
