"""Untrusted data from sources: ids, paths and third-party text.

Ids are checked against the source's shape before any use, every path stays under its
root, and every string from a third party is cleaned of NUL, lone surrogates and control
characters before it is stored or sent.
"""

from __future__ import annotations

import asyncio
import errno
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from curaflow.artifacts import ArtifactStore, safe_name
from curaflow.domain.models import Artifact, ArtifactFile, Work, WorkPage
from curaflow.domain.reasons import TerminalReason
from curaflow.domain.text import clean_json, clean_text
from curaflow.paths import PathEscape, inside
from curaflow.routes.base import DeliveryRequest, RouteError
from curaflow.routes.directory import DirectoryRoute
from curaflow.sources.errors import SourceError, WorkUnavailable
from curaflow.sources.pixiv.client import InvalidWork, is_work_id, parse_work

#: Text a source may put in a field: any character, with the ones cleaning changes often.
_TEXT_OF_A_FIELD = st.text(
    st.characters() | st.sampled_from(["\x00", "\x07", "\x1b", "\x7f", "\x85", "\ud83d", "\udc00", "\U0001f60a"])
)


def illust(**fields: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "id": 126872003,
        "title": "t",
        "type": "illust",
        "tags": [{"name": "a"}],
        "user": {"name": "u"},
        "create_date": "2025-02-04T00:00:00+09:00",
        "page_count": 1,
        "width": 10,
        "height": 10,
        "meta_single_page": {"original_image_url": "https://i.pximg.net/img-original/img/x/126872003_p0.png"},
    }
    return {**base, **fields}


@pytest.mark.parametrize(
    ("raw", "clean"),
    [
        ("plain 夕焼け 😀", "plain 夕焼け 😀"),
        ("broken \ud83d emoji", "broken \ufffd emoji"),
        ("low \udc00 half", "low \ufffd half"),
        ("nul\x00byte", "nulbyte"),
        ("bell\x07 esc\x1b[31m del\x7f c1\x85", "bell esc[31m del c1"),
        ("keeps\nnew lines\tand tabs", "keeps\nnew lines\tand tabs"),
    ],
)
def test_clean_text(raw: str, clean: str) -> None:
    assert clean_text(raw) == clean
    clean_text(raw).encode("utf-8")  # always encodable


def test_clean_json_cleans_every_string_and_key() -> None:
    body = json.loads('{"illusts": [{"title": "a\\ud83d", "tags": [{"name": "\\u0000x"}], "k\\udc00": 1}]}')
    cleaned = clean_json(body)
    assert cleaned == {"illusts": [{"title": "a\ufffd", "tags": [{"name": "x"}], "k\ufffd": 1}]}
    json.dumps(cleaned, ensure_ascii=False).encode("utf-8")


@pytest.mark.parametrize("good", ["1", "126872003", "9223372036854775807"])
def test_work_ids_of_the_pixiv_shape(good: str) -> None:
    assert is_work_id(good)


@pytest.mark.parametrize(
    "bad",
    ["", "0", "0123", "../../../escaped-1", "/tmp/escaped-2", "12a", "1 2", "１２", "99999999999999999999", "1\n"],
)
def test_anything_else_is_not_a_work_id(bad: str) -> None:
    assert not is_work_id(bad)
    with pytest.raises(InvalidWork):
        parse_work(illust(id=bad))


def test_parse_work_cleans_the_text_it_keeps() -> None:
    work = parse_work(
        illust(
            title="x\ud83d\x00",
            tags=[{"name": "t\x1b"}],
            user={"name": "n\udc00"},
            create_date="2025-02-04T00:00:00+09:00\x00",
        )
    )
    assert (work.title, work.tags, work.author, work.create_date) == (
        "x\ufffd",
        ["t"],
        "n\ufffd",
        "2025-02-04T00:00:00+09:00",
    )


@pytest.mark.parametrize(
    ("raw", "kept"),
    [
        ("2025-02-04T00:00:00+09:00", "2025-02-04T00:00:00+09:00"),
        ("2025-02-04", "2025-02-04"),
        ("2025-02-04 00:00:00", "2025-02-04 00:00:00"),
        ("1736470800", None),  # epoch seconds: no day of ours
        (1736470800, None),
        ("2025-13-40T00:00:00", None),
        ("04/02/2025", None),
        ("2025-02-04X", None),
        ("", None),
        (None, None),
        (["2025-02-04"], None),
    ],
)
def test_a_creation_date_is_kept_only_when_it_reads_as_an_iso_date(raw: object, kept: str | None) -> None:
    assert parse_work(illust(create_date=raw)).create_date == kept


