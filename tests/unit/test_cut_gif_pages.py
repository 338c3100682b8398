"""A GIF page cut short is the transfer's (retried), never curaflow's error nor the work's.

A page reaches the decode check cut short when nothing else could tell: a close-delimited
body (no ``Content-Length``), a host that content-encodes it (its length is the encoded
one: :func:`curaflow.outbound.announced_length`), a host holding a cut file. The check
(:func:`curaflow.artifacts.images.check_image`, the owner of "is this page a whole,
deliverable image") then judges by the page's own framing. The GIFs here are Pillow's own,
three frames of noise, cut where a transfer may cut them.
"""

from __future__ import annotations

import io
import random
from pathlib import Path

from PIL import Image

from curaflow.artifacts.images import Refused, Verified, check_image


def noise_gif(frames: int = 3, size: tuple[int, int] = (40, 40), seed: int = 7) -> bytes:
    """An animated GIF of ``frames`` frames of noise (each frame's LZW data long)."""
    rng = random.Random(seed)
    images = []
    for _ in range(frames):
        image = Image.new("RGB", size)
        image.putdata([(rng.randrange(256), rng.randrange(256), rng.randrange(256)) for _ in range(size[0] * size[1])])
        images.append(image)
    out = io.BytesIO()
    images[0].save(out, format="GIF", save_all=True, append_images=images[1:], duration=100, loop=0)
    return out.getvalue()


def blocks(gif: bytes) -> list[tuple[int, int, int]]:
    """The blocks of a GIF Pillow wrote (no stray bytes): ``(kind, start, end)`` for each
    extension (``0x21``) and image (``0x2C``), walked by their lengths; then the trailer."""
    flags = gif[10]
    at = 13 + (3 << ((flags & 7) + 1) if flags & 0x80 else 0)
    found = []
    while gif[at] != 0x3B:
        start, kind = at, gif[at]
        if kind == 0x21:
            at += 2
        else:
            local = gif[at + 9]
            at += 10 + (3 << ((local & 7) + 1) if local & 0x80 else 0) + 1
        while gif[at]:
            at += 1 + gif[at]
        at += 1
        found.append((kind, start, at))
    found.append((0x3B, at, at + 1))
    return found


def comment(size: int) -> bytes:
    """A comment extension of exactly ``size`` bytes (3, or 5 and more)."""
    assert size == 3 or size >= 5, size
    body, left = b"", size - 3
    while left:
        part = min(256, left) if left - min(256, left) != 1 else 255
        body += bytes([part - 1]) + b"c" * (part - 1)
        left -= part
    return b"\x21\xfe" + body + b"\x00"


def halved_at(gif: bytes, cut: int) -> bytes:
    """``gif`` with a comment put in (after its header, or before its trailer) so that its
    first half — what a close-delimited body of half the file holds
    (:class:`tests.fakes.pximg.FakeImageHost`'s ``close_half``) — ends where ``gif[:cut]``
    ends: the same bytes before the cut, the whole file still a whole GIF."""
    start = blocks(gif)[0][1]
    first = len(gif) > 2 * cut + 1  # a comment first (the cut moves with it), else last
    wanted = len(gif) - 2 * cut if first else 2 * cut - len(gif)
    for pad in (wanted - 1, wanted, wanted + 1, wanted + 2):
        if pad in (1, 2, 4) or pad < 0:
            continue
        if first:
            out = gif[:start] + comment(pad) + gif[start:] if pad else gif
            if len(out) // 2 == cut + pad:
                return out
        else:
            out = gif[:-1] + comment(pad) + gif[-1:] if pad else gif
            if len(out) // 2 == cut:
                return out
    raise AssertionError("no comment puts the cut at the half")


def images(gif: bytes) -> list[tuple[int, int]]:
    """``(start, end)`` of each image block (descriptor to its data's terminator)."""
    return [(start, end) for kind, start, end in blocks(gif) if kind == 0x2C]


def test_a_gif_cut_inside_a_later_frames_descriptor_is_retried_not_curaflows_error(tmp_path: Path) -> None:
    """Pillow reads a later frame's descriptor as it seeks to it, unpacking its fields from
    what it read: cut inside it, ``struct.error`` came out of the check — not a verdict on
    the page, curaflow's own error (``internal_error``) in every attempt."""
    gif = noise_gif()
    second = images(gif)[1][0]
    for cut in range(second + 1, second + 10):
        page = tmp_path / f"cut{cut}_p0.gif"
        page.write_bytes(gif[:cut])
        checked = check_image(page)
        assert isinstance(checked, str), (cut, checked)  # maybe the transfer's: retried


def test_the_whole_gif_is_verified(tmp_path: Path) -> None:
    page = tmp_path / "whole_p0.gif"
    page.write_bytes(noise_gif())
    assert check_image(page) == Verified(40, 40)
    assert not isinstance(check_image(page), Refused)


def test_a_gif_cut_at_a_frames_end_is_retried_not_delivered_short(tmp_path: Path) -> None:
    """Cut after a frame's last sub-block, a GIF is every frame it still holds and no
    trailer: Pillow decodes those frames and stops, so the check verified it and the work
    was delivered with frames missing (then never sent again). A GIF is whole only when
    its blocks, walked by their lengths, reach its trailer."""
    gif = noise_gif()
    for _, end in images(gif):
        page = tmp_path / f"cut{end}_p0.gif"
        page.write_bytes(gif[:end])
        assert isinstance(check_image(page), str), end  # maybe the transfer's: retried


def test_a_gif_cut_on_a_byte_that_reads_as_its_trailer_is_retried_not_the_works(tmp_path: Path) -> None:
    """A GIF's framing was its last byte: a cut inside a frame's data on a byte of 0x3B
    (one cut in 256) read as "whole by its framing" and, not decoding, as the work's
    (``undecodable``, recognised: the week)."""
    gif = noise_gif()
    start, end = images(gif)[1]
    cuts = [at + 1 for at in range(start + 20, end - 2) if gif[at] == 0x3B]
    assert cuts  # the noise holds such bytes
    for cut in cuts:
        page = tmp_path / f"cut{cut}_p0.gif"
        page.write_bytes(gif[:cut])
        assert isinstance(check_image(page), str), cut


def test_a_whole_gif_that_does_not_decode_stays_the_works(tmp_path: Path) -> None:
    """Whole by its blocks (the trailer reached), a frame whose data was replaced is what
    the host holds: the work's, as before."""
    gif = bytearray(noise_gif())
    start = images(gif)[1][0]
    local = gif[start + 9]
    data = start + 10 + ((3 << ((local & 7) + 1)) if local & 0x80 else 0)  # the LZW code size
    gif[data] = 12  # a code size no GIF has
    page = tmp_path / "broken_p0.gif"
    page.write_bytes(bytes(gif))
    checked = check_image(page)
    assert isinstance(checked, Refused) and checked.recognised and checked.kind == "undecodable", checked


def test_a_gif_with_bytes_after_its_trailer_is_verified(tmp_path: Path) -> None:
    page = tmp_path / "padded_p0.gif"
    page.write_bytes(noise_gif() + b"\x00" * 7)
    assert check_image(page) == Verified(40, 40)
