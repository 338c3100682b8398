"""The registry of route kinds and the ``[routes]`` settings (the route seam)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Literal

import httpx
import pytest
import tomli_w

from activities.deps import ActivityDeps
from curaflow.config import ConfigError, Settings, load_settings
from curaflow.outbound import Destinations, configured
from curaflow.routes import RouteContext, RouteSettings, UnsupportedRoute, build_route, register_route
from curaflow.routes.directory import DirectoryRoute
from curaflow.routes.discord import DiscordRoute
from curaflow.routes.registry import kinds
from curaflow.routes.telegram import TelegramRoute
from curaflow.routes.webhook import WebhookRoute
from tests.support import whsec

CHAT = {"route_modules": ["tests.fakes.chat_route"]}
CHAT_ROUTE = {"kind": "chat", "url": "http://chat.example:8080", "room": "r", "token": "t"}


def load(tmp_path: Path, data: dict[str, Any]) -> Settings:
    path = tmp_path / "curaflow.toml"
    path.write_text(tomli_w.dumps({"state_dir": str(tmp_path / "state"), **data}))
    return load_settings(path)


def builtin_routes(tmp_path: Path) -> dict[str, Any]:
    return {
        "out": {"kind": "directory", "path": str(tmp_path / "out")},
        "hook": {"kind": "webhook", "url": "https://hooks.example/in", "secret": whsec()},
        "tg": {"kind": "telegram", "bot_token": "1:x", "chat_id": "-100", "api_url": "http://tg.example:8081"},
        "dc": {"kind": "discord", "url": "https://discord.example/api/webhooks/1/x"},
    }


def test_a_registered_kind_is_validated_by_its_own_model(tmp_path: Path) -> None:
    settings = load(tmp_path, {**CHAT, "routes": {"room": CHAT_ROUTE, "out": {"kind": "directory", "path": "o"}}})
    config = settings.routes["room"]
    assert type(config).__name__ == "ChatRouteConfig"
    assert config.room == "r"  # type: ignore[attr-defined]
    assert ("routes.room.token", "t") in settings.secrets()  # its SecretStr is a secret like any route's
    assert {"chat", "directory", "webhook", "telegram", "discord"} <= set(kinds())


def test_the_toml_of_the_builtin_kinds_is_unchanged(tmp_path: Path) -> None:
    settings = load(tmp_path, {"routes": builtin_routes(tmp_path)})
    assert {name: type(c).__name__ for name, c in settings.routes.items()} == {
        "out": "DirectoryRouteConfig",
        "hook": "WebhookRouteConfig",
        "tg": "TelegramRouteConfig",
        "dc": "DiscordRouteConfig",
    }
    assert settings.routes["out"].path == (tmp_path / "out").resolve()  # type: ignore[attr-defined]


def test_an_unknown_kind_names_the_known_ones(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as raised:
        load(tmp_path, {"routes": {"x": {"kind": "slack"}}})
    assert "routes.x: Input tag 'slack' found using 'kind' does not match any of the expected tags" in str(raised.value)
    assert "'directory', 'discord', 'telegram', 'webhook'" in str(raised.value)


def test_every_problem_of_every_route_is_named(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as raised:
        load(
            tmp_path,
            {
                **CHAT,
                "routes": {
                    "hook": {"kind": "webhook", "url": "https://hooks.example/in"},
                    "nokind": {"path": "/tmp"},
                    "room": {**CHAT_ROUTE, "colour": "red"},
                },
            },
        )
    report = str(raised.value)
    assert "routes.hook.webhook.secret: Field required" in report
    assert "routes.nokind: Unable to extract tag using discriminator 'kind'" in report
    assert "routes.room.chat.colour: Extra inputs are not permitted" in report


def test_a_destination_that_cannot_be_read_is_refused_at_load(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"routes\.dc\.discord: Value error, ftp://discord\.example: not an http"):
        load(tmp_path, {"routes": {"dc": {"kind": "discord", "url": "ftp://discord.example/api/webhooks/1/x"}}})


def test_each_route_s_client_may_reach_what_its_config_declares(tmp_path: Path) -> None:
    # No second list of destinations: the worker asks the route's config model.
    settings = load(tmp_path, {**CHAT, "routes": {**builtin_routes(tmp_path), "room": CHAT_ROUTE}})
    deps = ActivityDeps(settings=settings, pool=None, client=None, store=None, sources=None)  # type: ignore[arg-type]
    reach = {
        "hook": "https://hooks.example/in",
        "tg": "http://tg.example:8081/bot1:x/sendPhoto",
        "dc": "https://discord.example/api/webhooks/1/x",
        "room": "http://chat.example:8080/api/rooms/r/posts",
    }
    for name, url in reach.items():
        destinations = deps.client_for(f"route:{name}").destinations
        assert destinations == settings.routes[name].destinations()
        assert destinations.allows_url(httpx.URL(url)), name
        assert not destinations.allows_url(httpx.URL("https://elsewhere.example/")), name
    assert deps.client_for("route:out").destinations == Destinations(origins=())


async def test_build_route_builds_each_kind_with_its_factory(tmp_path: Path) -> None:
    from tests.fakes.chat_route import ChatRoute

    settings = load(tmp_path, {**CHAT, "routes": {**builtin_routes(tmp_path), "room": CHAT_ROUTE}})
    expected = {"out": DirectoryRoute, "hook": WebhookRoute, "tg": TelegramRoute, "dc": DiscordRoute, "room": ChatRoute}
    async with httpx.AsyncClient() as http:
        from curaflow.outbound import Outbound

        for name, route_type in expected.items():
            route = build_route(name, settings.routes[name], RouteContext(http=Outbound(configured(), http=http)))
            assert isinstance(route, route_type)
            assert (route.name, route.kind) == (name, settings.routes[name].kind)


def test_a_route_kind_without_destinations_is_refused_at_registration() -> None:
    class SlackRouteConfig(RouteSettings):
        kind: Literal["slack"] = "slack"
        url: str

    with pytest.raises(ValueError, match=r"'slack'.*SlackRouteConfig does not implement destinations"):
        # mypy refuses it too: "Only concrete class can be given" (type-abstract)
        register_route("slack", SlackRouteConfig, lambda name, config, context: None)  # type: ignore[type-abstract,arg-type,return-value]
    assert "slack" not in kinds()
    with pytest.raises(TypeError, match="abstract"):  # nor can such a config exist
        SlackRouteConfig(url="http://x")  # type: ignore[abstract]


def test_a_kind_this_process_has_not_registered_is_unsupported() -> None:
    class Unregistered(RouteSettings):
        kind: Literal["unregistered"] = "unregistered"

        def destinations(self) -> Destinations:
            return Destinations(origins=())

    with pytest.raises(UnsupportedRoute, match=r"'unregistered' is not registered \(known: \["):
        build_route("x", Unregistered(), None)  # type: ignore[arg-type]


def test_a_route_kind_is_registered_once_under_its_own_word() -> None:
    class Other(RouteSettings):
        kind: Literal["webhook"] = "webhook"

        def destinations(self) -> Destinations:
            return Destinations(origins=())

    with pytest.raises(ValueError, match="'webhook' is already registered"):
        register_route("webhook", Other, lambda name, config, context: None)  # type: ignore[arg-type,return-value]
    with pytest.raises(ValueError, match=r"Other\.kind must be Literal\['elsewhere'\]"):
        register_route("elsewhere", Other, lambda name, config, context: None)  # type: ignore[arg-type,return-value]
    with pytest.raises(ValueError, match="must subclass"):
        register_route("plain", dict, lambda name, config, context: None)  # type: ignore[arg-type,return-value]


def test_a_module_whose_route_kind_declares_no_destinations_is_a_config_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The Slack route that was tried: a kind that forgets its destinations fails when the
    # settings load, naming the module and what it forgot — never at its first delivery.
    (tmp_path / "slack_route_no_dest.py").write_text(
        "from typing import Literal\n"
        "from curaflow.routes.base import RouteSettings\n"
        "from curaflow.routes.registry import register_route\n"
        "class SlackRouteConfig(RouteSettings):\n"
        "    kind: Literal['slack'] = 'slack'\n"
        "    url: str\n"
        "register_route('slack', SlackRouteConfig, lambda name, config, context: None)\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ConfigError) as raised:
        load(
            tmp_path, {"route_modules": ["slack_route_no_dest"], "routes": {"s": {"kind": "slack", "url": "http://x"}}}
        )
    assert "route_modules: cannot import 'slack_route_no_dest'" in str(raised.value)
    assert "does not implement destinations" in str(raised.value)


@pytest.mark.parametrize(
    ("body", "why"),
    [
        ("raise RuntimeError('no chat today')\n", "RuntimeError: no chat today"),
        ("def broken(:\n", "SyntaxError"),
        ("import curaflow_no_such_dependency\n", "No module named 'curaflow_no_such_dependency'"),
    ],
)
def test_a_route_module_that_fails_on_import_is_a_config_error_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, body: str, why: str
) -> None:
    name = f"curaflow_test_failing_route_{abs(hash(body))}"
    (tmp_path / f"{name}.py").write_text(body)
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ConfigError, match="route_modules") as raised:
        load(tmp_path, {"route_modules": [name]})
    assert repr(name) in str(raised.value)
    assert why in str(raised.value)


def test_a_route_module_cannot_take_a_builtin_kind(tmp_path: Path) -> None:
    # In a fresh process (the built-in kinds not looked up yet): the settings refuse the
    # module at load time, naming it, instead of a worker delivering with the wrong kind.
    (tmp_path / "hijack_route.py").write_text(
        "from typing import Literal\n"
        "from curaflow.outbound import Destinations\n"
        "from curaflow.routes.base import RouteSettings\n"
        "from curaflow.routes.registry import register_route\n"
        "class WebhookRouteConfig(RouteSettings):\n"
        "    kind: Literal['webhook'] = 'webhook'\n"
        "    def destinations(self) -> Destinations:\n"
        "        return Destinations(origins=())\n"
        "register_route('webhook', WebhookRouteConfig, lambda name, config, context: None)\n"
    )
    (tmp_path / "curaflow.toml").write_text(f'state_dir = "{tmp_path / "state"}"\nroute_modules = ["hijack_route"]\n')
    code = (
        "from curaflow.config import ConfigError, load_settings\n"
        "try:\n"
        "    load_settings('curaflow.toml')\n"
        "except ConfigError as err:\n"
        "    print(err)\n"
        "else:\n"
        "    print('loaded')\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CURAFLOW_", "PIXIV_"))}
    env["PYTHONPATH"] = str(tmp_path)
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert "route_modules: cannot import 'hijack_route'" in done.stdout
    assert "'webhook' is already registered" in done.stdout
