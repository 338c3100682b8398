"""The commit ``GET /health`` reports."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from curaflow.build import source_commit


@pytest.fixture(autouse=True)
def fresh_cache() -> None:
    source_commit.cache_clear()


def test_the_build_commit_comes_from_the_environment_first(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CURAFLOW_COMMIT", "abc123def456")
    assert source_commit() == "abc123def456"


def test_a_checkout_reports_its_git_head(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CURAFLOW_COMMIT", raising=False)
    root = Path(__file__).resolve().parents[2]
    head = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], cwd=root, capture_output=True, text=True)
    if head.returncode != 0:
        pytest.skip("not a git checkout")
    assert source_commit() == head.stdout.strip()


def test_no_git_means_unknown(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CURAFLOW_COMMIT", raising=False)
    monkeypatch.setenv("PATH", "/nonexistent")
    assert source_commit() == "unknown"
