"""TLS, mutual TLS and the SDK's environment configuration to a secured Temporal.

The session's dev server sits behind a real TLS-terminating gRPC (HTTP/2) proxy with a CA
made for the test (:mod:`tests.tls_proxy`). A real worker process, the API and the
``curaflow temporal-setup`` command reach it the way any Temporal application does: a
``temporal.toml`` profile or the ``TEMPORAL_TLS_*`` variables. A server requiring a client
certificate refuses a client without one, with a message naming the address and the TLS
options.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from curaflow.config import load_settings
from curaflow.temporal.connection import TemporalConnectError, connect_configured
from tests.conftest import StackFactory
from tests.support import short_id, terminal_job
from tests.tls_proxy import CertificateSet, TLSProxy, make_pki
from tests.zygote import curaflow_command

pytestmark = [pytest.mark.integration]


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> CertificateSet:
    return make_pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
def mtls_proxy(temporal_address: str, pki: CertificateSet) -> Iterator[TLSProxy]:
    proxy = TLSProxy(temporal_address, pki, require_client_cert=True).start()
    try:
        yield proxy
    finally:
        proxy.stop()


@pytest.fixture(scope="module")
def tls_proxy(temporal_address: str, pki: CertificateSet) -> Iterator[TLSProxy]:
    proxy = TLSProxy(temporal_address, pki, require_client_cert=False).start()
    try:
        yield proxy
    finally:
        proxy.stop()


def jobs_config(tmp_path: Path) -> dict[str, Any]:
    out = f"out-{short_id()}"
    return {
        "routes": {out: {"kind": "directory", "path": str(tmp_path / "delivered")}},
        "targets": [{"id": "demo", "query": {"tags": ["オリジナル"]}, "routes": [out]}],
    }


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CURAFLOW_", "TEMPORAL_"))}
    env.update(extra)
    return env


async def test_a_worker_and_the_api_run_a_job_through_mutual_tls_from_a_profile(
    make_stack: StackFactory, tmp_path: Path, mtls_proxy: TLSProxy, pki: CertificateSet
) -> None:
    profile = tmp_path / "temporal.toml"
    profile.write_text(
        "[profile.secure]\n"
        f'address = "{mtls_proxy.address}"\n'
        "[profile.secure.tls]\n"
        f'server_ca_cert_path = "{pki.ca_cert}"\n'
        f'client_cert_path = "{pki.client_cert}"\n'
        f'client_key_path = "{pki.client_key}"\n'
    )
    config = jobs_config(tmp_path)
    # curaflow's own address key would win over the profile's: the test stack's default is dropped
    config["temporal"] = {"address": mtls_proxy.address, "profile": "secure", "config_file": str(profile)}
    stack = make_stack(config)
    connection = stack.settings.temporal.connection
    assert connection.describe() == "tls=on mtls=on api_key=off"
    before = mtls_proxy.connections
    await stack.start_worker()  # the worker process: connect, namespace setup, polling, all through mTLS
    http = await stack.start_api()
    answer = await http.post("/jobs", json=stack.task(query={"tags": ["オリジナル"]}))
    assert answer.status_code in (200, 201, 202), answer.text
    job = await terminal_job(http, answer.json()["job"]["job_id"], timeout_s=90)
    assert job["status"] == "succeeded", job
    assert mtls_proxy.connections >= before + 2  # the worker's and the API's clients came through the proxy


async def test_mutual_tls_refuses_a_client_without_a_certificate_with_a_clear_error(
    mtls_proxy: TLSProxy, pki: CertificateSet, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in [k for k in os.environ if k.startswith("TEMPORAL_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("TEMPORAL_ADDRESS", mtls_proxy.address)
    monkeypatch.setenv("TEMPORAL_TLS_SERVER_CA_CERT_PATH", str(pki.ca_cert))
    settings = load_settings(None, state_dir=tmp_path / "state")
    assert settings.temporal.connection.describe() == "tls=on mtls=off api_key=off"
    with pytest.raises(TemporalConnectError) as refused:
        await asyncio.wait_for(connect_configured(settings.temporal), 30)
    message = str(refused.value)
    assert f"cannot reach Temporal at {mtls_proxy.address} (tls=on mtls=off api_key=off)" in message
    # the SDK says only "ConnectionReset": the message says what it most likely means
    assert "probably requires a client certificate (TEMPORAL_TLS_CLIENT_CERT_PATH" in message, message

    # a certificate from another CA is refused too; the CA's own client certificate is accepted
    monkeypatch.setenv("TEMPORAL_TLS_CLIENT_CERT_PATH", str(pki.stranger_cert))
    monkeypatch.setenv("TEMPORAL_TLS_CLIENT_KEY_PATH", str(pki.stranger_key))
    with pytest.raises(TemporalConnectError):
        await asyncio.wait_for(connect_configured(load_settings(None, state_dir=tmp_path / "state").temporal), 30)
    monkeypatch.setenv("TEMPORAL_TLS_CLIENT_CERT_PATH", str(pki.client_cert))
    monkeypatch.setenv("TEMPORAL_TLS_CLIENT_KEY_PATH", str(pki.client_key))
    client = await connect_configured(load_settings(None, state_dir=tmp_path / "state").temporal)
    assert (await client.service_client.check_health()) is True


async def test_a_server_certificate_from_an_unknown_ca_is_refused(
    tls_proxy: TLSProxy, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in [k for k in os.environ if k.startswith("TEMPORAL_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("TEMPORAL_ADDRESS", tls_proxy.address)
    monkeypatch.setenv("TEMPORAL_TLS", "true")  # the system's roots only: the test CA is not one of them
    settings = load_settings(None, state_dir=tmp_path / "state")
    with pytest.raises(TemporalConnectError, match=r"\(tls=on mtls=off api_key=off\)") as refused:
        await asyncio.wait_for(connect_configured(settings.temporal), 30)
    assert "not signed by a CA this client trusts (TEMPORAL_TLS_SERVER_CA_CERT_PATH" in str(refused.value)


def test_the_setup_command_prepares_a_namespace_through_tls_from_the_environment(
    tls_proxy: TLSProxy, pki: CertificateSet, mtls_proxy: TLSProxy, tmp_path: Path
) -> None:
    namespace = f"curaflow-{short_id()}"
    env = clean_env(
        TEMPORAL_ADDRESS=tls_proxy.address,
        TEMPORAL_NAMESPACE=namespace,
        TEMPORAL_TLS_SERVER_CA_CERT_PATH=str(pki.ca_cert),
    )
    run = curaflow_command(["temporal-setup"], env=env, cwd=tmp_path, timeout=120)
    assert run.returncode == 0, run.stderr
    assert f"namespace {namespace}: registered" in run.stdout

    # against the mTLS endpoint without a client certificate: exit 1 with the reason
    env["TEMPORAL_ADDRESS"] = mtls_proxy.address
    run = curaflow_command(["temporal-setup", "--timeout", "2"], env=env, cwd=tmp_path, timeout=120)
    assert run.returncode == 1, run.stdout + run.stderr
    assert f"cannot reach Temporal at {mtls_proxy.address} (tls=on mtls=off" in " ".join(run.stderr.split())
