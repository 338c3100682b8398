"""Files the directory route delivers get the umask's mode or the configured one, never a private 0600."""

from __future__ import annotations

import asyncio
import os
import stat
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from curaflow.config import ConfigError, load_settings
from curaflow.domain.models import Artifact, ArtifactFile, Work, WorkPage
from curaflow.outbound import Destinations, Outbound
from curaflow.routes import RouteContext, build_route
from curaflow.routes.base import DeliveryRequest
from curaflow.routes.directory import DirectoryRoute


@pytest.fixture
def umask() -> Iterator[object]:
    before = os.umask(0o022)
    os.umask(before)

    def set_mask(mask: int) -> None:
        os.umask(mask)

    yield set_mask
    os.umask(before)


def request(tmp_path: Path, work_id: str = "123") -> DeliveryRequest:
    src = tmp_path / "artifact.png"
    src.write_bytes(b"\x89PNG fake")
    work = Work.model_construct(
        work_id=work_id,
        work_type="illustration",
        title="t",
        url=f"https://www.pixiv.net/artworks/{work_id}",
        tags=[],
        pages=[WorkPage(index=0, url="https://i.pximg.net/x.png")],
    )
    return DeliveryRequest(
        job_id="j",
        target_id="t",
        route="out",
        idempotency_key=f"k-{work_id}",
        work=work,
        artifact=Artifact(work_id=work_id, files=[ArtifactFile(path=str(src), bytes=9, mime="image/png")]),
    )


def modes(folder: Path) -> dict[str, int]:
    return {p.name: stat.S_IMODE(p.stat().st_mode) for p in folder.iterdir()}


@pytest.mark.parametrize(("mask", "expected"), [(0o022, 0o644), (0o027, 0o640), (0o002, 0o664)])
def test_delivered_files_follow_the_umask(tmp_path: Path, umask, mask: int, expected: int) -> None:  # type: ignore[no-untyped-def]
    umask(mask)
    route = DirectoryRoute("out", tmp_path / "out")
    asyncio.run(route.deliver(request(tmp_path)))
    found = modes(tmp_path / "out" / "123")
    assert found == {"artifact.png": expected, "manifest.json": expected}


def test_a_configured_mode_wins_over_the_umask(tmp_path: Path, umask) -> None:  # type: ignore[no-untyped-def]
    umask(0o077)
    config = tmp_path / "c.toml"
    config.write_text(
        f'[routes.out]\nkind = "directory"\npath = "{tmp_path / "out"}"\nfile_mode = "0640"\n'
        '[[targets]]\nid = "t"\nroutes = ["out"]\n'
    )
    settings = load_settings(config)

    async def deliver() -> None:
        async with httpx.AsyncClient() as http:
            context = RouteContext(http=Outbound(Destinations(origins=()), http=http))
            await build_route("out", settings.routes["out"], context).deliver(request(tmp_path))

    asyncio.run(deliver())
    assert set(modes(tmp_path / "out" / "123").values()) == {0o640}


def test_a_mode_that_is_not_octal_is_refused(tmp_path: Path) -> None:
    config = tmp_path / "c.toml"
    config.write_text(
        f'[routes.out]\nkind = "directory"\npath = "{tmp_path / "out"}"\nfile_mode = "rw-r--r--"\n'
        '[[targets]]\nid = "t"\nroutes = ["out"]\n'
    )
    with pytest.raises(ConfigError, match="file_mode"):
        load_settings(config)
