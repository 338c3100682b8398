"""Where and how every curaflow process connects to Temporal: the SDK's environment configuration.

Every Temporal application reads its connection the same way (``temporalio.envconfig``):
a profile of a ``temporal.toml`` file (``TEMPORAL_CONFIG_FILE``, else the SDK's default
location ``~/.config/temporalio/temporal.toml``; profile ``TEMPORAL_PROFILE``, else
``default``) overridden by the ``TEMPORAL_*`` environment variables (``TEMPORAL_ADDRESS``,
``TEMPORAL_NAMESPACE``, ``TEMPORAL_API_KEY``, ``TEMPORAL_TLS``,
``TEMPORAL_TLS_SERVER_CA_CERT_PATH``/``_DATA``, ``TEMPORAL_TLS_CLIENT_CERT_PATH``/``_DATA``,
``TEMPORAL_TLS_CLIENT_KEY_PATH``/``_DATA``, ``TEMPORAL_TLS_SERVER_NAME``,
``TEMPORAL_GRPC_META_*``). Workers, the API, the CLI and ``curaflow temporal-setup`` all
resolve it here, once, when their settings load.

Precedence of each value, highest first:

1. the ``TEMPORAL_*`` environment variables;
2. curaflow's own keys ``temporal.address`` and ``temporal.namespace`` (its TOML file or
   ``CURAFLOW_TEMPORAL__*``), kept from before the profiles;
3. the ``temporal.toml`` profile (file ``temporal.config_file`` and profile
   ``temporal.profile`` when the environment names none);
4. defaults: no address (the embedded dev server), namespace ``default``, no TLS.

TLS is on when the resolved profile has a ``tls`` table, a ``TEMPORAL_TLS_*`` variable,
``TEMPORAL_TLS=true`` or an API key (as the SDK decides); ``TEMPORAL_TLS=false`` turns it
off. Certificate and key files are read when the settings load, so a missing file is a
configuration error, not a failure at the first connection.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from temporalio.envconfig import ClientConfigProfile, ClientConfigTLS
from temporalio.service import TLSConfig


@dataclass(frozen=True)
class TemporalConnection:
    """The resolved connection options of a process's Temporal clients.

    Attributes:
        address: ``host:port`` of the frontend, or None (the embedded dev server).
        namespace: the namespace.
        tls: False (plain), or the TLS options (server CA, client certificate and key
            as PEM bytes, SNI name).
        api_key: sent as ``Authorization: Bearer``; never logged.
        rpc_metadata: extra gRPC headers of every call (``TEMPORAL_GRPC_META_*``).
        profile: the ``temporal.toml`` profile read, or None when no file was found.
    """

    address: str | None = None
    namespace: str = "default"
    tls: bool | TLSConfig = False
    api_key: str | None = field(default=None, repr=False)
    rpc_metadata: Mapping[str, str] = field(default_factory=dict)
    profile: str | None = None

    def connect_kwargs(self) -> dict[str, Any]:
        """Keyword arguments of :meth:`temporalio.client.Client.connect` besides the address."""
        kwargs: dict[str, Any] = {"namespace": self.namespace, "tls": self.tls}
        if self.api_key:
            kwargs["api_key"] = self.api_key
        if self.rpc_metadata:
            kwargs["rpc_metadata"] = dict(self.rpc_metadata)
        return kwargs

    def describe(self) -> str:
        """``tls=on mtls=off api_key=off``: what a log line or an error may say (no secret)."""
        mtls = isinstance(self.tls, TLSConfig) and self.tls.client_cert is not None
        return (
            f"tls={'on' if self.tls else 'off'} mtls={'on' if mtls else 'off'} "
            f"api_key={'on' if self.api_key else 'off'}"
        )


def _merge_tls(low: ClientConfigTLS | None, high: ClientConfigTLS | None) -> ClientConfigTLS | None:
    """``high``'s values over ``low``'s, field by field (the environment over the file)."""
    if low is None or high is None:
        return high or low
    updates = {k: v for k, v in vars(high).items() if v is not None}
    return replace(low, **updates)


def resolve_connection(
    address: str | None,
    namespace: str | None,
    *,
    profile: str | None = None,
    config_file: Path | None = None,
    environ: Mapping[str, str] | None = None,
) -> TemporalConnection:
    """Resolve the Temporal connection (see the module doc for the precedence).

    Args:
        address: curaflow's ``temporal.address`` (already including ``TEMPORAL_ADDRESS``),
            or None.
        namespace: curaflow's ``temporal.namespace`` when it was configured, else None.
        profile: the ``temporal.toml`` profile when ``TEMPORAL_PROFILE`` is not set.
        config_file: the ``temporal.toml`` file when ``TEMPORAL_CONFIG_FILE`` is not set.
        environ: the environment (the process's when None).

    Returns:
        The connection options.

    Raises:
        ValueError: a named file or profile does not exist, a certificate or key cannot
            be read, or the profile is invalid; the message says which.
    """
    env = dict(os.environ if environ is None else environ)
    name = env.get("TEMPORAL_PROFILE") or profile
    file = env.get("TEMPORAL_CONFIG_FILE") or (str(config_file) if config_file else None)
    if file and not Path(file).expanduser().is_file():
        raise ValueError(f"Temporal client config file not found: {file}")
    source = Path(file).expanduser() if file else None
    try:
        from_file = ClientConfigProfile.load(name, config_source=source, disable_env=True, override_env_vars=env)
    except RuntimeError as err:  # the SDK bridge's ConfigError (a RuntimeError): no such profile, bad TOML
        if name is None and "not found" in str(err).lower():
            from_file = ClientConfigProfile()  # no default profile in the file: nothing from it
        else:
            raise ValueError(f"Temporal client profile {name or 'default'!r}: {err}") from None
    try:
        from_env = ClientConfigProfile.load(name, disable_file=True, override_env_vars=env)
    except RuntimeError as err:
        raise ValueError(f"Temporal client environment (TEMPORAL_*): {err}") from None
    merged = ClientConfigProfile(
        address=from_env.address or address or from_file.address,
        namespace=from_env.namespace or namespace or from_file.namespace or "default",
        api_key=from_env.api_key or from_file.api_key,
        tls=_merge_tls(from_file.tls, from_env.tls),
        grpc_meta={**from_file.grpc_meta, **from_env.grpc_meta},
    )
    try:
        options = merged.to_client_connect_config()
    except OSError as err:
        raise ValueError(f"Temporal TLS: cannot read {err.filename}: {err.strerror}") from None
    return TemporalConnection(
        address=merged.address,
        namespace=merged.namespace or "default",
        tls=options.get("tls", False),
        api_key=options.get("api_key"),
        rpc_metadata=options.get("rpc_metadata") or {},
        profile=(name or "default") if (source is not None or from_file != ClientConfigProfile()) else None,
    )
