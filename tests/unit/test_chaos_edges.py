"""The edges chaos scenario's pieces: its cases' config, its checks, the hostile parties' scripts."""

from __future__ import annotations

import json
import random
from pathlib import Path

import httpx
from typer.testing import CliRunner

from bench.chaos.edges import EDGE_CASES, edges_config
from bench.chaos.hostile import State, create_hostile_app
from bench.chaos.records import ScenarioResult
from bench.chaos.scenarios import plans


def test_an_edge_finding_fails_the_scenario_and_other_scenarios_have_no_edge_checks() -> None:
    found = ScenarioResult(name="edges", plan={}, edge_findings={"internal_reached": [{"path": "/x"}]})
    honest = ScenarioResult(name="kills", plan={})

    assert found.checks()["internal_reached"] == 1 and not found.ok
    assert "internal_reached" not in honest.checks() and honest.ok


def test_edges_runs_in_the_full_mode_and_the_quick_run_is_unchanged() -> None:
    assert set(plans(quick=True)) == {"kills", "postgres", "temporal", "pg_hang", "cancel_kills"}
    assert plans(quick=False)["edges"].jobs == len(EDGE_CASES)


def test_quick_with_only_edges_is_refused_rather_than_running_nothing() -> None:
    from curaflow.cli.app import app

    result = CliRunner().invoke(app, ["chaos", "--quick", "--only", "edges"])
    assert result.exit_code == 2 and "full mode only" in result.output


def test_every_edge_case_has_a_target_and_routes_of_its_own(tmp_path: Path) -> None:
    config = edges_config("http://127.0.0.1:1", tmp_path, "http://127.0.0.1:2", "http://127.0.0.1:3")

    targets = {t["id"]: t for t in config["targets"]}
    assert list(targets) == [f"edges{i}" for i in range(len(EDGE_CASES))]
    for i, case in enumerate(EDGE_CASES):
        routes = targets[f"edges{i}"]["routes"]
        assert routes[:2] == [f"edges-hook{i}", f"edges-dir{i}"]
        url = config["routes"][f"edges-hook{i}"]["url"]
        assert (
            url.startswith(f"http://127.0.0.1:2/hook/{case.hook}/")
            if case.hook
            else url.startswith("http://127.0.0.1:1")
        )
        assert (f"edges-tg{i}" in routes) is case.telegram
        assert (f"edges-dc{i}" in routes) is case.discord
        if case.telegram:
            assert config["routes"][f"edges-tg{i}"]["api_url"] == "http://127.0.0.1:2" + case.telegram_api
        assert targets[f"edges{i}"]["query"]["tags"] == [f"edges-{case.word}"]
    # the source and its image host are the hostile party; data destinations may not be loopback
    assert config["pixiv"]["image_url"] == "http://127.0.0.1:2/i"
    assert "outbound" in config and not config["outbound"].get("private_networks")


async def test_the_hostile_receivers_rate_limit_redirect_and_record(tmp_path: Path) -> None:
    log = tmp_path / "received.jsonl"
    state = State()
    app = create_hostile_app(state, "http://127.0.0.1:9", "http://127.0.0.1:7", log)
    body = json.dumps({"job_id": "j", "route": "r", "work": {"work_id": "1"}})
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://hostile") as http:
        answers = [await http.post("/hook/ratelimit/4", content=body) for _ in range(3)]
        assert [a.status_code for a in answers] == [429, 503, 200]
        assert answers[0].headers["retry-after"] == "1" and "GMT" in answers[1].headers["retry-after"]

        telegram = [await http.post("/bot1:x/sendPhoto", content=b"") for _ in range(3)]
        assert [a.status_code for a in telegram] == [429, 400, 200]
        assert telegram[0].json()["parameters"]["retry_after"] == 1
        assert "retry after 1" in telegram[1].json()["description"]
        assert telegram[2].json()["result"]["message_id"] >= 1

        moved = await http.post("/hook/redirect/2", content=body)
        assert moved.status_code == 307 and moved.headers["location"].startswith("http://127.0.0.1:7/")
    # only the accepted request is an arrival at the route
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    assert [(x["path"], x["work_id"]) for x in lines] == [("/hook/ratelimit/4", "1")]
    assert state.hook_accepted["4"] == 1 and len(state.telegram_posts) == 1


