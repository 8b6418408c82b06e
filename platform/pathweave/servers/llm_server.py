"""Lifecycle of the managed local model server (the default LLM endpoint).

Like the store (:mod:`pathweave.servers.store_server`), Pathweave starts llama.cpp through
llama-cpp-python's OpenAI-compatible server (extra ``pathweave[llm]``) as a detached process
bound to 127.0.0.1 on a free port, serving a packaged Qwen2.5-Coder GGUF
(:mod:`pathweave.servers.llm_weights`) with the ChatML chat format. One server per data directory.

No orphans: the process is ``python -m pathweave.servers.llm_server OWNER DIR -- ARGS``, a
small supervisor that forks the server (same command line): the server starts a watchdog
thread and then runs ``llama_cpp.server``'s main with ``ARGS`` (its pid is the server's, in
``server.json``); the supervisor waits for it and records how it ended when it was not asked
to (``exit.json``: a signal such as SIGSEGV or SIGKILL, or a non-zero code), so that a crash
is reported as one (:class:`LLMServerExited`), with its signal and its log, never as an
endpoint that is merely unreachable. Started on demand (:func:`pathweave.llm.client.connect`)
the server belongs to the process that started it and stops within seconds of its exit
(killed too); started by ``pathweave llm start`` it runs until ``pathweave llm stop``; either
way it stops when ``<data_dir>/llm`` is deleted. A server that crashed is restarted with the
owner it had (:func:`pathweave.servers.processes.launch_owner`).

- ``<data_dir>/llm/models/*.gguf``: the model files assembled from their part packages;
- ``<data_dir>/llm/server.json``: ``{pid, port, model, owner}`` (the pid file; a pid that no
  longer runs is stale and gets replaced);
- ``<data_dir>/llm/owner.json``: the owner the last launched server got;
- ``<data_dir>/llm/server.log``: the server's log;
- ``<data_dir>/llm/exit.json``: the last unasked exit not yet reported to a caller
  (:class:`ServerExit`); ``exit.reported.json`` once one caller has been told.

Ready means able to generate: ``server.json`` is written only once a one-token chat completion
has come back (a server that loads its model but faults on its first matrix product, as a
llama.cpp built with AMX kernels does on a VM that advertises AMX, never counts as ready).

Errors: :class:`LLMServerError` when the extra is missing (with how to install it) or the
server does not generate within ``start_timeout_s`` (with the log's tail);
:class:`LLMServerExited` (also an :class:`~pathweave.errors.LLMUnavailable`: API 503) when it
exited unasked.
"""

from __future__ import annotations

import importlib.util
import json
import os
import resource
import signal
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import psutil

import httpx

from pathweave.errors import LLMUnavailable, PathweaveError
from pathweave.settings import LLMSettings
from pathweave.servers.llm_weights import INSTALL_HINT, ModelUnavailable, assemble
from pathweave.servers.processes import (
    Lifetime, ServerError, free_port, launch_owner, log_tail, make_private, open_server_log, pid_alive, read_json, start_once,
    stop_recorded, wait_ready, write_json,
)


class LLMServerError(PathweaveError, RuntimeError):
    """The managed model server could not be started, reached or stopped. Not a
    :class:`~pathweave.servers.processes.ServerError`: that one means the store is away
    (transient), while a model that cannot start is the caller's to report."""


EXIT_FILE = "exit.json"
"""``<data_dir>/llm/exit.json``: how the last server ended unasked (:class:`ServerExit`),
until a caller is told (:func:`take_exit` renames it to :data:`REPORTED_EXIT_FILE`)."""

REPORTED_EXIT_FILE = "exit.reported.json"
"""The last unasked exit once reported (``pathweave llm status`` shows it)."""

STOPPING_FILE = "stopping.json"
"""``{"pid": N}``: :func:`stop` is stopping server N on purpose (also when it has to SIGKILL
it): its supervisor records no exit."""


@dataclass(frozen=True)
class ServerExit:
    """How a managed model server process ended without being asked to (written by its
    supervisor): ``pid`` of the server, its ``port`` and ``model``; ``signal`` (e.g. 11 for
    SIGSEGV, 9 for SIGKILL) or exit ``code`` (one of them is None); ``at`` (Unix time, s);
    ``ready``: whether it had passed its readiness check (a one-token completion); ``log``:
    the path of its log."""

    pid: int
    port: int
    model: str
    code: int | None
    signal: int | None
    at: float
    ready: bool
    log: str

    @property
    def how(self) -> str:
        """``signal SIGSEGV (Segmentation fault)`` or ``code 1``."""
        if self.signal:
            try:
                return f"signal {signal.Signals(self.signal).name} ({signal.strsignal(self.signal)})"
            except ValueError:
                return f"signal {self.signal}"
        return f"code {self.code}"

    def describe(self) -> str:
        """One sentence for the caller: what exited, how, when, and where its log is."""
        when = "while serving" if self.ready else "before it could generate (its readiness check)"
        stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(self.at))
        return (f"the local model server (pid {self.pid}, {self.model}) exited with {self.how} {when} "
                f"at {stamp}; its log: {self.log}")


