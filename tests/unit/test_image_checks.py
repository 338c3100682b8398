"""The decode check of a fetched page is bounded (curaflow.artifacts.verify_image).

A page is refused by the pixel size its header claims, before any pixel is decoded, and
a page that cannot be verified is never "accepted on its length": it is not an image
that can be delivered (the work is unavailable).
"""

from __future__ import annotations

import json
import struct
import subprocess
import sys
import zlib
from pathlib import Path

from PIL import Image

from curaflow.artifacts import verify_image


def refused(problem: object) -> bool:
    """A verdict that the page can never be delivered (not None: whole; not a str: retry)."""
    return type(problem).__name__ == "Refused"


def png_claiming(path: Path, width: int, height: int) -> Path:
    """A PNG whose header claims ``width`` × ``height``, with a few bytes of pixel data."""

    def chunk(kind: bytes, payload: bytes) -> bytes:
        return struct.pack(">I", len(payload)) + kind + payload + struct.pack(">I", zlib.crc32(kind + payload))

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    path.write_bytes(
        b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(b"\0" * 64)) + chunk(b"IEND", b"")
    )
    return path


def test_a_header_claiming_60000_square_is_refused_not_accepted(tmp_path: Path) -> None:
    problem = verify_image(png_claiming(tmp_path / "p0.png", 60000, 60000))
    assert refused(problem), problem


def test_a_small_png_of_13000_square_is_refused_before_decoding(tmp_path: Path) -> None:
    # 657 KB on disk, 169 megapixels: a full decode holds ~680 MB
    path = tmp_path / "big_p0.png"
    # made in a process of its own: Linux keeps a parent's peak RSS across fork + exec
    make = f"from PIL import Image; Image.new('1', (13000, 13000), 1).save({str(path)!r}, format='PNG')"
    subprocess.run([sys.executable, "-c", make], check=True, timeout=120)
    assert path.stat().st_size < 2_000_000
    code = (
        "import resource, sys, json\n"
        "from pathlib import Path\n"
        "from curaflow.artifacts import verify_image\n"
        "before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
        f"problem = verify_image(Path({str(path)!r}))\n"
        "after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
        "print(json.dumps({'refused': type(problem).__name__, 'why': str(problem), 'grew_kib': after - before}))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    result = json.loads(out.stdout)
    assert result["refused"] == "Refused", result
    assert result["grew_kib"] < 64 * 1024, result  # the check never held the decoded image


def test_a_page_that_is_not_an_image_is_refused_whatever_its_name(tmp_path: Path) -> None:
    for name in ("p0.json", "p0.jpg", "p0.bin"):
        path = tmp_path / name
        path.write_text(json.dumps({"service": "internal", "secret": "x"}))
        assert refused(verify_image(path)), name


def test_an_image_within_the_bound_is_verified_and_a_broken_one_retried(tmp_path: Path) -> None:
    good = tmp_path / "ok_p0.png"
    Image.new("RGB", (800, 600), (10, 20, 30)).save(good, format="PNG")
    assert verify_image(good) is None
    cut = tmp_path / "cut_p0.png"
    cut.write_bytes(good.read_bytes()[: good.stat().st_size // 2])
    problem = verify_image(cut)
    assert isinstance(problem, str)  # short: another download may succeed
    assert refused(verify_image(good, max_pixels=100_000))
