"""Pathweave core: graph model, store, embeddings, retrieval and evaluation.

The core never imports the ingestion package (``pathweave_ingest``) or the
service (``pathweave_api``).
"""

__version__ = "0.1.0"
