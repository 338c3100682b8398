"""The replay's pictures: deterministic images with a work's recorded aspect ratio.

A page of a work is drawn from a hash of its id and page number at a tenth of the
recorded size (:data:`SCALE`), as PNG or JPEG — the same bytes every time, so a fetched
artifact can be checked against them.
"""

from __future__ import annotations

import hashlib
import io
import zipfile
from functools import lru_cache
from typing import Any

from PIL import Image, ImageDraw

#: Pictures are served at 1/SCALE of the recorded width and height.
SCALE = 10


def image_size(work: dict[str, Any], page: int = 0) -> tuple[int, int]:
    """The pixel size the replay serves ``work``'s pages at: a tenth of the recorded size."""
    return work["width"] // SCALE, work["height"] // SCALE


@lru_cache(maxsize=64)
def render_image(work_id: str, page: int, width: int, height: int, fmt: str) -> bytes:
    """A deterministic picture of ``width``×``height`` for a work page (PNG or JPEG bytes)."""
    digest = hashlib.sha256(f"{work_id}:{page}".encode()).digest()
    w, h = max(1, width), max(1, height)
    image = Image.new("RGB", (w, h), (digest[0], digest[1], digest[2]))
    draw = ImageDraw.Draw(image)
    for i in range(0, max(w, h), max(4, min(w, h) // 8)):
        draw.line([(i, 0), (0, i)], fill=(digest[3], digest[4], digest[5]), width=2)
    draw.rectangle([w // 4, h // 4, 3 * w // 4, 3 * h // 4], outline=(digest[6], digest[7], digest[8]), width=2)
    buf = io.BytesIO()
    image.save(buf, format="PNG" if fmt == "png" else "JPEG", quality=85)
    return buf.getvalue()


@lru_cache(maxsize=8)
def render_ugoira_zip(work_id: str, frames: int, width: int, height: int) -> bytes:
    """A deterministic frames zip, as Pixiv serves an ugoira's: ``000000.jpg`` … one
    JPEG per frame (each frame a different picture)."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED) as archive:
        for i in range(frames):
            archive.writestr(f"{i:06d}.jpg", render_image(work_id, 1000 + i, width, height, "jpeg"))
    return buf.getvalue()
