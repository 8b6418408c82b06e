"""Shared fixtures: one managed ArcadeDB server in a temporary data directory for
the whole session (real server, real Bolt driver), the real embedder, and a
fresh tenant per test so tests never see each other's data."""

from __future__ import annotations

import os
import shutil
import tempfile
import uuid
from pathlib import Path

import pytest

_DATA_DIR = Path(tempfile.mkdtemp(prefix="pathweave-tests-"))
os.environ.setdefault("PATHWEAVE_DATA_DIR", str(_DATA_DIR))
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
