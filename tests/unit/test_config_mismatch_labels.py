"""The ``name`` label of ``curaflow_config_mismatch_total`` and ``_last_seconds``: a bounded set.

A step meets a route or source account its worker does not know before it opens
(:func:`activities.errors.config_mismatch`), and the name is the job's input — which any
Temporal client of the namespace writes (a start under an admitted job's id with an edited
``JobInput``, refused only once the step opens). Until 2026-12-07 each such name, cut at 100
characters, became one series of each family for the life of the worker: starts naming
``x1``, ``x2``, … grew every worker's ``/metrics`` without bound. Now a process gives its own
series to the first :data:`~curaflow.observability.metrics.CONFIG_MISMATCH_NAMES_MAX` names of
each kind and counts the rest under
:data:`~curaflow.observability.metrics.CONFIG_MISMATCH_OTHER`.
"""

from __future__ import annotations

import pytest
from prometheus_client import REGISTRY

from curaflow.observability import metrics
from curaflow.observability.metrics import CONFIG_MISMATCH_LAST, CONFIG_MISMATCHES
from tests.support import short_id


@pytest.fixture
def fresh_names(monkeypatch: pytest.MonkeyPatch) -> None:
    """This test's names do not take the process's slots (other tests of the process count theirs)."""
    monkeypatch.setattr(metrics, "_MISMATCH_NAMES", metrics.MismatchNames())


def names_of(kind: str, prefix: str) -> set[str]:
    """The ``name`` values of ``kind`` both families export that start with ``prefix``."""
    return {
        sample.labels["name"]
        for family in (CONFIG_MISMATCHES, CONFIG_MISMATCH_LAST)
        for metric in family.collect()
        for sample in metric.samples
        if sample.labels["kind"] == kind and sample.labels["name"].startswith(prefix)
    }


def count(kind: str, name: str) -> float:
    return REGISTRY.get_sample_value("curaflow_config_mismatch_total", {"kind": kind, "name": name}) or 0.0


@pytest.mark.usefixtures("fresh_names")
def test_made_up_names_beyond_the_bound_share_one_series() -> None:
    prefix = f"forged{short_id()}-"
    bound = metrics.CONFIG_MISMATCH_NAMES_MAX
    other_before = count("route", metrics.CONFIG_MISMATCH_OTHER)
    forged = [f"{prefix}{n}" for n in range(bound + 50)]
    for name in forged:
        metrics.record_config_mismatch("route", name, 1_000.0)
    seen = names_of("route", prefix)
    assert seen == set(forged[:bound])
    assert count("route", metrics.CONFIG_MISMATCH_OTHER) == other_before + 50
    assert (
        REGISTRY.get_sample_value(
            "curaflow_config_mismatch_last_seconds", {"kind": "route", "name": metrics.CONFIG_MISMATCH_OTHER}
        )
        == 1_000.0
    )


@pytest.mark.usefixtures("fresh_names")
def test_a_name_held_keeps_its_series_after_the_bound_is_reached() -> None:
    prefix = f"held{short_id()}-"
    first = f"{prefix}first"
    metrics.record_config_mismatch("source", first, 1.0)
    for n in range(metrics.CONFIG_MISMATCH_NAMES_MAX + 3):
        metrics.record_config_mismatch("source", f"{prefix}{n}", 2.0)
    metrics.record_config_mismatch("source", first, 3.0)
    assert count("source", first) == 2
    assert REGISTRY.get_sample_value("curaflow_config_mismatch_last_seconds", {"kind": "source", "name": first}) == 3.0


@pytest.mark.usefixtures("fresh_names")
def test_each_kind_has_its_own_bound() -> None:
    prefix = f"kinds{short_id()}-"
    for n in range(metrics.CONFIG_MISMATCH_NAMES_MAX):
        metrics.record_config_mismatch("route", f"{prefix}r{n}", 1.0)
    metrics.record_config_mismatch("source", f"{prefix}s", 1.0)
    assert f"{prefix}s" in names_of("source", prefix)


@pytest.mark.usefixtures("fresh_names")
def test_names_cut_to_one_label_take_one_slot() -> None:
    prefix = f"long{short_id()}-"
    stem = prefix + "x" * metrics.CONFIG_MISMATCH_NAME_MAX
    for n in range(metrics.CONFIG_MISMATCH_NAMES_MAX + 5):
        metrics.record_config_mismatch("route", f"{stem}{n}", 1.0)
    assert names_of("route", prefix) == {stem[: metrics.CONFIG_MISMATCH_NAME_MAX]}