@given(st.sampled_from(["title", "type", "create_date", "author", "tag", "url"]), _TEXT_OF_A_FIELD)
@example("title", "broken \ud83d emoji\x00 and a \x07bell")
@example("tag", "tag\udc00\x1b[31m")
@example("url", "https://i.pximg.net/a_p0.png\x00")
@example("create_date", "2025-02-04T00:00:00+09:00\x7f")
def test_a_work_read_from_a_cleaned_answer_is_the_work_the_cleaning_parse_gives(field: str, value: str) -> None:
    """The scan hands ``parse_work`` answers read with ``loads_clean`` and says so
    (``cleaned=True``: no text cleaned twice). Whatever text a field holds, the work is the
    one the parse that cleans every field again makes of the same answer, and every text
    it keeps is clean."""
    from curaflow.domain.text import loads_clean

    fields: dict[str, Any] = {
        "title": {"title": value},
        "type": {"type": value},
        "create_date": {"create_date": value},
        "author": {"user": {"name": value}},
        "tag": {"tags": [{"name": "a"}, {"name": value}]},
        "url": {"meta_single_page": {"original_image_url": value}},
    }[field]
    answer = loads_clean(json.dumps(illust(**fields)))
    try:
        work = parse_work(answer)
    except InvalidWork:
        with pytest.raises(InvalidWork):
            parse_work(answer, cleaned=True)
        return
    assert parse_work(answer, cleaned=True) == work
    texts = [work.kind, work.title, work.author or "", work.create_date or "", *work.tags, *(p.url for p in work.pages)]
    assert [clean_text(t) for t in texts] == texts


def test_parse_work_reads_every_page_and_refuses_what_is_not_a_field() -> None:
    """A multi-page work: every page in order (its original; none without it — never its
    ``large`` sample, 2026-12-06), page 0 with the work's size, URLs cleaned. A page URL
    that is not text, or a size that is not a number, makes the work invalid (it is never
    used), as a broken id does."""
    pages = [
        {"image_urls": {"original": "https://i.pximg.net/a_p0.png\x00"}},
        {"image_urls": {"large": "https://i.pximg.net/a_p1.jpg"}},
        {"image_urls": {}},
    ]
    work = parse_work(illust(page_count=3, meta_pages=pages, width=640, height="480"))
    assert [(p.index, p.url) for p in work.pages] == [
        (0, "https://i.pximg.net/a_p0.png"),
        (1, ""),
        (2, ""),
    ]
    assert (work.pages[0].width, work.pages[0].height, work.pages[1].width) == (640, 480, None)
    single = parse_work(illust())
    assert [(p.index, p.url, p.width, p.height) for p in single.pages] == [
        (0, "https://i.pximg.net/img-original/img/x/126872003_p0.png", 10, 10)
    ]
    for broken in (
        illust(page_count=2, meta_pages=[{"image_urls": {"original": 5}}, *pages]),
        illust(meta_single_page={"original_image_url": ["https://i.pximg.net/x.png"]}),
        illust(page_count=3, meta_pages=pages, width="wide"),
        illust(page_count=3, meta_pages="pages"),
    ):
        with pytest.raises(InvalidWork):
            parse_work(broken)


@pytest.mark.parametrize(
    ("expires_in", "lifetime"),
    [
        (3600, 3600.0),
        ("3600", 3600.0),
        (1800.5, 1800.5),
        (5, 60.0),  # a few seconds: refreshed at most once a minute
        (10**6, 86_400.0),  # longer than a day: refreshed daily all the same
        (10**400, 86_400.0),  # beyond a float
        ("1e999", 86_400.0),
        (float("inf"), 86_400.0),
        (None, 3600.0),
        (0, 3600.0),
        (-5, 3600.0),
        (float("nan"), 3600.0),
        ("soon", 3600.0),
        (True, 3600.0),
        ([3600], 3600.0),
        ({"s": 3600}, 3600.0),
    ],
)
def test_a_token_lifetime_is_a_number_within_bounds_or_pixivs(expires_in: object, lifetime: float) -> None:
    from curaflow.sources.pixiv.client import token_lifetime_s

    assert token_lifetime_s(expires_in) == lifetime


