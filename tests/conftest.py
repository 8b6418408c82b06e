"""Shared fixtures: one managed store server in a temporary data directory for the whole
session (real server, real Bolt driver), the real embedder, and a fresh tenant per test so
tests never see each other's data.

The store is the managed server of ``PATHWEAVE_STORE_BACKEND``: ArcadeDB (default) or Neo4j
5.26 + GDS 2.13 (``tools/test.sh`` runs the suite once per backend). In the Neo4j run only
the store contract is collected: the modules marked ``store_contract``, whose subject is the
store (statements, transactions, versions, visibility, topology, backup), and the tests marked
``neo4j_only``; every named statement of ``cypher/`` must still run there (the coverage gate
below). The service's interface, validation, auth, limits, OpenAPI, rendering and the model
run once, on the default store. Tests marked ``neo4j_only`` (GDS) are left
out of the ArcadeDB run, and the few marked ``arcadedb_only`` (ArcadeDB's own code paths, whose
Neo4j counterparts have tests of their own) out of the Neo4j run. Either way a test is
deselected, never skipped, for its backend."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import tempfile
import time
import uuid
from pathlib import Path

import pytest

_DATA_DIR = Path(tempfile.mkdtemp(prefix="pathweave-tests-"))
os.environ.setdefault("PATHWEAVE_DATA_DIR", str(_DATA_DIR))
# every process of the run (this one, API servers, workers) records the statements it runs
_CYPHER_TRACE = Path(tempfile.mkdtemp(prefix="pathweave-cypher-trace-")) / "statements.txt"
os.environ["PATHWEAVE_TEST_CYPHER_TRACE"] = str(_CYPHER_TRACE)
os.environ.setdefault("PATHWEAVE_LLM_MODEL", "qwen2.5-coder-0.5b")  # the managed server's fast model in tests
# the stores the suite starts (many at once, beside the models) get fixed sizes, not the share of
# the machine's memory one store takes in production (pathweave.servers.sizing)
os.environ.setdefault("PATHWEAVE_STORE_SERVER_HEAP", "2g")
os.environ.setdefault("PATHWEAVE_STORE_SERVER_PAGECACHE", "512m")
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"

FIXTURES = Path(__file__).parent / "fixtures"
BACKEND = os.environ.get("PATHWEAVE_STORE_BACKEND", "arcadedb")


def pytest_configure(config):
    config.addinivalue_line("markers", "neo4j_only: runs in the Neo4j + GDS run of the suite only")
    config.addinivalue_line("markers", "arcadedb_only: about the ArcadeDB backend itself; not in the Neo4j run")
    config.addinivalue_line("markers", "store_contract: the store is the test's subject (statements, transactions, "
                                       "versions, visibility, topology, backup): it runs on Neo4j too")


def pytest_collection_modifyitems(config, items):
    """Select the tests of this run's backend (see the module docstring)."""
    def wanted(item) -> bool:
        if item.get_closest_marker("neo4j_only"):
            return BACKEND == "neo4j"
        if item.get_closest_marker("arcadedb_only"):
            return BACKEND != "neo4j"
        return BACKEND != "neo4j" or item.get_closest_marker("store_contract") is not None

    deselected = [item for item in items if not wanted(item)]
    if deselected:
        config.hook.pytest_deselected(items=deselected)
        items[:] = [item for item in items if wanted(item)]


def pytest_sessionfinish(session, exitstatus):
    """The Neo4j run of the whole suite fails when a named statement of ``cypher/`` was never
    executed on Neo4j by any process of the run (a statement only ArcadeDB ever ran would
    reach production untried)."""
    if BACKEND != "neo4j" or session.config.args not in ([], [str(Path(__file__).parent)], ["tests"]):
        return
    if exitstatus not in (0, pytest.ExitCode.TESTS_FAILED):
        return
    from pathweave.store.statements import load_all

    ran = set(_CYPHER_TRACE.read_text().split()) if _CYPHER_TRACE.exists() else set()
    never = sorted(set(load_all()) - ran)
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if never:
        reporter.write_line(f"FAILED cypher coverage: {len(never)} named statements never ran on Neo4j: "
                            + ", ".join(never), red=True)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
    else:
        reporter.write_line(f"cypher coverage: all {len(load_all())} named statements ran on Neo4j", green=True)


