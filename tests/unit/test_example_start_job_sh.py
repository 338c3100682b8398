"""``examples/start_job.sh`` talks to the Temporal a reader's stack listens on.

The script had ``--address 127.0.0.1:7233`` written into each command: a reader whose
``curaflow dev`` listens elsewhere (``--temporal-port``, the documented way when 7233 is
taken) had to edit it (a newcomer's finding). It now reads ``TEMPORAL_ADDRESS`` — the
variable curaflow and the ``temporal`` CLI read — default ``127.0.0.1:7233``. A stand-in
``temporal`` on ``PATH`` records what the script asks of it; no Temporal runs.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "examples" / "start_job.sh"


def run_script(tmp_path: Path, **env: str) -> list[str]:
    """Run the script with a recording ``temporal``; returns each call's arguments."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    calls = tmp_path / "calls"
    fake = bin_dir / "temporal"
    fake.write_text(f'#!/bin/sh\necho "$*" >> {calls}\n')
    fake.chmod(0o755)
    result = subprocess.run(
        ["bash", str(SCRIPT), "k-1"],
        capture_output=True,
        text=True,
        timeout=30,
        env={"PATH": f"{bin_dir}:/usr/bin:/bin", **env},
    )
    assert result.returncode == 0, result.stderr
    return calls.read_text().splitlines()


@pytest.mark.parametrize(
    ("env", "address"),
    [({"TEMPORAL_ADDRESS": "127.0.0.1:17233"}, "127.0.0.1:17233"), ({}, "127.0.0.1:7233")],
)
def test_every_call_goes_to_the_temporal_address_of_the_environment(
    tmp_path: Path, env: dict[str, str], address: str
) -> None:
    calls = run_script(tmp_path, **env)
    assert [call.split()[:2] for call in calls] == [["workflow", "execute-update-with-start"], ["workflow", "result"]]
    for call in calls:
        assert f"--address {address} " in call, call