def test_the_classes_of_an_unknown_answer_are_cases() -> None:
    # an unknown refusal wording (webhook, Telegram) and an undeclared delay (webhook, Discord)
    assert {c.hook for c in EDGE_CASES} >= {"refusal", "nodelay"}
    assert any(c.telegram_api == "/tg/refusal" for c in EDGE_CASES) and any(c.discord for c in EDGE_CASES)
    refusing = [c for c in EDGE_CASES if c.hook == "refusal" or c.telegram_api]
    assert all(c.expected == ("failed/route_refused",) for c in refusing)


async def test_the_hostile_parties_draw_unknown_refusals_and_undeclared_delays(tmp_path: Path) -> None:
    from bench.chaos.hostile import REFUSAL_STATUSES

    state = State()
    state.rng = random.Random("7:refusals")  # as POST /_chaos/seed sets it
    app = create_hostile_app(state, "http://127.0.0.1:9", "http://127.0.0.1:7", tmp_path / "received.jsonl")
    body = json.dumps({"job_id": "j", "route": "r", "work": {"work_id": "1"}})
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://hostile") as http:
        refusals = [await http.post("/hook/refusal/3", content=body) for _ in range(30)]
        telegram = [await http.post("/tg/refusal/bot1:x/sendPhoto", content=b"") for _ in range(10)]
        nodelay = [await http.post("/hook/nodelay/5", content=body) for _ in range(3)]
        discord = [await http.post("/api/webhooks/6/nodelay", content=b"") for _ in range(3)]
    statuses = {a.status_code for a in refusals + telegram}
    assert statuses <= set(REFUSAL_STATUSES) and len(statuses) > 2  # several members of the class
    assert not set(REFUSAL_STATUSES) & {408, 425}  # HTTP's own "send it again" is retried, no refusal
    assert len({r["words"] for r in state.refusals}) == 40  # a new wording each time
    assert all(a.json()["ok"] is False and a.json()["error_code"] == a.status_code for a in telegram)
    # 429 without Retry-After, an HTML 429, then accepted (webhook and Discord alike)
    assert [a.status_code for a in nodelay] == [429, 429, 200] == [a.status_code for a in discord]
    assert "retry-after" not in nodelay[0].headers and "retry-after" not in discord[0].headers
    assert "1015" in nodelay[1].text and "1015" in discord[1].text and "retry_after" not in discord[0].json()
    assert state.hook_accepted["5"] == 1 and state.discord_posts == 1
    assert [len(v) for v in state.asked_ms.values()] == [3, 3]
    # the same seed draws the same members: a failing run can be replayed
    again = State()
    again.rng = random.Random("7:refusals")
    assert [again.refusal("x")[1] for _ in range(3)] == [r["words"] for r in state.refusals[:3]]


async def test_the_hostile_image_host_serves_the_bombs_of_its_seed_and_records_them(tmp_path: Path) -> None:
    state = State()
    app = create_hostile_app(state, "http://127.0.0.1:9", "http://127.0.0.1:7", tmp_path / "received.jsonl")
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://hostile", timeout=120
    ) as http:
        seeded = (await http.post("/_chaos/seed", json={"seed": 7})).json()
        assert set(seeded["bombs"]) == {"gif_frames", "gif_canvas", "ugoira_zip"}
        gif = await http.get("/i/edges/bomb/gif_frames/img-original/img/2025/01/01/00/00/00/42_p0.png")
        assert gif.status_code == 200 and gif.content[:6] == b"GIF89a" and len(gif.content) < 1_000_000
        zipped = await http.get("/i/edges/bomb/ugoira_zip/42_ugoira600x600.zip")
        assert zipped.content[:4] == b"PK\x03\x04"
        state.ugoira["43"] = {"ugoira_metadata": {"zip_urls": {"medium": 1}, "frames": []}}
        state.hostile_works["43"] = "animation/zip_url"
        assert (await http.get("/v1/ugoira/metadata", params={"illust_id": "43"})).json() == state.ugoira["43"]
    assert [(x["work_id"], x["kind"]) for x in state.served] == [
        ("42", "bomb/gif_frames"),
        ("42", "bomb/ugoira_zip"),
        ("43", "animation/zip_url"),
    ]
    assert state.seed == 7


def test_the_bombs_of_a_seed_are_the_same_and_unusable_metadata_covers_each_kind() -> None:
    import random

    from bench.chaos import bombs

    assert bombs.random_bomb(random.Random(3), "gif_canvas") == bombs.random_bomb(random.Random(3), "gif_canvas")
    for kind in bombs.UNUSABLE_ANIMATIONS:
        body = bombs.unusable_metadata(random.Random(1), kind, "https://i.pximg.net/x.zip")
        assert "ugoira_metadata" in body