@pytest.fixture(scope="session")
def settings():
    from pathweave.settings import get_settings

    return get_settings()


@pytest.fixture(scope="session")
def base_store(settings):
    from pathweave.servers import store_server
    from pathweave.runtime import open_store

    store = open_store(settings)
    yield store
    store.close()
    store_server.stop(settings)
    shutil.rmtree(_DATA_DIR, ignore_errors=True)


@pytest.fixture(scope="session")
def embedder(settings):
    from pathweave.embedding.embedders import get_embedder

    return get_embedder(settings)


@pytest.fixture()
def tenant() -> str:
    return f"t{uuid.uuid4().hex[:10]}"


@pytest.fixture()
def store(base_store, tenant):
    """A store handle scoped to a fresh tenant (same server and driver)."""
    from pathweave.store.graph_store import GraphStore

    return GraphStore(base_store.driver, base_store.database, base_store.backend, tenant,
                      base_store.batch_size, base_store.dimensions)


@pytest.fixture(scope="session")
def extractor():
    from pathweave.extractors.spacy_extractor import SpacyExtractor

    return SpacyExtractor()


@pytest.fixture()
def pipeline(store, embedder, extractor, settings):
    from pathweave_ingest.pipeline import Pipeline

    return Pipeline(store, embedder, extractor, settings.model_copy(update={"tenant": store.tenant}))


def _make_pdf(path: Path, pages: list[str], title: str | None = "Annual Report", images: bool = False,
             encrypt: str | None = None) -> Path:
    from reportlab.lib.pagesizes import letter
    from reportlab.lib.utils import ImageReader
    from reportlab.pdfgen import canvas

    c = canvas.Canvas(str(path), pagesize=letter, encrypt=encrypt)
    if title is not None:  # else reportlab's default metadata title, "untitled"
        c.setTitle(title)
    for text in pages:
        if images:
            from PIL import Image

            c.drawImage(ImageReader(Image.new("RGB", (60, 40), (120, 30, 30))), 100, 100, 300, 200)
        else:
            c.drawString(72, 700, text)
        c.showPage()
    c.save()
    return path


@pytest.fixture(scope="session")
def make_pdf():
    """``make_pdf(path, pages, title=..., images=False, encrypt=None) -> path``: a PDF of one
    line of text (or one image) per page, made with reportlab (tests of PDF ingestion);
    ``title=None`` leaves reportlab's placeholder title "untitled"."""
    return _make_pdf


# ---- the real local model server (LLM tests): the managed llama.cpp server of the session's
# data directory serving the packaged Qwen2.5-Coder-0.5B (fast on a CPU). Skipped, with the
# reason, only when llama-cpp-python (extra pathweave[llm]) is not installed: make install
# (and so CI) installs it.

SKIP_REASON = "llama-cpp-python is not installed: pip install -e '.[llm]' (make install does)"


@pytest.fixture(scope="session")
def llm_settings():
    if importlib.util.find_spec("llama_cpp") is None:
        pytest.skip(SKIP_REASON)
    from pathweave.settings import LLMSettings

    return LLMSettings(base_url="", model="qwen2.5-coder-0.5b", timeout_s=600, start_timeout_s=300)


class RunningModelServer:
    """The session's managed model server wherever it runs now (``pid``, ``port``, ``model``,
    ``base_url``): a test that kills it (tests/api/test_model_server_exit.py) leaves it started
    again, on another port."""

    def __init__(self, data_dir: Path, llm_settings) -> None:
        self.data_dir, self.llm_settings = data_dir, llm_settings

    def _info(self):
        from pathweave.servers import llm_server as server

        return server.start(self.data_dir, self.llm_settings, owner=os.getpid(), report_exit=False)

    def __getattr__(self, name: str):
        return getattr(self._info(), name)

    def __eq__(self, other) -> bool:
        return self._info() == other

    __hash__ = None


@pytest.fixture(scope="session")
def llm_server(base_store, settings, llm_settings):
    """The running managed server, owned by this process (stopped before the store's teardown
    removes the data dir; a killed test run leaves none behind)."""
    from pathweave.servers import llm_server as server

    server.start(settings.data_dir, llm_settings, owner=os.getpid())
    yield RunningModelServer(settings.data_dir, llm_settings)
    server.stop(settings.data_dir)


