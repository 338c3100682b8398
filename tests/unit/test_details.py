"""The job's *current details* in the Temporal UI.

UI 2.54.1 (the version the embedded dev server ships and ``tests/ui`` drives) renders
user markdown without table support: a table's cells ran together
(``demo submitteddone``); it also joins the lines of a nested list. Each cell of the job
is a line (target, state) followed by a top-level bullet list, one bullet per field.
"""

from __future__ import annotations

import re
from html import unescape

import pytest
from markdown_it import MarkdownIt

from curaflow.domain.messages import JobInput, JobState, TargetSpec
from curaflow.domain.models import CellSnapshot, RouteDelivery, Work
from tests.markdown_support import MD as MD_UI
from tests.markdown_support import shown
from workflows.details import DETAILS_LIMIT, render_details

INP = JobInput(
    job_id="demo@manual-k",
    plan_id="demo",
    created_at_ms=1_735_700_400_000,
    deadline_at_ms=1_735_702_200_000,
    targets=[TargetSpec(target_id="demo"), TargetSpec(target_id="other")],
)


def state() -> JobState:
    done = CellSnapshot(
        target_id="demo",
        state="submitted",
        stage="done",
        work_id="126839080",
        work=Work(work_id="126839080", title="sky | sea", url="https://www.pixiv.net/artworks/126839080"),
        deliveries=[
            RouteDelivery(route="out", status="delivered", idempotency_key="k1"),
            RouteDelivery(route="hook", status="delivered", idempotency_key="k2"),
        ],
    )
    failed = CellSnapshot(target_id="other", state="no_candidate", stage="done", reason="duplicate_exhausted")
    return JobState(
        job_id="demo@manual-k",
        status="succeeded",
        stage="done",
        business_status="partial_success",
        cells=[done, failed],
    )


def plain_lines(markdown: str) -> list[str]:
    """What a renderer without table support shows: markup stripped, one entry per line."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", markdown)
    text = re.sub(r"[*`|]", "", text)
    return [re.sub(r"^\s*[-]\s*", "", line).strip() for line in text.splitlines() if line.strip()]


def test_each_cell_is_a_line_and_a_bullet_list_with_one_field_per_line() -> None:
    details = render_details(INP, state())

    assert "|---" not in details  # no table: UI 2.54.1 runs table cells together
    lines = plain_lines(details)
    assert "demo: submitted" in lines
    assert "stage: done" in lines
    assert "work: 126839080 sky / sea" in lines
    assert "deliveries: out: delivered, hook: delivered" in lines
    assert "other: no_candidate" in lines
    assert "reason: duplicate_exhausted" in lines
    assert "business status: partial_success" in lines
    # top-level bullets only (the UI joins a nested list's lines), each list after a blank line
    assert re.search(r"^\*\*demo\*\*: submitted\n\n- stage: done\n- work: ", details, re.M)
    assert not re.search(r"^[ \t]+- ", details, re.M)
    assert "\n\n\n" not in details


def test_details_stay_within_the_limit() -> None:
    many = state().model_copy(
        update={"cells": [c.model_copy(update={"target_id": f"t{i}"}) for i in range(400) for c in state().cells[:1]]}
    )
    assert len(render_details(INP, many)) <= DETAILS_LIMIT


def test_an_open_jobs_details_say_where_its_outcome_is_read_if_the_execution_is_closed() -> None:
    """A terminated or timed-out execution runs no code: its details stay as they were, so
    they say where the job's outcome is (the ledger) while the job is open, never after."""
    live = render_details(INP, state().model_copy(update={"business_status": None, "status": "running"}))
    assert f"curaflow status {INP.job_id}" in live and "Terminated or timed out" in live
    final = render_details(INP, state())
    assert "curaflow status" not in final


# --- untrusted text in the details --------------------------------------------------------
# A work's title is the source's text (Pixiv's: cleaned of controls, line breaks kept) and a
# job id holds the consumer's idempotency key (any character but controls). The details are
# markdown the UI renders: neither may add a line, a heading, emphasis, code, an image or
# HTML of its own, break the work's link, or run longer than a bullet. CommonMark
# (markdown-it) stands for the UI's renderer.

MD = MarkdownIt("commonmark")
URL = "https://www.pixiv.net/artworks/126839080"


def with_title(title: str) -> JobState:
    done = state()
    work = Work(work_id="126839080", title=title, url=URL)
    return done.model_copy(update={"cells": [done.cells[0].model_copy(update={"work": work}), done.cells[1]]})


def rendered(details: str) -> tuple[str, list[str]]:
    """The HTML of ``details`` with every link's text replaced by ``LINK``, and the texts."""
    html = MD.render(details)
    inner = re.findall(r'<a href="[^"]*">(.*?)</a>', html, re.S)
    assert not any("<" in text for text in inner)  # text only: no tag (HTML, code, emphasis) inside
    texts = [unescape(text) for text in inner]
    return re.sub(r'(<a href="[^"]*">).*?</a>', r"\1LINK</a>", html, flags=re.S), texts