class LLMServerExited(LLMServerError, LLMUnavailable):
    """The managed model server exited unasked (crashed, killed): ``exit`` says how. Raised to
    the first caller that meets the dead server (:func:`start`, a request of
    :class:`~pathweave.llm.client.LLMClient`); a later call starts the server again. An
    :class:`~pathweave.errors.LLMUnavailable`: the API answers 503 with Retry-After
    (5 s: the next request starts it again)."""

    retry_after_s = 5

    def __init__(self, exit: ServerExit, detail: str = "") -> None:  # noqa: A002 - the field's name
        super().__init__(exit.describe() + (f"\n{detail}" if detail else ""))
        self.exit = exit


def last_exit(data_dir: Path) -> ServerExit | None:
    """The last unasked exit of ``data_dir``'s model server, reported or not (None: none recorded)."""
    directory = server_dir(data_dir)
    for name in (EXIT_FILE, REPORTED_EXIT_FILE):
        found = _read_exit(directory / name)
        if found is not None:
            return found
    return None


def _read_exit(path: Path) -> ServerExit | None:
    try:
        return ServerExit(**json.loads(path.read_text()))
    except (OSError, ValueError, TypeError):
        return None


def take_exit(data_dir: Path, port: int | None = None) -> ServerExit | None:
    """The unreported unasked exit of ``data_dir``'s model server (of the one on ``port`` when
    given), marked reported: exactly one caller gets it (an atomic rename), every later one
    None. None too while a server of ``data_dir`` runs (a record older than it is stale)."""
    directory = server_dir(data_dir)
    found = _read_exit(directory / EXIT_FILE)
    if found is None or (port is not None and found.port != port):
        return None
    claim = directory / f".exit.{os.getpid()}.{threading.get_ident()}.claim"
    try:
        os.rename(directory / EXIT_FILE, claim)  # exactly one caller wins the file it then reads
    except FileNotFoundError:  # another caller took it
        return None
    taken = _read_exit(claim) or found
    os.replace(claim, directory / REPORTED_EXIT_FILE)
    return taken


EXIT_WAIT_S = 2.0
"""Seconds :func:`exit_at` waits for a dead server's supervisor to write its record (it does
within milliseconds of the server's end, which a client may meet first)."""


def exit_at(data_dir: Path, port: int | None, wait_s: float = EXIT_WAIT_S) -> ServerExit | None:
    """After a request to the managed server on ``port`` found it unreachable: its unasked exit
    when it exited (taken, :func:`take_exit`: exactly one caller hears of it), else None (it
    still runs there, or its exit was reported already: the caller then relocates). Waits up to
    ``wait_s`` seconds for the record of a server that is gone but not yet recorded."""
    directory = server_dir(data_dir)
    deadline = time.monotonic() + wait_s
    while True:
        crashed = take_exit(data_dir, port)
        if crashed is not None:
            return crashed
        state = _read_state(directory)
        pid = int(state.get("pid") or 0)
        if state.get("port") == port and pid > 0 and pid_alive(pid):
            return None  # it runs there: not an exit
        told = _read_exit(directory / REPORTED_EXIT_FILE)
        if told is not None and told.port == port and pid in (0, told.pid):
            return None  # its exit was reported already
        if state.get("port") not in (None, port) or time.monotonic() >= deadline:
            return None  # another server was started meanwhile, or no record came
        time.sleep(0.05)


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


REQUIRED_CPU_FLAGS = ("avx2", "fma", "f16c", "bmi2")
"""The instruction sets the portable llama.cpp build uses (x86-64-v3, tools/build-llama.sh)."""


def missing_cpu_features(cpuinfo: Path = Path("/proc/cpuinfo")) -> list[str]:
    """Those of :data:`REQUIRED_CPU_FLAGS` this x86-64 CPU does not advertise (a flag's absence
    proves the lack; its presence is not trusted for more). Empty elsewhere (no cpuinfo, or
    another architecture)."""
    try:
        text = cpuinfo.read_text()
    except OSError:
        return []
    line = next((line for line in text.splitlines() if line.startswith("flags")), None)
    if line is None:
        return []
    flags = set(line.split(":", 1)[1].split())
    return [flag for flag in REQUIRED_CPU_FLAGS if flag not in flags]


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


