"""Docstrings and comments are for readers of the code: no benchmark figure and no issue
number in them (measurements and history live in ``docs/benchmarks.md``)."""

from __future__ import annotations

import ast
import io
import re
import tokenize
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SOURCES = ("platform", "ingest", "api")

FORBIDDEN = re.compile(
    r"\bissues? #?\d+"                                   # an issue number
    r"|\bmeasured (on|at|with|in)\b|\(measured\b"          # where a figure came from
    r"|\bbest of \d+|\bmin of \d+"
    r"|\bp(50|95|99)\b\s*[:=]?\s*\d"                      # a latency percentile's value
    r"|\bR@\d+\s*[:=]?\s*0?\.\d"                          # a recall figure
    r"|\d+(\.\d+)?\s*(ms|s|%)\s*(vs\.?|->|→|against)\s*\d"  # a before/after pair
    r"|\b\d+(\.\d+)?x (faster|slower)\b"                  # a speed-up
    r"|\b2-core\b",                                       # the benchmark machine
    re.IGNORECASE)


def commentary(path: Path) -> list[tuple[int, str]]:
    """``(line, text)`` of every comment and docstring of the file."""
    text = path.read_text(encoding="utf-8")
    found = [(tok.start[0], tok.string) for tok in tokenize.generate_tokens(io.StringIO(text).readline)
             if tok.type == tokenize.COMMENT]
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
                found.append((first.lineno, first.value.value))
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            found.append((node.lineno, node.value.value))  # attribute docstrings
    return found


def offences(paths) -> list[str]:
    out = []
    for path in paths:
        for line, text in commentary(path):
            for match in FORBIDDEN.finditer(" ".join(text.split())):
                out.append(f"{path.relative_to(ROOT)}:{line}: {match.group(0)!r}")
    return sorted(set(out))


def test_no_docstring_or_comment_quotes_a_figure_or_an_issue():
    paths = [p for source in SOURCES for p in sorted((ROOT / source).rglob("*.py"))]
    assert offences(paths) == []


@pytest.mark.parametrize("text", ["# fixed in issue 42", '"""p50 265 -> 189 ms"""', "# 31 ms vs 560 ms",
                                  '"""R@5 0.77 on MuSiQue"""', "# measured on the 2-core machine"])
def test_the_check_finds_a_figure(tmp_path, text):
    sample = tmp_path / "sample.py"
    sample.write_text(text + "\n")
    global ROOT
    saved, ROOT = ROOT, tmp_path
    try:
        assert offences([sample])
    finally:
        ROOT = saved
