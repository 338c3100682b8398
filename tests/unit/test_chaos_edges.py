"""The edges chaos scenario's pieces: its cases' config, its checks, the hostile parties' scripts."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
from typer.testing import CliRunner

from bench.chaos.hostile import State, create_hostile_app
from bench.chaos.scenarios import EDGE_CASES, ScenarioResult, edges_config, plans


def test_an_edge_finding_fails_the_scenario_and_other_scenarios_have_no_edge_checks() -> None:
    found = ScenarioResult(name="edges", plan={}, edge_findings={"internal_reached": [{"path": "/x"}]})
    honest = ScenarioResult(name="kills", plan={})

    assert found.checks()["internal_reached"] == 1 and not found.ok
    assert "internal_reached" not in honest.checks() and honest.ok


def test_edges_runs_in_the_full_mode_and_the_quick_run_is_unchanged() -> None:
    assert set(plans(quick=True)) == {"kills", "postgres", "temporal", "pg_hang", "cancel_kills"}
    assert plans(quick=False)["edges"].jobs == len(EDGE_CASES)


def test_quick_with_only_edges_is_refused_rather_than_running_nothing() -> None:
    from curaflow.cli.main import app

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
