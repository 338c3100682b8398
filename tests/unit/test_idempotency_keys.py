"""The one reading of an idempotency key (:mod:`curaflow.protocol.keys`), by every entry.

Admission (the ``Task`` model behind ``POST /jobs``, ``curaflow run`` and the ``admit``
activity), the Temporal start's job id (:func:`curaflow.jobs.submit.job_id_for`), the
lookup and the legacy shim all read a key through :func:`normalise_key`: whitespace at
the ends (any Unicode whitespace, U+2028 included) is not part of it, case and Unicode
normal form are. The HTTP paths themselves are exercised in
``tests/integration/test_api_edges.py``.
"""

from __future__ import annotations

import unicodedata
import uuid
from typing import Any

from hypothesis import example, given, settings
from hypothesis import strategies as st

from curaflow.jobs.submit import job_id_for
from curaflow.protocol.keys import MAX_KEY_LENGTH, key_refusal, manual_job_id, normalise_key, same_request_id
from curaflow.protocol.task import validate_task

#: Every character ``str.strip()`` trims: the Unicode White_Space set and U+001C–U+001F.
WHITESPACE = [chr(c) for c in range(0x110000) if chr(c).isspace()]
PADS = st.text(st.sampled_from(WHITESPACE), max_size=4)
CORE = st.text(st.characters(codec="utf-8", exclude_categories=("Cs", "Cc")), min_size=1, max_size=60).filter(
    lambda s: s.strip() == s
)
FORMS = ("NFC", "NFD", "NFKC", "NFKD")


def task(key: Any) -> dict[str, Any]:
    return {
        "protocol_version": "1",
        "job_type": "candidate_search",
        "idempotency_key": key,
        "params": {"target_id": "demo"},
    }


def test_the_whitespace_trimmed_is_unicode_whitespace_and_nothing_else() -> None:
    assert {"\u2028", "\u2029", "\u00a0", "\u3000", "\u1680", "\u202f", "\u205f", " ", "\t"} <= set(WHITESPACE)
    # not whitespace, so part of the key (trimming them would give stored keys a second job id)
    for char in ("\u200b", "\ufeff", "\u180e"):
        assert normalise_key(f"{char}k{char}") == f"{char}k{char}"


@settings(max_examples=300, deadline=None, derandomize=True, database=None)
@given(core=CORE, before=PADS, after=PADS)
@example(core="k", before=" ", after="")
@example(core="k", before="", after="\u2028")
@example(core="Abc", before="\u3000", after="\u00a0\u2029")
def test_every_path_reads_an_accepted_key_alike(core: str, before: str, after: str) -> None:
    raw = f"{before}{core}{after}"
    accepted = key_refusal(normalise_key(raw)) is None
    if not accepted:
        assert len(core) > MAX_KEY_LENGTH or not core.strip()
        return
    validated = validate_task(task(raw))  # admission: HTTP, curaflow run, the admit activity
    assert validated.idempotency_key == normalise_key(raw) == core
    job_id = f"demo@manual-{core.lower()}"
    assert job_id_for(task(raw)) == job_id  # the Temporal start's workflow id
    assert manual_job_id("demo", raw) == manual_job_id("demo", core) == job_id  # the legacy shim's and admission's
    # the lookup reads any spelling of the pads as the stored key
    assert normalise_key(f"{after}{core}{before}") == validated.idempotency_key


@settings(max_examples=200, deadline=None, derandomize=True, database=None)
@given(core=CORE, form=st.sampled_from(FORMS), pad=PADS)
@example(core="é", form="NFD", pad="")
@example(core="ﬁ", form="NFKC", pad=" ")
@example(core="①", form="NFKC", pad="\u2028")
def test_a_key_keeps_its_normal_form(core: str, form: str, pad: str) -> None:
    # No Unicode normalisation: a client re-sending its key in its own form reaches its
    # job; another form of it is another key (another job), never a merge.
    other = unicodedata.normalize(form, core)
    assert normalise_key(f"{pad}{other}{pad}") == other.strip()
    if other.strip() and other.strip() != core and key_refusal(other.strip()) is None:
        assert validate_task(task(other)).idempotency_key != core
        if other.strip().lower() != core.lower():
            assert job_id_for(task(other)) != job_id_for(task(core))


def test_keys_refused_by_every_path() -> None:
    assert key_refusal(normalise_key(" \u2028 ")) == "blank"
    assert key_refusal("a\nb") == key_refusal("a\x00b") == key_refusal("a\ud800") == "control"
    assert key_refusal("x" * (MAX_KEY_LENGTH + 1)) == "length"
    assert key_refusal(normalise_key(" " + "x" * MAX_KEY_LENGTH + "\u2028")) is None  # counted once trimmed


@settings(max_examples=100, deadline=None, derandomize=True, database=None)
@given(request=st.uuids(), flips=st.lists(st.booleans(), min_size=36, max_size=36), pad=PADS)
def test_a_request_id_is_one_uuid_in_any_letter_case(request: uuid.UUID, flips: list[bool], pad: str) -> None:
    stored = str(request)
    variant = "".join(c.upper() if flip else c for c, flip in zip(stored, flips, strict=True))
    assert same_request_id(stored, f"{pad}{variant}{pad}")
    assert same_request_id(variant.upper(), stored)
    assert manual_job_id("demo", variant) == manual_job_id("demo", stored)
    assert not same_request_id(stored, str(uuid.UUID(int=request.int ^ 1)))


def test_keys_that_are_not_uuids_keep_their_case() -> None:
    assert not same_request_id("Order-42", "order-42")
    assert same_request_id("Order-42", " Order-42\u2028")