@pytest.mark.parametrize("field", ["x_restrict", "illust_ai_type", "total_bookmarks", "page_count", "width"])
@pytest.mark.parametrize("number", [float("inf"), float("-inf"), float("nan")])
def test_a_number_no_integer_holds_makes_the_work_invalid_not_a_crash(field: str, number: float) -> None:
    """``1e999`` or ``Infinity`` in a source's JSON reads as an infinite float (the
    standard library's parser; orjson refuses them): a field of the work that cannot be
    its integer makes the work invalid (never used, counted), never an ``OverflowError``
    out of the page's parse."""
    with pytest.raises(InvalidWork):
        parse_work(illust(**{field: number}))


@pytest.mark.parametrize(
    "url",
    [
        "https://i.pximg.net/a b.png",
        "https://i.pximg.net/a\u3000b.png",  # ideographic space
        "https://i.pximg.net/a\u2028b.png",  # line separator
        "https://i.pximg.net/a\x1cb.png",  # a separator C0 code that str.isspace counts
        "https://i.pximg.net/a\u202eb.png",  # right-to-left override: a format character
    ],
)
def test_a_url_holding_whitespace_or_an_unprintable_character_is_never_requested(url: str) -> None:
    from curaflow.outbound.destinations import url_problem

    assert url_problem(url) == "a URL holding whitespace or an unprintable character"
    assert url_problem("https://i.pximg.net/img-original/img/2024/01/01/00/00/00/1_p0.jpg") is None


def test_errors_from_third_parties_carry_clean_text() -> None:
    for err in (
        SourceError("remote_http_error", "pixiv said \ud83d\x00"),  # type: ignore[arg-type]
        RouteError("delivery_rejected", "telegram 400 Bad Request: \ud83d\x00"),  # type: ignore[arg-type]
        WorkUnavailable("1", "gone \ud83d\x00"),
    ):
        str(err).encode("utf-8")
        assert "\x00" not in str(err)
    assert WorkUnavailable("1", "gone \ud83d").why == "gone \ufffd"


def test_paths_stay_under_their_root(tmp_path: Path) -> None:
    assert inside(tmp_path, "a", "b.png") == tmp_path / "a" / "b.png"
    for parts in (("..", "x"), ("../../etc",), ("/etc/passwd",), ("a", "../../b"), (str(tmp_path.parent),)):
        with pytest.raises(PathEscape):
            inside(tmp_path, *parts)


def test_safe_names_are_never_dot_names() -> None:
    assert safe_name("..") not in (".", "..") and safe_name(".") not in (".", "..")
    assert "/" not in safe_name("../x")


def hostile_work(work_id: str) -> Work:
    # A Work that was never validated (as if built by a bug): the stores must still refuse it.
    return Work.model_construct(
        work_id=work_id,
        work_type="illustration",
        title="t",
        url="",
        tags=[],
        pages=[WorkPage(index=0, url="http://127.0.0.1:9/i/x.png")],
    )


def test_the_directory_route_refuses_a_path_outside_its_root(tmp_path: Path) -> None:
    src = tmp_path / "src.png"
    src.write_bytes(b"x")
    root = tmp_path / "a" / "b" / "out"
    route = DirectoryRoute("out", root)
    for work_id in ("../../../escaped-1", str(tmp_path / "escaped-2")):
        request = DeliveryRequest(
            job_id="j",
            target_id="t",
            route="out",
            idempotency_key="k",
            work=hostile_work(work_id),
            artifact=Artifact(work_id=work_id, files=[ArtifactFile(path=str(src), bytes=1, mime="image/png")]),
        )
        with pytest.raises(RouteError) as caught:
            asyncio.run(route.deliver(request))
        assert caught.value.permanent
    assert [p for p in tmp_path.rglob("*") if "escaped" in p.name] == []


