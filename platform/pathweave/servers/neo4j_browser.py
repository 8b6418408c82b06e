"""Neo4j Browser as a tool: Pathweave's Browser style and what the Browser runs once it connects.

The style (``neo4j-server/pathweave.grass``, GraSS in the JSON form the Browser reads, drops
and exports) captions each kind of node by what a reader needs: a query, proposition, answer
or PruneRAG tree node by its ``text``, a passage or document by its ``title``, an entity by its
``name``, a reasoning path by its ``score``; FOUND and SELECTED edges by ``rank``, STEP edges by
``order``; one colour per node kind. Without it the Browser captions a proposition by the first
of its properties (an id hash or an embedding).

The managed Neo4j writes :func:`browser_settings` into its ``neo4j.conf``:
``browser.post_connect_cmd`` applies the style inline (no server needs to serve it), sets the
``$tenant`` and ``$query_id`` parameters of the saved queries of ``cypher/browser/``, and opens
the Pathweave guide that the API serves at ``/browser/guide.html`` (those queries, runnable by a
click); the guide's host is on ``browser.remote_content_hostname_whitelist`` (its name in Neo4j 5); and
``client.allow_telemetry=false`` removes the usage-data banner. docker-compose sets the same
settings as ``NEO4J_*`` variables (docs/neo4j.md).
"""

from __future__ import annotations

import json
import re
from functools import lru_cache
from pathlib import Path
from urllib.parse import urlsplit

#: The style file, in the managed Neo4j's folder (linked into this package, shipped in the wheel).
STYLE_FILE = Path(__file__).resolve().parent / "neo4j-server" / "pathweave.grass"
#: Hosts the Browser may always fetch guides and styles from (its own default, and this machine).
ALLOWED_HOSTS = ("guides.neo4j.com", "localhost", "127.0.0.1")


@lru_cache(maxsize=1)
def style_text() -> str:
    """The style file's text (GraSS as JSON). Raises FileNotFoundError when the installation
    lacks its package data."""
    return STYLE_FILE.read_text(encoding="utf-8")


def style() -> dict[str, dict[str, str]]:
    """The style as the Browser's rules: ``{selector: {property: value}}``, selectors such as
    ``"node.Proposition"`` or ``"relationship.STEP"``."""
    return json.loads(style_text())


def post_connect_command(tenant: str, guide_url: str | None) -> str:
    """``browser.post_connect_cmd``: the commands the Browser runs after it connects, separated
    by ``;`` (the Browser keeps a quoted ``;`` whole): ``:style`` with the style inline as one
    JSON line, ``:param tenant`` and ``:param query_id`` (null: the latest query), then
    ``:play guide_url`` when a guide URL is given."""
    commands = [
        "style " + json.dumps(style(), separators=(",", ":")),
        f"param tenant => {json.dumps(tenant)}",
        "param query_id => null",
    ]
    if guide_url:
        commands.append(f"play {guide_url}")
    return "; ".join(commands)


def browser_settings(tenant: str, guide_url: str | None) -> dict[str, str]:
    """The ``neo4j.conf`` settings that make the Browser Pathweave's: the post-connect commands,
    the guide's host allowed (besides :data:`ALLOWED_HOSTS`), no usage-data collection.

    Raises ValueError when ``guide_url`` is not an http(s) URL with a host, or holds what
    could end the config line or the command (whitespace, quotes, ``;``)."""
    hosts = list(ALLOWED_HOSTS)
    if guide_url:
        parts = urlsplit(guide_url)
        if parts.scheme not in ("http", "https") or not parts.hostname or re.search(r"[\s;'\"`\\]", guide_url):
            raise ValueError(f"the Browser guide URL must be http(s)://host/... with no spaces, quotes or ';': "
                             f"{guide_url!r}")
        if parts.hostname not in hosts:
            hosts.append(parts.hostname)
    return {
        "browser.post_connect_cmd": post_connect_command(tenant, guide_url),
        "browser.remote_content_hostname_whitelist": ",".join(hosts),
        "client.allow_telemetry": "false",
    }
