"""Lifecycle of the managed local model server (the default LLM endpoint).

Like the store (:mod:`pathweave.servers.store_server`), Pathweave starts llama.cpp through
llama-cpp-python's OpenAI-compatible server (extra ``pathweave[llm]``) as a detached process
bound to 127.0.0.1 on a free port, serving a packaged Qwen2.5-Coder GGUF
(:mod:`pathweave.servers.llm_weights`) with the ChatML chat format. One server per data directory.

No orphans: the process is ``python -m pathweave.servers.llm_server OWNER DIR -- ARGS``,
which starts a watchdog thread and then runs ``llama_cpp.server``'s main with ``ARGS`` in
the same process (its pid is the server's). Started on demand (:func:`pathweave.llm.client.connect`)
the server belongs to the process that started it and stops within seconds of its exit
(killed too); started by ``pathweave llm start`` it runs until ``pathweave llm stop``; either
way it stops when ``<data_dir>/llm`` is deleted. A server that crashed is restarted with the
owner it had (:func:`pathweave.servers.processes.launch_owner`).

- ``<data_dir>/llm/models/*.gguf``: the model files assembled from their part packages;
- ``<data_dir>/llm/server.json``: ``{pid, port, model, owner}`` (the pid file; a pid that no
  longer runs is stale and gets replaced);
- ``<data_dir>/llm/owner.json``: the owner the last launched server got;
- ``<data_dir>/llm/server.log``: the server's log.

Errors: :class:`LLMServerError` when the extra is missing (with how to install it) or the
server does not answer ``/v1/models`` within ``start_timeout_s`` (with the log's tail).
"""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import psutil

import httpx

from pathweave.settings import LLMSettings
from pathweave.servers.llm_weights import INSTALL_HINT, ModelUnavailable, assemble
from pathweave.servers.processes import (
    Lifetime, ServerError, free_port, launch_owner, make_private, pid_alive, start_once, stop_recorded, wait_ready,
    write_json,
)


class LLMServerError(RuntimeError):
    """The managed model server could not be started, reached or stopped. Not a
    :class:`~pathweave.servers.processes.ServerError`: that one means the store is away
    (transient), while a model that cannot start is the caller's to report."""


@dataclass(frozen=True)
class LLMServerInfo:
    """A running managed model server (127.0.0.1)."""

    pid: int
    port: int
    model: str

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"


def server_dir(data_dir: Path) -> Path:
    """``<data_dir>/llm``, created private to the user (0700)."""
    path = Path(data_dir) / "llm"
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    return path


def extra_installed() -> bool:
    """Is llama-cpp-python with its server (extra ``pathweave[llm]``) importable?"""
    return importlib.util.find_spec("llama_cpp") is not None and importlib.util.find_spec("sse_starlette") is not None


def status(data_dir: Path) -> LLMServerInfo | None:
    """The running managed model server of ``data_dir``, or None (a stale pid file is removed)."""
    state = server_dir(data_dir) / "server.json"
    try:
        data = json.loads(state.read_text())
        pid = int(data["pid"])
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError):
        state.unlink(missing_ok=True)
        return None
    command = _cmdline(pid)  # a reused pid is no model server
    if not pid_alive(pid) or not any(module in command for module in (
            "pathweave.servers.llm_server", "pathweave.llm.server", "llama_cpp.server")):
        state.unlink(missing_ok=True)
        return None
    return LLMServerInfo(pid=pid, port=int(data["port"]), model=str(data["model"]))


def _cmdline(pid: int) -> str:
    try:
        return " ".join(psutil.Process(pid).cmdline())
    except psutil.Error:
        return ""


