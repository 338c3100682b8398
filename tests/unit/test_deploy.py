"""The production stack, tested by configuration (there is no Docker engine on these machines).

CI also runs ``docker compose config`` when the compose plugin is installed (.ci/run).
"""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from curaflow.config import load_settings
from curaflow.temporal import SEARCH_ATTRIBUTES

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
SERVICES = COMPOSE["services"]


def test_services_of_the_production_shape() -> None:
    assert set(SERVICES) >= {"temporal-db", "temporal", "temporal-ui", "curaflow-db", "api", "worker"}
    assert SERVICES["temporal"]["image"].startswith("temporalio/auto-setup")
    assert SERVICES["temporal"]["environment"]["DB"] == "postgres12"
    assert SERVICES["temporal-ui"]["image"].startswith("temporalio/ui")


def test_every_long_running_service_has_a_health_check() -> None:
    for name, svc in SERVICES.items():
        if svc.get("restart") == "no":
            continue
        if name == "temporal-ui":
            continue  # the UI image has no shell tools; nothing depends on it
        assert "healthcheck" in svc, name


def test_workers_scale() -> None:
    worker = SERVICES["worker"]
    assert "container_name" not in worker and "ports" not in worker  # `--scale worker=N` works
    assert worker["command"] == ["python", "worker.py"]
    assert worker["environment"]["CURAFLOW_OBSERVABILITY__METRICS_PORT"] == "9090"


def test_named_volumes_and_a_shared_artifact_store() -> None:
    assert set(COMPOSE["volumes"]) == {"temporal-db", "curaflow-db", "curaflow-artifacts"}
    for name in ("api", "worker"):
        assert "curaflow-artifacts:/var/lib/curaflow" in SERVICES[name]["volumes"]


def test_secrets_come_from_the_env_file_only() -> None:
    text = (ROOT / "docker-compose.yml").read_text()
    for key in ("CURAFLOW_API_TOKEN", "PIXIV_REFRESH_TOKEN", "CURAFLOW_DB_PASSWORD", "TEMPORAL_DB_PASSWORD"):
        for line in text.splitlines():
            if f"{key}:" in line and not line.strip().startswith("#"):
                assert "${" in line, line
    example = (ROOT / "deploy" / "curaflow.env.example").read_text()
    needed = set(re.findall(r"\$\{([A-Z_]+):\?", text))
    assert needed <= set(re.findall(r"^([A-Z_]+)=", example, re.M))


def test_custom_search_attributes_are_registered() -> None:
    command = " ".join(SERVICES["temporal-search-attributes"]["command"])
    for name in SEARCH_ATTRIBUTES:
        assert f"{name}:" in command


def test_the_stacks_config_file_is_valid() -> None:
    settings = load_settings(ROOT / "deploy" / "curaflow.toml")
    assert settings.schedules and settings.schedules[0].id == "nightly"
