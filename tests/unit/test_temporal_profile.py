"""How a process resolves its Temporal connection (:mod:`curaflow.temporal.profile`).

The SDK's environment configuration: ``TEMPORAL_*`` variables over curaflow's
``temporal.address``/``temporal.namespace`` over a ``temporal.toml`` profile.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from temporalio.service import TLSConfig

from curaflow.config import ConfigError, load_settings
from curaflow.temporal.profile import resolve_connection


@pytest.fixture
def profile_file(tmp_path: Path) -> Path:
    ca = tmp_path / "ca.pem"
    ca.write_text("-----BEGIN CERTIFICATE-----\nnot checked here\n-----END CERTIFICATE-----\n")
    path = tmp_path / "temporal.toml"
    path.write_text(
        '[profile.default]\naddress = "file-default:7233"\nnamespace = "from-file"\n'
        '[profile.cloud]\naddress = "ns.acct.tmprl.cloud:7233"\nnamespace = "ns.acct"\napi_key = "file-key"\n'
        f'[profile.secure]\naddress = "secure:7233"\n[profile.secure.tls]\nserver_ca_cert_path = "{ca}"\n'
        'server_name = "temporal.internal"\n'
    )
    return path


def test_nothing_configured_is_plain_and_has_no_address() -> None:
    connection = resolve_connection(None, None, environ={})
    assert (connection.address, connection.namespace, connection.tls, connection.api_key) == (
        None,
        "default",
        False,
        None,
    )


def test_a_profile_gives_address_namespace_and_api_key_with_tls(profile_file: Path) -> None:
    connection = resolve_connection(
        None, None, environ={"TEMPORAL_CONFIG_FILE": str(profile_file), "TEMPORAL_PROFILE": "cloud"}
    )
    assert (connection.address, connection.namespace, connection.api_key) == (
        "ns.acct.tmprl.cloud:7233",
        "ns.acct",
        "file-key",
    )
    assert connection.tls is True  # an API key turns TLS on (system roots), as the SDK decides
    assert connection.describe() == "tls=on mtls=off api_key=on"
    assert "file-key" not in repr(connection)


def test_curaflow_keys_win_over_the_profile_and_the_environment_over_both(profile_file: Path) -> None:
    env = {"TEMPORAL_CONFIG_FILE": str(profile_file)}
    assert resolve_connection("mine:1", "ours", environ=env).address == "mine:1"
    assert resolve_connection("mine:1", "ours", environ=env).namespace == "ours"
    assert resolve_connection(None, None, environ=env).namespace == "from-file"
    env |= {"TEMPORAL_NAMESPACE": "env-ns", "TEMPORAL_API_KEY": "env-key"}
    connection = resolve_connection("mine:1", "ours", environ=env)
    assert (connection.namespace, connection.api_key) == ("env-ns", "env-key")


def test_tls_fields_merge_and_can_be_turned_off(profile_file: Path) -> None:
    env = {"TEMPORAL_CONFIG_FILE": str(profile_file), "TEMPORAL_PROFILE": "secure"}
    connection = resolve_connection(None, None, environ=env)
    assert isinstance(connection.tls, TLSConfig)
    assert connection.tls.domain == "temporal.internal"
    assert connection.tls.server_root_ca_cert and b"not checked here" in connection.tls.server_root_ca_cert
    overridden = resolve_connection(None, None, environ=env | {"TEMPORAL_TLS_SERVER_NAME": "other"})
    assert isinstance(overridden.tls, TLSConfig) and overridden.tls.domain == "other"
    assert overridden.tls.server_root_ca_cert == connection.tls.server_root_ca_cert  # kept from the file
    assert resolve_connection(None, None, environ=env | {"TEMPORAL_TLS": "false"}).tls is False


def test_the_profile_file_and_profile_come_from_curaflow_keys_too(profile_file: Path) -> None:
    connection = resolve_connection(None, None, profile="cloud", config_file=profile_file, environ={})
    assert connection.address == "ns.acct.tmprl.cloud:7233"
    assert connection.profile == "cloud"


@pytest.mark.parametrize(
    ("env", "match"),
    [
        ({"TEMPORAL_CONFIG_FILE": "/nonexistent/temporal.toml"}, "config file not found"),
        ({"TEMPORAL_TLS_CLIENT_CERT_PATH": "/nonexistent/client.pem"}, "cannot read /nonexistent/client.pem"),
    ],
)
def test_a_missing_file_is_a_configuration_error(env: dict[str, str], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        resolve_connection("a:1", None, environ=env)


def test_a_named_profile_that_does_not_exist_is_refused(profile_file: Path) -> None:
    with pytest.raises(ValueError, match="'nope'"):
        resolve_connection(None, None, environ={"TEMPORAL_CONFIG_FILE": str(profile_file), "TEMPORAL_PROFILE": "nope"})


def test_settings_hold_the_resolved_connection(
    profile_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("TEMPORAL_ADDRESS", "TEMPORAL_NAMESPACE", "TEMPORAL_PROFILE", "TEMPORAL_CONFIG_FILE", "DATABASE_URL"):
        monkeypatch.delenv(name, raising=False)
    config = tmp_path / "curaflow.toml"
    config.write_text(f'[temporal]\nprofile = "cloud"\nconfig_file = "{profile_file}"\n')
    settings = load_settings(config)
    assert (settings.temporal.address, settings.temporal.namespace) == ("ns.acct.tmprl.cloud:7233", "ns.acct")
    assert settings.temporal.connection.api_key == "file-key"
    assert not settings.embedded  # a profile's address is a configured Temporal
    config.write_text('[temporal]\nconfig_file = "/nonexistent/temporal.toml"\n')
    with pytest.raises(ConfigError, match="temporal: Value error, Temporal client config file not found"):
        load_settings(config)
