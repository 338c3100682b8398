"""The docs UI (``/docs``: Swagger UI, ``/redoc``: ReDoc), served from the package.

FastAPI's own pages load Swagger UI and ReDoc from a CDN (and ReDoc's fonts from Google),
without subresource integrity: blank without internet, and a third party's script in the
page of a self-hosted service. Here both pages are FastAPI's templates
(:func:`fastapi.openapi.docs.get_swagger_ui_html`, :func:`~fastapi.openapi.docs.get_redoc_html`)
pointed at the pinned dist files shipped in ``curaflow/api/docs_ui/`` (versions, hashes and
licences in its ``README.md``) and served at :data:`ASSETS_PATH`: every URL a page holds
is on the API's own origin (relative to the request's ``root_path`` behind a proxy), and
nothing is downloaded at run time. Swagger UI's online validator badge is off
(``validatorUrl: null``), ReDoc's Google fonts are not loaded, and both pages carry a
Content-Security-Policy (:data:`DOCS_CSP`) that lets the browser load nothing from another
origin — ReDoc's bundle still names its "API docs by Redocly" logo on a CDN; a browser
never asks for it (a test drives a real Chromium with every other origin cut off).

No token needed (they reveal no job); not part of ``/openapi.json``.
"""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI, Request
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

#: Where the packaged assets are served.
ASSETS_PATH = "/docs/assets"
#: The packaged assets (the unmodified npm dist files).
ASSETS_DIR = Path(__file__).parent / "docs_ui"
#: The npm packages the assets come from.
ASSET_VERSIONS = {"swagger-ui-dist": "5.35.0", "redoc": "2.5.4"}
#: The pages' Content-Security-Policy: their own origin only (the templates' inline
#: start-up script and the bundles' inline styles, data: images and ReDoc's blob: worker
#: need the rest).
DOCS_CSP = (
    "default-src 'self'; script-src 'self' 'unsafe-inline'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data:; font-src 'self' data:; worker-src 'self' blob:; connect-src 'self'; "
    "frame-ancestors 'self'; base-uri 'self'; form-action 'self'"
)


def install_docs(app: FastAPI, *, openapi_url: str = "/openapi.json") -> None:
    """Add ``/docs``, ``/redoc`` and the assets they load to ``app`` (built with
    ``docs_url=None, redoc_url=None``, so FastAPI adds no CDN pages of its own)."""
    app.mount(ASSETS_PATH, StaticFiles(directory=ASSETS_DIR), name="docs-assets")

    @app.get("/docs", include_in_schema=False)
    async def swagger_ui(request: Request) -> HTMLResponse:
        root = request.scope.get("root_path", "")
        page = get_swagger_ui_html(
            openapi_url=f"{root}{openapi_url}",
            title=f"{app.title} - Swagger UI",
            swagger_js_url=f"{root}{ASSETS_PATH}/swagger-ui/swagger-ui-bundle.js",
            swagger_css_url=f"{root}{ASSETS_PATH}/swagger-ui/swagger-ui.css",
            swagger_favicon_url=f"{root}{ASSETS_PATH}/swagger-ui/favicon-32x32.png",
            swagger_ui_parameters={"validatorUrl": None},
        )
        page.headers["Content-Security-Policy"] = DOCS_CSP
        return page

    @app.get("/redoc", include_in_schema=False)
    async def redoc(request: Request) -> HTMLResponse:
        root = request.scope.get("root_path", "")
        page = get_redoc_html(
            openapi_url=f"{root}{openapi_url}",
            title=f"{app.title} - ReDoc",
            redoc_js_url=f"{root}{ASSETS_PATH}/redoc/redoc.standalone.js",
            redoc_favicon_url=f"{root}{ASSETS_PATH}/swagger-ui/favicon-32x32.png",
            with_google_fonts=False,
        )
        page.headers["Content-Security-Policy"] = DOCS_CSP
        return page