def start(data_dir: Path, llm: LLMSettings, owner: int | None = None) -> LLMServerInfo:
    """Start the managed server of ``data_dir`` for ``llm.model`` unless it runs already
    (one serving another model is stopped first). Assembles the model file on first use.
    ``owner``: a pid whose exit stops the server (checked every second; None: it runs until
    :func:`stop`, as ``pathweave llm start``). A server that runs already keeps its owner.

    Returns once ``/v1/models`` answers. Raises :class:`LLMServerError` when the extra is
    not installed, the model's parts are missing, or the server is not ready within
    ``llm.start_timeout_s`` seconds.
    """
    directory = server_dir(data_dir)
    running = status(data_dir)
    if running is not None and running.model == llm.model:
        return running
    if not extra_installed():
        raise LLMServerError(f"the local model server needs llama-cpp-python: {INSTALL_HINT}")
    try:  # a bad model name or missing parts leave a running server alone
        model_path = assemble(llm.model, directory / "models")
    except (ModelUnavailable, ValueError) as exc:
        raise LLMServerError(str(exc)) from None

    def current() -> LLMServerInfo | None:
        """Under the start lock: this model's server, after stopping one of another model."""
        info = status(data_dir)
        if info is not None and info.model != llm.model:
            stop(data_dir)
            return None
        return info

    def launch() -> subprocess.Popen:
        port = llm.server_port or free_port()
        threads = llm.server_threads or os.cpu_count() or 1
        make_private(directory)
        log = os.fdopen(os.open(directory / "server.log", os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600), "ab")
        chosen = launch_owner(directory, owner)
        process = subprocess.Popen(
            [sys.executable, "-m", "pathweave.servers.llm_server", str(chosen), str(directory), "--",
             "--model", str(model_path), "--model_alias", llm.model,
             "--host", "127.0.0.1", "--port", str(port), "--n_ctx", str(llm.context_tokens),
             "--n_threads", str(threads), "--n_threads_batch", str(threads), "--chat_format", "chatml",
             "--n_gpu_layers", str(llm.server_gpu_layers)],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
            # spinning threads starve shared cores; the log is written as it happens (a request's end, a disconnect)
            env={**os.environ, "OMP_WAIT_POLICY": "passive", "PYTHONUNBUFFERED": "1"},
        )
        log.close()
        return process

    def ready() -> LLMServerInfo | None:  # server.json appears once /v1/models answers (_announce)
        info = status(data_dir)
        return info if info is not None and info.model == llm.model else None

    try:
        return start_once(directory, lambda process: wait_ready("model server", directory, llm.start_timeout_s,
                                                                process, ready, poll_s=0.5), launch, current)
    except ServerError as exc:
        raise LLMServerError(str(exc)) from None


def stop(data_dir: Path, timeout_s: float = 30.0) -> bool:
    """Stop the managed model server (SIGTERM, then SIGKILL after ``timeout_s``).
    Returns False when none was running."""
    info = status(data_dir)
    return stop_recorded(info and info.pid, server_dir(data_dir) / "server.json", timeout_s)


WATCHDOG_GRACE_S = 10.0
"""Seconds a model server stopped by its watchdog gets to shut down after SIGTERM (finishing a
request) before it exits regardless."""


def _watchdog(lifetime: Lifetime, grace_s: float = WATCHDOG_GRACE_S) -> None:
    """The model server's watchdog thread: once ``lifetime`` is over (owner exited, data dir
    deleted) it sends SIGTERM to its own process (uvicorn shuts down; during model loading
    the process just ends) and exits the process after ``grace_s`` seconds if still running."""
    while (reason := lifetime.over()) is None:
        time.sleep(0.2)
    print(f"{reason}: stopping the model server", flush=True)
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(grace_s)
    os._exit(0)


def _announce(directory: Path, port: int, model: str, owner: int) -> None:
    """Write ``server.json`` (this pid, ``port``, ``model``, ``owner``) once the server in this
    process answers ``/v1/models``: a server is never handed out before it is ready."""
    while True:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/v1/models", timeout=2.0).status_code == 200:
                break
        except httpx.HTTPError:
            pass
        time.sleep(0.3)
    write_json(directory / "server.json", {"pid": os.getpid(), "port": port, "model": model, "owner": owner})


def _serve(owner: int, directory: Path, args: list[str]) -> None:
    """Entry point of the managed model server process (``python -m pathweave.servers.llm_server
    OWNER DIR -- ARGS``): a daemon watchdog thread (:func:`_watchdog`) stops the process when
    ``owner`` (non-zero) has exited (checked every second) or ``directory`` is gone (every 5 s),
    and another (:func:`_announce`) writes ``server.json`` once the server answers; then
    ``llama_cpp.server``'s main serves with ``ARGS`` in this process."""
    threading.Thread(target=_watchdog, args=(Lifetime(directory, owner),), name="watchdog", daemon=True).start()
    port, model = int(args[args.index("--port") + 1]), args[args.index("--model_alias") + 1]
    threading.Thread(target=_announce, args=(directory, port, model, owner), name="announce", daemon=True).start()
    from llama_cpp.server.__main__ import main

    sys.argv = [sys.argv[0], *args]
    main()


if __name__ == "__main__":
    split = sys.argv.index("--")
    _serve(int(sys.argv[1]), Path(sys.argv[2]), sys.argv[split + 1:])
