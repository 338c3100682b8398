"""``temporal.deployment_name`` / ``temporal.build_id``: Worker Versioning or none."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError
from temporalio.common import VersioningBehavior

from curaflow.config import Settings, load_settings
from curaflow.process.worker import deployment_config


def test_workers_are_unversioned_by_default() -> None:
    assert deployment_config(Settings()) is None


def test_a_deployment_and_build_make_pinned_versioned_workers() -> None:
    config = deployment_config(Settings.model_validate({"temporal": {"deployment_name": "curaflow", "build_id": "b7"}}))
    assert config is not None and config.use_worker_versioning
    assert (config.version.deployment_name, config.version.build_id) == ("curaflow", "b7")
    assert config.default_versioning_behavior == VersioningBehavior.PINNED


@pytest.mark.parametrize("half", [{"deployment_name": "curaflow"}, {"build_id": "b7"}])
def test_half_a_version_is_refused(half: dict[str, str]) -> None:
    with pytest.raises(ValidationError, match="go together"):
        Settings.model_validate({"temporal": half})


def test_the_version_from_the_environment_equals_the_version_from_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "curaflow.toml"
    path.write_text('[temporal]\ndeployment_name = "curaflow"\nbuild_id = "b7"\n')
    from_file = load_settings(path).temporal
    monkeypatch.setenv("CURAFLOW_TEMPORAL__DEPLOYMENT_NAME", "curaflow")
    monkeypatch.setenv("CURAFLOW_TEMPORAL__BUILD_ID", "b7")
    from_env = load_settings(None).temporal
    assert (from_env.deployment_name, from_env.build_id) == (from_file.deployment_name, from_file.build_id)
    assert from_env.build_id == "b7"
