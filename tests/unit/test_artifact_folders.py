"""Each cell has its own artifact folder: two job ids never share one.

A folder is named after its job id and target id (:func:`curaflow.artifacts.safe_name`).
Idempotency keys — and so job ids — are kept as sent, code point by code point (any
script, ``/``, up to 200 characters, docs/http-api.md "Idempotency keys"): a rendering
that folded characters it does not keep into ``_``, or cut long ids, gave distinct jobs
one folder — and a prune or a ``cache`` delivery of one job then deleted the other's files.
"""

from __future__ import annotations

from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from curaflow.artifacts import ArtifactStore, safe_name

#: Pairs of job ids the folders once confused.
CONFUSED = [
    ("demo@manual-注文", "demo@manual-依頼"),  # two keys in another script, same length
    ("demo@manual-order/42", "demo@manual-order_42"),  # `/` (sent as %2F) and `_`
    ("demo@manual-a b", "demo@manual-a_b"),
    ("demo@manual-" + "k" * 190 + "1", "demo@manual-" + "k" * 190 + "2"),  # long keys, one prefix
    ("nightly@2025-01-02T0300+0100", "nightly@2025-01-02T0300_0100"),
]


def test_distinct_job_ids_have_distinct_folders(tmp_path: Path) -> None:
    store = ArtifactStore(tmp_path)
    for first, second in CONFUSED:
        assert store.folder(first, "demo") != store.folder(second, "demo"), (first, second)


def test_deleting_one_jobs_cell_keeps_the_others_files(tmp_path: Path) -> None:
    store = ArtifactStore(tmp_path)
    for first, second in CONFUSED:
        kept = store.folder(second, "demo") / "1_p0.png"
        kept.parent.mkdir(parents=True, exist_ok=True)
        kept.write_bytes(b"png")
        store.folder(first, "demo").mkdir(parents=True, exist_ok=True)
        store.remove(first, "demo")  # the retention of the first job, its cache delivery, a release
        assert kept.read_bytes() == b"png", (first, second)


def test_a_plain_id_keeps_its_folder_name() -> None:
    # Folders written before the rendering changed are still found for every id of the
    # usual shape (ASCII letters, digits, `@._-`).
    for plain in ("demo@manual-order-42", "nightly@2025-01-02T0300-0500", "demo", "job@1.x_y"):
        assert safe_name(plain) == plain


@given(st.text(min_size=1, max_size=260), st.text(min_size=1, max_size=260))
def test_the_rendering_is_one_to_one_and_fits_a_file_name(first: str, second: str) -> None:
    a, b = safe_name(first), safe_name(second)
    assert (a == b) == (first == second)
    for name in (a, b):
        assert "/" not in name and "\x00" not in name and name not in (".", "..")
        assert len(name.encode()) <= 255  # NAME_MAX of Linux and macOS file systems
