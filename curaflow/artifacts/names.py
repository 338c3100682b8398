"""Names on disk: a filesystem-safe rendering of an id, a page's file extension, the MIME
type of each extension."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

_UNSAFE = re.compile(r"[^A-Za-z0-9@._-]")
#: Longest name :func:`safe_name` writes as it is (bytes; NAME_MAX is 255); a longer
#: rendering is cut and ends with :data:`_DIGEST_MARK` and a digest of the whole id.
NAME_LIMIT = 200
#: What a cut rendering keeps of the id before its digest (characters, whole escapes).
_KEPT = 150
#: Marks a cut name: never written otherwise (``~`` is escaped as ``%7E``).
_DIGEST_MARK = "~"
MIME_BY_EXT = {
    ".png": "image/png",
    ".jpg": "image/jpeg",
    ".jpeg": "image/jpeg",
    ".gif": "image/gif",
    ".webp": "image/webp",
}


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
