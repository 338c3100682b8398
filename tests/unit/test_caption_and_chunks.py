"""Caption truncation policy and deterministic chunking of multi-page works."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from hypothesis import given, settings
from hypothesis import strategies as st

from curaflow.domain.models import Work
from curaflow.routes.caption import build_caption, cut, hashtag, utf16_len
from curaflow.routes.chunks import balanced_chunks, packed_chunks, resumed_parts


def work(title: str = "夕焼けの街", tags: list[str] | None = None) -> Work:
    return Work(
        work_id="126839080",
        title=title,
        url="https://www.pixiv.net/artworks/126839080",
        author="artist-001",
        tags=tags if tags is not None else ["オリジナル", "風景", "Fate/GrandOrder"],
    )


def test_caption_layout_title_author_url_hashtags() -> None:
    caption = build_caption(work(), 1024)
    assert caption.split("\n") == [
        "夕焼けの街",
        "by artist-001",
        "https://www.pixiv.net/artworks/126839080",
        "#オリジナル #風景 #Fate_GrandOrder",
    ]


def test_tags_are_dropped_whole_before_the_title_is_cut() -> None:
    w = work(tags=["a" * 30, "b" * 30])
    full = build_caption(w, 1024)
    limit = len(full) - 10  # room for the first tag only
    caption = build_caption(w, limit)
    assert "#" + "a" * 30 in caption and "b" * 30 not in caption
    assert caption.startswith("夕焼けの街\n")
    assert len(caption) <= limit


def test_long_title_is_cut_with_an_ellipsis_and_the_url_survives() -> None:
    w = work(title="長" * 3000, tags=["tag"] * 50)
    caption = build_caption(w, 1024, measure=utf16_len)
    assert utf16_len(caption) <= 1024
    assert "https://www.pixiv.net/artworks/126839080" in caption
    assert caption.split("\n")[0].endswith("…")


def test_utf16_counting_protects_against_astral_characters() -> None:
    w = work(title="😀" * 600)  # 1200 UTF-16 units, 600 characters
    caption = build_caption(w, 1024, measure=utf16_len)
    assert utf16_len(caption) <= 1024
    assert len(caption) < 1024


def test_later_parts_carry_the_url_and_part_number_not_the_tags() -> None:
    caption = build_caption(work(), 1024, part=(2, 3))
    assert "https://www.pixiv.net/artworks/126839080 (2/3)" in caption
    assert "#" not in caption


def test_tiny_limit_still_bounded() -> None:
    for limit in (0, 1, 5, 20, 45):
        assert len(build_caption(work(), limit)) <= limit


def test_cut_and_hashtag() -> None:
    assert cut("abcdef", 4) == "abc…"
    assert cut("abc", 4) == "abc"
    assert hashtag("Fate/Grand Order") == "#Fate_Grand_Order"
    assert hashtag("///") == ""


def test_balanced_chunks_never_leave_an_album_of_one() -> None:
    sizes = {n: [len(c) for c in balanced_chunks(list(range(n)), 10)] for n in (1, 2, 10, 11, 14, 20, 21, 25, 88)}
    assert sizes[1] == [1]
    assert sizes[10] == [10]
    assert sizes[11] == [6, 5]
    assert sizes[14] == [7, 7]
    assert sizes[21] == [7, 7, 7]
    assert sizes[25] == [9, 8, 8]
    for n, chunks in sizes.items():
        assert sum(chunks) == n
        assert all(c <= 10 for c in chunks)
        assert n < 2 or all(c >= 2 for c in chunks)
    # deterministic: the same pages always split the same way, in order
    assert balanced_chunks(list(range(14)), 10) == [list(range(7)), list(range(7, 14))]


def test_packed_chunks_respect_count_and_bytes() -> None:
    assert packed_chunks([1] * 12, 10, 100) == [list(range(10)), [10, 11]]
    assert packed_chunks([60, 50, 40, 10], 10, 100) == [[0], [1, 2, 3]]
    assert packed_chunks([], 10, 100) == []


# ---- source text never steers how a caption is shown ------------------------------------------

HOSTILE_TITLE = "**bold** __u__ ||spoiler|| [click](https://evil.example) <@&1> # head \u202egnp.exe"


def test_bidi_controls_never_reach_a_caption_on_any_route() -> None:
    bidi = "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u061c"
    w = work(title=f"left{bidi}right", tags=[f"t{bidi}ag"])
    w.author = "\u202eartist"
    for measure in (len, utf16_len):
        caption = build_caption(w, 1024, measure=measure)
        assert not any(ch in caption for ch in bidi), caption
        assert caption.split("\n")[:2] == ["leftright", "by artist"]


def test_a_discord_caption_shows_markdown_as_written() -> None:
    import re

    from curaflow.routes.caption import escape_markdown

    caption = build_caption(work(title=HOSTILE_TITLE, tags=["a_b_c"]), 2000, escape=escape_markdown)
    title, _author, url, tags = caption.split("\n")
    # every Markdown character of the source text is escaped: nothing formats, links or mentions
    assert re.search(r"(?<!\\)[*_~`|\[\]()<>#:]", title.replace("\\\\", "")) is None, title
    assert "\u202e" not in title
    assert title.replace("\\", "") == HOSTILE_TITLE.replace("\u202e", "")  # shown as written
    assert url == "https://www.pixiv.net/artworks/126839080"  # curaflow's own line: a live link
    assert tags == r"\#a\_b\_c"


def test_escaping_counts_against_the_limit() -> None:
    from curaflow.routes.caption import escape_markdown

    for limit in (60, 80, 100, 2000):
        caption = build_caption(work(title="*" * 500), limit, escape=escape_markdown)
        assert len(caption) <= limit
        head = caption.split("\n")[0]
        assert head.endswith("…") or limit == 2000
        assert head.rstrip("…") == "\\*" * (len(head.rstrip("…")) // 2)  # never a lone, unescaped star


@settings(max_examples=300, deadline=None)
@given(
    sizes=st.lists(st.integers(min_value=1, max_value=90), min_size=1, max_size=40),
    first_room=st.integers(min_value=100, max_value=400),
    then_room=st.integers(min_value=100, max_value=400),
    confirmed=st.integers(min_value=0, max_value=40),
    partial_last=st.booleans(),
)
def test_a_delivery_resumed_under_another_split_sends_every_page_once(
    sizes: list[int], first_room: int, then_room: int, confirmed: int, partial_last: bool
) -> None:
    # The parts confirmed under one split, resumed under another (a worker with other
    # limits): the recorded parts stand, every later page is in exactly one later part.
    pages = list(range(len(sizes)))

    def split(room: int) -> Callable[[Sequence[int]], list[list[int]]]:
        def by(run: Sequence[int]) -> list[list[int]]:
            return [[run[i] for i in group] for group in packed_chunks([sizes[p] for p in run], 10, room)]

        return by

    recorded = split(first_room)(pages)[:confirmed]
    parts = resumed_parts(pages, [len(part) for part in recorded], split(then_room), partial_last=partial_last)
    assert [p for part in parts for p in part] == pages
    if recorded and partial_last:
        # the last recorded part may be an album posted partly: the part at its place
        # begins with its pages, and the route sends only the rest of that part
        assert parts[: len(recorded) - 1] == recorded[:-1]
        assert parts[len(recorded) - 1][: len(recorded[-1])] == recorded[-1]
    else:
        assert parts[: len(recorded)] == recorded
    if first_room == then_room:
        assert parts == split(then_room)(pages)  # the same split: resumed where it stopped


def test_a_partly_posted_album_under_the_same_split_is_continued_in_its_part() -> None:
    pages = list(range(14))
    split = lambda run: balanced_chunks(list(run), 10)  # noqa: E731 - the album split
    assert resumed_parts(pages, [3], split, partial_last=True) == [pages[:7], pages[7:]]
    assert resumed_parts(pages, [3], split) == [pages[:3], pages[3:9], pages[9:]]  # another split's part
