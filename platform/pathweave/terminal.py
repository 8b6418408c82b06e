"""The terminal, for the command line and the benchmarks: the stderr console (progress,
messages), the stdout console (tables and results) and a progress bar with a passages/s
column (every long job has one)."""

from __future__ import annotations

import os

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

console = Console(stderr=True)

REDIRECTED_WIDTH = 160
"""Width (columns) of :func:`stdout_console` when stdout is not a terminal (``| tee``, a CI
log): rich's default there is 80 columns, which truncates wider tables' cells."""


def stdout_console() -> Console:
    """The console tables and results are printed on: the terminal's own width, or
    :data:`REDIRECTED_WIDTH` columns when stdout is redirected (``COLUMNS`` still wins)."""
    out = Console()
    if not out.is_terminal and "COLUMNS" not in os.environ:
        out.width = REDIRECTED_WIDTH
    return out


def progress_bar() -> Progress:
    """A rich progress bar with a passages/s column (for every long job)."""
    return Progress(
        TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
        TextColumn("{task.fields[rate]}"), TimeElapsedColumn(), console=console,
    )
