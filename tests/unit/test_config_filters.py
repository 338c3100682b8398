"""A target's filter no work can pass is refused at load.

``filters.max_page_count = 0`` loaded (until 2026-12-07): a work has at least one page, so
every candidate was ``filtered:page_count`` and every job of the target found nothing, for
ever. A filter's bound that excludes every work is refused naming the target, the setting
and its value; the bounds that only narrow stay (``max_page_count = 1``: single pages).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from curaflow.config import ConfigError, load_settings
from curaflow.domain.messages import TargetFilters, TargetSpec
from curaflow.domain.models import Work
from curaflow.sources.filters import reject_reason

pytestmark = pytest.mark.usefixtures("config_environment_cleared")


def write(tmp_path: Path, filters: str) -> Path:
    config = tmp_path / "curaflow.toml"
    config.write_text(
        '[[targets]]\nid = "ok"\nroutes = ["out"]\n'
        f'[[targets]]\nid = "narrow"\nroutes = ["out"]\nfilters = {{ {filters} }}\n'
    )
    return config


@pytest.mark.parametrize("value", [0, -1, -1000])
def test_a_page_count_no_work_has_is_refused_naming_the_target(tmp_path: Path, value: int) -> None:
    config = write(tmp_path, f"max_page_count = {value}")
    with pytest.raises(ConfigError) as err:
        load_settings(config)
    message = str(err.value)
    assert f"targets[1].filters.max_page_count ({value}) of target 'narrow' is below 1" in message, message
    assert "finds nothing" in message and f"(in {config})" in message, message


def test_the_refused_bound_is_one_no_work_passes_and_the_least_kept_one_is_passed() -> None:
    """The rule's source: the filter itself (every work has at least one page)."""
    work = Work(work_id="1", work_type="illustration", page_count=1, total_bookmarks=0)
    for bound, passes in ((0, False), (1, True)):
        target = TargetSpec(target_id="t", filters=TargetFilters(max_page_count=bound))
        assert (reject_reason(work, target, set()) is None) is passes


def test_a_bound_that_only_narrows_loads(tmp_path: Path) -> None:
    settings = load_settings(write(tmp_path, "max_page_count = 1, min_bookmarks = 0"))
    assert settings.targets[1].filters.max_page_count == 1