def test_a_loop_of_symbolic_links_is_the_disk_refusing_not_a_crash(tmp_path: Path) -> None:
    # A loop under a route's directory (or the artifacts directory) is the disk's state:
    # an OSError (ELOOP, as Python 3.13 reports it), which the directory route calls the
    # route's refusal (route_refused: a loop does not pass by itself; the work held back,
    # never refused) — not a RuntimeError out of the route.
    root = tmp_path / "out"
    root.mkdir()
    (root / "a").symlink_to(root / "b")
    (root / "b").symlink_to(root / "a")
    with pytest.raises(OSError) as caught:
        inside(root, "a", "x.png")
    assert caught.value.errno == errno.ELOOP
    src = tmp_path / "src.png"
    src.write_bytes(b"x")
    (root / "1").symlink_to(root / "2")
    (root / "2").symlink_to(root / "1")
    request = DeliveryRequest(
        job_id="j",
        target_id="t",
        route="out",
        idempotency_key="k",
        work=hostile_work("1"),
        artifact=Artifact(work_id="1", files=[ArtifactFile(path=str(src), bytes=1, mime="image/png")]),
    )
    with pytest.raises(RouteError) as refused:
        asyncio.run(DirectoryRoute("out", root).deliver(request))
    assert refused.value.reason == TerminalReason.ROUTE_REFUSED and refused.value.answer == "directory eloop"


def test_the_artifact_store_refuses_a_path_outside_its_root(tmp_path: Path) -> None:
    store = ArtifactStore(tmp_path / "artifacts")
    with pytest.raises(PathEscape):
        asyncio.run(store.fetch(None, hostile_work("../../../escaped-1"), "job", "t"))  # type: ignore[arg-type]
    assert [p for p in tmp_path.rglob("*") if "escaped" in p.name] == []


#: Strings from any characters plus the ones the fast path must tell apart: lone and paired
#: surrogates, backslashes and a "u" (escaped backslashes before "ud83d"), DEL, controls.
_TRICKY = st.text(
    st.characters()
    | st.sampled_from(
        ["\\", "u", "d", "8", "3", "\ud83d", "\ude0a", "\U0001f60a", "\x7f", "\x08", "\x85", "\u00e9", '"']
    )
)


@given(st.recursive(_TRICKY | st.integers() | st.none(), lambda c: st.lists(c) | st.dictionaries(_TRICKY, c)))
@example("\x08")  # json.dumps writes the short escapes \b and \f: controls to clean
@example({"\x0c": "x"})
@example("\ud83d")  # lone surrogates, high and low, as a value and as a key
@example({"\ude0a": "x"})
@example(["\U0001f60a", "\udfff"])  # a valid pair (an emoji) beside a lone one
@example("\\ud83d\ude0a")  # an escaped backslash, then a lone low surrogate: no pair
@example("\\\x08")  # an escaped backslash, then a control to clean
@example("\ud83d\\")  # a lone surrogate, then an escaped backslash
@example(["\\", "\U0001f60a"])  # an escaped backslash, then a valid pair: nothing to clean
def test_the_fast_json_path_cleans_exactly_like_the_walk(value: object) -> None:
    """``loads_clean`` skips the walk only when nothing could change: same result either way."""
    import json

    from curaflow.domain.text import clean_json, loads_clean

    for text in (json.dumps(value), json.dumps(value, ensure_ascii=False)):
        try:
            parsed = json.loads(text)
        except ValueError:
            continue
        assert loads_clean(text) == clean_json(parsed)


def test_emoji_in_ascii_only_json_take_the_fast_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """Pixiv writes JSON in ASCII: an emoji arrives as a surrogate-pair escape. A page
    whose surrogates are all paired is not walked (the walk cost the worker ~2 ms per
    ranking page); a page with a lone one still is."""
    import json

    from curaflow.domain import text

    page = json.dumps({"illusts": [{"title": "\U0001f60a" * 3, "tags": [{"name": "x\U0001f338"}]}] * 30})
    assert "\\ud83d" in page  # the pair is escaped, as on the wire

    def no_walk(value: object) -> object:
        raise AssertionError("walked a document with nothing to clean")

    monkeypatch.setattr(text, "clean_json", no_walk)
    assert text.loads_clean(page) == json.loads(page)
    monkeypatch.undo()
    broken = page.replace("\\ude0a", "", 1)  # one high surrogate left alone
    assert "\ufffd" in json.dumps(text.loads_clean(broken), ensure_ascii=False)


