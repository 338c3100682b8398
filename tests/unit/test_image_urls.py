"""Work page URLs are Pixiv's canonical ones; only the request goes to the replay.

A work bound in replay mode used to store ``http://127.0.0.1:<port>/i/…``, the address
of the binding worker's own replay server, so a fetch resumed on another worker after a
crash asked a dead port.
"""

from __future__ import annotations

import httpx

from curaflow.sources.pixiv import PixivClient

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


def test_real_mode_and_foreign_hosts_are_left_alone() -> None:
    assert client(None).image_url(CANONICAL) == CANONICAL
    placeholder = "https://s.pximg.net/common/images/limit_sanity_level_360.png"
    assert client("http://127.0.0.1:40001/i").image_url(placeholder) == placeholder
