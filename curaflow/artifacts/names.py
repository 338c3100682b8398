"""Names on disk: a filesystem-safe rendering of an id, a page's file extension, the MIME
type of each extension."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

from curaflow.sources.decoding import signed_format

_UNSAFE = re.compile(r"[^A-Za-z0-9@._-]")
#: Longest name :func:`safe_name` writes as it is (bytes; NAME_MAX is 255); a longer
#: rendering is cut and ends with :data:`_DIGEST_MARK` and a digest of the whole id.
NAME_LIMIT = 200
#: What a cut rendering keeps of the id before its digest (characters, whole escapes).
_KEPT = 150
#: Marks a cut name: never written otherwise (``~`` is escaped as ``%7E``).
_DIGEST_MARK = "~"
#: The MIME type of each image format a page's first bytes may sign
#: (:func:`~curaflow.sources.decoding.signed_format`, the one table of signatures, which
#: the decode check reads too): what a page is described as (:func:`mime_of`).
MIME_BY_FORMAT = {"PNG": "image/png", "JPEG": "image/jpeg", "GIF": "image/gif", "WEBP": "image/webp"}
#: The MIME type of a file's extension: only for a file whose bytes sign no image format
#: (:func:`mime_of`), never for a page (a page is described only once its bytes decoded).
MIME_BY_EXT = {
    ".png": "image/png",
    ".jpg": "image/jpeg",
    ".jpeg": "image/jpeg",
    ".gif": "image/gif",
    ".webp": "image/webp",
}


def mime_of(head: bytes, suffix: str) -> str:
    """The MIME type a file is described as (``ArtifactFile.mime``, what every route sends
    it as) — owner (2026-12-07): the image format its first bytes ``head`` sign
    (:func:`~curaflow.sources.decoding.signed_format`; an MPO signs as the JPEG it is),
    whatever its name's extension ``suffix`` (the page URL's, :func:`page_suffix`) says.
    Until 2026-12-07 the extension decided: a PNG the image host served under
    ``…_p0.jpg`` was delivered described as ``image/jpeg``. Bytes signing no image format
    (no page gets here: one is refused ``not_an_image`` before it is described) keep the
    extension's type, else ``application/octet-stream``."""
    fmt = signed_format(head)
    if fmt is not None:
        return MIME_BY_FORMAT[fmt]
    return MIME_BY_EXT.get(suffix.lower(), "application/octet-stream")


_SUFFIX = re.compile(r"\.[a-z0-9]{1,5}")


def _escape(match: re.Match[str]) -> str:
    return "".join(f"%{byte:02X}" for byte in match.group().encode("utf-8", "surrogatepass"))


def safe_name(value: str) -> str:
    """A filesystem-safe rendering of an id, one to one: two ids never share a name.

    ASCII letters, digits and ``@._-`` are kept; every other character is written as the
    ``%XX`` escapes of its UTF-8 bytes (``%`` itself too: ``order/42`` is
    ``order%2F42``, ``注文`` is ``%E6%B3%A8%E6%96%87``). A name of dots only has its dots
    escaped (never ``.`` or ``..``); the empty id is ``%``. A rendering over
    :data:`NAME_LIMIT` bytes keeps its first 150 characters (whole escapes), then ``~``
    and the SHA-256 of the whole id (40 hex digits): at most 191 bytes.

    An id of the usual shape (only the kept characters, at most 200 of them) is its own
    name, as it always was. Before 2026-12-05 every other character became ``_`` and a
    name was cut at 200 characters, so distinct job ids (keys in another script, ``/``
    against ``_``, long keys with one prefix) shared one folder, and deleting one job's
    cell (retention, a ``cache`` delivery) deleted the other's files.
    """
    if not value:
        return "%"
    if set(value) <= {"."}:
        return "%2E" * len(value) if len(value) * 3 <= NAME_LIMIT else _digested("", value)
    name = _UNSAFE.sub(_escape, value)
    if len(name.encode()) <= NAME_LIMIT:
        return name
    kept = name[:_KEPT]
    cut = kept.rfind("%", len(kept) - 2)
    return _digested(kept[:cut] if cut >= 0 else kept, value)


def _digested(kept: str, value: str) -> str:
    digest = hashlib.sha256(value.encode("utf-8", "surrogatepass")).hexdigest()[:40]
    return f"{kept}{_DIGEST_MARK}{digest}"


def page_suffix(url: str) -> str:
    """The file extension of a page URL (``.png``), lower case; ``.jpg`` when it has none
    or one that is not a plain short extension."""
    suffix = Path(url.split("?", 1)[0]).suffix.lower()
    return suffix if _SUFFIX.fullmatch(suffix) else ".jpg"
