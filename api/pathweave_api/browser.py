"""Neo4j Browser's Pathweave guide and style, served for the Browser (``/browser/...``).

- ``/browser/guide.html``: a Browser guide (``:play <url>``) with the saved queries of
  ``cypher/browser/``, each under its title and its comment, a click puts it in the Browser's
  editor. The managed Neo4j opens it once connected (:mod:`pathweave.servers.neo4j_browser`).
- ``/browser/pathweave.grass``: the Browser style (GraSS as JSON) for ``:style <url>``, as
  docker-compose's Neo4j applies it, or to drop on a Browser by hand.

Both are the same for every caller and carry no tenant data: no key is needed. The Browser
runs on the Neo4j server's origin and fetches them with ``Pragma`` and ``Cache-Control``
headers, so they allow any origin and answer the CORS preflight.
"""

from __future__ import annotations

from functools import lru_cache
from html import escape

from fastapi import FastAPI, Response

from pathweave.servers.neo4j_browser import style_text
from pathweave.store.statements import cypher_dir, documented

CORS = {
    "Access-Control-Allow-Origin": "*",
    "Access-Control-Allow-Methods": "GET, OPTIONS",
    "Access-Control-Allow-Headers": "pragma, cache-control",
    "Access-Control-Max-Age": "600",
    "X-Content-Type-Options": "nosniff",
    "Cache-Control": "no-cache",
}


@lru_cache(maxsize=1)
def guide_html() -> str:
    """The guide: one section per saved query of ``cypher/browser/*.cypher`` in file and
    statement order (the title, the comment, the query in a ``pre.runnable``), and how to set
    the ``$tenant`` / ``$query_id`` parameters they take. Raises FileNotFoundError when the
    installation lacks its package data."""
    sections = []
    for path in sorted((cypher_dir() / "browser").glob("*.cypher")):
        for statement in documented(path.read_text(encoding="utf-8"), str(path)):
            title = statement.title.removeprefix("Pathweave:").strip() or statement.name
            title = title[:1].upper() + title[1:]
            sections.append(
                f'<h4>{escape(title)}</h4>\n<p class="lead">{escape(statement.doc)}</p>\n'
                f'<pre class="pre-scrollable code runnable" data-name="{escape(statement.name)}">'
                f"{escape(statement.body)}</pre>")
    return (
        '<div class="pathweave-guide">\n<h3>Pathweave: reasoning records in Neo4j Browser</h3>\n'
        "<p>Every query Pathweave answers is written back as a reasoning record: "
        "(:Query)-[:FOUND]-&gt;(:Path)-[:STEP]-&gt;(:Proposition), the entities the propositions mention and "
        "the passages stating them. Click a query below to put it in the editor, then run it. They read the "
        "parameters <code>$tenant</code> and <code>$query_id</code> (null: the latest query); set them with</p>\n"
        '<pre class="code runnable">:param tenant =&gt; \'default\'</pre>\n'
        '<pre class="code runnable">:param query_id =&gt; null</pre>\n'
        + "\n".join(sections) + "\n</div>\n")


def install(app: FastAPI) -> None:
    """Add the guide's and the style's routes to ``app`` (hidden from the OpenAPI schema)."""

    @app.get("/browser/guide.html", include_in_schema=False)
    def browser_guide():
        return Response(guide_html(), media_type="text/html; charset=utf-8", headers=CORS)

    @app.get("/browser/pathweave.grass", include_in_schema=False)
    def browser_style():
        return Response(style_text(), media_type="application/json", headers=CORS)

    @app.options("/browser/guide.html", include_in_schema=False)
    @app.options("/browser/pathweave.grass", include_in_schema=False)
    def browser_preflight():
        return Response(status_code=204, headers=CORS)
