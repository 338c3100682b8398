"""The ``[outbound]`` section: the outbound layer's limits and the destination guard.

Its own module, as the routes' and sources' config models are theirs: the settings root
(:mod:`curaflow.config`) imports it, and the sources read it through
:class:`curaflow.sources.registry.SourceContext` without importing the settings.
"""

from __future__ import annotations

from pydantic import ConfigDict, Field, field_validator

from curaflow.domain.config_numbers import BooleansAreNoNumbers
from curaflow.outbound.destinations import parse_networks

MiB_ = 1024 * 1024


class OutboundSettings(BooleansAreNoNumbers):
    """The outbound layer's limits and the destination guard (DESIGN "The outbound layer").

    Attributes:
        private_networks: loopback / private / link-local networks that a *data*
            destination (an image URL from the source, a ``callback_url``) may resolve
            to, e.g. ``["127.0.0.0/8"]`` when the consumers run on this machine (the
            embedded stack and the test suite). Empty: only public addresses.
            Destinations the operator configured (routes, ``pixiv.api_url`` /
            ``auth_url`` / ``image_url``) are not address-checked.
        page_max_bytes: largest answer of the source's API (a search page: ~100 KiB).
        download_max_bytes: largest image page; a bigger one makes the work unavailable.
        download_timeout_ms: total time of one image page (connect, send, whole body).
        image_max_pixels: largest frame decoded (pixels held at once; ~4 bytes each while
            the check runs); a page or an animation frame over it makes the work
            unavailable. At most ``decode_max_pixels`` (a frame counts toward its decode;
            refused at load above it: ``curaflow.config.checks.ORDERED_SETTINGS``). With
            it, the only bound on a frame's size: Pillow's own decompression-bomb limit is
            switched off while curaflow decodes
            (:func:`curaflow.sources.decoding.pillow_defers`).
        decode_max_pixels: pixels one decode may decode, summed over every frame (an
            animated GIF / APNG / WebP frame counts its whole canvas; an ugoira's frames
            their own size, and the first frame's size each as the GIF encoder holds
            them); over it the work is unavailable.
        decode_max_frames: frames one decode may have (an animated page, an ugoira).
        decode_max_cpu_ms: CPU time one decode may take (the decoding thread's, checked
            between frames and between the blocks a frame is decoded from).

    The four ``image_max_pixels`` / ``decode_*`` fields are the decode budget
    (:meth:`curaflow.sources.decoding.DecodeBudget.of`, DESIGN "Work-owned failures and
    the decode budget"); their defaults here are the budget's defaults.
    """

    model_config = ConfigDict(extra="forbid")

    private_networks: list[str] = Field(default_factory=list)
    page_max_bytes: int = Field(default=4 * MiB_, ge=65_536)
    download_max_bytes: int = Field(default=64 * MiB_, ge=65_536)
    download_timeout_ms: int = Field(default=120_000, ge=100)
    image_max_pixels: int = Field(default=40_000_000, ge=1_000_000)
    decode_max_pixels: int = Field(default=60_000_000, ge=1_000_000)
    decode_max_frames: int = Field(default=1000, ge=1)
    decode_max_cpu_ms: int = Field(default=30_000, ge=100)

    @field_validator("private_networks")
    @classmethod
    def _networks(cls, value: list[str]) -> list[str]:
        parse_networks(value)
        return value
