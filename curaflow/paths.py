"""Paths built from data: every one is checked to stay under its root.

Work ids, page names and route paths combine configuration with values that came from
a third party. :func:`inside` joins them and refuses any result that is not strictly
under the root once ``..`` and symbolic links are resolved, or that an absolute part
would move elsewhere (``Path("/root") / "/etc"`` is ``/etc``).
"""

from __future__ import annotations

from pathlib import Path


class PathEscape(ValueError):
    """A path built from data would leave its root."""


def inside(root: Path, *parts: str) -> Path:
    """``root / parts[0] / …``, guaranteed to lie under ``root``.

    Args:
        root: the directory the result must stay in (need not exist yet).
        parts: path components from data; each must be a relative path.

    Returns:
        The joined path (not resolved: symbolic links inside the root are kept as given).

    Raises:
        PathEscape: a part is absolute, or the resolved result is ``root`` itself or
            outside it.
    """
    for part in parts:
        if not part or Path(part).is_absolute() or "\x00" in part:
            raise PathEscape(f"refused path component {part!r} under {root}")
    candidate = root.joinpath(*parts)
    base = root.resolve()
    resolved = candidate.resolve()
    if resolved == base or not resolved.is_relative_to(base):
        raise PathEscape(f"{candidate} is outside {root}")
    return candidate
