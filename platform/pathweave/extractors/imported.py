"""Import of precomputed OpenIE extractions (the HippoRAG JSON format):

``{"docs": [{"title", "text", "passage", "extracted_entities": [str],
"extracted_triples": [[s, p, o]]}]}`` — one record per passage, matched to our
documents by title and text. Entities are the extracted entities plus triple
subjects and objects; propositions are the passage's sentences linked to the
imported entities they contain; the triples become RELATES edges.
"""

from __future__ import annotations

import json
from pathlib import Path

from pathweave.extractors.base import (
    PassageExtraction,
    PassageInput,
    build_propositions,
    mentioned,
    split_sentences,
)


class ImportedExtractor:
    """Extractions read from a file. Raises ValueError on a malformed file."""

    name = "imported"

    def __init__(self, path: str | Path) -> None:
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ValueError(f"{path}: cannot read extraction file: {exc}") from None
        if not isinstance(data, dict) or not isinstance(data.get("docs"), list):
            raise ValueError(f"{path}: extraction file needs a 'docs' list")
        self.records: dict[tuple[str, str], dict] = {}
        for record in data["docs"]:
            if isinstance(record, dict):
                key = (str(record.get("title", "")).strip(), str(record.get("text", "")).strip())
                self.records[key] = record

    def extract(self, passages: list[PassageInput]) -> list[PassageExtraction]:
        """One extraction per passage; a passage without a record gets propositions only."""
        out = []
        for passage, sentences in zip(passages, split_sentences([p.text for p in passages])):
            record = self.records.get((passage.title, passage.doc_text), {})
            extraction = PassageExtraction()
            triples = [
                tuple(str(x).strip() for x in t) for t in record.get("extracted_triples", [])
                if isinstance(t, list) and len(t) == 3 and all(str(x).strip() for x in t)
            ]
            names = [str(e).strip() for e in record.get("extracted_entities", []) if str(e).strip()]
            for subject, _, obj in triples:
                names.extend((subject, obj))
            names = list(dict.fromkeys(names))
            if passage.text != passage.doc_text:  # a chunk keeps what it mentions
                names = mentioned(names, passage.text)
                triples = [t for t in triples if t[0] in names or t[2] in names]
            for name in names:
                extraction.entities.setdefault(name, "IMPORTED")
            for subject, _, obj in triples:
                extraction.entities.setdefault(subject, "IMPORTED")
                extraction.entities.setdefault(obj, "IMPORTED")
            extraction.triples = triples
            extraction.propositions = build_propositions(
                passage.title, sentences, list(extraction.entities)
            )
            out.append(extraction)
        return out
