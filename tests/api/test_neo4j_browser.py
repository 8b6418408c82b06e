"""Neo4j Browser on a reasoning record (Neo4j run only): the Browser served by the managed
Neo4j (neo4j-browser 5.24 on its HTTP port), driven by a real headless Chromium. A real
query over ingested documents writes its record; the Browser logs in over Bolt with the
generated password and runs the commands of ``browser.post_connect_cmd`` (Pathweave's style
applied inline, the saved queries' parameters, the guide). The guide, served by a real API
(``/browser/guide.html``), puts the saved query of ``cypher/browser/reasoning_record.cypher``
in the editor with a click; the Browser must draw exactly the record's nodes (and at least its
relationships: it also connects the drawn nodes), each captioned by what the style says: a
proposition or the query by its text, a passage by its title, an entity by its name."""

from __future__ import annotations

import os
import re
import time

import pytest

from pathweave.servers import store_server
from pathweave.store.statements import cypher_dir, parse
from pathweave.query.retriever import Retriever
from pathweave_ingest.loaders import SourceDocument

from conftest import served_app
from waiting import wait_until

pytestmark = pytest.mark.neo4j_only

DOCS = [
    SourceDocument("browser#curie", "Marie Curie", "Marie Curie was a physicist who studied radioactivity. "
                   "She was born in Warsaw."),
    SourceDocument("browser#warsaw", "Warsaw", "Warsaw is the capital of Poland. The Vistula river flows "
                   "through Warsaw."),
]
SCREENSHOT = os.environ.get("PATHWEAVE_TEST_BROWSER_SCREENSHOT")  # e.g. docs/neo4j-browser.png


def one_line(statement: str) -> str:
    """The statement as one editor line (no comments, single spaces)."""
    return re.sub(r"\s+", " ", statement).strip()


def wait_for(check, seconds: float = 60.0, what: str = "the page"):
    return wait_until(check, seconds, what, interval_s=0.3)


def click(browser, element) -> None:
    """Click ``element`` as a user would once it is in view; where the Browser draws over it
    (the editor's bar over the stream's top frame) the click event is sent to it directly."""
    from selenium.common.exceptions import ElementClickInterceptedException, ElementNotInteractableException

    browser.execute_script("arguments[0].scrollIntoView({block: 'center'})", element)
    try:
        element.click()
    except (ElementClickInterceptedException, ElementNotInteractableException):
        browser.execute_script("arguments[0].click()", element)


def captions(browser) -> list[str]:
    """The caption of each drawn node: its lines joined by a space, without the ellipsis of
    a caption cut to fit its circle."""
    from selenium.webdriver.common.by import By

    drawn = []
    for node in browser.find_elements(By.CSS_SELECTOR, "svg g.node"):
        lines = [t.text for t in node.find_elements(By.CSS_SELECTOR, "text.caption")]
        drawn.append(" ".join(line.strip() for line in lines).rstrip("\u2026").strip())
    return drawn


def shortens(caption: str, text: str) -> bool:
    """Whether ``caption`` is ``text`` as the Browser fits it into a circle: its words in
    order, some left out, the last one possibly cut."""
    words = iter(text.split())
    return all(any(word.startswith(part) for word in words) for part in caption.split())


