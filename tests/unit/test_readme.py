"""What the README promises a new user, checked as text (its commands run in
``tests/integration/test_readme_make_it_real.py``)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()


def section(title: str) -> str:
    start = README.index(f"\n## {title}\n")
    return README[start : README.index("\n## ", start + 1)]


def test_make_it_real_shows_the_telegram_api_url_for_a_local_bot_api() -> None:
    real = section("Make it real")
    [toml] = re.findall(r"```toml\n(.*?)```", real, flags=re.S)
    assert re.search(r'(?m)^#? ?api_url = "http://127\.0\.0\.1:\d+"', toml), toml
    assert "local Bot API server" in real


def test_the_readme_says_how_to_start_the_replay_on_its_own() -> None:
    text = section("Run a job on the replay")
    assert "python -m curaflow.sources.pixiv.replay --port" in text
    assert "CURAFLOW_PIXIV__API_URL=" in text
