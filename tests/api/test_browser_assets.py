"""What Neo4j Browser gets from Pathweave: the guide and the style the API serves (no key,
any origin, the CORS preflight the Browser's fetch makes), and the settings the managed Neo4j
writes (``browser.post_connect_cmd`` splits into the commands the Browser runs). The Browser
itself runs them in ``test_neo4j_browser.py`` (Neo4j run)."""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser

import pytest

from pathweave.servers.neo4j_browser import browser_settings, style
from pathweave.store.statements import cypher_dir, documented

pytestmark = pytest.mark.arcadedb_only  # the service's interface; the stores are covered by the rest of the suite


def browser_split(command: str) -> list[str]:
    """``browser.post_connect_cmd`` split as the Browser splits it: at ``;`` outside quotes."""
    quoted = re.sub(r"(`[^`]*?`|\"[^\"]*?\"|'[^']*?')", lambda m: m[0].replace(";", "\0"), command)
    return [part.strip().replace("\0", ";") for part in quoted.split(";") if part.strip()]


class _Runnable(HTMLParser):
    def __init__(self):
        super().__init__()
        self.blocks: dict[str, str] = {}
        self._name = None

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "pre" and "runnable" in (attrs.get("class") or ""):
            self._name = attrs.get("data-name") or f"anonymous{len(self.blocks)}"
            self.blocks[self._name] = ""

    def handle_endtag(self, tag):
        if tag == "pre":
            self._name = None

    def handle_data(self, data):
        if self._name:
            self.blocks[self._name] += data


def test_the_api_serves_the_guide_and_the_style_to_any_origin(client):
    guide = client.get("/browser/guide.html", headers={"Origin": "http://localhost:7474"})
    assert guide.status_code == 200 and guide.headers["content-type"].startswith("text/html")
    assert guide.headers["access-control-allow-origin"] == "*"
    parser = _Runnable()
    parser.feed(guide.text)
    saved = {s.name: s.body for path in (cypher_dir() / "browser").glob("*.cypher")
             for s in documented(path.read_text(), str(path))}
    assert saved and {name: parser.blocks.get(name) for name in saved} == saved  # every saved query, verbatim
    preflight = client.options("/browser/guide.html", headers={
        "Origin": "http://localhost:7474", "Access-Control-Request-Method": "GET",
        "Access-Control-Request-Headers": "pragma,cache-control"})
    assert preflight.status_code == 204 and preflight.headers["access-control-allow-origin"] == "*"
    assert {"pragma", "cache-control"} <= {h.strip() for h in
                                           preflight.headers["access-control-allow-headers"].split(",")}
    grass = client.get("/browser/pathweave.grass")
    assert grass.status_code == 200 and grass.json() == style()


def test_the_managed_neo4j_tells_the_browser_to_apply_the_style_and_open_the_guide():
    conf = browser_settings("acme", "http://pathweave.internal:8000/browser/guide.html")
    commands = browser_split(conf["browser.post_connect_cmd"])
    assert commands[0].startswith("style {") and json.loads(commands[0][len("style "):]) == style()
    assert commands[1:] == ['param tenant => "acme"', "param query_id => null",
                            "play http://pathweave.internal:8000/browser/guide.html"]
    assert conf["browser.remote_content_hostname_whitelist"].split(",") == [
        "guides.neo4j.com", "localhost", "127.0.0.1", "pathweave.internal"]
    assert conf["client.allow_telemetry"] == "false"
    for label, caption in {"Query": "{text}", "Proposition": "{text}", "Passage": "{title}", "Entity": "{name}",
                           "Path": "{score}"}.items():
        assert style()[f"node.{label}"]["caption"] == caption
    for bad in ("file:///etc/passwd", "http://localhost:8000/g\ndbms.security.auth_enabled=false",
                "http://localhost:8000/g;style reset"):
        with pytest.raises(ValueError):
            browser_settings("acme", bad)
