"""Latency summaries for benchmark samples (milliseconds)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any


def percentile(samples: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0..100) by nearest rank; NaN for no samples."""
    if not samples:
        return math.nan
    ordered = sorted(samples)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[rank - 1]


def summarise(samples_ms: Sequence[float]) -> dict[str, Any]:
    """``{n, p50, p95, p99, max, mean}`` of latency samples in ms, rounded to 0.01 ms."""
    if not samples_ms:
        return {"n": 0}
    return {
        "n": len(samples_ms),
        "p50": round(percentile(samples_ms, 50), 2),
        "p95": round(percentile(samples_ms, 95), 2),
        "p99": round(percentile(samples_ms, 99), 2),
        "max": round(max(samples_ms), 2),
        "mean": round(sum(samples_ms) / len(samples_ms), 2),
    }
