"""A fake picture catalog: a second source that speaks its own JSON over real HTTP.

Nothing of Pixiv's shapes: items have a ``ref`` (``c<digits>``), ``labels``, a
``posted`` time, ``hearts`` and ``pictures``; results come in numbered pages with a
``has_more`` flag. It proves the source seam (``tests/fakes/catalog_source.py`` is its
source kind, ``tests/integration/test_second_source.py`` runs a job through it).

* ``GET /api/v2/search?label=<l>[&label=…]&page=<n>`` → ``{"results": [item…],
  "page": n, "has_more": bool}`` (items carrying every label, newest first,
  :data:`PAGE_SIZE` a page; ``page`` from 1);
* ``GET /api/v2/items/<ref>`` → ``{"item": item}``, 404 ``{"problem": "no such item"}``;
* ``GET /media/<ref>-<n>.png`` → a small PNG (each item's own colour), 404 for a ref
  in :attr:`Catalog.gone`;
* :attr:`Catalog.odd` replaces fields of an item's answer (shapes the source did not expect).

Every request is logged (:attr:`Catalog.log`: kind, path, query).
"""

from __future__ import annotations

import io
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response
from PIL import Image

from curaflow.process.httpserver import BackgroundServer

PAGE_SIZE = 4


@dataclass
class Seen:
    """One request the catalog answered."""

    kind: str
    path: str
    query: dict[str, list[str]]


@dataclass
class Item:
    """One catalog item (its own shape, see :meth:`wire`)."""

    ref: str
    caption: str
    labels: list[str]
    posted: datetime
    hearts: int = 0
    pictures: int = 1

    def wire(self, base: str) -> dict[str, Any]:
        return {
            "ref": self.ref,
            "caption": self.caption,
            "labels": self.labels,
            "posted": self.posted.isoformat(),
            "hearts": self.hearts,
            "artist": {"handle": f"artist-{self.ref}"},
            "pictures": [{"path": f"{base}/media/{self.ref}-{n}.png", "w": 48, "h": 32} for n in range(self.pictures)],
        }


def sample_items(n: int = 10, label: str = "sky") -> list[Item]:
    """``n`` items labelled ``label`` (every third also ``sea``), one day apart, newest first."""
    start = datetime(2026, 11, 30, 12, tzinfo=UTC)
    return [
        Item(
            ref=f"c{100 + i}",
            caption=f"catalog picture {i}",
            labels=[label, *(["sea"] if i % 3 == 0 else [])],
            posted=start - timedelta(days=i),
            hearts=10 * i,
            pictures=2 if i == 1 else 1,
        )
        for i in range(n)
    ]


@dataclass
class Catalog:
    """The catalog's state (the test edits it between jobs)."""

    items: list[Item] = field(default_factory=sample_items)
    gone: set[str] = field(default_factory=set)
    #: Fields of an item's answer replaced by odd values (a catalog changing its shapes).
    odd: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: Pages answered with no results though more are promised (``has_more`` true): a
    #: struggling backend.
    empty_pages: set[int] = field(default_factory=set)
    log: list[Seen] = field(default_factory=list)

    def wire(self, item: Item, base: str) -> dict[str, Any]:
        return {**item.wire(base), **self.odd.get(item.ref, {})}

    def kinds(self) -> list[str]:
        return [s.kind for s in self.log]


def _png(ref: str, n: int) -> bytes:
    seed = sum(map(ord, ref)) + n
    image = Image.new("RGB", (48, 32), ((seed * 37) % 256, (seed * 91) % 256, (seed * 53) % 256))
    out = io.BytesIO()
    image.save(out, format="PNG")
    return out.getvalue()


def create_catalog_app(catalog: Catalog, base: list[str]) -> FastAPI:
    """The catalog's HTTP app; ``base[0]`` is its own URL (set once it listens)."""
    app = FastAPI()

    def seen(kind: str, request: Request) -> None:
        query: dict[str, list[str]] = {}
        for key, value in request.query_params.multi_items():
            query.setdefault(key, []).append(value)
        catalog.log.append(Seen(kind, request.url.path, query))

    @app.get("/api/v2/search")
    async def search(request: Request) -> Any:
        seen("search", request)
        labels = request.query_params.getlist("label")
        page = int(request.query_params.get("page") or 1)
        found = [i for i in catalog.items if all(label in i.labels for label in labels)]
        found.sort(key=lambda i: i.posted, reverse=True)
        chunk = found[(page - 1) * PAGE_SIZE : page * PAGE_SIZE]
        if page in catalog.empty_pages:
            return {"results": [], "page": page, "has_more": True}
        return {
            "results": [catalog.wire(i, base[0]) for i in chunk],
            "page": page,
            "has_more": page * PAGE_SIZE < len(found),
        }

    @app.get("/api/v2/items/{ref}")
    async def item(ref: str, request: Request) -> Any:
        seen("item", request)
        for i in catalog.items:
            if i.ref == ref and ref not in catalog.gone:
                return {"item": catalog.wire(i, base[0])}
        return JSONResponse({"problem": "no such item"}, status_code=404)

    @app.get("/media/{name}")
    async def media(name: str, request: Request) -> Any:
        seen("media", request)
        ref, _, rest = name.partition("-")
        if ref in catalog.gone or not rest.endswith(".png"):
            return JSONResponse({"problem": "gone"}, status_code=404)
        return Response(_png(ref, int(rest.removesuffix(".png"))), media_type="image/png")

    return app


class CatalogServer:
    """The catalog on 127.0.0.1 (an ephemeral port) for one test."""

    def __init__(self, catalog: Catalog | None = None) -> None:
        self.catalog = catalog or Catalog()
        self._base = [""]
        self._server = BackgroundServer(create_catalog_app(self.catalog, self._base))

    @property
    def url(self) -> str:
        return self._server.url

    async def __aenter__(self) -> CatalogServer:
        await self._server.start()
        self._base[0] = self._server.url
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._server.stop()
