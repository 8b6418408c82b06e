"""Retrieval modes: PropRAG (default), dense passages, HippoRAG 2 baseline."""
