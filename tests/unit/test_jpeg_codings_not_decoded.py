"""A whole JPEG of a coding Pillow's decoder does not implement is no verdict on the work.

A page (or an ugoira frame) whole by its framing that does not decode is the work's
(``undecodable``, recognised: the week, and a lasting ``unavailable`` its target's frontier
passes for good). But the JPEG standard (ITU T.81) has codings Pillow's decoder —
libjpeg-turbo through its 8-bit interface — does not implement: samples of 12 bits
(the extended process, SOF1 with P=12), lossless (SOF3), hierarchical (SOF5–SOF7). Such a
file refuses to decode however whole it is: what is refused is curaflow's decoder, a fact
of the machine's build as much as of the bytes (another Pillow reads it), so it is held
back briefly and counted, never the work's. A JPEG of a coding the decoder implements
(8-bit baseline here) that does not decode stays the work's.
"""

from __future__ import annotations

import struct
import zipfile
from pathlib import Path

import pytest

from curaflow.artifacts import ArtifactStore
from curaflow.artifacts.images import Refused, Verified, check_image
from curaflow.sources.animation import UnusableAnimation, encode_gif
from curaflow.sources.errors import UnavailableKind, WorkUnavailable
from curaflow.sources.pixiv.ugoira import parse_metadata
from tests.unit.test_store_pages import Pages, work


def _segment(marker: int, payload: bytes) -> bytes:
    return b"\xff" + bytes([marker]) + struct.pack(">H", len(payload) + 2) + payload


def grey_jpeg(frame: int = 0xC0, precision: int = 8, *, components: int = 1, scanned: int = 1) -> bytes:
    """A whole 8×8 grey JPEG of ``components`` components (ids 1, 2 …, each one block an
    MCU), coded with ``frame`` (its SOF marker) at ``precision`` bits a sample: one DC code
    (category 0) and one AC code (end of block), each one bit. Its scan codes the first
    component as ``scanned``: another id than 1 is one its frame does not have (a file
    broken whatever decodes it)."""
    dqt = _segment(0xDB, bytes([0]) + bytes([1] * 64))
    specs = b"".join(bytes([c + 1, 0x11, 0]) for c in range(components))
    sof = _segment(frame, bytes([precision]) + struct.pack(">HH", 8, 8) + bytes([components]) + specs)
    one_code = bytes([1] + [0] * 15)
    dht = _segment(0xC4, bytes([0x00]) + one_code + bytes([0]) + bytes([0x10]) + one_code + bytes([0]))
    scans = bytes([scanned, 0x00]) + b"".join(bytes([c + 1, 0x00]) for c in range(1, components))
    sos = _segment(0xDA, bytes([components]) + scans + bytes([0, 63, 0]))
    bits = "00" * components
    bits += "1" * (-len(bits) % 8)
    data = int(bits, 2).to_bytes(len(bits) // 8, "big")
    return b"\xff\xd8" + dqt + sof + dht + sos + data + b"\xff\xd9"


@pytest.mark.parametrize("components", [1, 3, 4])
def test_the_grey_jpeg_decodes_at_eight_bits(tmp_path: Path, components: int) -> None:
    # The files below differ from these by their frame header alone.
    page = tmp_path / "1_p0.jpg"
    page.write_bytes(grey_jpeg(components=components))
    assert check_image(page) == Verified(8, 8)


CODINGS_NOT_DECODED = {
    "12-bit-extended": grey_jpeg(0xC1, 12),
    "12-bit-baseline-marker": grey_jpeg(0xC0, 12),
    "16-bit": grey_jpeg(0xC1, 16),
    "lossless": grey_jpeg(0xC3),
    "hierarchical": grey_jpeg(0xC5),
    "hierarchical-lossless": grey_jpeg(0xC7),
    "arithmetic-lossless": grey_jpeg(0xCB),
    "two-components": grey_jpeg(components=2),
    "five-components": grey_jpeg(components=5),
}


@pytest.mark.parametrize("data", CODINGS_NOT_DECODED.values(), ids=CODINGS_NOT_DECODED.keys())
def test_a_whole_jpeg_of_a_coding_the_decoder_does_not_implement_is_not_recognised_as_the_works(
    tmp_path: Path, data: bytes
) -> None:
    page = tmp_path / "1_p0.jpg"
    page.write_bytes(data)
    checked = check_image(page)
    assert isinstance(checked, Refused)
    assert checked.kind == UnavailableKind.UNDECODABLE
    assert checked.recognised is False


def test_a_whole_jpeg_of_a_coding_the_decoder_implements_that_does_not_decode_stays_the_works(
    tmp_path: Path,
) -> None:
    page = tmp_path / "1_p0.jpg"
    page.write_bytes(grey_jpeg(scanned=9))  # its scan codes a component the frame lacks
    checked = check_image(page)
    assert isinstance(checked, Refused)
    assert checked.kind == UnavailableKind.UNDECODABLE
    assert checked.recognised is True


def _frame_refusal(tmp_path: Path, frame: bytes) -> UnusableAnimation:
    path = tmp_path / "f.zip"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("000000.jpg", frame)
        archive.writestr("000001.jpg", grey_jpeg())
    meta = parse_metadata(
        {
            "ugoira_metadata": {
                "zip_urls": {"medium": "https://i.pximg.net/z/1_ugoira600x600.zip"},
                "frames": [{"file": "000001.jpg", "delay": 50}, {"file": "000000.jpg", "delay": 50}],
            }
        }
    )
    with pytest.raises(UnusableAnimation) as caught:
        encode_gif(path, meta, tmp_path / "1_ugoira.gif")
    return caught.value


@pytest.mark.parametrize("data", CODINGS_NOT_DECODED.values(), ids=CODINGS_NOT_DECODED.keys())
def test_an_ugoira_frame_of_a_jpeg_coding_the_decoder_does_not_implement_is_not_recognised_as_the_works(
    tmp_path: Path, data: bytes
) -> None:
    assert _frame_refusal(tmp_path, data).recognised is False


def test_an_ugoira_frame_of_a_coding_the_decoder_implements_that_does_not_decode_stays_the_works(
    tmp_path: Path,
) -> None:
    assert _frame_refusal(tmp_path, grey_jpeg(scanned=9)).recognised is True


@pytest.mark.parametrize("recognised", [False, True], ids=["12-bit", "broken-8-bit"])
async def test_the_store_holds_a_work_whose_page_is_of_a_coding_not_decoded_briefly(
    tmp_path: Path, recognised: bool
) -> None:
    # What the fetch remembers: a brief hold (not recognised) for the decoder's lack, the
    # week for a broken file of a coding it implements.
    page = grey_jpeg(scanned=9) if recognised else grey_jpeg(0xC1, 12)
    with pytest.raises(WorkUnavailable) as raised:
        await ArtifactStore(tmp_path).fetch(Pages([page]), work(1), "job", "t")  # type: ignore[arg-type]
    assert (raised.value.kind, raised.value.recognised) == (UnavailableKind.UNDECODABLE, recognised)
