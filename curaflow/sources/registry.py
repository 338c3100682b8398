"""Source kinds by name: their config model and how to build them (mirrors :func:`~curaflow.routes.build_route`).

A source kind is registered once, at import of its module, with
:func:`register_source` — its ``kind`` word, its config model (a
:class:`~curaflow.sources.base.SourceConfig` subclass) and a factory. The built-in
kinds are the modules of :data:`BUILTIN_MODULES` (imported on the first lookup);
further modules are named by the ``source_modules`` setting and imported when the
settings load, before ``[sources]`` is validated (a test-only source registers itself
that way: ``tests/fakes/catalog_source.py``).

:func:`build_source` turns one configured instance into a
:class:`~curaflow.sources.base.Source`; :func:`parse_source_config` validates one
``[sources.<name>]`` table with the model registered for its ``kind``.
"""

from __future__ import annotations

import asyncio
import importlib
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from curaflow.sources.base import Source, SourceConfig

if TYPE_CHECKING:
    from curaflow.outbound.settings import OutboundSettings
    from curaflow.sources.gate import Gate
    from curaflow.sources.tokens import TokenStore

#: Modules that register the built-in source kinds.
BUILTIN_MODULES = ("curaflow.sources.pixiv.source",)

T = TypeVar("T")


class UnsupportedSource(Exception):
    """The configured source kind (or instance name) has no implementation in this build."""


#: ``gates(name, min_interval_ms=…, base_ms=…, cap_ms=…, decay_after=…, pause_ms=…, concurrency=…)`` → the
#: rate gate of instance ``name`` (the keyword arguments a factory leaves out keep the gate's defaults).
GateFactory = Callable[..., "Gate"]


@dataclass
class SourceContext:
    """What a source factory gets from the worker process — only what a source needs, never
    the whole settings (the settings root sits above the sources: DESIGN.md "Layers") — and a
    place for clients shared by every instance of a kind.

    Attributes:
        outbound: the ``[outbound]`` limits and private networks.
        gates: makes an instance's rate gate; the worker passes the ledger's
            (:class:`curaflow.ledger.gates.LedgerGate`, keyed by the instance's source task
            queue, so spacing and cooldown hold across processes).
        replay_url: the base URL of a replay server this process started (Pixiv's
            replay mode), else None.
        tokens: makes an instance's store of rotated refresh tokens (the worker passes
            the ledger's, :class:`curaflow.ledger.source_tokens.LedgerTokenStore`, keyed
            as the gate is); None: a rotated token is kept in memory only (tools, tests).
    """

    outbound: OutboundSettings
    gates: GateFactory
    replay_url: str | None = None
    tokens: Callable[[str], TokenStore] | None = None
    _shared: dict[str, Any] = field(default_factory=dict)
    _closers: list[Callable[[], Awaitable[None]]] = field(default_factory=list)

    def shared(self, key: str, make: Callable[[], T], close: Callable[[T], Awaitable[None]] | None = None) -> T:
        """The object ``key`` of this process, made by ``make`` on first use; ``close``
        is awaited with it by :meth:`aclose`."""
        if key not in self._shared:
            value = make()
            self._shared[key] = value
            if close is not None:
                self._closers.append(lambda: close(value))
        return self._shared[key]  # type: ignore[no-any-return]

    def gate(
        self,
        name: str,
        *,
        min_interval_ms: int,
        base_ms: int | None = None,
        cap_ms: int | None = None,
        decay_after: int | None = None,
        pause_ms: int | None = None,
        concurrency: int | None = None,
    ) -> Gate:
        """The rate gate of instance ``name`` (:attr:`gates`); an argument left None keeps
        the gate's default (``concurrency``: 1). ``concurrency`` is the instance's source
        activities at once (:attr:`curaflow.sources.base.SourcePolicy.concurrency`): the ledger's gate bounds the
        next slot it reads by the queue they can form
        (:func:`curaflow.ledger.gates.reserve`)."""
        given = (
            ("base_ms", base_ms),
            ("cap_ms", cap_ms),
            ("decay_after", decay_after),
            ("pause_ms", pause_ms),
            ("concurrency", concurrency),
        )
        extra = {k: v for k, v in given if v is not None}
        return self.gates(name, min_interval_ms=min_interval_ms, **extra)

    def token_store(self, name: str) -> TokenStore | None:
        """The store of instance ``name``'s rotated refresh token (:attr:`tokens`), or None."""
        return self.tokens(name) if self.tokens is not None else None

    async def aclose(self) -> None:
        """Close what :meth:`shared` made (in reverse order)."""
        for close in reversed(self._closers):
            await close()
        self._closers.clear()
        self._shared.clear()
        await asyncio.sleep(0)


