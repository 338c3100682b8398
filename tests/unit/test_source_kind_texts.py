"""A text about any source instance names no source kind but as a case.

A target's ``account`` names a Pixiv account or a ``[sources.<name>]`` instance of any
kind, and the metrics, the commands and the cell reasons below are about either: none of
their series, arguments or cells carries the kind. A report never says more than what
happened, so such a text says "the source", "an account", and names a kind only as a
case ("for a Pixiv account: …", a setting ``pixiv.…``). Until 2026-12-07
``curaflow_source_account_paused_total`` said "Times a Pixiv account was paused because
Pixiv answered …", ``curaflow accounts`` "Pixiv accounts' gates", a cell ended
``rate_limited`` "Pixiv is rate limiting this account", of any source's account.
"""

from __future__ import annotations

from typing import Any

import pytest
import typer
from prometheus_client.metrics import MetricWrapperBase

from curaflow.domain.reasons import REASONS
from curaflow.observability import metrics
from tests.source_kinds import kinds_said

#: The commands whose subject is any source instance (an account, its works, a target's
#: scan frontier) — not ``curaflow pixiv``, nor the dev stack's Pixiv replay server.
SOURCE_GROUPS = ("accounts", "unavailable", "frontiers")


@pytest.fixture(scope="module")
def known() -> set[str]:
    from curaflow.sources.registry import kinds

    found = set(kinds())
    assert "pixiv" in found  # the built-in kind: the test reads the registry, not a list
    return found


def account_metrics() -> dict[str, str]:
    """name → help text of every metric family with an ``account`` label."""
    found = {
        wrapper._name: wrapper._documentation
        for wrapper in vars(metrics).values()
        if isinstance(wrapper, MetricWrapperBase) and "account" in wrapper._labelnames
    }
    found.update({name: text for name, (text, labels) in metrics.LEDGER_GAUGE_FAMILIES.items() if "account" in labels})
    return found


def test_no_metric_of_an_account_names_a_source_kind(known: set[str]) -> None:
    texts = account_metrics()
    assert "curaflow_source_account_paused" in texts and "curaflow_source_paused_until_seconds" in texts
    assert {name: kinds_said(text, known) for name, text in texts.items() if kinds_said(text, known)} == {}


def helps(command: Any, path: str) -> dict[str, str]:
    """``command path`` (with a parameter's name) → its help, for ``command`` (a click
    command, as typer builds it) and every command below it."""
    found = {path: f"{command.help or ''} {command.short_help or ''}"}
    for param in command.params:
        found[f"{path} {param.name}"] = getattr(param, "help", None) or ""
    for name, sub in getattr(command, "commands", {}).items():
        found.update(helps(sub, f"{path} {name}"))
    return found


def test_no_help_of_a_command_about_any_source_names_a_source_kind(known: set[str]) -> None:
    from curaflow.cli.app import app

    root: Any = typer.main.get_command(app)
    texts: dict[str, str] = {}
    for group in SOURCE_GROUPS:
        texts.update(helps(root.commands[group], f"curaflow {group}"))
    assert "curaflow accounts resume account" in texts and "curaflow unavailable clear account" in texts
    assert {where: kinds_said(text, known) for where, text in texts.items() if kinds_said(text, known)} == {}


def test_no_reason_of_a_cell_names_a_source_kind(known: set[str]) -> None:
    """Every reason a cell ends with is of any source instance: none is one kind's."""
    wrong = {
        (str(reason), lang): kinds_said(text, known)
        for reason, info in REASONS.items()
        for lang, text in (("en", info.message_en), ("zh", info.message_zh))
        if kinds_said(text, known)
    }
    assert wrong == {}


def test_kinds_said_tells_a_statement_from_a_case() -> None:
    known = {"pixiv"}
    assert kinds_said("Pixiv refused the account", known) == {"pixiv"}
    assert kinds_said("Pixiv account x is rate limited", known) == {"pixiv"}
    assert kinds_said("an id not of Pixiv's shape", known) == {"pixiv"}
    assert kinds_said("请检查到Pixiv图片服务器的网络", known) == {"pixiv"}
    assert kinds_said("lower its min_interval_ms (pixiv.min_interval_ms for a Pixiv account)", known) == set()
    assert kinds_said("set PIXIV_REFRESH_TOKEN or run curaflow pixiv login", known) == set()
    assert kinds_said("请检查该账号（Pixiv：登录 pixiv.net 查看通知）", known) == set()
