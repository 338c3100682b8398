"""Interleaved A/B of a benchmark scenario between two checkouts, medians of each side.

    python -m bench.ab OTHER_CHECKOUT [--runs 3] [--only throughput] [--quick]

Runs ``curaflow bench --only SCENARIO`` alternately in this checkout ("this") and in
``OTHER_CHECKOUT`` ("other", e.g. a clean worktree of ``main`` with its own ``.venv``), one
run of each per round — the side that runs first alternates from round to round — so both
see the same hours of the machine; then prints, for every
figure, the median of each side and their ratio, and the machine's load average when each
run started. The runs' JSON files are kept in ``--out`` (default: a new temporary
directory). Each checkout runs its own ``curaflow`` (``<checkout>/.venv/bin/curaflow``).

Compare what the runs measure in-run (the ratios against the baselines, the counts);
absolute rates and CPU move with the machine (docs/performance.md, "Method").
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from bench.compare import figures

ROOT = Path(__file__).resolve().parents[1]


def run_once(checkout: Path, out: Path, only: str, quick: bool) -> dict[str, Any]:
    """One ``curaflow bench`` run in ``checkout``; returns its JSON document."""
    exe = checkout / ".venv" / "bin" / "curaflow"
    args = [str(exe), "bench", "--only", only, "--json", str(out)]
    if quick:
        args.append("--quick")
    load = os.getloadavg()
    subprocess.run(args, cwd=checkout, check=True, stdout=subprocess.DEVNULL)
    document: dict[str, Any] = json.loads(out.read_text())
    document["load_average_at_start"] = load
    out.write_text(json.dumps(document, indent=2))
    return document


def run_order(sides: dict[str, Path], round_: int) -> list[tuple[str, Path]]:
    """The sides of round ``round_`` (from 1) in the order they run: as given in odd
    rounds, reversed in even ones. With a fixed order the first run of each round measured
    the lower in-run ratio in 8 of 9 pairs on 2026-12-04, whichever checkout it was
    (docs/performance.md)."""
    items = list(sides.items())
    return items if round_ % 2 else items[::-1]


def main() -> None:
    """Parse the options, run the rounds, print the medians."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("other", type=Path, help="the other checkout (with its own .venv)")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--only", default="throughput")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    # Absolute: each checkout runs with its own working directory.
    out = (args.out or Path(tempfile.mkdtemp(prefix="ab-bench-"))).resolve()
    out.mkdir(parents=True, exist_ok=True)
    sides = {"this": ROOT, "other": args.other.resolve()}
    runs: dict[str, list[dict[str, float]]] = {name: [] for name in sides}
    loads: dict[str, list[str]] = {name: [] for name in sides}
    for round_ in range(1, args.runs + 1):
        for name, checkout in run_order(sides, round_):
            document = run_once(checkout, out / f"{name}-{round_}.json", args.only, args.quick)
            runs[name].append(figures(document))
            loads[name].append(" ".join(f"{x:.1f}" for x in document["load_average_at_start"]))
            print(f"round {round_} {name}: done (load average at start {loads[name][-1]})", flush=True)
    keys = [k for k in runs["this"][0] if all(k in r for side in runs.values() for r in side)]
    print(f"\nmedians of {args.runs} interleaved runs (JSON in {out})")
    print(f"{'figure':<64} {'this':>10} {'other':>10} {'this/other':>10}")
    for key in keys:
        this = statistics.median(r[key] for r in runs["this"])
        other = statistics.median(r[key] for r in runs["other"])
        ratio = f"{this / other:.3f}" if other else "—"
        print(f"{key:<64} {this:>10g} {other:>10g} {ratio:>10}")
    for name in sides:
        print(f"load averages at start ({name}): {'; '.join(loads[name])}")


if __name__ == "__main__":
    main()