def start(data_dir: Path, llm: LLMSettings, owner: int | None = None, report_exit: bool = True) -> LLMServerInfo:
    """Start the managed server of ``data_dir`` for ``llm.model`` unless it runs already
    (one serving another model is stopped first). Assembles the model file on first use.
    ``owner``: a pid whose exit stops the server (checked every second; None: it runs until
    :func:`stop`, as ``pathweave llm start``). A server that runs already keeps its owner.

    Returns once the server has generated a token (its readiness check, a one-token chat
    completion). Raises :class:`LLMServerExited` when the last server exited unasked and no
    caller has been told yet (``report_exit``; the call after it starts one), or when the
    server launched here exits before it is ready (its signal and log); :class:`LLMServerError`
    when the extra is not installed, the model's parts are missing, or the server is not ready
    within ``llm.start_timeout_s`` seconds.
    """
    directory = server_dir(data_dir)
    state = _read_state(directory)  # before status() forgets the file of a server that died
    running = status(data_dir)
    if running is not None and running.model == llm.model:
        return running
    if report_exit and running is None:
        # a server that died just now: its supervisor writes the record within moments
        crashed = take_exit(data_dir) or (exit_at(data_dir, int(state["port"])) if state.get("port") else None)
        if crashed is not None:
            raise LLMServerExited(crashed)
    if not extra_installed():
        raise LLMServerError(f"the local model server needs llama-cpp-python: {INSTALL_HINT}")
    missing = missing_cpu_features()
    if missing:
        raise LLMServerError(f"this CPU lacks {', '.join(missing)}, which the local model server's llama.cpp "
                             f"(tools/build-llama.sh: x86-64-v3) needs; set PATHWEAVE_LLM_BASE_URL to an "
                             f"OpenAI-compatible endpoint instead")
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

    launched: dict = {}

    def launch() -> subprocess.Popen:
        port = llm.server_port or free_port()
        launched["port"] = port
        threads = llm.server_threads or os.cpu_count() or 1
        make_private(directory)
        log = open_server_log(directory)
        chosen = launch_owner(directory, owner)
        (directory / EXIT_FILE).unlink(missing_ok=True)  # an earlier server's: this one is new
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

    waiting_since = time.time()

    def ready() -> LLMServerInfo | None:  # server.json appears once it has generated (_announce)
        info = status(data_dir)
        if info is not None and info.model == llm.model:
            return info
        crashed = _read_exit(directory / EXIT_FILE)  # the one launched here (or by another process) died
        if crashed is not None and crashed.at >= waiting_since and crashed.port == launched.get("port", crashed.port) \
                and take_exit(data_dir, crashed.port) is not None:
            raise LLMServerExited(crashed, log_tail(directory))
        return None

    try:
        return start_once(directory, lambda process: wait_ready("model server", directory, llm.start_timeout_s,
                                                                process, ready, poll_s=0.5), launch, current)
    except ServerError as exc:
        crashed = take_exit(data_dir)  # the launched server's own record, when its supervisor wrote one
        if crashed is not None and crashed.at >= waiting_since:
            raise LLMServerExited(crashed, log_tail(directory)) from None
        raise LLMServerError(str(exc)) from None


def stop(data_dir: Path, timeout_s: float = 30.0) -> bool:
    """Stop the managed model server (SIGTERM, then SIGKILL after ``timeout_s``; either way on
    purpose: no exit is recorded). Returns False when none was running."""
    info = status(data_dir)
    if info is not None:
        write_json(server_dir(data_dir) / STOPPING_FILE, {"pid": info.pid})
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


_READY_FD: int | None = None
"""In the forked server: the pipe to its supervisor, told once the server is ready."""

READY_PROMPT = [{"role": "user", "content": "Say OK."}]
"""The readiness check's request: one generated token proves the model's kernels run here."""


def _announce(directory: Path, port: int, model: str, owner: int) -> None:
    """Write ``server.json`` (this pid, ``port``, ``model``, ``owner``) once the server in this
    process has generated a token (``/v1/models`` answers, then a one-token chat completion
    comes back with one completion token): a server is never handed out before it can
    generate. A server that faults there is recorded by its supervisor (:func:`_supervise`)."""
    base = f"http://127.0.0.1:{port}/v1"
    while True:
        try:
            if httpx.get(f"{base}/models", timeout=2.0).status_code == 200:
                break
        except httpx.HTTPError:
            pass
        time.sleep(0.3)
    while True:
        started = time.perf_counter()
        try:
            response = httpx.post(f"{base}/chat/completions", timeout=60.0, json={
                "model": model, "messages": READY_PROMPT, "max_tokens": 1, "temperature": 0})
            body = response.json() if response.status_code == 200 else {}
            generated = int((body.get("usage") or {}).get("completion_tokens") or 0)
            if not generated and (body.get("choices") or [{}])[0].get("finish_reason") == "stop":
                generated = 1  # the end-of-text token, sampled first: generated all the same
        except (httpx.HTTPError, ValueError, AttributeError, IndexError):
            generated = 0
        if generated >= 1:
            break
        time.sleep(0.5)
    print(f"ready: generated {generated} token in {(time.perf_counter() - started) * 1000:.0f} ms", flush=True)
    write_json(directory / "server.json", {"pid": os.getpid(), "port": port, "model": model, "owner": owner})
    if _READY_FD is not None:  # tell the supervisor (how the server ends says whether it had served)
        os.write(_READY_FD, b"r")