@pytest.fixture(scope="session")
def llm_client(settings, llm_settings, llm_server):
    from pathweave.llm.client import connect

    return connect(settings.data_dir, llm_settings)


# ---- a real headless Chromium (Debian chromium + chromium-driver, installed by tools/test.sh)
# for the pages: the reasoning explorer (tests/api/test_explorer.py) and Neo4j Browser
# (tests/api/test_neo4j_browser.py)

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    """A selenium driver of headless Chromium (1280x800), one per test module."""
    if not (os.path.exists(CHROMIUM) and os.path.exists(CHROMEDRIVER)):
        pytest.fail("headless Chromium is needed: apt-get install -y chromium chromium-driver (tools/test.sh does)")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--no-first-run", "--window-size=1280,800",
                 f"--user-data-dir={tmp_path_factory.mktemp('chromium')}"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(60)
    yield driver
    driver.quit()


@pytest.fixture(scope="session")
def broker_url(tmp_path_factory):
    """A real Redis (the worker's broker, the API's shared rate limits): ``PATHWEAVE_TEST_BROKER_URL``,
    else Redis on 127.0.0.1:6379 (db 15), else a private redis-server."""
    from pathweave.servers.processes import free_port
    from pathweave_ingest.worker import broker_answers as redis_answers

    candidates = [os.environ.get("PATHWEAVE_TEST_BROKER_URL"), "redis://127.0.0.1:6379/15"]
    for url in filter(None, candidates):
        if redis_answers(url):
            yield url
            return
    binary = shutil.which("redis-server")
    if binary is None:
        pytest.skip("no Redis: run tools/start-redis.sh (installs and starts redis-server on 127.0.0.1)")
    port = free_port()
    directory = tmp_path_factory.mktemp("redis")
    process = subprocess.Popen([binary, "--bind", "127.0.0.1", "--port", str(port), "--save", "", "--appendonly", "no",
                                "--dir", str(directory)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"redis://127.0.0.1:{port}/0"
    try:
        deadline = time.monotonic() + 20
        while not redis_answers(url):
            assert process.poll() is None and time.monotonic() < deadline, "redis-server did not start"
            time.sleep(0.1)
        yield url
    finally:
        process.terminate()
        process.wait(10)


@pytest.fixture()
def while_held(store):
    """``while_held(hold, contend)``: ``hold(run)`` runs in a write transaction of ``store``
    that stays open while ``contend()`` runs in another thread, until ``contend`` is seen
    waiting for a lock (Neo4j: ``SHOW TRANSACTIONS`` reports a blocked transaction) or, on a
    store whose transactions do not wait (ArcadeDB's optimistic ones conflict at commit
    instead), for 1 s; then the holder commits. Returns ``(contend()'s result, whether it was
    seen waiting)``; raises what either raised. Forces the interleaving a compare-and-set
    must survive."""
    import threading
    import time

    def interleave(hold, contend):
        held, release, outcome, errors = threading.Event(), threading.Event(), {}, []

        def holder(run):
            hold(run)
            held.set()
            release.wait(30)  # every retry of the transaction waits too (nothing is left blocked)

        def contender():
            try:
                outcome["value"] = contend()
            except BaseException as exc:  # noqa: BLE001 - raised below
                errors.append(exc)

        def holding():
            try:
                store.execute_write(holder)
            except BaseException as exc:  # noqa: BLE001
                errors.append(exc)

        first = threading.Thread(target=holding)
        first.start()
        assert held.wait(30), errors
        second = threading.Thread(target=contender)
        second.start()
        deadline, waited = time.monotonic() + (10.0 if BACKEND == "neo4j" else 1.0), False
        while time.monotonic() < deadline and second.is_alive() and not waited:
            if BACKEND == "neo4j":
                with store.driver.session(database=store.database) as session:
                    statuses = [r["status"] for r in session.run("SHOW TRANSACTIONS YIELD status")]
                waited = any(str(s).startswith("Blocked") for s in statuses)
            time.sleep(0.05)
        release.set()
        first.join(30)
        second.join(30)
        if errors:
            raise errors[0]
        return outcome.get("value"), waited

    return interleave
