"""The artifact store: fetched work files on the local disk of the process that fetched them.

Only verified images are ever complete; what the store does and why is told in
:mod:`~curaflow.artifacts.store`. One concern per module, every name imported from here:
:mod:`~curaflow.artifacts.store` (:class:`ArtifactStore`: fetching a work's pages or its
animation, the cell's folders, the transfer folders),
:mod:`~curaflow.artifacts.images` (whether a page is a deliverable image: :func:`check_image`
and :func:`verify_image`, :class:`Verified`, :class:`Refused`),
:mod:`~curaflow.artifacts.files` (a page's temporary file until it is whole,
:func:`describe`) and :mod:`~curaflow.artifacts.names` (safe names, extensions, a file's MIME
type from its bytes: :func:`mime_of`).
"""

from __future__ import annotations

from curaflow.artifacts.files import HELD_BYTES, WRITE_BATCH, _PartFile, describe
from curaflow.artifacts.images import (
    IMAGE_FORMATS,
    IMAGE_MAX_PIXELS,
    Refused,
    Verified,
    check_image,
    decoded_pixels,
    frame_count,
    verify_image,
    whole_by_framing,
)
from curaflow.artifacts.names import MIME_BY_EXT, MIME_BY_FORMAT, mime_of, page_suffix, safe_name
from curaflow.artifacts.store import STORE_ID_FILE, TRANSFER_DIR, TRANSFER_MAX_AGE_S, ArtifactStore, ProgressHook

__all__ = [
    "HELD_BYTES",
    "IMAGE_FORMATS",
    "IMAGE_MAX_PIXELS",
    "MIME_BY_EXT",
    "MIME_BY_FORMAT",
    "STORE_ID_FILE",
    "TRANSFER_DIR",
    "TRANSFER_MAX_AGE_S",
    "WRITE_BATCH",
    "ArtifactStore",
    "ProgressHook",
    "Refused",
    "Verified",
    "_PartFile",
    "check_image",
    "decoded_pixels",
    "describe",
    "frame_count",
    "mime_of",
    "page_suffix",
    "safe_name",
    "verify_image",
    "whole_by_framing",
]
