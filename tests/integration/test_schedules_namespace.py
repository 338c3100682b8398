"""``curaflow schedules`` works only in a namespace curaflow's workers serve.

Every curaflow worker registers curaflow's search attributes in its namespace at start
(and ``curaflow temporal-setup`` does). A namespace without them never ran a curaflow
worker: ``TEMPORAL_NAMESPACE`` mistyped, or the cluster's ``default`` while the workers
run in ``curaflow``. Until 2026-12-05 ``schedules list`` there answered "no schedules"
(exit 0), ``sync --dry-run`` would create the plans' schedules (exit 0) and ``sync`` failed
on Temporal's "no mapping defined for search attribute ScheduleId". Now each says which
namespace and why (and how to prepare it), and exits 1 before it lists or changes anything.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
import tomli_w
from temporalio.client import Client

from tests.integration.test_cli_operator import clean_env, curaflow
from tests.integration.test_schedules import plan_config
from tests.integration.test_upgrade_check_namespace import other_namespace
from tests.support import short_id

pytestmark = [pytest.mark.integration]


@pytest.mark.parametrize("verb", [["list"], ["sync", "--dry-run"], ["sync"]])
async def test_schedules_in_a_namespace_curaflow_never_ran_in_say_so(
    temporal_client: Client, temporal_address: str, tmp_path: Path, verb: list[str]
) -> None:
    name = await other_namespace(temporal_client, with_search_attributes=False)
    config = tmp_path / "curaflow.toml"
    config.write_text(tomli_w.dumps(plan_config(tmp_path, f"plan-{short_id()}")))
    env = clean_env(TEMPORAL_ADDRESS=temporal_address, TEMPORAL_NAMESPACE=name, CURAFLOW_CONFIG=str(config))

    result = await asyncio.to_thread(curaflow, "schedules", *verb, cwd=tmp_path, env=env)

    assert result.returncode == 1, result.stdout + result.stderr
    assert name in result.stderr and "search attributes" in result.stderr, result.stderr
    assert "temporal-setup" in result.stderr
    other = await Client.connect(temporal_address, namespace=name)
    assert not [s async for s in await other.list_schedules()]  # nothing created there


async def test_schedules_in_the_jobs_namespace_still_answer(temporal_address: str, tmp_path: Path) -> None:
    # The session's namespace, where the suite's workers registered the attributes.
    result = await asyncio.to_thread(
        curaflow, "schedules", "list", cwd=tmp_path, env=clean_env(TEMPORAL_ADDRESS=temporal_address)
    )
    assert result.returncode == 0, result.stdout + result.stderr
