"""The registry of source kinds and the ``[sources]`` settings (the source seam)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import tomli_w

from curaflow.config import ConfigError, Settings, load_settings
from curaflow.ledger import gates as ledger_gates
from curaflow.sources.base import SourceConfig
from curaflow.sources.gate import MemoryGate
from curaflow.sources.pixiv.config import PixivSourceConfig
from curaflow.sources.pixiv.source import PixivSource
from curaflow.sources.registry import (
    SourceContext,
    UnsupportedSource,
    build_source,
    kinds,
    parse_source_config,
    register_source,
)

CATALOG = {"source_modules": ["tests.fakes.catalog_source"]}


def load(tmp_path: Path, data: dict[str, Any]) -> Settings:
    path = tmp_path / "curaflow.toml"
    path.write_text(tomli_w.dumps({"state_dir": str(tmp_path / "state"), **data}))
    return load_settings(path)


def test_a_registered_kind_is_validated_by_its_own_model(tmp_path: Path) -> None:
    settings = load(
        tmp_path,
        {
            **CATALOG,
            "sources": {"shelf": {"kind": "catalog", "url": "http://127.0.0.1:9", "max_concurrency": 2}},
            "targets": [{"id": "t", "account": "shelf", "routes": ["out"]}],
        },
    )
    config = settings.sources["shelf"]
    assert type(config).__name__ == "CatalogSourceConfig"
    assert config.url == "http://127.0.0.1:9"  # type: ignore[attr-defined]
    assert sorted(settings.source_configs()) == ["default", "shelf"]
    assert settings.source_configs()["shelf"].policy().concurrency == 2
    assert settings.source_task_queues()["shelf"] == f"{settings.temporal.task_queue}-source-shelf"
    assert "catalog" in kinds() and "pixiv" in kinds()


def test_the_kind_model_refuses_what_it_does_not_know(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"sources\.shelf\.colour"):
        load(tmp_path, {**CATALOG, "sources": {"shelf": {"kind": "catalog", "url": "http://x", "colour": "red"}}})


def test_a_field_error_of_a_source_table_names_the_fields_full_path_and_its_origin(tmp_path: Path) -> None:
    # Until 2026-12-07 a [sources.<name>] table's field errors were one line at the table,
    # after pydantic's "Value error," ("sources: Value error, sources.shelf: url: Field
    # required; …"), its origin the whole table's, and only the first bad table was said:
    # every other section names the field (``pixiv.unavailable_ttl_ms: …``, ``routes.hook…``).
    with pytest.raises(ConfigError) as raised:
        load(
            tmp_path,
            {
                **CATALOG,
                "sources": {
                    "shelf": {"kind": "catalog", "unavailable_ttl_ms": "soon"},
                    "attic": {"kind": "catalog", "url": "http://x", "colour": "red"},
                    "cellar": {"kind": "nowhere"},
                    "vault": {"url": "http://x"},
                },
            },
        )
    lines = str(raised.value).splitlines()[1:]
    said = {line.split(": ", 1)[0].removeprefix("  - "): line for line in lines}
    assert sorted(said) == [
        "sources.attic.colour",
        "sources.cellar.kind",
        "sources.shelf.unavailable_ttl_ms",
        "sources.shelf.url",
        "sources.vault.kind",
    ], lines
    assert "Value error" not in str(raised.value)
    assert said["sources.shelf.unavailable_ttl_ms"].endswith(f"(in {tmp_path / 'curaflow.toml'})")
    assert "valid integer" in said["sources.shelf.unavailable_ttl_ms"]
    assert "Field required" in said["sources.shelf.url"]
    assert "'nowhere' is not registered" in said["sources.cellar.kind"]
    assert "needs a kind" in said["sources.vault.kind"]


def test_an_unknown_kind_names_the_known_ones(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="'nowhere' is not registered"):
        load(tmp_path, {"sources": {"shelf": {"kind": "nowhere"}}})


def test_a_source_module_that_cannot_be_imported_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="source_modules"):
        load(tmp_path, {"source_modules": ["tests.fakes.no_such_module"]})


def test_pixiv_accounts_stay_under_pixiv(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"configured in its own section"):
        load(tmp_path, {"sources": {"other": {"kind": "pixiv"}}})
    with pytest.raises(ConfigError, match="has the name of a pixiv account"):
        load(tmp_path, {**CATALOG, "sources": {"default": {"kind": "catalog", "url": "http://x"}}})


def test_a_target_on_an_unknown_source_lists_accounts_and_sources(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"accounts: \[.default.\]; sources: \[.shelf.\]"):
        load(
            tmp_path,
            {
                **CATALOG,
                "sources": {"shelf": {"kind": "catalog", "url": "http://x"}},
                "targets": [{"id": "t", "account": "elsewhere", "routes": ["out"]}],
            },
        )


def test_the_pixiv_section_is_one_source_instance_per_account(tmp_path: Path) -> None:
    # The TOML users write for Pixiv is unchanged: [pixiv] and [pixiv.accounts.<name>].
    settings = load(
        tmp_path,
        {"pixiv": {"max_examined": 70, "replay_max_concurrency": 3, "accounts": {"second": {"max_concurrency": 2}}}},
    )
    configs = settings.source_configs()
    assert sorted(configs) == ["default", "second"]
    assert all(isinstance(c, PixivSourceConfig) and c.kind == "pixiv" for c in configs.values())
    policy = configs["second"].policy()
    assert (policy.max_examined, policy.concurrency, policy.keeps_frontier) == (70, 3, True)  # replay mode


async def test_build_source_builds_pixiv_from_its_config(tmp_path: Path) -> None:
    settings = load(tmp_path, {})
    context = SourceContext(
        settings.outbound, lambda _name, **policy: MemoryGate(**policy), replay_url="http://127.0.0.1:9"
    )
    try:
        source = build_source("default", settings.source_configs()["default"], context)
        assert isinstance(source, PixivSource)
        assert (source.name, source.kind) == ("default", "pixiv")
        assert source.client.api_url == "http://127.0.0.1:9"
        assert source.client.image_host == "http://127.0.0.1:9/i"
    finally:
        await context.aclose()


def test_a_kind_is_registered_once() -> None:
    class Other(SourceConfig):
        pass

    with pytest.raises(ValueError, match="already registered"):
        register_source("pixiv", Other, lambda name, config, context: None)  # type: ignore[arg-type,return-value]
    with pytest.raises(UnsupportedSource):
        build_source("x", SourceConfig(kind="nowhere"), None)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="needs a kind"):
        parse_source_config({"url": "http://x"})


@pytest.mark.parametrize(
    ("body", "why"),
    [
        ("raise RuntimeError('no catalog today')\n", "RuntimeError: no catalog today"),
        ("def broken(:\n", "SyntaxError"),
        ("import curaflow_no_such_dependency\n", "No module named 'curaflow_no_such_dependency'"),
    ],
)
def test_a_source_module_that_fails_on_import_is_a_config_error_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, body: str, why: str
) -> None:
    # Not a traceback out of load_settings: the module's own failure, named, at load time.
    name = f"curaflow_test_failing_source_{abs(hash(body))}"
    (tmp_path / f"{name}.py").write_text(body)
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ConfigError, match="source_modules") as raised:
        load(tmp_path, {"source_modules": [name]})
    assert repr(name) in str(raised.value)
    assert why in str(raised.value)


def test_a_source_module_cannot_take_a_builtin_kind(tmp_path: Path) -> None:
    # In a fresh process (the built-in kinds not looked up yet): the settings refuse the
    # module at load time, naming it, instead of a worker failing on its first source.
    import subprocess
    import sys

    (tmp_path / "hijack_source.py").write_text(
        "from typing import Literal\n"
        "from curaflow.sources.base import SourceConfig\n"
        "from curaflow.sources.registry import register_source\n"
        "class PixivSourceConfig(SourceConfig):\n"
        "    kind: Literal['pixiv'] = 'pixiv'\n"
        "register_source('pixiv', PixivSourceConfig, lambda name, config, context: None)\n"
    )
    (tmp_path / "curaflow.toml").write_text(f'state_dir = "{tmp_path / "state"}"\nsource_modules = ["hijack_source"]\n')
    code = (
        "from curaflow.config import ConfigError, load_settings\n"
        "try:\n"
        "    load_settings('curaflow.toml')\n"
        "except ConfigError as err:\n"
        "    print(err)\n"
        "else:\n"
        "    print('loaded')\n"
    )
    env = {k: v for k, v in __import__("os").environ.items() if not k.startswith(("CURAFLOW_", "PIXIV_"))}
    env["PYTHONPATH"] = str(tmp_path)
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert "source_modules: cannot import 'hijack_source'" in done.stdout
    assert "'pixiv' is already registered" in done.stdout


@pytest.mark.parametrize(("pixiv", "concurrency"), [({"replay_max_concurrency": 3}, 3), ({"refresh_token": "t"}, 1)])
async def test_an_accounts_gate_is_told_how_many_of_its_requests_may_wait_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, pixiv: dict[str, Any], concurrency: int
) -> None:
    # The ledger's gate hands out no slot further ahead than the queue the account's
    # requests can form (its concurrency × the interval, gates.reserve): the Pixiv source
    # passes the account's concurrency (replay's in replay mode) to its gate, and the gate
    # to every slot it takes.
    settings = load(tmp_path, {"pixiv": pixiv})
    config = settings.source_configs()["default"]
    made: dict[str, Any] = {}

    def factory(_name: str, **policy: Any) -> MemoryGate:
        made.update(policy)
        return MemoryGate(**policy)

    context = SourceContext(settings.outbound, factory, replay_url="http://127.0.0.1:9")
    try:
        build_source("default", config, context)
    finally:
        await context.aclose()
    assert made["concurrency"] == concurrency == config.policy().concurrency

    taken: list[dict[str, Any]] = []

    async def reserve(_pool: Any, _gate: str, _interval_ms: int, **kwargs: Any) -> ledger_gates.Slot:
        taken.append(kwargs)
        return ledger_gates.Slot(wait_ms=0)

    monkeypatch.setattr(ledger_gates, "reserve", reserve)
    await ledger_gates.LedgerGate(None, "q", min_interval_ms=made["min_interval_ms"], concurrency=concurrency).acquire()  # type: ignore[arg-type]
    assert taken == [{"cap_ms": ledger_gates.LedgerGate(None, "q", min_interval_ms=0).cap_ms, "waiters": concurrency}]  # type: ignore[arg-type]
