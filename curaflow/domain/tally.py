"""The tally of a cell's search: what happened to each work it examined, and what it says.

A cell that binds no work it can use ends with a reason decided from its tally
(:func:`curaflow.domain.verdicts.no_candidate_verdict`) and a message built from it
(:func:`cell_message`): the message says what the search found and what became of each
work, so it can never claim what did not happen (a search that found nothing never says
"the works found were already delivered").

The tally is a typed view (:class:`Tally`, :meth:`Tally.of`) of the cell's
:class:`~curaflow.domain.models.CandidateReport`, which the ``search`` and ``fetch``
activities record on the cell (the scan counts every examined work by its reason word;
``fetch`` adds each bound work it found gone or unusable) and the finish reads (the
outcome's message in both languages). Reason words and what they count:

* ``duplicate``: delivered before on one of the target's routes (or its delivery's
  outcome never learnt: held there for good);
* ``in_flight``: held by another open job on one of the target's routes (reserved or
  being sent, not delivered): told as such ("being delivered by another job"), counted
  like ``duplicate`` for the cell's reason, a verdict that does not last (the job may
  release it: :func:`curaflow.ledger.remembered.known_works`);
* ``refused``: a route of the target refused the work for good;
* ``held``: a route of the target holds the work back for a while (a refusal that did
  not name the work: the route's, lifted at its ``until``);
* ``unavailable``: the work cannot be had (deleted, private, restricted, 404, too large,
  undecodable, over the decode budget …: ``CandidateReport.unavailable`` counts each
  kind, :class:`~curaflow.sources.errors.UnavailableKind`);
* ``hidden``: the source hides the work from the account the target searches with (Pixiv's
  placeholder of the account's display settings or of its relation to the artist, or
  one never seen) — not the
  work's fault: told as such, a verdict that does not last (a later job meets the work
  again once the account may see it; until 2026-12-06 it was ``unavailable``);
* ``released``: a work this cell bound and released as unavailable, met again by a
  later pass of the same cell — counted ``unavailable``, a verdict that does not last
  (what lasts is the account's memory of it, read as ``unavailable`` first). A work the
  cell released on an answer not recognised as the work's is told ``unrecognised``
  instead, held back or not (:func:`curaflow.ledger.remembered.known_works`);
* ``unusable``, ``invalid``, ``unrecognised`` (a work the account holds back on an
  answer not recognised as the work's: its ``unrecognised_hold_ms``), the unavailable
  kinds of :data:`SOURCE_ANSWER_KINDS` and the kinds counted in
  ``CandidateReport.unrecognised``:
  what the source sent for the work cannot be used at all — a file URL curaflow may not
  request (another host, not under the image prefix), a page that is no image, no file
  listed, an id or fields not of the source's shape. One such work is skipped like any
  unavailable one; a search whose every work ruled out was one is the source's failure,
  and so is one whose every work not delivered before was, when at least one met an
  answer not recognised as its own (:attr:`Tally.unrecognised`;
  :func:`curaflow.domain.verdicts.no_candidate_verdict`). ``unusable`` is how later
  scans count such a work remembered for the account;
* ``excluded``: the task excluded it;
* ``filtered:<filter>``: one of the target's filters rejected it.

Works a target's earlier scans ruled out for good and that this scan did not read again
(the scan frontier's known run, :mod:`curaflow.sources.frontier`) are counted by the
same words in ``CandidateReport.known``: the tally — and so the reason — of a scan over
identical state is the same whether or not a frontier let it skip them.

Pure module: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping

from pydantic import BaseModel, ConfigDict, Field

from curaflow.domain.cells import CellState
from curaflow.domain.holds import Hold, hold_sentence
from curaflow.domain.models import CandidateReport
from curaflow.domain.reasons import TALLY_REASONS, parse_reason, user_message

#: Reason words of works whose only fault is what the source sent for them.
UNUSABLE_WORDS = frozenset({"unusable", "invalid", "unrecognised"})

#: Reason words of works ruled out as already on the target's routes: delivered
#: (``duplicate``) or held by another open job (``in_flight``). Both count as duplicates
#: for the cell's reason (:func:`curaflow.domain.verdicts.no_candidate_verdict`).
DUPLICATE_WORDS = frozenset({"duplicate", "in_flight"})

#: Kinds of unavailable work (:class:`~curaflow.sources.errors.UnavailableKind`) that are
#: what the source sent rather than the work itself: counted ``unusable``. Recognised
#: positively; any other kind (gone, too large, undecodable, over the decode budget, an
#: unusable animation) stays the work's.
SOURCE_ANSWER_KINDS = frozenset({"unusable_url", "not_an_image", "no_file"})

#: The order categories are listed in a message, with their sentence fragments (en, zh).
_PARTS: tuple[tuple[str, str, str], ...] = (
    ("delivered", "{n} already delivered", "{n} 件已投递过"),
    ("in_flight", "{n} being delivered by another job", "{n} 件正由另一个任务投递"),
    ("refused", "{n} refused by a route", "{n} 件被路由拒绝过"),
    ("held", "{n} held back by a route for now", "{n} 件暂时被路由搁置"),
    ("unavailable", "{n} unavailable", "{n} 件无法获取"),
    ("hidden", "{n} hidden from the source account", "{n} 件对来源账号不可见"),
    ("unusable", "{n} unusable as the source sent them", "{n} 件来源返回的内容无法使用"),
    ("excluded", "{n} excluded by the task", "{n} 件被任务排除"),
    ("other", "{n} ruled out for another reason", "{n} 件因其他原因被排除"),
)

#: What to do about works hidden from the source account (``hidden``), said beside the
#: reason's sentence when a search met one (en, zh): the account's settings at the source,
#: not the query, decide whether they are shown (DESIGN.md "The scan frontier of a target").
HIDDEN_REMEDY = (
    "Works hidden from the source account are met again by a later job once the account's settings at the "
    "source show them (on Pixiv: its sensitive-content display setting; a My pixiv work needs the artist's "
    "acceptance).",
    "对来源账号不可见的作品，在来源账号的设置允许显示后（Pixiv：账号的敏感内容显示设置；仅好P友可见的作品需作者接受），"
    "之后的任务会再次找到它们。",
)


class Tally(BaseModel):
    """What happened to the works a cell's search examined (counts of works).

    Attributes:
        examined: works this scan looked at (``CandidateReport.fetched``).
        known: works earlier scans of the target ruled out for good that this scan did
            not read again (the frontier's known run).
        delivered / in_flight / refused / held / unavailable / hidden / unusable / excluded:
            works rejected for each reason (examined and known together; see the module
            doc; ``in_flight``: held by another open job, not delivered).
        unrecognised: of ``unusable``, the works met on an answer not recognised as
            theirs (word ``unrecognised``, or fetched and counted in
            ``CandidateReport.unrecognised``): the source refusing them, an answer that
            would come for any work while it lasts. A part of ``unusable``, not a
            category of its own (not in :attr:`rejected`).
        other: works rejected for a reason word this module does not know (never taken
            for one that names an owner or a remedy).
        filtered: works a filter rejected, per filter name (``min_bookmarks``, ``ai`` …).
        candidates: examined works no rule rejected that the cell did not try (a cell
            keeps a bounded number of candidates: the rest are left for later jobs).
    """

    model_config = ConfigDict(frozen=True)

    examined: int = 0
    known: int = 0
    delivered: int = 0
    in_flight: int = 0
    refused: int = 0
    held: int = 0
    unavailable: int = 0
    hidden: int = 0
    unusable: int = 0
    unrecognised: int = 0
    excluded: int = 0
    other: int = 0
    filtered: dict[str, int] = Field(default_factory=dict)
    candidates: int = 0

    @property
    def found(self) -> int:
        """Works the search found: examined by this scan or known from earlier ones."""
        return self.examined + self.known

    @property
    def rejected(self) -> int:
        """Works ruled out, whatever the reason."""
        return (
            self.delivered
            + self.in_flight
            + self.refused
            + self.held
            + self.unavailable
            + self.hidden
            + self.unusable
            + self.excluded
            + self.other
            + sum(self.filtered.values())
        )

    @property
    def duplicates(self) -> int:
        """Works ruled out as already on the target's routes: delivered before, or held by
        another open job (:data:`DUPLICATE_WORDS`)."""
        return self.delivered + self.in_flight

    @classmethod
    def of(cls, report: CandidateReport | None) -> Tally:
        """The tally of a candidate report (an empty tally for None)."""
        if report is None:
            return cls()
        counts: dict[str, int] = {}
        for words in (report.reasons, report.known):
            for word, n in words.items():
                word = "unavailable" if word == "released" else word
                counts[word] = counts.get(word, 0) + max(0, n)
        # Works fetched and found unusable as the source sent them, or on an answer not
        # recognised as theirs: each is one ``unavailable`` of ``reasons`` and one of its
        # kind in ``unavailable`` (and, for the latter, in ``unrecognised``: counted by the
        # word ``unrecognised``, the rest ``unusable``).
        fetched = {kind: max(0, n) for kind, n in report.unavailable.items()}
        refused = {kind: min(n, max(0, report.unrecognised.get(kind, 0))) for kind, n in fetched.items()}
        answers = min(
            counts.get("unavailable", 0),
            sum(n if kind in SOURCE_ANSWER_KINDS else refused[kind] for kind, n in fetched.items()),
        )
        if answers:
            unrecognised = min(answers, sum(refused.values()))
            counts["unavailable"] -= answers
            counts["unrecognised"] = counts.get("unrecognised", 0) + unrecognised
            counts["unusable"] = counts.get("unusable", 0) + answers - unrecognised
        return tally_of_words(counts, examined=report.fetched, known=sum(max(0, n) for n in report.known.values()))


def tally_of_words(counts: Mapping[str, int], *, examined: int, known: int = 0) -> Tally:
    """A :class:`Tally` from counts by reason word (a word unknown here counts as ``other``:
    it is never taken for a duplicate, a filter or the source's failure; ``unrecognised``
    counts ``unusable`` and, of it, ``unrecognised``)."""
    filtered: dict[str, int] = {}
    named = {
        "duplicate": 0,
        "in_flight": 0,
        "refused": 0,
        "held": 0,
        "unavailable": 0,
        "hidden": 0,
        "unusable": 0,
        "excluded": 0,
        "other": 0,
    }
    unrecognised = 0
    for word, n in counts.items():
        if word.startswith("filtered:"):
            name = word.split(":", 1)[1] or "other"
            filtered[name] = filtered.get(name, 0) + n
        elif word in UNUSABLE_WORDS:
            named["unusable"] += n
            if word == "unrecognised":
                unrecognised += n
        elif word in named:
            named[word] += n
        else:
            named["other"] += n
    rejected = sum(named.values()) + sum(filtered.values())
    return Tally(
        examined=examined,
        known=known,
        delivered=named["duplicate"],
        in_flight=named["in_flight"],
        refused=named["refused"],
        held=named["held"],
        unavailable=named["unavailable"],
        hidden=named["hidden"],
        unusable=named["unusable"],
        unrecognised=unrecognised,
        excluded=named["excluded"],
        other=named["other"],
        filtered=dict(sorted(filtered.items())),
        candidates=max(0, examined + known - rejected),
    )


def describe(tally: Tally, lang: str = "en") -> str:
    """The sentence saying what the search found and what became of each work.

    Args:
        tally: the cell's tally.
        lang: ``"en"`` or ``"zh"``.

    Returns:
        e.g. "The search found no work for this query." or "The search found 35 works: 30
        already delivered, 5 unavailable (30 of them ruled out by earlier
        jobs of this target and not read again)." Only categories with works are named.
    """
    zh = lang == "zh"
    if tally.found == 0:
        return "本次搜索没有找到任何作品。" if zh else "The search found no work for this query."
    parts: list[str] = []
    for field, en_text, zh_text in _PARTS:
        n = getattr(tally, field)
        if n:
            parts.append((zh_text if zh else en_text).format(n=n))
    filtered = sum(tally.filtered.values())
    if filtered:
        names = ", ".join(tally.filtered)
        parts.append(f"{filtered} 件未通过筛选（{names}）" if zh else f"{filtered} filtered out ({names})")
    if tally.candidates:
        parts.append(f"{tally.candidates} 件未尝试" if zh else f"{tally.candidates} not tried")
    if zh:
        text = f"本次搜索找到 {tally.found} 件作品：" + "，".join(parts)
        if tally.known:
            text += f"（其中 {tally.known} 件已由此目标之前的任务排除，未再读取）"
        return text + "。"
    noun = "work" if tally.found == 1 else "works"
    text = f"The search found {tally.found} {noun}: " + ", ".join(parts)
    if tally.known:
        text += f" ({tally.known} of them ruled out by earlier jobs of this target and not read again)"
    return text + "."


def cell_message(
    state: str, reason: str | None, report: CandidateReport | None, lang: str = "en", *, held: Hold | None = None
) -> str | None:
    """The user message of a terminal cell: for a cell a third party's wait held when its
    job ended (``held``, :mod:`curaflow.domain.holds`), what held it — whose wait, until
    when, what to do — instead of the reason's sentence, whose remedy (a longer deadline, a
    narrower query, checking the bot) would not help; for a cell that ended for what its search
    found (:data:`~curaflow.domain.reasons.TALLY_REASONS`, not a work found duplicate at
    delivery), the tally's sentence (:func:`describe`), :data:`HIDDEN_REMEDY` when it met a
    work hidden from the source account, then the reason's; for any other,
    the reason's sentence alone. None for a cell without a reason.

    Args:
        state: the cell's state (``no_candidate``, ``failed`` …).
        reason: its terminal reason code.
        report: its candidate report (the tally).
        lang: ``"en"`` or ``"zh"``.
        held: what held the cell when its job ended (``CellSnapshot.held_by``).
    """
    if reason is None:
        return None
    if held is not None:
        return hold_sentence(held, lang)
    sentence = user_message(reason, lang)
    if parse_reason(reason) not in TALLY_REASONS or state == CellState.DUPLICATE:
        return sentence
    tally = Tally.of(report)
    found = describe(tally, lang)
    if tally.hidden:  # their remedy is the account's settings, which a wider query does not reach
        found += HIDDEN_REMEDY[1] if lang == "zh" else f" {HIDDEN_REMEDY[0]}"
    return f"{found}{'' if lang == 'zh' else ' '}{sentence}"