#: ``factory(name, config, context)`` → the instance.
SourceFactory = Callable[[str, Any, SourceContext], Source]


@dataclass(frozen=True)
class SourceKind:
    """One registered kind.

    Attributes:
        kind: the ``kind`` word of its configuration.
        config: its config model.
        build: its factory.
        configurable: may be written as ``[sources.<name>]`` (Pixiv's instances come
            from ``[pixiv]`` instead).
    """

    kind: str
    config: type[SourceConfig]
    build: SourceFactory
    configurable: bool = True


_KINDS: dict[str, SourceKind] = {}
_loaded = False


def register_source(kind: str, config: type[SourceConfig], build: SourceFactory, *, configurable: bool = True) -> None:
    """Register the source kind ``kind`` (idempotent for the same kind and model).

    Raises:
        ValueError: another model is already registered under ``kind``.
    """
    known = _KINDS.get(kind)
    if known is not None and _model_name(known.config) != _model_name(config):
        raise ValueError(f"source kind {kind!r} is already registered ({_model_name(known.config)})")
    _KINDS[kind] = SourceKind(kind, config, build, configurable)


def _model_name(config: type[SourceConfig]) -> str:
    return f"{config.__module__}.{config.__qualname__}"


def _load_builtin() -> None:
    global _loaded
    if not _loaded:
        _loaded = True
        for module in BUILTIN_MODULES:
            importlib.import_module(module)


def import_source_modules(modules: Iterable[str]) -> None:
    """Import the modules that register further source kinds (the ``source_modules`` setting).

    Raises:
        ImportError: a module cannot be imported.
        ValueError: a module registers a kind already registered (a built-in one too:
            they are registered first, so a module cannot take their word).
    """
    _load_builtin()
    for module in modules:
        importlib.import_module(module)


def kinds() -> dict[str, SourceKind]:
    """Every registered kind by its word."""
    _load_builtin()
    return dict(_KINDS)


def source_kind(kind: str) -> SourceKind:
    """The registered kind ``kind``.

    Raises:
        UnsupportedSource: no such kind is registered.
    """
    _load_builtin()
    if kind not in _KINDS:
        raise UnsupportedSource(f"source kind {kind!r} is not registered (known: {sorted(_KINDS)})")
    return _KINDS[kind]


def parse_source_config(value: Any) -> SourceConfig:
    """Validate one ``[sources.<name>]`` table with the model of its ``kind``.

    Raises:
        ValueError: no ``kind``, an unknown or unconfigurable kind, or a field the
            kind's model refuses (pydantic's ``ValidationError`` is a ``ValueError``).
    """
    if isinstance(value, SourceConfig):
        return value
    if not isinstance(value, dict) or not isinstance(value.get("kind"), str):
        raise ValueError("a source needs a kind")
    try:
        found = source_kind(value["kind"])
    except UnsupportedSource as err:
        raise ValueError(str(err)) from None
    if not found.configurable:
        raise ValueError(f"source kind {found.kind!r} is configured in its own section, not under [sources]")
    return found.config.model_validate(value)


def build_source(name: str, config: SourceConfig, context: SourceContext) -> Source:
    """Instantiate the source instance ``name`` from its configuration.

    Raises:
        UnsupportedSource: for a kind this build cannot search.
    """
    return source_kind(config.kind).build(name, config, context)
