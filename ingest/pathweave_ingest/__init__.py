"""Pathweave ingestion: loaders, chunking, extractors and the ingestion pipeline.

Depends on the core package ``pathweave``; the core never imports this one.
"""