@pytest.mark.parametrize(
    ("title", "shown"),
    [
        ("sky\n\n**other**: submitted\n\n- reason: forged", "sky **other**: submitted - reason: forged"),
        ("# heading\r\n> quote\u2028next\u2029para\x85nel\tend", "# heading > quote next para nel end"),
        ("a `b", "a `b"),  # a code span from here to the next backtick of the details
        ("ends with a backslash\\", "ends with a backslash\\"),  # escaped the link's ]
        ("<img src=x onerror=alert(1)> <b>bold</b>", "<img src=x onerror=alert(1)> <b>bold</b>"),
        ("**strong** _em_ *em* ~~gone~~ &amp; &#65;", "**strong** _em_ *em* ~~gone~~ &amp; &#65;"),
        ("![pic)(https://x/p.png)", "!(pic)(https://x/p.png)"),
        ("\u202eevil\u202c \u2066isolated\u2069", "evil isolated"),  # no bidi reordering of the line
        ("sky | sea [1]", "sky / sea (1)"),
        ("x" * 100_000, "x" * 60),
    ],
)
def test_a_works_title_shows_as_its_text_and_changes_nothing_else(title: str, shown: str) -> None:
    html, texts = rendered(render_details(INP, with_title(title)))
    plain_html, _ = rendered(render_details(INP, with_title("plain")))
    assert html == plain_html  # the same lines, bullets and emphasis as for a plain title
    assert [text.rstrip() for text in texts] == [f"126839080 {shown}"]  # (a space may end it: below)


def test_a_job_id_shows_as_code_whatever_its_key_holds() -> None:
    job_id = "demo@manual-a`b ``c **d** <i>e</i> \\"
    inp = INP.model_copy(update={"job_id": job_id})
    open_job = state().model_copy(update={"business_status": None, "status": "running", "job_id": job_id})
    html = MD.render(render_details(inp, open_job))
    codes = [unescape(c) for c in re.findall(r"<code>(.*?)</code>", html, re.S)]
    assert job_id in codes  # the head
    assert f"curaflow status {job_id}" in codes  # the open note
    assert "<strong>d</strong>" not in html and "<i>" not in html


def test_a_works_url_stays_one_link_whatever_it_holds() -> None:
    done = state()
    work = Work(work_id="126839080", title="t", url="https://x.test/a b)(c<d>\\e`f")
    cells = [done.cells[0].model_copy(update={"work": work}), done.cells[1]]
    html, texts = rendered(render_details(INP, done.model_copy(update={"cells": cells})))
    assert texts == ["126839080 t"]
    assert 'href="https://x.test/a%20b%29%28c%3Cd%3E%5Ce%60f"' in html


@pytest.mark.parametrize("title", ["end\\", "end\\\\", "\\"])
def test_no_backslash_stands_right_before_the_links_bracket(title: str) -> None:
    """The Temporal UI's renderer (2.54.1, checked in a browser) reads an escaped backslash
    right before a link's ``]`` as escaping the bracket: the link is shown as raw text
    (CommonMark does not). A title ending in a backslash keeps a space before the ``]``."""
    details = render_details(INP, with_title(title))
    assert "\\](" not in details
    _, texts = rendered(details)
    assert [text.rstrip() for text in texts] == [f"126839080 {title}"]


# --- what the Temporal UI's renderer does beyond CommonMark --------------------------------
# UI 2.54.1 links a URL in the text (http, https, ftp, mailto: any case) and reads $…$ as a
# formula (probed with Chromium; tests/markdown_support.py models both): a title naming an
# address would be a live link the source wrote, a title with two prices a formula.


@pytest.mark.parametrize("url", [URL, ""], ids=["linked", "unlinked"])
@pytest.mark.parametrize(
    "title",
    [
        "see http://evil.test/x",
        "HTTPS://EVIL.TEST and ftp://evil.test/f",
        "mail Mailto:a@evil.test",
        "$5 and $6",
        "<img src=http://127.0.0.1:1/a.png>",
    ],
)
def test_a_url_or_a_formula_in_a_title_shows_as_text_in_the_ui(title: str, url: str) -> None:
    """Inside the work's link the UI links nothing more (no link in a link); a work without
    a URL is plain text, where it would."""
    done = state()
    work = Work(work_id="126839080", title=title, url=url)
    cells = [done.cells[0].model_copy(update={"work": work}), done.cells[1]]
    details = render_details(INP, done.model_copy(update={"cells": cells}))

    html = shown(details)
    assert "math" not in html.tags, details  # no formula
    assert f"126839080 {title}" in html.text  # shown as written
    assert len(re.findall(r"<a ", MD_UI.render(details))) == (1 if url else 0), MD_UI.render(details)
    assert not re.search(r"(?i)mailto:", details)  # the UI links mailto: too (not modelled by MD_UI)
