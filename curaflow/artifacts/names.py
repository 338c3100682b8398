"""Names on disk: a filesystem-safe rendering of an id, a page's file extension, the MIME
type of each extension."""

from __future__ import annotations

import re
from pathlib import Path

_UNSAFE = re.compile(r"[^A-Za-z0-9@._-]")
MIME_BY_EXT = {
    ".png": "image/png",
    ".jpg": "image/jpeg",
    ".jpeg": "image/jpeg",
    ".gif": "image/gif",
    ".webp": "image/webp",
}


_SUFFIX = re.compile(r"\.[a-z0-9]{1,5}")


def safe_name(value: str) -> str:
    """A filesystem-safe rendering of an id (unsafe characters become ``_``; never ``.`` or ``..``)."""
    name = _UNSAFE.sub("_", value)[:200]
    return name.replace(".", "_") if set(name) <= {"."} else name


def page_suffix(url: str) -> str:
    """The file extension of a page URL (``.png``), lower case; ``.jpg`` when it has none
    or one that is not a plain short extension."""
    suffix = Path(url.split("?", 1)[0]).suffix.lower()
    return suffix if _SUFFIX.fullmatch(suffix) else ".jpg"
