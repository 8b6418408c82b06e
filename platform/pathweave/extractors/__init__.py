"""Extractors turn passages into entities, propositions and triples.

- :mod:`.spacy_extractor`: the default, LLM-free (spaCy ``en_core_web_sm``).
- :mod:`.imported`: precomputed OpenIE extractions (HippoRAG JSON format).
- :mod:`.llm_extractor`: an LLM (``--extractor llm``), JSON-schema constrained.
"""

from pathweave.extractors.base import PassageExtraction, PassageInput

__all__ = ["PassageExtraction", "PassageInput"]


def make_extractor(settings, batch_size: int | None = None):
    """The extractor ``settings.ingest.extractor`` names: ``spacy`` (default) or ``llm`` (the
    endpoint of ``settings.llm``, the managed local server when none is set). Raises
    ValueError for another name."""
    name = settings.ingest.extractor
    if name == "llm":
        from pathweave.llm.client import connect
        from pathweave.extractors.llm_extractor import LLMExtractor

        return LLMExtractor(connect(settings.data_dir, settings.llm), settings.llm.concurrency)
    if name != "spacy":
        raise ValueError(f"unknown extractor {name!r}; use spacy or llm")
    from pathweave.extractors.spacy_extractor import SpacyExtractor

    return SpacyExtractor(settings.models.spacy_model, **({"batch_size": batch_size} if batch_size else {}))


def question_parser(extractor):
    """APR's question parser over ``extractor`` (spec §3: a question is one run of its
    triples, from the configured extractor): ``question -> (triples, entity names)``."""
    def parse(question: str) -> tuple[list[tuple[str, str, str]], list[str]]:
        found = extractor.extract([PassageInput("", question, question)])[0]
        return list(found.triples), list(found.entities)
    return parse
