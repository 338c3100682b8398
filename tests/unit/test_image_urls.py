"""Work page URLs are Pixiv's canonical ones; only the request goes to the replay.

A work bound in replay mode used to store ``http://127.0.0.1:<port>/i/…``, the address
of the binding worker's own replay server, so a fetch resumed on another worker after a
crash asked a dead port.
"""

from __future__ import annotations

import httpx
import pytest

from curaflow.outbound import DestinationRefused
from curaflow.sources.pixiv.client import PixivClient

CANONICAL = "https://i.pximg.net/img-original/img/2025/02/01/00/00/00/126860839_p0.png"


def client(image_host: str | None) -> PixivClient:
    return PixivClient(httpx.AsyncClient(), refresh_token="x", image_host=image_host)


def test_canonical_image_urls_go_to_the_image_host_of_this_process() -> None:
    here = client("http://127.0.0.1:40001/i")
    assert here.image_url(CANONICAL) == "http://127.0.0.1:40001/i/img-original/img/2025/02/01/00/00/00/126860839_p0.png"
    assert here.image_url(CANONICAL + "?x=1").endswith("126860839_p0.png?x=1")
    request = here.image_request(CANONICAL)
    assert str(request.url).startswith("http://127.0.0.1:40001/i/") and request.headers["Referer"]


def test_a_url_naming_another_process_s_replay_server_is_re_rooted() -> None:
    # stored by a version before canonical URLs: the dead worker's own port
    legacy = "http://127.0.0.1:38211/i/img-original/img/2025/02/01/00/00/00/126860839_p0.png"
    assert client("http://127.0.0.1:40001/i").image_url(legacy) == (
        "http://127.0.0.1:40001/i/img-original/img/2025/02/01/00/00/00/126860839_p0.png"
    )


def test_real_mode_keeps_pixiv_s_image_host() -> None:
    assert client(None).image_url(CANONICAL) == CANONICAL


@pytest.mark.parametrize("image_host", [None, "http://127.0.0.1:40001/i"])
@pytest.mark.parametrize(
    "url",
    [
        "https://s.pximg.net/common/images/limit_sanity_level_360.png",
        "http://10.0.0.5:8080/internal/status.json",  # a work's page pointing at an internal service
        "http://i.pximg.net/img-original/x_p0.png",  # not Pixiv's https origin
        "https://i.pximg.net:8443/img-original/x_p0.png",
        "https://i.pximg.net.evil.example/img-original/x_p0.png",
    ],
)
def test_an_image_url_on_another_host_is_never_requested(image_host: str | None, url: str) -> None:
    # a work's URLs are the source's data: only its image host may be fetched
    with pytest.raises(DestinationRefused):
        client(image_host).image_request(url)


@pytest.mark.parametrize("image_host", [None, "http://127.0.0.1:40001/i"])
@pytest.mark.parametrize(
    "path",
    [
        "/../_chaos/state",
        "/img-original/../../secret",
        "/img-original/./x_p0.png",
        "/img-original/%2e%2e/%2E%2E/secret",
        "/img-original/%2e%2E%2fsecret",
        "/img-original/.%2e/secret",
        "/img-original/%252e%252e/secret",  # encoded twice
        "/img-original/..%5csecret",
        "/img-original\\..\\secret",
        "/img-original//x_p0.png",
        "",
    ],
)
def test_an_image_path_that_is_not_strictly_under_the_image_host_is_never_requested(
    image_host: str | None, path: str
) -> None:
    # ``/i/../x`` on the configured host is ``/x``: any dot-segment, encoded or not, could
    # leave the prefix once normalised, so a path holding one is never a work's image
    with pytest.raises(DestinationRefused):
        client(image_host).image_request(f"https://i.pximg.net{path}")
    with pytest.raises(DestinationRefused):
        client("http://127.0.0.1:40001/i").image_request(f"http://127.0.0.1:38211/i{path}")


@pytest.mark.parametrize(
    "url",
    [
        "https://i.pximg.net/img-original/" + "a" * 100_000 + "_p0.png",  # 100 000 characters
        "https://i.pximg.net:99999/img-original/x_p0.png",  # a port that is not one
        "https://[i.pximg.net/img-original/x_p0.png",  # not a URL
        "https://i.pximg.net/img-original/x p0.png",
        "https://i.pximg.net/img-original/x\x00_p0.png",
        "https://i.pximg.net/img-original/x\u202e_p0.png",
    ],
    ids=["100000-chars", "bad-port", "unparseable", "space", "nul", "bidi"],
)
def test_an_image_url_that_is_not_a_usable_url_is_refused_before_a_request_exists(url: str) -> None:
    for image_host in (None, "http://127.0.0.1:40001/i"):
        with pytest.raises(DestinationRefused):
            client(image_host).image_request(url)


def test_ordinary_pixiv_image_paths_are_kept_as_they_are() -> None:
    here = client("http://127.0.0.1:40001/i")
    for path in (
        "/img-original/img/2025/02/01/00/00/00/126860839_p0.png",
        "/c/600x1200_90_webp/img-master/img/2025/02/01/00/00/00/126860839_p0_master1200.jpg",
        "/img-zip-ugoira/img/2026/11/01/00/00/00/99999001_ugoira600x600.zip",
        "/img-original/img/2025/02/01/00/00/00/126860839_p0.v2.png",
    ):
        assert here.image_url(f"https://i.pximg.net{path}") == f"http://127.0.0.1:40001/i{path}"
        assert client(None).image_url(f"https://i.pximg.net{path}") == f"https://i.pximg.net{path}"
