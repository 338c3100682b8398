"""The ``temporal.retention_differs`` warning says a fix that works where it is printed."""

from __future__ import annotations

from datetime import timedelta
from types import SimpleNamespace
from typing import Any

import pytest

from curaflow.config import Settings
from curaflow.devstack import stack as devstack
from curaflow.temporal import connection, namespace
from curaflow.temporal.namespace import SetupReport


@pytest.fixture
def dev_server_namespace(monkeypatch: pytest.MonkeyPatch) -> list[SetupReport]:
    """A namespace that exists keeping closed executions 1 day (the dev server's), on a
    client of address 127.0.0.1:40123; the reports of every ``prepare_namespace``."""

    async def described(client: Any, retention: timedelta, deadline: float) -> tuple[bool, timedelta]:
        return False, timedelta(days=1)

    async def attributes(client: Any, deadline: float) -> tuple[list[str], dict[str, str]]:
        return [], {}

    async def connected(address: str, name: str, **kwargs: Any) -> Any:
        config = SimpleNamespace(target_host=address)
        return SimpleNamespace(namespace=name, service_client=SimpleNamespace(config=config))

    reports: list[SetupReport] = []
    prepare = namespace.prepare_namespace

    async def prepared(*args: Any, **kwargs: Any) -> SetupReport:
        reports.append(await prepare(*args, **{**kwargs, "nexus_endpoint": None}))
        return reports[-1]

    monkeypatch.setattr(namespace, "describe_or_register", described)
    monkeypatch.setattr(namespace, "ensure_search_attributes", attributes)
    monkeypatch.setattr(namespace, "prepare_namespace", prepared)
    monkeypatch.setattr(connection, "connect", connected)
    return reports


async def test_the_embedded_stacks_warning_says_the_setting_not_a_command_to_a_stopped_server(
    dev_server_namespace: list[SetupReport],
) -> None:
    """``curaflow run`` printed ``temporal operator namespace update --address
    127.0.0.1:<port> …`` for the dev server of its own stack, stopped when the command
    ends (a newcomer's finding): a command that cannot work as printed. On the embedded
    dev server the warning says the setting that silences it (the README's)."""
    settings = Settings().model_copy(
        update={"temporal": Settings().temporal.model_copy(update={"address": "127.0.0.1:40123"})}
    )
    await devstack.prepare_dev_server(settings)
    [report] = dev_server_namespace
    [warning] = report.warnings
    assert "temporal operator" not in warning and "40123" not in warning
    assert "temporal.namespace_retention_days" in warning
    assert "CURAFLOW_TEMPORAL__NAMESPACE_RETENTION_DAYS=1" in warning


async def test_a_server_curaflow_does_not_own_is_told_the_command_on_its_address(
    dev_server_namespace: list[SetupReport],
) -> None:
    """A worker's or ``temporal-setup``'s server outlives the command: its fix stays the
    ``temporal operator`` command on the configured address, or the setting."""
    client: Any = await connection.connect("temporal.example:7233", "prod")
    report = await namespace.prepare_namespace(client, retention=timedelta(days=7), timeout_s=1)
    [warning] = report.warnings
    assert (
        "temporal operator namespace update --address temporal.example:7233 --namespace prod --retention 168h"
        in warning
    )
    assert "configure 1 day" in warning


async def test_the_embedded_stacks_workers_say_the_setting_as_the_stack_does(
    dev_server_namespace: list[SetupReport], monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    """The workers ``curaflow dev`` and ``curaflow run`` start logged, at each start, the
    ``temporal operator namespace update --address 127.0.0.1:<port>`` command for the
    stack's own dev server (they did not know the server was the stack's), while the stack
    itself said the setting: two advices for one warning. A worker of the stack says the
    stack's; a worker whose Temporal is another server keeps the command."""
    from curaflow.process import worker

    settings = Settings().model_copy(
        update={
            "temporal": Settings().temporal.model_copy(update={"address": "127.0.0.1:40123"}),
            "database": Settings().database.model_copy(update={"url": "postgresql://u@127.0.0.1:1/db"}),
            "state_dir": tmp_path,
        }
    )
    env = devstack.EmbeddedStack(settings).worker_env()
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    client: Any = await connection.connect("127.0.0.1:40123", "default")
    [warning] = (await worker.prepare_worker_namespace(client, settings)).warnings
    assert "temporal operator" not in warning and "40123" not in warning
    assert "CURAFLOW_TEMPORAL__NAMESPACE_RETENTION_DAYS=1" in warning

    elsewhere = settings.model_copy(
        update={"temporal": settings.temporal.model_copy(update={"address": "temporal.example:7233"})}
    )
    client = await connection.connect("temporal.example:7233", "default")
    [warning] = (await worker.prepare_worker_namespace(client, elsewhere)).warnings
    assert "temporal operator namespace update --address temporal.example:7233" in warning
