"""A job id given on the command line names that job, never another path of the API:
``.`` and ``..`` are dot-segments an HTTP client removes (``curaflow events .`` asked for
a job named ``events``, ``curaflow status ..`` for ``/``), and an empty id is no job
(``curaflow status ''`` asked for the job list)."""

from __future__ import annotations

import httpx
import pytest
from typer.testing import CliRunner

from curaflow.cli.app import app
from curaflow.protocol.projection import job_path


@pytest.mark.parametrize("job_id", [".", "..", "...", "demo@.."])
def test_a_dot_id_stays_one_segment_of_the_job_path(job_id: str) -> None:
    base = httpx.Client(base_url="http://api.example:8080")
    for suffix in ("", "/cancel", "/events"):
        url = base.build_request("GET", job_path(job_id) + suffix).url
        segments = url.raw_path.decode().split("?")[0].split("/")
        assert segments[:2] == ["", "jobs"] and len(segments) == 3 + bool(suffix), url
        assert httpx.URL(f"http://x/{segments[2]}").path.lstrip("/") in (job_id, job_id.replace(".", "%2E"))


@pytest.mark.parametrize("command", ["status", "cancel", "events"])
@pytest.mark.parametrize("job_id", ["", "   "])
def test_an_empty_job_id_is_a_usage_error_before_any_request(command: str, job_id: str) -> None:
    result = CliRunner().invoke(app, [command, job_id, "--api-url", "http://127.0.0.1:9"])
    assert result.exit_code == 2, result.output
    assert "job id" in result.output and "cannot reach" not in result.output