def test_neo4j_browser_draws_the_reasoning_record(pipeline, store, embedder, settings, browser, api_settings,
                                                   worker_settings, runtime):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    from pathweave.servers.neo4j_server import browser_guide_url

    pipeline.ingest(DOCS)
    retriever = Retriever(store, embedder, settings.model_copy(update={"tenant": store.tenant}))
    result = retriever.query("In which country is the city where Marie Curie was born?", k=3, write_record=True)
    retriever.flush()
    assert result.paths, "the query found no reasoning path to draw"
    query = parse((cypher_dir() / "browser" / "reasoning_record.cypher").read_text())["browser_reasoning_record"]
    params = {"tenant": store.tenant, "query_id": result.query_id}
    expected: dict[str, tuple[str, str]] = {}  # element id -> (label, the caption the style gives)
    relationships = set()
    caption_of = {"Query": "text", "Path": "score", "Proposition": "text", "Entity": "name", "Passage": "title"}
    with store.driver.session(database=store.database) as session:
        for record in session.run(query, params):
            for value in record.values():
                for path in value if isinstance(value, list) else [value]:
                    for n in path.nodes:
                        label = next(iter(n.labels))
                        expected[n.element_id] = (label, str(n.get(caption_of.get(label, ""), "")))
                    relationships.update(r.element_id for r in path.relationships)
    labels = {label: sum(1 for v, _ in expected.values() if v == label) for label, _ in expected.values()}
    assert {"Query", "Path", "Proposition", "Entity", "Passage"} <= set(labels)

    info = store_server.status(settings)
    assert info is not None and info.backend == "neo4j"
    with served_app(settings, api_settings, worker_settings, runtime, "browser-guide-api") as (base, _keys):
        browser.get(f"{info.http_url}/browser/?dbms=bolt://neo4j@127.0.0.1:{info.bolt_port}&db=neo4j")
        wait_for(lambda: browser.find_elements(By.CSS_SELECTOR, '[data-testid="password"]'), what="login")

        def log_in() -> bool:
            """Connected yet? Else type the password again: the Browser first tries the URL's
            connection without one and may re-draw the form (dropping what was typed) meanwhile."""
            fields = browser.find_elements(By.CSS_SELECTOR, '[data-testid="password"]')
            if not fields:
                return True
            if not fields[0].get_attribute("value"):
                fields[0].send_keys(info.password + Keys.ENTER)
                time.sleep(2.0)
            return False

        try:
            wait_for(log_in, 120.0, what="the connection")
        except AssertionError:  # say what the Browser shows
            raise AssertionError(browser.find_element(By.TAG_NAME, "body").text[-1500:]) from None
        body = lambda: browser.find_element(By.TAG_NAME, "body").text  # noqa: E731
        # the post-connect commands ran, the last one opening the configured guide
        wait_for(lambda: f":play {browser_guide_url(settings)}" in body(), what="the post-connect commands")
        assert "Could not parse grass" not in body()
        assert "usage data" not in body().lower()  # client.allow_telemetry=false: no consent banner

        def run(command: str | None) -> None:
            """Type and run ``command``, or run what the editor holds (None)."""
            frames = len(browser.find_elements(By.CSS_SELECTOR, '[data-testid="frame"]'))
            if command:
                browser.find_element(By.CSS_SELECTOR, '[data-testid="activeEditor"] textarea').send_keys(command)
            click(browser, browser.find_element(By.CSS_SELECTOR, '[data-testid="editor-Run"]'))
            wait_for(lambda: len(browser.find_elements(By.CSS_SELECTOR, '[data-testid="frame"]')) > frames,
                     what=f"the frame of {(command or 'the editor')[:40]!r}")

        run(f":param tenant => '{store.tenant}'")
        run(f":param query_id => '{result.query_id}'")
        run(f":play {base}/browser/guide.html")
        saved = wait_for(lambda: browser.find_elements(
            By.CSS_SELECTOR, 'pre.runnable[data-name="browser_reasoning_record"]'), what="the guide")
        assert one_line(saved[0].text) == one_line(query)
        click(browser, saved[0])  # the guide puts it in the editor
        run(None)
        wait_for(lambda: browser.find_elements(By.CSS_SELECTOR, "svg g.node"), what="the graph")
        time.sleep(1.0)  # the force layout settles; the node set is complete once drawn
        drawn = browser.find_elements(By.CSS_SELECTOR, "svg g.node")
        overview = browser.find_element(By.XPATH, "//*[contains(text(), 'Displaying')]").text
        if SCREENSHOT:
            browser.save_screenshot(SCREENSHOT)
        assert len(drawn) == len(expected), overview
        shown = re.search(r"Displaying (\d+) nodes?, (\d+) relationships?", overview)
        assert shown and int(shown[1]) == len(expected) and int(shown[2]) >= len(relationships), overview
        for label, count in labels.items():  # the Overview panel counts the drawn nodes per label
            assert browser.find_elements(By.XPATH, f"//*[normalize-space(text())='{label} ({count})']"), (label, count)
        # the style's captions: a proposition by its text (not its id hash), a passage by its title, ...
        drawn_captions = captions(browser)
        assert all(drawn_captions), drawn_captions
        for element_id, (label, text) in expected.items():
            if label == "Path":
                continue
            assert any(c and shortens(c, text) for c in drawn_captions), (label, text, drawn_captions)
        assert not any(re.fullmatch(r"[0-9a-f]{16,}", c) for c in drawn_captions), drawn_captions
