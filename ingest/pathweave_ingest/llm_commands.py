"""What ``pathweave llm start|stop|status`` do (the CLI only wires them): the managed local
model server of the configured data directory (:mod:`pathweave.llm.server`)."""

from __future__ import annotations

from pathweave_ingest.console import console


def _llm(model: str | None):
    from pathweave.llm.settings import LLMSettings

    llm = LLMSettings()
    return llm.model_copy(update={"model": model}) if model else llm


def llm_start(settings, model: str | None = None) -> int:
    """Start the managed server (assembling the model on first use); returns an exit code
    (2 with the reason and how to enable it when it cannot start)."""
    from pathweave.llm import server

    llm = _llm(model)
    if not llm.managed:
        console.print(f"PATHWEAVE_LLM_BASE_URL is set ({llm.base_url}): that endpoint answers, nothing to start")
        return 0
    try:
        info = server.start(settings.data_dir, llm)
    except server.LLMServerError as exc:
        console.print(f"[red]error:[/] {exc}")
        return 2
    console.print(f"model server running: pid {info.pid}, {info.model} at {info.base_url}")
    return 0


def llm_stop(settings) -> int:
    """Stop the managed server; returns 0."""
    from pathweave.llm import server

    console.print("stopped" if server.stop(settings.data_dir) else "no model server was running")
    return 0


def llm_status(settings) -> int:
    """Print the managed server's state; returns 1 when it does not run."""
    from pathweave.llm import server

    info = server.status(settings.data_dir)
    if info is None:
        hint = "" if server.extra_installed() else " (the local model server needs pip install 'pathweave[llm]')"
        console.print(f"not running{hint}")
        return 1
    console.print(f"running: pid {info.pid}, {info.model} at {info.base_url}, log {server.server_dir(settings.data_dir)}/server.log")
    return 0
