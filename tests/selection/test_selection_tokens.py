"""TokenCounter with the embedder's local tokenizer (no downloads)."""

from __future__ import annotations

import shutil

import pytest

from pathweave.selection import TokenCounter
from pathweave.selection.tokens import DEFAULT_TOKENIZER_NAME, _load, default_tokenizer_path


def test_counts_without_special_tokens(counter):
    assert counter.name == DEFAULT_TOKENIZER_NAME
    # bert-base-uncased WordPiece: "hello", "world" -> 2 tokens, no [CLS]/[SEP]
    assert counter.count("Hello world") == 2
    assert counter.count("") == 0


def test_no_truncation_or_padding(counter):
    # the bundled tokenizer.json pads/truncates to 128; counting must not
    long_text = "token " * 300
    assert counter.count(long_text) == 300
    assert counter.count("short") == 1


def test_count_many_matches_count(counter):
    texts = ["Marie Curie won the Nobel Prize.", "", "x " * 200, "Entity: Paris"]
    assert counter.count_many(texts) == [counter.count(t) for t in texts]
    assert counter.count_many([]) == []


def test_tokenizer_loaded_once_per_path(counter):
    counter.count("warm up")
    before = _load.cache_info()
    TokenCounter().count("again")
    TokenCounter().count_many(["and", "again"])
    after = _load.cache_info()
    assert after.misses == before.misses
    assert after.hits >= before.hits + 2


def test_custom_local_directory(tmp_path):
    shutil.copy(default_tokenizer_path() / "tokenizer.json", tmp_path / "tokenizer.json")
    custom = TokenCounter(tmp_path)
    assert custom.name == tmp_path.name
    assert custom.count("Hello world") == 2
    named = TokenCounter(tmp_path, name="my-tokenizer")
    assert named.name == "my-tokenizer"


def test_missing_directory_raises(tmp_path):
    with pytest.raises(FileNotFoundError):
        TokenCounter(tmp_path / "missing")
