"""Which build of curaflow is running: the commit ``GET /health`` reports."""

from __future__ import annotations

import os
import subprocess
from functools import cache
from pathlib import Path


@cache
def source_commit() -> str:
    """The commit of this build: ``$CURAFLOW_COMMIT`` (set by image builds), else the
    short hash of the git checkout the package runs from, else ``"unknown"``.

    Read once per process (cached); ``git`` gets 2 s and any failure means "unknown".
    """
    if commit := os.environ.get("CURAFLOW_COMMIT", "").strip():
        return commit
    try:
        done = subprocess.run(
            ["git", "rev-parse", "--short=12", "HEAD"],
            cwd=Path(__file__).resolve().parent,
            capture_output=True,
            text=True,
            timeout=2,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return done.stdout.strip() if done.returncode == 0 and done.stdout.strip() else "unknown"
