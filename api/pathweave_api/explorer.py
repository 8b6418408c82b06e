"""The reasoning explorer's pages (``/ui/...``): static HTML, CSS and JS, and the vendored
Cytoscape.js (``tools/vendor-ui.sh``). They carry no tenant data and need no key: the
page asks for an API key once, keeps it in sessionStorage and reads everything from the
authenticated ``/v1`` API, so it works the same on every store backend.
"""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI, Path as PathParam
from fastapi.responses import FileResponse, HTMLResponse
from typing import Annotated

from pathweave_api.models import DOC_ID_PATTERN, HEX32_PATTERN
from pathweave_api.problems import ApiProblem

UI_DIR = Path(__file__).parent / "ui"

# name -> (file, media type): the only files served under /ui/static/
_STATIC = {
    "explorer.js": (UI_DIR / "explorer.js", "text/javascript; charset=utf-8"),
    "explorer.css": (UI_DIR / "explorer.css", "text/css; charset=utf-8"),
    "cytoscape.min.js": (UI_DIR / "static" / "cytoscape.min.js", "text/javascript; charset=utf-8"),
    "cytoscape.LICENSE": (UI_DIR / "static" / "cytoscape.LICENSE", "text/plain; charset=utf-8"),
}

# Scripts only from this origin (no inline script, no eval); the page's fetches go to this origin only.
HEADERS = {
    "Content-Security-Policy": ("default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
                                "img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'self'; "
                                "frame-ancestors 'none'"),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-cache",
}


def explorer_path(query_id: str | None = None) -> str:
    """The explorer's path: a query's page, or the list of queries."""
    return f"/ui/queries/{query_id}" if query_id else "/ui/queries"


def install(app: FastAPI) -> None:
    """Add the explorer's routes to ``app`` (hidden from the OpenAPI schema)."""

    def page() -> HTMLResponse:
        return HTMLResponse((UI_DIR / "explorer.html").read_text(encoding="utf-8"), headers=HEADERS)

    @app.get("/ui/queries", include_in_schema=False)
    def ui_queries():
        return page()

    @app.get("/ui/queries/{query_id}", include_in_schema=False)
    def ui_query(query_id: Annotated[str, PathParam(pattern=HEX32_PATTERN)]):
        return page()

    @app.get("/ui/documents/{doc_id}", include_in_schema=False)
    def ui_document(doc_id: Annotated[str, PathParam(pattern=DOC_ID_PATTERN)]):
        return page()

    @app.get("/ui/static/{name}", include_in_schema=False)
    def ui_static(name: str):
        entry = _STATIC.get(name)
        if entry is None or not entry[0].is_file():
            hint = " (run tools/vendor-ui.sh)" if name.startswith("cytoscape") else ""
            raise ApiProblem(404, f"no such file{hint}", "not-found")
        return FileResponse(entry[0], media_type=entry[1], headers=HEADERS)
