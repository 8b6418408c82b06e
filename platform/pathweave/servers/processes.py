"""Child processes Pathweave manages: the store servers (ArcadeDB, Neo4j), the model server.

Shared by :mod:`pathweave.servers.store_server` (the managed ArcadeDB server and the façade that picks
the managed backend), :mod:`pathweave.servers.neo4j_server` (the managed Neo4j + GDS server) and
:mod:`pathweave.servers.llm_server`: where a server listens (:class:`ServerInfo`), private folders
and generated passwords, free ports, liveness and clean termination, the lifetime of a
server started on demand (:class:`Lifetime`, :func:`launch_owner`: no orphans) and
every managed server running on this machine (:func:`managed_servers`).
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import psutil
from pathweave.errors import PathweaveError


T = TypeVar("T")
"""A managed server's info type (:class:`ServerInfo` for the stores)."""


class ServerError(PathweaveError, RuntimeError):
    """A managed server (store or model) could not be started, reached or stopped (transient:
    it may answer when asked again)."""

    transient = True


@dataclass(frozen=True)
class ServerInfo:
    """Where a running managed store server listens (all on 127.0.0.1).

    ``pid``: the server process (for Neo4j the JVM, whose RSS is the store's);
    ``backend``: ``arcadedb`` or ``neo4j``; ``database``: the database Pathweave uses
    (Neo4j Community has only ``neo4j``)."""

    pid: int
    bolt_port: int
    http_port: int
    password: str
    user: str = "root"
    backend: str = "arcadedb"
    database: str = "pathweave"

    @property
    def bolt_uri(self) -> str:
        return f"bolt://127.0.0.1:{self.bolt_port}"

    @property
    def http_url(self) -> str:
        return f"http://127.0.0.1:{self.http_port}"


def private_dir(*directories: Path) -> Path:
    """Create each folder (parents too) private to the user (0700); returns the last as an
    absolute path (a managed server runs in its folder and is given it: a relative data dir,
    such as ``--keep bench-state/x``, would be read again from inside it)."""
    for directory in directories:
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        _chmod(directory, 0o700)
    return Path(directories[-1]).absolute()


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


def read_password(directory: Path) -> str:
    """Read, or create with mode 0600, the generated password ``directory/password``."""
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


def port_free(port: int) -> bool:
    """Whether a server can listen on 127.0.0.1:``port`` now (with SO_REUSEADDR, as servers
    bind: connections of a killed server left in TIME_WAIT do not hold the port)."""
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def port_open(port: int) -> bool:
    """Whether something accepts TCP connections on 127.0.0.1:``port``."""
    with socket.socket() as sock:
        sock.settimeout(0.5)
        return sock.connect_ex(("127.0.0.1", port)) == 0


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
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False
    except psutil.AccessDenied:
        return True


def open_server_log(directory: Path, note: str = ""):
    """``directory/server.log`` opened for appending (binary, 0600: a server's stdout and
    stderr), with the line ``pathweave: <note>`` written first when ``note`` is given."""
    log = os.fdopen(os.open(directory / "server.log", os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600), "ab")
    if note:
        log.write(f"pathweave: {note}\n".encode())
        log.flush()
    return log


