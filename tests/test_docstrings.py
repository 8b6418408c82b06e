"""Docstrings and comments are for readers of the code: no benchmark figure and no issue
number in them (measurements and history live in ``docs/benchmarks-history.md``)."""

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
    r"|\b2-core\b"                                        # the benchmark machine
    r"|\b(fell|rose) (from|to) \d|\d+(\.\d+)?\s*(ms|s|MiB|MB|GiB)\s+to\s+\d"  # a before/after in words
    r"|\bcosts?\s+(about\s+)?\d+(\.\d+)?(-\d+)?\s*(ms|s)\b"  # a timing
    r"|\bmeasured\s+p\d\d\b"
    r"|~?\d+(\.\d+)?\s*(MB|MiB|GiB)\s+of\b"                # a memory figure
    r"|\b\d+(\.\d+)?k[- ](node|nodes|passages|entities)\b"  # a benchmark corpus's size
    r"|\b\d{1,3}(,\d{3})+\b[^.;:()`\"]{0,40}\b(cost|were all)\b"  # a count, then what it measured
    r"|\b(it|they) (kept|took|reached)\s+(about\s+)?~?\d",   # a model's or a run's result
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


DOCUMENTED = ("platform/pathweave/retrieval", "platform/pathweave/query", "platform/pathweave/graph")
"""The packages whose every public function, method and class has a docstring."""
SHAPE = re.compile(r"\(\s*\(?[A-Za-z0-9_ +\-]+(,[A-Za-z0-9_ +\-]*)*\)?\s*[,)]")
"""A shape as the docstrings write it: ``(P,)``, ``(n, 384)``, ``(E + P,)``."""


def public_definitions(path: Path):
    """``(qualified name, node)`` of the public functions, methods and classes of ``path``
    (nested in public classes; not inside functions)."""
    def walk(body, prefix):
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and \
                    not node.name.startswith("_"):
                yield prefix + node.name, node
                if isinstance(node, ast.ClassDef):
                    yield from walk(node.body, prefix + node.name + ".")
    yield from walk(ast.parse(path.read_text(encoding="utf-8")).body, "")


def test_every_public_function_of_the_core_s_query_path_has_a_docstring():
    """retrieval/, query/ and graph/: a docstring on every public definition, and one that
    names the shape of an array it returns."""
    missing, shapeless = [], []
    for folder in DOCUMENTED:
        for path in sorted((ROOT / folder).rglob("*.py")):
            for name, node in public_definitions(path):
                doc = ast.get_docstring(node)
                where = f"{path.relative_to(ROOT)}:{node.lineno} {name}"
                if not doc:
                    missing.append(where)
                elif isinstance(node, ast.FunctionDef) and node.returns is not None and \
                        "ndarray" in ast.unparse(node.returns) and not SHAPE.search(doc):
                    shapeless.append(where)
    assert missing == [] and shapeless == []


def test_no_docstring_or_comment_quotes_a_figure_or_an_issue():
    paths = [p for source in SOURCES for p in sorted((ROOT / source).rglob("*.py"))]
    assert offences(paths) == []


@pytest.mark.parametrize("text", ["# fixed in issue 42", '"""p50 265 -> 189 ms"""', "# 31 ms vs 560 ms",
                                  '"""R@5 0.77 on MuSiQue"""', "# measured on the 2-core machine",
                                  '"""the default presolve costs 10-30 ms"""', "# p50 fell from 20 ms to 8 ms",
                                  '"""~45 MB of matrices at 8.7k passages"""', "# a 19k-node graph",
                                  '"""Scoring 2,000 nodes exactly cost about what"""',
                                  '"""asked for a free list it kept 2.7 propositions per passage"""'])
def test_the_check_finds_a_figure(tmp_path, text):
    sample = tmp_path / "sample.py"
    sample.write_text(text + "\n")
    global ROOT
    saved, ROOT = ROOT, tmp_path
    try:
        assert offences([sample])
    finally:
        ROOT = saved
