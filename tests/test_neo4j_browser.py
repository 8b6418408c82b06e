"""Neo4j Browser on a reasoning record (Neo4j run only): the Browser served by the managed
Neo4j (neo4j-browser 5.24 on its HTTP port), driven by a real headless Chromium. A real
query over ingested documents writes its record; the Browser logs in over Bolt with the
generated password, sets the parameters, runs the saved query of
``cypher/browser/reasoning_record.cypher`` and must draw exactly the record's nodes (and at
least its relationships: the Browser also connects the drawn nodes)."""

from __future__ import annotations

import os
import re
import time

import pytest

from pathweave.servers import store_server
from pathweave.store.statements import cypher_dir, parse
from pathweave.query.retriever import Retriever
from pathweave_ingest.loaders import SourceDocument

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
    deadline = time.monotonic() + seconds
    while True:
        value = check()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.3)


def test_neo4j_browser_draws_the_reasoning_record(pipeline, store, embedder, settings, browser):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    pipeline.ingest(DOCS)
    retriever = Retriever(store, embedder, settings.model_copy(update={"tenant": store.tenant}))
    result = retriever.query("In which country is the city where Marie Curie was born?", k=3, write_record=True)
    retriever.flush()
    assert result.paths, "the query found no reasoning path to draw"
    query = parse((cypher_dir() / "browser" / "reasoning_record.cypher").read_text())["browser_reasoning_record"]
    params = {"tenant": store.tenant, "query_id": result.query_id}
    with store.driver.session(database=store.database) as session:
        records = list(session.run(query, params))
        nodes, relationships = {}, set()
        for record in records:
            for value in record.values():
                for path in value if isinstance(value, list) else [value]:
                    nodes.update((n.element_id, next(iter(n.labels))) for n in path.nodes)
                    relationships.update(r.element_id for r in path.relationships)
    nodes = dict(nodes)
    labels = {label: sum(1 for v in nodes.values() if v == label) for label in set(nodes.values())}
    assert {"Query", "Path", "Proposition", "Entity", "Passage"} <= set(labels)

    info = store_server.status(settings)
    assert info is not None and info.backend == "neo4j"
    browser.get(f"{info.http_url}/browser/?dbms=bolt://neo4j@127.0.0.1:{info.bolt_port}&db=neo4j")
    wait_for(lambda: browser.find_elements(By.CSS_SELECTOR, '[data-testid="password"]'), what="login")

    def log_in() -> bool:
        """Connected yet? Else type the password again: the Browser first tries the URL's
        connection without one and may re-draw the form (dropping what was typed) meanwhile."""
        fields = browser.find_elements(By.CSS_SELECTOR, '[data-testid="password"]')
        if not fields:
            return True
        if not fields[0].get_attribute("value"):
            # submitted with Enter: the usage-data banner can lie over the Connect button
            fields[0].send_keys(info.password + Keys.ENTER)
            time.sleep(2.0)
        return False

    try:
        wait_for(log_in, 120.0, what="the connection")
    except AssertionError:  # say what the Browser shows
        raise AssertionError(browser.find_element(By.TAG_NAME, "body").text[-1500:]) from None

    def run(command: str) -> None:
        frames = len(browser.find_elements(By.CSS_SELECTOR, '[data-testid="frame"]'))
        browser.find_element(By.CSS_SELECTOR, '[data-testid="activeEditor"] textarea').send_keys(command)
        browser.find_element(By.CSS_SELECTOR, '[data-testid="editor-Run"]').click()
        wait_for(lambda: len(browser.find_elements(By.CSS_SELECTOR, '[data-testid="frame"]')) > frames,
                 what=f"the frame of {command[:40]!r}")

    run(f":param tenant => '{store.tenant}'")
    run(f":param query_id => '{result.query_id}'")
    run(one_line(query))
    drawn = wait_for(lambda: browser.find_elements(By.CSS_SELECTOR, "svg g.node"), what="the graph")
    time.sleep(1.0)  # the force layout settles; the node set is complete once drawn
    drawn = browser.find_elements(By.CSS_SELECTOR, "svg g.node")
    overview = browser.find_element(By.XPATH, "//*[contains(text(), 'Displaying')]").text
    if SCREENSHOT:
        browser.save_screenshot(SCREENSHOT)
    assert len(drawn) == len(nodes), overview
    shown = re.search(r"Displaying (\d+) nodes?, (\d+) relationships?", overview)
    assert shown and int(shown[1]) == len(nodes) and int(shown[2]) >= len(relationships), overview
    for label, count in labels.items():  # the Overview panel counts the drawn nodes per label
        assert browser.find_elements(By.XPATH, f"//*[normalize-space(text())='{label} ({count})']"), (label, count)
