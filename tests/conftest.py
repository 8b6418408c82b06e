"""Shared fixtures: one managed ArcadeDB server in a temporary data directory for
the whole session (real server, real Bolt driver), the real embedder, and a
fresh tenant per test so tests never see each other's data."""

from __future__ import annotations

import importlib.util
import os
import shutil
import tempfile
import uuid
from pathlib import Path

import pytest

_DATA_DIR = Path(tempfile.mkdtemp(prefix="pathweave-tests-"))
os.environ.setdefault("PATHWEAVE_DATA_DIR", str(_DATA_DIR))
os.environ.setdefault("PATHWEAVE_LLM_MODEL", "qwen2.5-coder-0.5b")  # the managed server's fast model in tests
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"

FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture(scope="session")
def settings():
    from pathweave.settings import get_settings

    return get_settings()


@pytest.fixture(scope="session")
def base_store(settings):
    from pathweave import server
    from pathweave.store import open_store

    store = open_store(settings)
    yield store
    store.close()
    server.stop(settings)
    shutil.rmtree(_DATA_DIR, ignore_errors=True)


@pytest.fixture(scope="session")
def embedder(settings):
    from pathweave.embeddings import get_embedder

    return get_embedder(settings)


@pytest.fixture()
def tenant() -> str:
    return f"t{uuid.uuid4().hex[:10]}"


@pytest.fixture()
def store(base_store, tenant):
    """A store handle scoped to a fresh tenant (same server and driver)."""
    from pathweave.store import GraphStore

    return GraphStore(base_store.driver, base_store.database, base_store.backend, tenant,
                      base_store.batch_size, base_store.dimensions)


@pytest.fixture(scope="session")
def extractor():
    from pathweave_ingest.extractors.spacy_extractor import SpacyExtractor

    return SpacyExtractor()


@pytest.fixture()
def pipeline(store, embedder, extractor, settings):
    from pathweave_ingest.pipeline import Pipeline

    return Pipeline(store, embedder, extractor, settings.model_copy(update={"tenant": store.tenant}))


def _make_pdf(path: Path, pages: list[str], title: str = "Annual Report", images: bool = False,
             encrypt: str | None = None) -> Path:
    from reportlab.lib.pagesizes import letter
    from reportlab.lib.utils import ImageReader
    from reportlab.pdfgen import canvas

    c = canvas.Canvas(str(path), pagesize=letter, encrypt=encrypt)
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
    line of text (or one image) per page, made with reportlab (tests of PDF ingestion)."""
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


@pytest.fixture(scope="session")
def llm_server(base_store, settings, llm_settings):
    """The running managed server (stopped before the store's teardown removes the data dir)."""
    from pathweave.llm import server

    info = server.start(settings.data_dir, llm_settings)
    yield info
    server.stop(settings.data_dir)


@pytest.fixture(scope="session")
def llm_client(settings, llm_settings, llm_server):
    from pathweave.llm.client import connect

    return connect(settings.data_dir, llm_settings)
