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
