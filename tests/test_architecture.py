"""Dependencies point one way and nothing imports in a circle (issue 14).

Layers, top to bottom: the command line (``pathweave_cli``), the benchmarks
(``pathweave_bench``), the service (``pathweave_api``), ingestion (``pathweave_ingest``),
the core (``pathweave``). A package may import only the layers below it. The import
graph comes from grimp, which reads every ``import`` statement of every module, those
inside functions (lazy imports) included; the test below proves it sees one.
"""

from __future__ import annotations

import grimp
import networkx as nx
import pytest

LAYERS = ("pathweave_cli", "pathweave_bench", "pathweave_api", "pathweave_ingest", "pathweave")


@pytest.fixture(scope="module")
def graph() -> grimp.ImportGraph:
    return grimp.build_graph(*LAYERS, cache_dir=None)


def upward_imports(graph: grimp.ImportGraph) -> list[str]:
    """Every import of a higher layer by a lower one, as ``"importer -> imported (line N)"``."""
    found = []
    for dependency in graph.find_illegal_dependencies_for_layers(layers=LAYERS):
        for route in dependency.routes:
            for head in route.heads:
                for tail in route.tails:
                    chain = graph.find_shortest_chain(importer=head, imported=tail) or (head, tail)
                    found.append(" -> ".join(chain))
    return sorted(found)


def import_cycles(graph: grimp.ImportGraph) -> list[list[str]]:
    """Groups of modules that import each other in a circle (strongly connected
    components of the module graph with more than one module, or a module importing itself)."""
    digraph = nx.DiGraph()
    for module in graph.modules:
        digraph.add_node(module)
        for imported in graph.find_modules_directly_imported_by(module):
            digraph.add_edge(module, imported)
    return sorted(sorted(c) for c in nx.strongly_connected_components(digraph)
                  if len(c) > 1 or digraph.has_edge(next(iter(c)), next(iter(c))))


def test_the_graph_includes_lazy_imports(graph):
    # `pathweave demo` imports the demo module inside the command function
    assert graph.direct_import_exists(importer="pathweave_cli.main", imported="pathweave_cli.demo")


def test_no_layer_imports_a_higher_one(graph):
    assert upward_imports(graph) == []


def test_no_import_cycles(graph):
    assert import_cycles(graph) == []


def test_the_checks_catch_an_upward_import_and_a_cycle():
    graph = grimp.build_graph(*LAYERS, cache_dir=None)  # a graph of its own: this test changes it
    graph.add_import(importer="pathweave.text", imported="pathweave_cli.main")
    assert any(line.startswith("pathweave.text -> pathweave_cli.main") for line in upward_imports(graph))
    assert any("pathweave.text" in cycle and "pathweave_cli.main" in cycle for cycle in import_cycles(graph))


# ---- inside the core: each package has one role, and the roles are layered ----

CORE_RANKS = {
    "servers": 0, "store": 0,  # managed processes; store access over Bolt (neither knows the other)
    "access": 0,  # who may read what: access lists and principals (vocabulary of the packages above)
    "telemetry": 0,  # spans through the OpenTelemetry API, and the SDK's set-up
    "graph": 1, "records": 1, "selection": 1, "embedding": 1, "llm": 1,
    "retrieval": 2,
    "apr": 3,  # AutoPrunedRetriever builds on the retrieval modes, never the other way
    "query": 4,  # the dispatcher over every mode
    "runtime": 5,  # what a process opens and keeps
}
"""Rank of each of the core's packages: a package imports only packages of a lower rank (the
top-level modules not named here, such as ``settings``, ``model``, ``text`` and ``errors``,
are the vocabulary every package may use)."""

INDEPENDENT = {("store", "servers"), ("servers", "store")}
"""Pairs of the same rank that never import each other: the Bolt wrapper knows nothing of
processes, and the process supervision nothing of the graph."""