def log_tail(directory: Path, lines: int = 20, name: str = "server.log") -> str:
    """The last ``lines`` lines of ``directory/name`` ("(no log)" when unreadable), for errors."""
    try:
        return "\n".join((directory / name).read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def terminate(pid: int, timeout_s: float = 30.0) -> None:
    """SIGTERM ``pid``, then SIGKILL when it still runs after ``timeout_s`` seconds."""
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and pid_alive(pid):
        time.sleep(0.1)
    if pid_alive(pid):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def stop_recorded(pid: int | None, state_file: Path, timeout_s: float = 30.0) -> bool:
    """Stop the managed server ``pid`` found by its status (None: none runs; :func:`terminate`)
    and remove its ``state_file`` (``server.json``) and its recorded owner (:func:`forget_owner`:
    a stopped server is not restarted with its lifetime). Returns False when none was running."""
    forget_owner(state_file.parent)
    if pid is None:
        return False
    terminate(pid, timeout_s)
    state_file.unlink(missing_ok=True)
    return True


def read_json(path: Path) -> dict | None:
    """The JSON object in ``path``, or None when missing or unreadable."""
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def server_state(state_file: Path) -> dict | None:
    """What ``state_file`` (a managed server's ``server.json``: ``pid`` and its ports) records
    of a server that runs and is not stopping: None when there is none (the file of a dead
    process is removed; one marked stopping, :func:`mark_stopping`, is left to its server)."""
    data = read_json(state_file)
    if data is None or not pid_alive(int(data.get("pid", 0))):
        state_file.unlink(missing_ok=True)
        return None
    return None if data.get("stopping") else data


def mark_stopping(state_file: Path) -> None:
    """Record in ``state_file`` that its server is stopping (before it stops): a client that
    reads it from then on starts a new one (:func:`wait_stopped` first) instead of connecting
    to a server that is going away."""
    data = read_json(state_file)
    if data is not None:
        write_json(state_file, {**data, "stopping": True})


def wait_stopped(state_file: Path, timeout_s: float = 120.0) -> None:
    """Wait until the server ``state_file`` marks as stopping has exited (its database files
    are then free for the next one); raises :class:`ServerError` after ``timeout_s``."""
    data = read_json(state_file)
    if data is None or not data.get("stopping"):
        return
    pid, deadline = int(data.get("pid", 0)), time.monotonic() + timeout_s
    while pid_alive(pid) and _serves(pid, state_file.parent):
        if time.monotonic() > deadline:
            raise ServerError(f"the server (pid {pid}) recorded in {state_file} is still stopping after "
                              f"{timeout_s:.0f} s")
        time.sleep(0.1)
    if read_json(state_file) == data:  # not a file the next server wrote meanwhile
        state_file.unlink(missing_ok=True)


def _serves(pid: int, directory: Path) -> bool:
    """Whether process ``pid`` is a managed server of ``directory`` (its command line names
    the directory: a pid the system gave another process since is not waited for)."""
    try:
        return any(str(directory) in part for part in psutil.Process(pid).cmdline())
    except (psutil.NoSuchProcess, psutil.ZombieProcess):
        return False
    except psutil.AccessDenied:
        return True


@contextmanager
def starting(directory: Path) -> Iterator[bool]:
    """Hold ``directory/starting.lock`` (this pid, 0600) while starting the server of
    ``directory``: yields True when this process is to start it, False when another live
    process holds the lock (wait for that one's server instead). The lock appears with its pid
    already in it (a hard link of a written file), so no reader ever sees it empty; a lock left
    behind by a process that died is replaced; the lock is removed on exit when it was taken here."""
    lock = directory / "starting.lock"
    mine = directory / f".starting.{os.getpid()}.{secrets.token_hex(4)}"
    with os.fdopen(os.open(mine, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w") as handle:
        handle.write(str(os.getpid()))
    try:
        for _ in range(2):
            try:
                os.link(mine, lock)
            except FileExistsError:
                text = lock.read_text().strip()
                if text.isdigit() and pid_alive(int(text)):
                    yield False
                    return
                lock.unlink(missing_ok=True)  # stale: its process is gone
                continue
            try:
                yield True
            finally:
                lock.unlink(missing_ok=True)
            return
        yield False
    finally:
        mine.unlink(missing_ok=True)


def stop_requested() -> Callable[[], bool]:
    """Install SIGTERM and SIGINT handlers in a server process; returns a function that tells
    whether one of them has arrived (the process then stops cleanly in its own loop)."""
    stopping = [False]

    def _on_signal(signum, frame):  # noqa: ARG001
        stopping[0] = True

    signal.signal(signal.SIGTERM, _on_signal)
    signal.signal(signal.SIGINT, _on_signal)
    return lambda: stopping[0]


def write_json(path: Path, data: dict) -> None:
    """Write ``data`` to ``path`` atomically (a reader never sees half a file), private to the
    user (0600, whatever the writer's umask)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.unlink(missing_ok=True)
    with os.fdopen(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w") as handle:
        handle.write(json.dumps(data))
    tmp.replace(path)


OWNER_FILE = "owner.json"
"""``<server dir>/owner.json``: ``{"owner": pid}``, the owner the last launched server got (0:
none, it runs until stopped); kept when that server dies unstopped, for :func:`launch_owner`."""


def launch_owner(directory: Path, owner: int | None) -> int:
    """The owner (a pid whose exit stops the server; 0: none) of a server launched now for
    ``directory``, recorded in :data:`OWNER_FILE`. A server that died without being stopped (a
    crash, a SIGKILL) is replaced with its own lifetime, whoever restarts it: its recorded owner
    when that still runs, or 0 when it had none (``pathweave db start``'s, which runs until
    ``db stop``). Otherwise ``owner`` (None: 0). So a worker that restarts the API's crashed store
    does not take it down when the worker is killed later."""
    previous = read_json(directory / OWNER_FILE) or {}
    chosen = owner or 0
    if "owner" in previous:
        was = int(previous["owner"])
        if was == 0 or pid_alive(was):
            chosen = was
    write_json(directory / OWNER_FILE, {"owner": chosen})
    return chosen


USERS_DIR = "users"
"""``<server dir>/users/<pid>``: one empty file per process that uses the managed server (the
API, each worker, a CLI command): a server started on demand runs while any of them does."""


def register_user(directory: Path, pid: int | None = None) -> None:
    """Record ``pid`` (default: this process) as a user of ``directory``'s managed server, so
    that the server outlives the process that happened to start it while this one runs."""
    users = directory / USERS_DIR
    users.mkdir(mode=0o700, parents=True, exist_ok=True)
    (users / str(pid or os.getpid())).touch(mode=0o600)


def live_users(directory: Path) -> list[int]:
    """The pids registered with :func:`register_user` that still run (the files of those that
    exited are removed)."""
    alive = []
    for path in (directory / USERS_DIR).glob("*") if (directory / USERS_DIR).is_dir() else ():
        try:
            pid = int(path.name)
        except ValueError:
            continue
        if pid_alive(pid):
            alive.append(pid)
        else:
            path.unlink(missing_ok=True)
    return sorted(alive)


def forget_owner(directory: Path) -> None:
    """Remove the recorded owner of ``directory``'s server (it was stopped on purpose: a later
    start decides its owner afresh)."""
    (directory / OWNER_FILE).unlink(missing_ok=True)


def start_once(directory: Path, wait: Callable[[subprocess.Popen | None], T],
               launch: Callable[[], subprocess.Popen], running: Callable[[], T | None]) -> T:
    """The start protocol of every managed server of ``directory`` (stores and the model
    server), once the caller found none running: under the start lock, the server another
    process started meanwhile (``running()``), else ``wait(launch())``; when another process
    holds the lock (it is starting the server), ``wait(None)``."""
    with starting(directory) as mine:
        if not mine:
            return wait(None)
        info = running()
        return info if info is not None else wait(launch())


def wait_ready(what: str, directory: Path, timeout_s: float, process: subprocess.Popen | None,
               ready: Callable[[], T | None], poll_s: float = 0.2) -> T:
    """Poll ``ready()`` until it gives the running server's info. Raises :class:`ServerError`
    with the tail of ``directory/server.log`` when ``process`` (the one just launched, if any)
    exits first, or after ``timeout_s`` seconds (the launched process is then stopped)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        info = ready()
        if info is not None:
            return info
        if process is not None and process.poll() is not None:
            raise ServerError(f"{what} exited with code {process.returncode}:\n{log_tail(directory)}")
        time.sleep(poll_s)
    if process is not None:
        stop_process(process, 30)
    raise ServerError(f"{what} not ready after {timeout_s:.0f} s:\n{log_tail(directory)}")


OWNER_CHECK_S = 1.0
"""How often (s) a managed server checks that its owner process still runs."""

DATA_DIR_CHECK_S = 5.0
"""How often (s) a managed server checks that its data directory still exists; a server whose
data directory is gone (a killed benchmark's or test's temporary folder) stops."""


class Lifetime:
    """When a managed server process must stop by itself (no orphans): once its ``owner`` (a
    pid; 0: none, it runs until stopped) has exited and so has every other process registered
    as its user (:func:`register_user`: a store started by a worker keeps serving the API
    after that worker is killed), checked at most every ``owner_every_s`` seconds, or once its
    ``directory`` is gone, checked at most every ``directory_every_s`` seconds. The server's
    own loop (or watchdog thread) calls :meth:`over` often; the checks themselves run at those
    intervals."""

    def __init__(self, directory: Path, owner: int, owner_every_s: float = OWNER_CHECK_S,
                 directory_every_s: float = DATA_DIR_CHECK_S) -> None:
        self.directory, self.owner = Path(directory), owner
        self._every = (owner_every_s, directory_every_s)
        self._checked = [time.monotonic()] * 2

    def over(self) -> str | None:
        """Why the server must stop now (``owner process N has exited``, ``data directory
        removed``), or None while it may run on."""
        now = time.monotonic()
        if self.owner and now - self._checked[0] >= self._every[0]:
            self._checked[0] = now
            if not pid_alive(self.owner) and not live_users(self.directory):
                return f"owner process {self.owner} and every other user have exited"
        if now - self._checked[1] >= self._every[1]:
            self._checked[1] = now
            if not self.directory.exists():
                return "data directory removed"
        return None


SERVER_MODULES = {"pathweave.servers.store_server": "arcadedb", "pathweave.servers.neo4j_server": "neo4j",
                  "pathweave.servers.llm_server": "llm", "llama_cpp.server": "llm"}
"""The ``python -m`` module of each managed server process and its kind (``llama_cpp.server``:
a model server started before it had an owner)."""

LEGACY_MODULES = {"pathweave.store_server": "pathweave.servers.store_server",
                  "pathweave.neo4j_server": "pathweave.servers.neo4j_server",
                  "pathweave.llm.server": "pathweave.servers.llm_server"}
"""The modules of servers started by the release before the core's packages (same arguments),
recognized for one release so that an upgrade finds the servers still running."""


@dataclass(frozen=True)
class ManagedServer:
    """A managed server found running on this machine (:func:`managed_servers`).

    ``pid``: the server process (for Neo4j the JVM; ``supervisor`` its supervisor); ``kind``:
    ``arcadedb``, ``neo4j`` or ``llm``; ``directory``: its folder ``<data_dir>/server``,
    ``<data_dir>/neo4j`` or ``<data_dir>/llm``; ports: from its ``server.json`` or command line
    (None when unknown); ``owner``: the pid whose exit stops it (0: none, it runs until
    stopped); ``rss_mib``: resident memory of its processes (MiB; Neo4j's JVM and supervisor)."""

    pid: int
    kind: str
    directory: Path
    owner: int
    owner_alive: bool
    rss_mib: float
    bolt_port: int | None = None
    http_port: int | None = None
    port: int | None = None
    supervisor: int | None = None

    @property
    def data_dir(self) -> Path:
        """The data directory (the parent of the server's folder)."""
        return self.directory.parent

    @property
    def directory_exists(self) -> bool:
        """False when the data directory was deleted (the server then stops by itself)."""
        return self.directory.exists()


def managed_servers() -> list[ManagedServer]:
    """Every managed server running on this machine (any data directory, any user whose
    processes can be read), found by the command lines of :data:`SERVER_MODULES`: ArcadeDB
    store servers, Neo4j supervisors with their JVM, managed model servers. Ordered by kind,
    then data directory."""
    found = []
    for process in psutil.process_iter(["pid", "cmdline"]):
        try:
            server = _managed_server(process, process.info["cmdline"] or [])
        except (psutil.Error, OSError, ValueError, IndexError):
            continue
        if server is not None:
            found.append(server)
    return sorted(found, key=lambda s: (s.kind, str(s.directory), s.pid))


def _managed_server(process, argv: list[str]) -> ManagedServer | None:
    """The :class:`ManagedServer` of ``process`` when its ``argv`` is ``python -m <server module> ...``."""
    started = next((argv[i + 1] for i in range(len(argv) - 1) if argv[i] == "-m"), None)
    module = LEGACY_MODULES.get(started, started)
    kind = SERVER_MODULES.get(module)
    if kind is None:
        return None
    args = argv[argv.index(started) + 1:]
    owner, processes, extra = 0, [process], {}
    if module == "pathweave.servers.store_server":  # DIR BOLT HTTP HEAP [OWNER]
        directory = Path(args[0])
        owner = int(args[4]) if len(args) > 4 else 0
        extra = {"bolt_port": int(args[1]), "http_port": int(args[2])}
    elif module == "pathweave.servers.neo4j_server":  # DIR TARGET HEAP BOLT HTTP OWNER
        directory = Path(args[0])
        owner = int(args[5]) if len(args) > 5 else 0
        extra = {"bolt_port": int(args[3]), "http_port": int(args[4]), "supervisor": process.pid}
        processes += [child for child in process.children() if "java" in child.name()]
    else:  # pathweave.servers.llm_server OWNER DIR -- ARGS, or (older) llama_cpp.server ARGS
        if module == "pathweave.servers.llm_server":
            owner, directory = int(args[0]), Path(args[1])
            # a supervisor and the server it forked share the command line: one entry, the server's
            if any(child.cmdline() == argv for child in process.children()):
                return None
            parent = process.parent()
            if parent is not None and parent.cmdline() == argv:
                processes, extra = [parent, process], {"supervisor": parent.pid}
        else:
            directory = Path(args[args.index("--model") + 1]).parent.parent  # <dir>/models/X.gguf
        if "--port" in args:
            extra["port"] = int(args[args.index("--port") + 1])
    rss = 0
    for member in processes:
        try:
            rss += member.memory_info().rss
        except psutil.Error:
            pass
    return ManagedServer(pid=processes[-1].pid, kind=kind, directory=directory, owner=owner,
                         owner_alive=bool(owner) and pid_alive(owner), rss_mib=round(rss / 2**20, 1), **extra)
