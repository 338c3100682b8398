"""The suite's module order (``tests/conftest.py`` ``LONGEST_FIRST``) names modules that exist, once each.

A module renamed or removed would silently fall back to collection order, and the two
processes of ``pytest -n 3`` would no longer finish together.
"""

from __future__ import annotations

from pathlib import Path

from tests.conftest import LONGEST_FIRST

ROOT = Path(__file__).resolve().parents[2]


def test_every_module_of_the_order_exists_once() -> None:
    assert [name for name in LONGEST_FIRST if not (ROOT / name).is_file()] == []
    assert len(set(LONGEST_FIRST)) == len(LONGEST_FIRST)


def test_modules_not_listed_that_start_services_run_before_the_unit_modules() -> None:
    from tests.conftest import module_rank

    listed = [module_rank(name) for name in LONGEST_FIRST]
    assert listed == sorted(listed)
    unlisted = [
        "tests/workflow/test_not_yet_measured.py",
        "tests/integration/test_not_yet_measured.py",
        "tests/ui/test_not_yet_measured.py",
        "tests/chaos/test_not_yet_measured.py",
    ]
    unit = module_rank("tests/unit/test_not_yet_measured.py")
    for name in unlisted:
        assert max(listed) < module_rank(name) < unit, name
