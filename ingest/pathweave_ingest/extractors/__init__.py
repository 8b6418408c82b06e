"""Extractors turn passages into entities, propositions and triples.

- :mod:`.spacy_extractor`: the default, LLM-free (spaCy ``en_core_web_sm``).
- :mod:`.imported`: precomputed OpenIE extractions (HippoRAG JSON format).
"""

from pathweave_ingest.extractors.base import PassageExtraction, PassageInput

__all__ = ["PassageExtraction", "PassageInput"]