def _serve(owner: int, directory: Path, args: list[str]) -> None:
    """The model server (the child of :func:`_supervise`): a daemon watchdog thread
    (:func:`_watchdog`) stops the process when ``owner`` (non-zero) has exited (checked every
    second) or ``directory`` is gone (every 5 s), and another (:func:`_announce`) writes
    ``server.json`` once the server generates; then ``llama_cpp.server``'s main serves with
    ``ARGS`` in this process."""
    threading.Thread(target=_watchdog, args=(Lifetime(directory, owner),), name="watchdog", daemon=True).start()
    port, model = int(args[args.index("--port") + 1]), args[args.index("--model_alias") + 1]
    threading.Thread(target=_announce, args=(directory, port, model, owner), name="announce", daemon=True).start()
    from llama_cpp.server.__main__ import main

    sys.argv = [sys.argv[0], *args]
    main()


PR_SET_PDEATHSIG = 1
"""prctl(2): the signal a process gets when its parent ends."""


def _die_with_parent(parent: int) -> None:
    """In the forked server: SIGKILL when the supervisor ends (killed, or stopped by a start
    that timed out), so no server runs on unsupervised; exits at once when it ended already."""
    import ctypes

    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
    except (OSError, AttributeError):  # not Linux: the watchdog's owner check still stops it
        return
    if os.getppid() != parent:
        os._exit(0)


ASKED_SIGNALS = frozenset({signal.SIGTERM, signal.SIGINT})
"""The signals a server is stopped with on purpose (:func:`stop`, its watchdog, Ctrl-C): no exit record."""


def _supervise(owner: int, directory: Path, args: list[str]) -> int:
    """Entry point of the managed model server process (``python -m pathweave.servers.llm_server
    OWNER DIR -- ARGS``): forks the server (:func:`_serve`), passes SIGTERM and SIGINT on to it,
    waits for it, and when it ended unasked (a signal other than those, or a non-zero code)
    writes ``exit.json`` (:class:`ServerExit`) and says so in the log. Returns the exit code
    (128 + the signal's number for a signal)."""
    port, model = int(args[args.index("--port") + 1]), args[args.index("--model_alias") + 1]
    sys.stdout.flush()
    supervisor = os.getpid()
    told, tell = os.pipe()  # the server writes one byte once it is ready (server.json may be gone by its end)
    child = os.fork()
    if child == 0:  # the server
        os.close(told)
        global _READY_FD
        _READY_FD = tell
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # a crash is recorded, not dumped (GBs of model)
        _die_with_parent(supervisor)
        code = 0
        try:
            _serve(owner, directory, args)
        except KeyboardInterrupt:  # Ctrl-C (SIGINT) while the model loads: asked
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        except BaseException:  # noqa: BLE001 - printed to the log, then the code says it failed
            import traceback

            traceback.print_exc()
            code = 1
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)

    def forward(signum, frame):  # noqa: ARG001
        try:
            os.kill(child, signum)
        except ProcessLookupError:
            pass

    os.close(tell)
    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, forward)
    _, status_code = os.waitpid(child, 0)
    os.set_blocking(told, False)
    try:
        was_ready = os.read(told, 1) == b"r"
    except BlockingIOError:
        was_ready = False
    os.close(told)
    killed = os.WTERMSIG(status_code) if os.WIFSIGNALED(status_code) else None
    code = os.WEXITSTATUS(status_code) if os.WIFEXITED(status_code) else None
    asked = (read_json(directory / STOPPING_FILE) or {}).get("pid") == child  # stop(), SIGKILL after its wait too
    if asked:
        (directory / STOPPING_FILE).unlink(missing_ok=True)
    if asked or (killed is None and code == 0) or killed in ASKED_SIGNALS:
        return 0
    ended = ServerExit(pid=child, port=port, model=model, code=code, signal=killed, at=time.time(),
                       ready=was_ready, log=str(directory / "server.log"))
    print(f"model server (pid {child}) exited with {ended.how}", flush=True)
    try:
        write_json(directory / EXIT_FILE, asdict(ended))
    except OSError:  # the data directory is gone: nobody to tell
        pass
    return 128 + killed if killed else (code or 1)


def _read_state(directory: Path) -> dict:
    return read_json(directory / "server.json") or {}


if __name__ == "__main__":
    split = sys.argv.index("--")
    sys.exit(_supervise(int(sys.argv[1]), Path(sys.argv[2]), sys.argv[split + 1:]))
