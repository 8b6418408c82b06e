"""``pathweave bench calibrate``: each catalog embedder's cosine thresholds, derived from a
corpus without questions.

The spec's thresholds (synonymy 0.8, aliases 0.93, APR's tau 0.7, ...) were set on
all-MiniLM-L6-v2's cosine scale. Another model spreads the same pairs over another range
(retrieval-trained models put unrelated texts at 0.4-0.6, not 0.0-0.3), so a number does
not carry over; a *share of pairs* does. For each threshold, on the population of pairs it
is applied to, this finds the share q of MiniLM's pairs at or above MiniLM's value and
takes the other model's value at the same share (quantile matching: the same fraction of
entity pairs become synonyms, the same fraction of neighbouring triple lines fall in one
run). The populations, built from the 2Wiki corpus (``../shared/bench/scale``, which
holds no question) with the default spaCy extractor:

- **entity neighbours**: each entity name (more than 2 alphanumerics, as synonymy) with its
  10 nearest other names: ``ingest.synonym_threshold``, ``aliases.threshold``,
  ``retrieval.synonym_step_min``;
- **line neighbours**: each triple line "h r t" with its 10 nearest other lines (what APR's
  fine score and near-duplicate grouping compare): ``apr.unique_cos``, ``apr.coverage_min``,
  ``apr.pair_center``, ``apr.match_min``, ``apr.whole_center``;
- **consecutive lines**: each line with the next line of its passage, in text order (what
  run segmentation compares): ``apr.run_tau``.

Nothing here sees a benchmark question, so the values are not tuned to the 100 MuSiQue
questions. Prints a table and writes ``calibration.json``; the catalog's values
(:data:`pathweave.embedding.catalog.CATALOG`) are copied from a run of it, recorded in
docs/benchmarks-history.md.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np

from pathweave.embedding.catalog import CALIBRATED, SPEC_DEFAULTS
from pathweave.text import alnum_count, normalize

#: Which population each calibrated setting is matched on.
POPULATION = {
    "ingest.synonym_threshold": "entity_neighbours", "aliases.threshold": "entity_neighbours",
    "retrieval.synonym_step_min": "entity_neighbours", "apr.unique_cos": "line_neighbours",
    "apr.coverage_min": "line_neighbours", "apr.pair_center": "line_neighbours",
    "apr.match_min": "line_neighbours", "apr.whole_center": "line_neighbours", "apr.run_tau": "consecutive_lines",
}
assert set(POPULATION) == {f"{a}.{b}" for a, b in CALIBRATED}


def neighbour_cosines(vectors: np.ndarray, k: int = 10, block: int = 1024) -> np.ndarray:
    """The cosines of each row of ``vectors`` (``(n, d)`` L2-normalized) to its ``k`` nearest
    other rows, flattened: ``(n * k,)`` float32 (exact, blockwise)."""
    out = []
    for start in range(0, len(vectors), block):
        sims = vectors[start:start + block] @ vectors.T
        rows = np.arange(sims.shape[0])
        sims[rows, start + rows] = -np.inf  # not itself
        k_eff = min(k, vectors.shape[0] - 1)
        out.append(-np.sort(-np.partition(sims, -k_eff, axis=1)[:, -k_eff:], axis=1).ravel())
    return np.concatenate(out).astype(np.float32)


def matched(reference: np.ndarray, other: np.ndarray, value: float) -> tuple[float, float]:
    """``(share, matched value)``: the share of ``reference`` at or above ``value`` and the
    value of ``other`` at the same share (its (1 - share) quantile)."""
    share = float(np.mean(reference >= value))
    return share, float(np.quantile(other, 1.0 - share))


def populations(passages: list[dict], extractor) -> dict[str, list]:
    """The texts of the three populations from ``passages`` ({title, text}): entity names,
    unique triple lines, and consecutive line pairs per passage (indices into the lines)."""
    from pathweave.apr.runs import line
    from pathweave.extractors.base import PassageInput

    found = extractor.extract([PassageInput(p["title"], p["text"], p["text"]) for p in passages])
    names: dict[str, str] = {}
    lines: dict[str, int] = {}
    pairs: list[tuple[int, int]] = []
    for extraction in found:
        for name in extraction.entities:
            key = normalize(name)
            if alnum_count(key) > 2:
                names.setdefault(key, name)
        order = []
        for triple in extraction.triples:
            text = line(triple)
            order.append(lines.setdefault(text, len(lines)))
        pairs.extend((a, b) for a, b in zip(order, order[1:]) if a != b)
    return {"entities": list(names.values()), "lines": list(lines), "pairs": pairs}


def run_calibrate(corpus: Path, out: Path, embedders: list[str], limit: int, reference: str = "minilm") -> dict:
    """Calibrate ``embedders`` against ``reference`` on the first ``limit`` passages of
    ``corpus``; returns (and writes) the results."""
    from rich.table import Table

    from pathweave.embedding.embedders import CatalogEmbedder
    from pathweave.embedding.catalog import get
    from pathweave.extractors.spacy_extractor import SpacyExtractor
    from pathweave.settings import get_settings
    from pathweave.terminal import stdout_console
    from pathweave_bench.common import git_commit, machine_info

    console = stdout_console()
    passages = json.loads(corpus.read_text())[:limit]
    began = time.perf_counter()
    texts = populations(passages, SpacyExtractor(get_settings().models.spacy_model))
    console.print(f"[dim]{len(passages)} passages: {len(texts['entities'])} entity names, {len(texts['lines'])} "
                  f"triple lines, {len(texts['pairs'])} consecutive line pairs ({time.perf_counter() - began:.0f} s)[/]")
    models_dir = get_settings().models.models_path
    cosines: dict[str, dict[str, np.ndarray]] = {}
    for name in dict.fromkeys([reference, *embedders]):
        embedder = CatalogEmbedder(get(name), models_dir)
        entities = embedder.encode(texts["entities"])
        lines = embedder.encode(texts["lines"])
        a, b = (np.array([p[i] for p in texts["pairs"]], dtype=np.int64) for i in (0, 1))
        cosines[name] = {"entity_neighbours": neighbour_cosines(entities), "line_neighbours": neighbour_cosines(lines),
                         "consecutive_lines": np.einsum("ij,ij->i", lines[a], lines[b]) if len(a) else np.zeros(0)}
    results: dict = {"corpus": str(corpus), "passages": len(passages), "commit": git_commit(), "machine": machine_info(),
                     "sizes": {k: len(v) for k, v in texts.items()}, "reference": reference, "values": {}}
    table = Table(title=f"Thresholds matched to {reference}'s share of pairs ({len(passages)} 2Wiki passages)")
    table.add_column("setting")
    table.add_column("population")
    table.add_column(reference)
    table.add_column("share >=")
    for name in embedders:
        table.add_column(name)
    for key, value in SPEC_DEFAULTS.items():
        population = POPULATION[key]
        row = [key, population, f"{value:.2f}"]
        share = None
        for name in embedders:
            share, threshold = matched(cosines[reference][population], cosines[name][population], value)
            results["values"].setdefault(name, {})[key] = round(threshold, 3)
            row.append(f"{threshold:.3f}")
        results["values"].setdefault(reference, {})[key] = value
        row.insert(3, f"{share:.4f}" if share is not None else "")
        table.add_row(*row)
    console.print(table)
    for name in dict.fromkeys([reference, *embedders]):
        for population, values in cosines[name].items():
            results.setdefault("quantiles", {}).setdefault(name, {})[population] = {
                str(q): round(float(np.quantile(values, q)), 4) for q in (0.1, 0.5, 0.9, 0.99)}
    out.mkdir(parents=True, exist_ok=True)
    (out / "calibration.json").write_text(json.dumps(results, indent=2))
    console.print(f"wrote {out / 'calibration.json'}")
    return results
