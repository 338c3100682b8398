"""The file wrappers decoders read: the shared delegation and what each wrapper adds (pure).

:class:`curaflow.sources.decoding.DelegatedReads` holds the delegation;
:class:`~curaflow.sources.decoding.MeteredReads` checks a decode's meter before each read,
and the animation's zip member reader turns a broken compressed stream into
:class:`~curaflow.sources.animation.AnimationBroken` on a read and on a seek.
"""

from __future__ import annotations

import errno
import io
import zlib

import pytest

from curaflow.sources.animation import AnimationBroken, _MemberReader
from curaflow.sources.decoding import DecodeBudget, DecodeStopped, DelegatedReads, MeteredReads


def test_a_wrapped_file_reads_seeks_and_tells_through_and_is_readable_and_seekable() -> None:
    raw = io.BytesIO(b"abcdef")
    for view in (DelegatedReads(raw), MeteredReads(raw, DecodeBudget().meter()), _MemberReader(raw, "0.png")):
        raw.seek(0)
        assert view.read(2) == b"ab"
        assert view.tell() == 2
        assert view.seek(1) == 1 and view.read() == b"bcdef"
        assert view.seek(-2, io.SEEK_END) == 4 and view.read(-1) == b"ef"
        assert view.readable() and view.seekable()
        assert view.getvalue() == b"abcdef"  # any other attribute is the file's


def test_metered_reads_check_the_meter_before_each_read_and_nowhere_else() -> None:
    meter = DecodeBudget().meter()
    view = MeteredReads(io.BytesIO(b"abc"), meter)
    assert view.read(1) == b"a"
    meter.stop()
    assert view.tell() == 1 and view.seek(0) == 0
    with pytest.raises(DecodeStopped):
        view.read(1)
    assert view.tell() == 0  # nothing was read


class _Breaking(io.BytesIO):
    """A member whose reads and seeks raise ``error``."""

    def __init__(self, error: BaseException) -> None:
        super().__init__(b"abc")
        self.error = error

    def read(self, size: int | None = -1) -> bytes:
        raise self.error

    def seek(self, offset: int, whence: int = 0) -> int:
        raise self.error


@pytest.mark.parametrize("error", [zlib.error("invalid distance"), EOFError("cut"), OSError("Invalid data stream")])
def test_a_members_broken_stream_is_animation_broken_on_a_read_and_on_a_seek(error: BaseException) -> None:
    member = _MemberReader(_Breaking(error), "000001.png")
    with pytest.raises(AnimationBroken, match=r"frame 000001\.png cannot be read from the zip"):
        member.read(1)
    with pytest.raises(AnimationBroken, match=r"frame 000001\.png cannot be read from the zip"):
        member.seek(0)


def test_the_machines_error_reading_a_member_is_raised_as_it_came() -> None:
    eio = OSError(errno.EIO, "Input/output error")
    member = _MemberReader(_Breaking(eio), "000001.png")
    for call in (lambda: member.read(1), lambda: member.seek(0)):
        with pytest.raises(OSError) as caught:
            call()
        assert caught.value is eio