_JSON_VALUES = st.recursive(
    _TRICKY | st.integers() | st.floats() | st.booleans() | st.none(),
    lambda c: st.lists(c) | st.dictionaries(_TRICKY, c),
)


@given(_JSON_VALUES, st.booleans())
@example(2**64 + 1, True)  # beyond 64 bits: orjson would read a float
@example(-(2**63) - 1, True)
@example(10**18, True)
@example(float("nan"), True)  # NaN / Infinity: the standard library reads them, orjson refuses
@example([float("inf"), float("-inf")], True)
@example("\ud83d", True)  # a lone surrogate escape
@example({"a": 1.0000000000000002, "b": 5e-324, "c": 1.7976931348623157e308}, True)
def test_parse_json_reads_what_the_standard_library_reads(value: object, ascii_only: bool) -> None:
    """``parse_json`` gives ``json.loads``'s result — value and types — on any text."""
    from curaflow.domain.text import parse_json

    text = json.dumps(value, ensure_ascii=ascii_only)
    expected, got = json.loads(text), parse_json(text)
    # NaN != NaN: compare the documents as the standard library writes them back
    assert json.dumps(got) == json.dumps(expected)
    assert type(got) is type(expected)


@pytest.mark.parametrize(
    "text",
    ['{"a": 1, "a": 2}', "1e400", '{"id": 123456789012345678901234567890}', "[1, 2.5]"],
)
def test_parse_json_edges_read_as_the_standard_library_reads_them(text: str) -> None:
    """Duplicate keys (the last wins), a number out of range, a long integer."""
    from curaflow.domain.text import parse_json

    assert parse_json(text) == json.loads(text)


def test_nesting_too_deep_for_either_parser_is_a_malformed_answer() -> None:
    """Over orjson's 1 024 levels the standard library decides (and refuses beyond its
    recursion limit); ``loads_clean`` calls that a malformed answer, never a crash."""
    from curaflow.domain.text import loads_clean, parse_json

    deep = "[" * 5000 + "]" * 5000
    with pytest.raises(RecursionError):
        parse_json(deep)
    with pytest.raises(ValueError, match="nested too deep"):
        loads_clean(deep)


@pytest.mark.parametrize("text", ["", "{", "NaNx", "\ufeff{}", '{"a": 1,}', "[1] 2"])
def test_parse_json_refuses_what_the_standard_library_refuses(text: str) -> None:
    from curaflow.domain.text import parse_json

    with pytest.raises(json.JSONDecodeError):
        json.loads(text)
    with pytest.raises(json.JSONDecodeError):
        parse_json(text)


def test_a_name_that_is_a_symbolic_link_out_of_the_root_is_refused(tmp_path: Path) -> None:
    root, outside = tmp_path / "root", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    (root / "kept.png").write_bytes(b"x")
    (root / "out.png").symlink_to(outside / "secret.png")
    (root / "dir").symlink_to(outside)
    (root / "in.png").symlink_to(root / "kept.png")
    assert inside(root, "kept.png") == root / "kept.png"
    assert inside(root, "new.png") == root / "new.png"  # not there yet
    assert inside(root, "in.png") == root / "in.png"  # a link that stays under the root
    assert inside(tmp_path / "not-yet", "a.png") == tmp_path / "not-yet" / "a.png"
    for name in ("out.png", "dir", ".", "..", "\ud800"):  # a lone surrogate is no file name
        with pytest.raises(PathEscape):
            inside(root, name)
    (outside / "sub").mkdir()
    (root / "real").mkdir()
    (root / "real" / "up").symlink_to(outside)
    assert inside(root, "real", "x.png") == root / "real" / "x.png"
    assert inside(root, "real", "new", "x.png") == root / "real" / "new" / "x.png"
    for parts in (
        ("dir", "x.png"),
        ("dir", "sub"),
        ("real", "up", "x.png"),
        ("real", "..", "..", "x"),
        ("new", "\ud800"),
    ):
        with pytest.raises(PathEscape):
            inside(root, *parts)
    (root / "file").write_bytes(b"")
    assert inside(root, "file", "x.png") == root / "file" / "x.png"  # under the root (a write fails later)
