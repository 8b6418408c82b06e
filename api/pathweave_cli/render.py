"""A query result for the terminal: passages with citations, paths, context or compact
prompt, PruneRAG tree, answer, seeds and timings (``pathweave query``, ``pathweave demo``).
The only place results are rendered for people; the API returns them as JSON."""

from __future__ import annotations

import json

from rich.console import Console
from rich.markup import escape

from pathweave.terminal import stdout_console


def print_result(result) -> None:
    """Human-readable result: passages with citations, paths, seeds, timings."""
    out = stdout_console()
    out.print(f"[bold]Q:[/] {result.question}  [dim]({result.mode}, record {result.query_id})[/]")
    for hit in result.passages:
        snippet = hit.text if len(hit.text) < 220 else hit.text[:217] + "..."
        out.print(f"  [{hit.rank}] [bold]{hit.reference or hit.title}[/] (score {hit.score:.4f})\n      {snippet}")
    for path in result.paths[:3]:
        out.print(f"  path {path.rank} (score {path.score:.3f}):")
        for step in path.steps:
            via = f" [dim]via {step.via}[/]" if step.via else ""
            out.print(f"    -> {step.text}{via}")
    if result.context is not None:
        c = result.context
        referenced = sum(line.referenced for line in c.lines)
        session = f"; session {escape(c.session_id)}: {referenced} of {len(c.lines)} lines referenced" if c.session_id else ""
        out.print(f"  [bold]context[/] ({c.token_count}/{c.budget} tokens of {c.tokenizer}, {c.method}, "
                  f"{'optimal' if c.optimal else f'gap {c.gap:.3f}'}, {c.solve_ms:.0f} ms{session}):", markup=True)
        out.print("    " + c.text.replace("\n", "\n    "), markup=False)
    if getattr(result, "apr", None) is not None:
        a = result.apr
        reused = sum(run.reused for run in a.runs)
        session = f", session {a.session_id}: {reused} of {len(a.runs)} runs referenced" if a.session_id else ""
        counts = ", ".join(f"{name} {n}" for name, n in a.token_counts.items())
        out.print(f"  [bold]compact prompt[/] ({a.prompt_tokens} tokens of {a.tokenizer}, {a.rendering}; {counts}{session}):")
        out.print("    " + a.prompt, markup=False, soft_wrap=True)
    if result.tree is not None:
        print_tree(out, result.tree)
    if result.answer is not None:
        print_answer(out, result.answer)
    if result.seeds:
        out.print("  seeds: " + ", ".join(f"{s.name} ({s.weight:.2f})" for s in result.seeds))
    out.print("  [dim]timings ms: " + json.dumps(result.timings_ms) + "[/]")


class EventPrinter:
    """Prints a query's events as they happen (``on_event`` of
    :meth:`pathweave.query.retriever.Retriever.run`): each settled PruneRAG node on a line,
    indented by its depth; the retrieval as :func:`print_result` prints it; the answer as the
    model writes it, then what it cites and cost (an answer not streamed: whole, at the end)."""

    def __init__(self) -> None:
        self.out = stdout_console()
        self.streamed = False

    def __call__(self, event) -> None:
        if event.kind == "step":
            self.out.print(f"  step {'  ' * (event.node.depth - 1)}{_node_line(event.node)}", markup=False,
                           highlight=False)
        elif event.kind == "retrieval":
            print_result(event.result)
        elif event.kind == "token":
            if not self.streamed:
                self.out.print("  [bold green]A:[/] ", end="")
                self.streamed = True
            self.out.print(event.text, end="", markup=False, highlight=False)
        elif event.result.answer is not None:
            self.answered(event.result.answer)

    def answered(self, answer) -> None:
        """The end of the answer: after streamed pieces, why it stopped (if it did), what it
        cites and cost; an answer not streamed, whole."""
        if not self.streamed:
            print_answer(self.out, answer)
            return
        self.out.print()
        if answer.error:
            self.out.print(f"  [bold red]the answer stopped[/]: {answer.error}", markup=True, soft_wrap=True)
        cited = f"cites {', '.join(answer.citations)}; " if answer.citations else ""
        self.out.print(f"  [dim]{cited}{answer_cost(answer)}[/]")


def print_answer(out: Console, answer) -> None:
    """The generated answer, what it cites and what it cost."""
    if answer.error and not answer.text:
        out.print(f"  [bold red]no answer[/]: {answer.error}", markup=True, soft_wrap=True)
        return
    cited = f" [dim]cites {', '.join(answer.citations)}[/]" if answer.citations else ""
    out.print(f"  [bold green]A:[/] {answer.text}{cited}")
    out.print(f"  [dim]{answer_cost(answer)}[/]")


def answer_cost(answer) -> str:
    """What an answer cost, in one line: its model, LLM calls, tokens and seconds."""
    return (f"{answer.model}, {answer.llm_calls} LLM call(s), {answer.prompt_tokens} prompt + "
            f"{answer.completion_tokens} completion tokens, {answer.latency_ms / 1000:.1f} s")


def _node_line(node) -> str:
    """A PruneRAG tree node in one line: decision, kind, text, answer and confidence, error."""
    conf = f" ({node.confidence:.2f})" if node.confidence is not None else ""
    answer = f" -> {node.answer}{conf}" if node.answer is not None else ""
    error = f" [{node.error[:80]}]" if node.error else ""
    return f"[{node.decision}] {node.kind}: {node.text}{answer}{error}"


def print_tree(out: Console, tree) -> None:
    """The PruneRAG tree, one indented line per node: decision, answer and confidence."""
    by_id = {node.node_id: node for node in tree.nodes}

    def show(node, indent: int) -> None:
        out.print(f"  {'  ' * indent}{_node_line(node)}", markup=False)
        for child in node.children:
            show(by_id[child], indent + 1)

    out.print(f"  [bold]PruneRAG tree[/] ({len(tree.nodes)} nodes, {tree.llm_calls} LLM calls, "
              f"{tree.retrievals} retrievals):")
    show(tree.nodes[0], 1)
