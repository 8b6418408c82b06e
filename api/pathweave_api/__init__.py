"""Pathweave HTTP API (FastAPI): ingestion jobs, documents, queries, reasoning records.

``from pathweave_api.app import create_app``; see ``docs/api.md``.
"""

__all__ = ["create_app"]


def create_app(*args, **kwargs):
    """Build the FastAPI application (see :func:`pathweave_api.app.create_app`)."""
    from pathweave_api.app import create_app as _create_app

    return _create_app(*args, **kwargs)