def core_package(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if parts[0] == "pathweave" and len(parts) > 1 else None


def core_violations(graph: grimp.ImportGraph) -> list[str]:
    """Every direct import between two of the core's packages that the ranks forbid, as
    ``"importer -> imported"``."""
    found = []
    for module in graph.modules:
        low = core_package(module)
        if low not in CORE_RANKS:
            continue
        for imported in graph.find_modules_directly_imported_by(module):
            high = core_package(imported)
            if high in CORE_RANKS and high != low and (
                    CORE_RANKS[high] > CORE_RANKS[low] or (low, high) in INDEPENDENT):
                found.append(f"{module} -> {imported}")
    return sorted(found)


def test_the_cores_packages_import_only_lower_roles(graph):
    assert core_violations(graph) == []


def test_the_core_check_catches_an_upward_import():
    graph = grimp.build_graph(*LAYERS, cache_dir=None)
    graph.add_import(importer="pathweave.records.reasoning", imported="pathweave.apr.memory")
    graph.add_import(importer="pathweave.store.graph_store", imported="pathweave.servers.store_server")
    assert core_violations(graph) == ["pathweave.records.reasoning -> pathweave.apr.memory",
                                      "pathweave.store.graph_store -> pathweave.servers.store_server"]


def test_the_core_is_its_packages_and_a_few_modules():
    """At most 8 top-level modules beside the packages, and every package says its role."""
    import ast
    from pathlib import Path

    import pathweave

    root = Path(pathweave.__file__).parent
    modules = sorted(p.stem for p in root.glob("*.py") if p.stem != "__init__")
    assert len(modules) <= 8, modules
    packages = sorted(p for p in root.iterdir() if (p / "__init__.py").is_file())
    assert {p.name for p in packages} >= set(CORE_RANKS) - {"runtime"}
    for package in packages:
        doc = ast.get_docstring(ast.parse((package / "__init__.py").read_text()))
        assert doc and len(doc.split()) >= 8, f"pathweave.{package.name} has no docstring naming its role"


def test_every_mode_of_the_vocabulary_has_its_strategy_and_options():
    from pathweave.model import MODE_OPTIONS, MODES
    from pathweave.query.modes import STRATEGIES

    assert tuple(STRATEGIES) == MODES and set(MODE_OPTIONS) == set(MODES)
    assert all(STRATEGIES[mode].options == MODE_OPTIONS[mode] for mode in MODES)


BUILTIN_ERRORS = {"Exception", "RuntimeError", "ValueError", "LookupError", "KeyError", "TimeoutError", "OSError",
                  "ConnectionError", "TypeError"}


def errors_outside_the_vocabulary(roots) -> list[str]:
    """Exception classes of the modules under ``roots`` (folders) whose bases are builtin
    exceptions alone: outside the one vocabulary rooted at ``PathweaveError``."""
    import ast
    from pathlib import Path

    found = []
    for root in roots:
        for path in sorted(Path(root).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.ClassDef) and node.bases:
                    bases = {b.id if isinstance(b, ast.Name) else getattr(b, "attr", "") for b in node.bases}
                    if bases <= BUILTIN_ERRORS and node.name != "PathweaveError":
                        found.append(f"{path}:{node.lineno} {node.name}")
    return found


def test_every_error_of_the_core_and_ingestion_says_whether_it_is_transient(tmp_path):
    """One error vocabulary: every exception class of ``pathweave`` and ``pathweave_ingest``
    derives from ``PathweaveError``, whose ``transient`` says whether to retry later."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    assert errors_outside_the_vocabulary([root / "platform" / "pathweave", root / "ingest" / "pathweave_ingest"]) == []
    (tmp_path / "m.py").write_text("class Lost(RuntimeError):\n    pass\n\nclass Kept(PathweaveError, RuntimeError):\n"
                                   "    pass\n")
    assert [line.rsplit(" ", 1)[1] for line in errors_outside_the_vocabulary([tmp_path])] == ["Lost"]
