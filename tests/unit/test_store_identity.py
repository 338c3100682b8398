"""Workers started together on one artifacts directory name it with one id.

An artifacts directory names itself (``.store-id``, :meth:`ArtifactStore.identity`): the
ledger records which store holds which cell's folder with it, and a store's own retention
pass deletes the folders recorded under its id. Workers share no disk in production, but
``curaflow dev --workers N`` starts N workers on one state directory, and a volume mounted
twice by mistake does the same. Until 2026-12-05 the first use created the file empty and
wrote the id after: a worker starting meanwhile read it empty and wrote an id of its own —
the two workers then recorded their holdings under two ids for one directory (the rows of
the id the file lost were never released: their folders stayed for good), or one failed
to start (``FileNotFoundError`` renaming the shared temporary file). 200 starts of six
workers on a new directory: 33 disagreed, 5 had a worker failing.
"""

from __future__ import annotations

import multiprocessing
from pathlib import Path
from typing import Any

from curaflow.artifacts import ArtifactStore
from curaflow.artifacts.store import STORE_ID_FILE

WORKERS = 6
STARTS = 60


def _start(root: str, barrier: Any, answers: Any) -> None:
    barrier.wait()
    try:
        answers.put(ArtifactStore(Path(root)).identity()[0])
    except OSError as err:  # reported, not lost: the assertion names it
        answers.put(f"failed: {type(err).__name__}: {err}")


def test_workers_starting_together_on_a_new_directory_agree_on_its_id(tmp_path: Path) -> None:
    ctx = multiprocessing.get_context("fork")
    outcomes = []
    for start in range(STARTS):
        root = tmp_path / str(start)
        barrier, answers = ctx.Barrier(WORKERS), ctx.Queue()
        procs = [ctx.Process(target=_start, args=(str(root), barrier, answers)) for _ in range(WORKERS)]
        for proc in procs:
            proc.start()
        got = sorted(answers.get() for _ in procs)
        for proc in procs:
            proc.join()
        named = (root / STORE_ID_FILE).read_text(encoding="ascii").strip()
        outcomes.append(set(got) == {named})
    assert outcomes.count(False) == 0, f"{outcomes.count(False)} of {STARTS} starts did not agree"


def test_an_empty_id_file_a_crash_left_gets_an_id_every_store_then_reads(tmp_path: Path) -> None:
    (tmp_path / STORE_ID_FILE).write_text("", encoding="ascii")
    first = ArtifactStore(tmp_path).identity()[0]
    assert first and ArtifactStore(tmp_path).identity()[0] == first
    assert (tmp_path / STORE_ID_FILE).read_text(encoding="ascii").strip() == first
