"""Validation across sections: the rules no single section can check on its own (names that
must be unique or well-formed, targets and schedules naming what exists, no example secret)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Protocol

from curaflow.config.base import ID_PATTERN
from curaflow.config.schedules import ScheduleConfig
from curaflow.config.targets import TargetConfig

#: How every secret of the env example begins (``deploy/curaflow.env.example``): a process
#: refuses to start with one, so a copied example never runs as a production secret.
EXAMPLE_SECRET_PREFIX = "change-me"


class ConfiguredNames(Protocol):
    """What :func:`check_references` reads (a :class:`curaflow.config.Settings`)."""

    @property
    def targets(self) -> list[TargetConfig]: ...

    @property
    def schedules(self) -> list[ScheduleConfig]: ...

    @property
    def routes(self) -> Mapping[str, object]: ...

    @property
    def sources(self) -> Mapping[str, object]: ...

    def accounts(self) -> Mapping[str, object]: ...

    def source_configs(self) -> Mapping[str, object]: ...


def refuse_example_secrets(secrets: Iterable[tuple[str, str]]) -> None:
    """Refuse settings that still hold a secret of the env example.

    Args:
        secrets: ``(dotted name, value)`` of every secret that is set
            (:meth:`curaflow.config.Settings.secrets`).

    Raises:
        ValueError: naming every such secret.
    """
    found = [name for name, value in secrets if value.strip().lower().startswith(EXAMPLE_SECRET_PREFIX)]
    if found:
        raise ValueError(
            f"{', '.join(found)} still hold the example value '{EXAMPLE_SECRET_PREFIX}…' of the env example: "
            "set real secrets (in the env file, the environment or CURAFLOW_SECRETS_DIR)"
        )


def check_references(settings: ConfiguredNames) -> None:
    """Check the names across sections, in this order: target ids unique; each
    ``[sources]`` name well-formed and not a Pixiv account's; each target's ``account``
    configured, its routes present, distinct and configured; each schedule's targets
    configured; each route name well-formed.

    Raises:
        ValueError: the first rule broken, naming the target, schedule, route or source.
    """
    ids = [t.id for t in settings.targets]
    dupes = {i for i in ids if ids.count(i) > 1}
    if dupes:
        raise ValueError(f"duplicate target ids: {sorted(dupes)}")
    pixiv_accounts = settings.accounts()
    for name in settings.sources:
        if not ID_PATTERN.match(name):
            raise ValueError(f"source name {name!r} must match [A-Za-z0-9_-]{{1,64}}")
        if name in pixiv_accounts:
            raise ValueError(f"source {name!r} has the name of a pixiv account: a target could not tell them apart")
    accounts = settings.source_configs()
    for target in settings.targets:
        if target.account not in accounts:
            raise ValueError(
                f"target {target.id!r} uses pixiv account {target.account!r}, which is not configured "
                f"(accounts: {sorted(pixiv_accounts)}"
                + (f"; sources: {sorted(settings.sources)})" if settings.sources else ")")
            )
        if not target.routes:
            raise ValueError(f"target {target.id!r} has no routes")
        twice = sorted({r for r in target.routes if target.routes.count(r) > 1})
        if twice:
            raise ValueError(f"target {target.id!r} names route(s) {twice} more than once")
        for route in target.routes:
            if route not in settings.routes:
                raise ValueError(
                    f"target {target.id!r} names unknown route {route!r} (configured routes: {sorted(settings.routes)})"
                )
    for schedule in settings.schedules:
        for tid in schedule.target_ids:
            if tid not in ids:
                raise ValueError(f"schedule {schedule.id!r} names unknown target {tid!r}")
    for name in settings.routes:
        if not ID_PATTERN.match(name):
            raise ValueError(f"route name {name!r} must match [A-Za-z0-9_-]{{1,64}}")
