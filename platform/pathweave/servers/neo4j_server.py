"""The managed local Neo4j: Neo4j Community 5.26 LTS + Open GDS 2.13 + Neo4j Browser.

The production store (``docker-compose.yml``) run on this machine without Docker. The
server is assembled from Maven Central by ``neo4j-server/pom.xml`` at the repository root
(pinned versions; ``mvn package`` copies the Community server's jars to
``neo4j-server/target/lib`` and the Open GDS procedure jars to ``neo4j-server/target/plugins``;
built once, again only when the POM changes) and runs as the real server process
(``org.neo4j.server.CommunityEntryPoint``), with its ``neo4j.conf``, Bolt, HTTP and the
Browser on 127.0.0.1. Python reaches it only over Bolt (official driver, ``graphdatascience``).

One server per data directory, under ``<data_dir>/neo4j``:

- ``password``: generated password of the ``neo4j`` user (0600), set before the first start;
- ``conf/neo4j.conf``: written at each start (ports, folders, heap-independent settings);
- ``server.json``: ``{pid, supervisor, bolt_port, http_port}`` once Bolt answers (``pid`` is
  the JVM, whose RSS is the store's); a pid that no longer runs is stale and is replaced;
- ``server.log`` (the supervisor and the JVM's output), ``logs/`` (Neo4j's own), ``data/``.

A small supervisor (``python -m pathweave.servers.neo4j_server``) owns the JVM: it stops it on
SIGTERM/SIGINT, when the data directory disappears, and, for a server started on demand
(:func:`start` with ``owner``), when the owner process dies, checking once a second, so
nothing is left behind by a killed test run or benchmark. ``pathweave db start --backend
neo4j`` starts one with no owner: it runs until ``pathweave db stop``.

Errors: :class:`pathweave.servers.processes.ServerError` when Java or Maven is missing, the build
fails, or the server is not ready within ``settings.store.server_start_timeout_s`` (with the
log's tail).
"""

from __future__ import annotations

import functools
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

from pathweave.servers.neo4j_browser import browser_settings
from pathweave.servers.processes import (
    OWNER_FILE, Lifetime, ServerError, ServerInfo, forget_owner, free_port, launch_owner, make_private, mark_stopping,
    open_server_log, pid_alive, port_free, port_open, private_dir, read_json, read_password, server_state, start_once,
    stop_requested, terminate, wait_ready, wait_stopped, write_json,
)
from pathweave.servers.sizing import store_memory
from pathweave.settings import Settings

#: Neo4j Community has the one database ``neo4j``.
DATABASE = "neo4j"
USER = "neo4j"
#: JVM options of Neo4j's own launcher that matter here (module access for the page cache
#: and Netty, no JMX for log4j).
JVM_OPTIONS = (
    "-XX:+UseG1GC", "-XX:-OmitStackTraceInFastThrow", "-XX:+ExitOnOutOfMemoryError",
    "-Djdk.nio.maxCachedBufferSize=1024", "-Dio.netty.tryReflectionSetAccessible=true",
    "-Dlog4j2.disable.jmx=true",
    "--add-opens=java.base/java.nio=ALL-UNNAMED", "--add-opens=java.base/java.io=ALL-UNNAMED",
    "--add-opens=java.base/sun.nio.ch=ALL-UNNAMED", "--add-opens=java.base/java.lang=ALL-UNNAMED",
    "--enable-native-access=ALL-UNNAMED",
)
MAIN_CLASS = "org.neo4j.server.CommunityEntryPoint"
#: Seconds a restart waits for the last ports of its data dir to be released (a SIGKILLed
#: JVM's sockets close only once all its threads are gone).
PORT_WAIT_S = 15.0
ADMIN_CLASS = "org.neo4j.cli.AdminTool"


def distribution_dir() -> Path:
    """The managed Neo4j's ``pom.xml`` and built ``target/``: the repository's
    ``neo4j-server/``, linked into this package and shipped in the wheel as package data
    (an installed Pathweave builds ``target/`` beside the installed ``pom.xml``)."""
    return Path(__file__).resolve().parent / "neo4j-server"


def build(quiet: bool = True) -> Path:
    """Build the server once: ``mvn package`` of ``neo4j-server/pom.xml`` (Maven's local
    repository makes later builds offline); skipped while ``target/.built`` holds the POM's
    SHA-256. Returns ``target/`` (``lib/`` = the classpath, ``plugins/`` = GDS).

    Raises :class:`ServerError` when ``mvn`` is missing or the build fails (output tail)."""
    dist = distribution_dir()
    pom = dist / "pom.xml"
    target = dist / "target"
    digest = hashlib.sha256(pom.read_bytes()).hexdigest()
    stamp = target / ".built"
    if stamp.exists() and stamp.read_text().strip() == digest and (target / "lib").is_dir():
        return target
    mvn = shutil.which("mvn")
    if mvn is None:
        raise ServerError("Maven (mvn) is needed once to build the managed Neo4j: apt-get install -y maven")
    shutil.rmtree(target / "lib", ignore_errors=True)
    shutil.rmtree(target / "plugins", ignore_errors=True)
    command = [mvn, "-B", "-f", str(pom), "package"] + (["-q"] if quiet else [])
    done = subprocess.run(command, capture_output=True, text=True, stdin=subprocess.DEVNULL)
    if done.returncode != 0:
        tail = "\n".join((done.stdout + done.stderr).splitlines()[-30:])
        raise ServerError(f"building the managed Neo4j failed (mvn exit {done.returncode}):\n{tail}")
    stamp.write_text(digest)
    return target


def java_executable() -> str:
    """``$JAVA_HOME/bin/java`` when set, else ``java`` on the PATH (Neo4j 5.26: Java 17 or 21).
    Raises :class:`ServerError` when there is none."""
    home = os.environ.get("JAVA_HOME")
    if home and (Path(home) / "bin" / "java").exists():
        return str(Path(home) / "bin" / "java")
    java = shutil.which("java")
    if java is None:
        raise ServerError("Java 17 or 21 is needed for the managed Neo4j: apt-get install -y openjdk-17-jre-headless")
    return java


def server_dir(settings: Settings) -> Path:
    """``<data_dir>/neo4j``, private to the user (0700)."""
    return private_dir(Path(settings.data_dir), Path(settings.data_dir) / "neo4j")


def status(settings: Settings) -> ServerInfo | None:
    """The running managed Neo4j of ``settings.data_dir``, or None (stale state removed)."""
    directory = server_dir(settings)
    data = server_state(directory / "server.json")
    if data is None:
        return None
    return ServerInfo(pid=int(data["pid"]), bolt_port=int(data["bolt_port"]), http_port=int(data["http_port"]),
                      password=read_password(directory), user=USER, backend="neo4j", database=DATABASE)


def start(settings: Settings, owner: int | None = None) -> ServerInfo:
    """Start the managed Neo4j for ``settings.data_dir`` unless it runs already (building it
    first when needed); returns its :class:`ServerInfo` once Bolt answers queries on the
    ``neo4j`` database. ``owner``: a pid whose death stops the server (None: runs until
    :func:`stop`). Raises :class:`ServerError` after ``server_start_timeout_s`` seconds (+
    the build's time on first use)."""
    directory = server_dir(settings)

    def launch() -> subprocess.Popen:
        wait_stopped(directory / "server.json")  # a server going away first frees the database files
        target = build()
        password = read_password(directory)
        bolt_port, http_port = _ports(directory, settings)
        heap, pagecache = _memory(settings)
        _write_conf(directory, target, bolt_port, http_port, settings)
        # the system database holds the users: none yet (a new data dir, or one a restore
        # loaded the graph into before its first start) takes the generated password
        if not (directory / "data" / "dbms" / "auth.ini").exists() and \
                not (directory / "data" / "databases" / "system").exists():
            _set_initial_password(directory, target, password)
        make_private(directory)
        log = open_server_log(directory, f"starting Neo4j with heap {heap}, page cache {pagecache}")
        return subprocess.Popen(
            [sys.executable, "-m", "pathweave.servers.neo4j_server", str(directory), str(target),
             heap, str(bolt_port), str(http_port), str(launch_owner(directory, owner))],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True, cwd=directory,
        )

    info = status(settings)
    return info if info is not None else start_once(
        directory, lambda process: _wait_ready(settings, directory, process), launch, lambda: status(settings))


def stop(settings: Settings, timeout_s: float = 30.0) -> bool:
    """Stop the managed Neo4j cleanly (SIGTERM to the JVM, SIGKILL after ``timeout_s``), and
    its supervisor. Returns False when none was running."""
    directory = server_dir(settings)
    data = read_json(directory / "server.json") or {}
    forget_owner(directory)
    info = status(settings)
    if info is None:
        wait_stopped(directory / "server.json")  # one stopping by itself: until it has
        return False
    terminate(info.pid, timeout_s)
    supervisor = int(data.get("supervisor", 0))
    if supervisor and pid_alive(supervisor):
        terminate(supervisor, 10)
    (directory / "server.json").unlink(missing_ok=True)
    return True


RESTORE_CHECK = "restore-check"
"""The scratch database a restore loads first, so a file that is no dump changes nothing."""
DUMP_HEADERS = (b"DZV1", b"DGV1", b"BZV1", b"BTV1", b"BZV2", b"BTV2", b"\x28\xb5\x2f\xfd", b"\x1f\x8b")
"""How a file ``neo4j-admin database load`` reads begins (Neo4j 5.26's
``DumpFormatSelector``): the dump formats' magic (zstd "DZV1", gzip "DGV1"), the backup
artefacts' ("BZV1", "BTV1", "BZV2", "BTV2") and, for dumps older than those, a bare zstd
or gzip frame."""


def backup(settings: Settings, target: Path) -> Path:
    """Dump the managed Neo4j's database into the file ``target`` with ``neo4j-admin database
    dump`` (the store's own format; its folder must exist, the file must not). Neo4j
    Community has no online backup: a running server is stopped for the dump and started
    again with the owner it had, so queries meanwhile get 503 with Retry-After and every
    client follows it back (:func:`_offline`). Returns ``target``. Raises
    :class:`ServerError` when the dump fails."""
    directory = server_dir(settings)
    with _offline(settings) as admin, tempfile.TemporaryDirectory(dir=directory) as scratch:
        admin("database", "dump", DATABASE, f"--to-path={scratch}")
        shutil.move(str(Path(scratch) / f"{DATABASE}.dump"), target)
    return target


def restore(settings: Settings, source: Path) -> None:
    """Replace the managed Neo4j's database with the dump ``source`` (:func:`backup`) with
    ``neo4j-admin database load``. A file that does not start as a dump (:data:`DUMP_HEADERS`)
    is refused at once; one that does is first loaded as a scratch database
    (:data:`RESTORE_CHECK`, which the server never starts, so this runs while it serves on),
    so a damaged dump is refused with no downtime and the database unchanged. Only then is
    the server stopped for the one load of the database (:func:`_offline`). Query processes
    catch up by the restored graph version. Raises :class:`ServerError` when Neo4j refuses
    (the database unchanged)."""
    directory = server_dir(settings)
    try:
        with open(source, "rb") as file:
            head = file.read(4)
    except OSError as exc:
        raise ServerError(f"{source} cannot be read ({exc.strerror}); nothing changed") from None
    if not head.startswith(DUMP_HEADERS):
        raise ServerError(f"{source} is not a dump Neo4j can load (it does not start as one); nothing changed")
    _check_room(directory, source)
    if status(settings) is None:  # never started here, or stopped: the conf neo4j-admin reads
        _write_admin_conf(directory, settings)
    with tempfile.TemporaryDirectory(dir=directory) as scratch:
        for name in (RESTORE_CHECK, DATABASE):
            os.symlink(source, Path(scratch) / f"{name}.dump")
        try:
            _admin(directory, "database", "load", RESTORE_CHECK, f"--from-path={scratch}", "--overwrite-destination=true")
        except ServerError as exc:
            raise ServerError(f"{source} is not a dump Neo4j can load; nothing changed: {exc}") from None
        finally:
            for kind in ("databases", "transactions"):
                shutil.rmtree(directory / "data" / kind / RESTORE_CHECK, ignore_errors=True)
        with _offline(settings) as admin:
            admin("database", "load", DATABASE, f"--from-path={scratch}", "--overwrite-destination=true")


def _check_room(directory: Path, source: Path) -> None:
    """Refuse a restore the disk cannot hold: the scratch load beside the serving database,
    then the loaded database, each about as large as the database now or (a dump is
    compressed) four times the dump, whichever is larger, plus 256 MiB for transaction logs.
    Raises :class:`ServerError` (nothing changed) when the data dir's disk has less free."""
    stored = sum(path.stat().st_size for kind in ("databases", "transactions")
                 for path in (directory / "data" / kind / DATABASE).rglob("*") if path.is_file())
    need = max(stored, 4 * source.stat().st_size) + 256 * 2**20
    free = shutil.disk_usage(directory).free
    if free < need:
        raise ServerError(f"restoring {source} needs about {need // 2**20} MiB free beside the database, the disk of "
                          f"{directory} has {free // 2**20} MiB; nothing changed")


def _admin(directory: Path, *args: str) -> None:
    """Run ``neo4j-admin *args`` on the data dir ``directory`` (its ``neo4j.conf`` written by
    the last start or :func:`_offline`). Raises :class:`ServerError` with its output when it
    fails."""
    done = subprocess.run([java_executable(), "-cp", _classpath(build()), ADMIN_CLASS, *args], capture_output=True,
                          text=True, env=_env(directory), stdin=subprocess.DEVNULL, cwd=directory)
    if done.returncode != 0:
        raise ServerError(f"neo4j-admin {' '.join(args[:2])} failed:\n{(done.stdout + done.stderr)[-2000:]}")


@contextmanager
def _offline(settings: Settings):
    """The managed Neo4j stopped for ``neo4j-admin`` (yields ``admin(*args)``: :func:`_admin`
    on this data dir), then started again if it ran, with the owner it had (0: until
    ``db stop``)."""
    directory = server_dir(settings)
    running = status(settings) is not None
    owner = int((read_json(directory / OWNER_FILE) or {}).get("owner", 0))
    if running:
        stop(settings)
    _write_admin_conf(directory, settings)
    try:
        yield functools.partial(_admin, directory)
    finally:
        if running:
            start(settings, owner=owner or None)


def _write_admin_conf(directory: Path, settings: Settings) -> None:
    """``neo4j.conf`` for ``neo4j-admin`` on a stopped server: the next start's ports."""
    _write_conf(directory, build(), *_ports(directory, settings), settings)


def _memory(settings: Settings) -> tuple[str, str]:
    """The JVM heap and page cache of the managed Neo4j (Java sizes): the settings', each
    ``auto`` one from the machine's memory (:func:`pathweave.servers.sizing.store_memory`)."""
    return store_memory("neo4j", settings.store.server_heap, settings.store.server_pagecache)


def _ports(directory: Path, settings: Settings) -> tuple[int, int]:
    """Bolt and HTTP ports: the settings' when set; else the ports of this data dir's last
    start when they are free (a restarted server comes back where every client's driver
    still points, so running API processes and workers reconnect by themselves); else new
    free ports. Remembered in ``ports.json``."""
    last = read_json(directory / "ports.json") or {}
    ports = []
    for key, configured in (("bolt_port", settings.store.server_port), ("http_port", settings.store.server_http_port)):
        previous = 0 if configured else int(last.get(key, 0))
        deadline = time.monotonic() + PORT_WAIT_S  # a killed JVM's sockets close as its threads die
        while previous and not port_free(previous) and time.monotonic() < deadline:
            time.sleep(0.2)
        ports.append(configured or (previous if previous and port_free(previous) else free_port()))
    write_json(directory / "ports.json", {"bolt_port": ports[0], "http_port": ports[1]})
    return ports[0], ports[1]


def browser_guide_url(settings: Settings) -> str:
    """The guide the Browser opens once connected: ``store.browser_guide_url``, else the local
    API's (``http://localhost:<api.port>/browser/guide.html``)."""
    return settings.store.browser_guide_url or f"http://localhost:{settings.api.port}/browser/guide.html"


def _write_conf(directory: Path, target: Path, bolt_port: int, http_port: int, settings: Settings) -> None:
    conf = private_dir(directory / "conf")
    for name in ("data", "logs", "run", "import"):
        private_dir(directory / name)
    lines = [
        "# written by pathweave.servers.neo4j_server at each start; edit settings, not this file",
        f"server.directories.data={directory / 'data'}",
        f"server.directories.logs={directory / 'logs'}",
        f"server.directories.run={directory / 'run'}",
        f"server.directories.import={directory / 'import'}",
        f"server.directories.plugins={target / 'plugins'}",
        "server.default_listen_address=127.0.0.1",
        "server.default_advertised_address=127.0.0.1",
        f"server.bolt.listen_address=127.0.0.1:{bolt_port}",
        f"server.http.listen_address=127.0.0.1:{http_port}",
        "server.https.enabled=false",
        "dbms.security.procedures.unrestricted=gds.*",
        f"server.memory.pagecache.size={_memory(settings)[1]}",
        "dbms.usage_report.enabled=false",
        "db.tx_log.rotation.retention_policy=2 files",
        # one server, no followers: a bookmark it has not reached is one from before a restore
        # (GraphStore then starts its bookmarks afresh), never one to wait for (default 30 s)
        "db.transaction.bookmark_ready_timeout=1s",
        # the Browser: Pathweave's style, the saved queries' parameters and guide, no usage-data banner
        *(f"{key}={value}" for key, value in browser_settings(settings.tenant, browser_guide_url(settings)).items()),
    ]
    (conf / "neo4j.conf").write_text("\n".join(lines) + "\n")


def _classpath(target: Path) -> str:
    return f"{target / 'plugins'}/*:{target / 'lib'}/*"


def _env(directory: Path) -> dict[str, str]:
    return {**os.environ, "NEO4J_HOME": str(directory), "NEO4J_CONF": str(directory / "conf")}


def _set_initial_password(directory: Path, target: Path, password: str) -> None:
    """``neo4j-admin dbms set-initial-password`` (before the first start only)."""
    done = subprocess.run(
        [java_executable(), "-cp", _classpath(target), ADMIN_CLASS, "dbms", "set-initial-password", "--", password],
        capture_output=True, text=True, env=_env(directory), stdin=subprocess.DEVNULL, cwd=directory,
    )
    if done.returncode != 0:
        raise ServerError(f"setting the Neo4j password failed:\n{done.stdout[-2000:]}{done.stderr[-2000:]}")


def _wait_ready(settings: Settings, directory: Path, process: subprocess.Popen | None) -> ServerInfo:
    from neo4j import GraphDatabase

    def ready() -> ServerInfo | None:
        info = status(settings)
        if info is None or not port_open(info.bolt_port):
            return None
        try:
            with GraphDatabase.driver(info.bolt_uri, auth=(info.user, info.password)) as driver:
                driver.execute_query("RETURN 1", database_=DATABASE)
        except Exception:  # noqa: BLE001 - the database is still starting
            return None
        return info

    return wait_ready("Neo4j", directory, settings.store.server_start_timeout_s, process, ready, poll_s=0.3)


def _serve(directory: Path, target: Path, heap: str, bolt_port: int, http_port: int, owner: int) -> int:
    """The supervisor (``python -m pathweave.servers.neo4j_server``): runs the JVM with umask 077,
    writes ``server.json`` once Bolt listens, and stops the JVM on SIGTERM/SIGINT, when the
    data directory is gone or when ``owner`` (non-zero) has died, each checked every second
    (:class:`~pathweave.servers.processes.Lifetime`: no orphans). Returns the exit code."""
    os.umask(0o077)
    command = [java_executable(), f"-Xms{heap}", f"-Xmx{heap}", *JVM_OPTIONS, "-cp", _classpath(target),
               MAIN_CLASS, f"--home-dir={directory}", f"--config-dir={directory / 'conf'}"]
    jvm = subprocess.Popen(command, env=_env(directory), stdin=subprocess.DEVNULL, cwd=directory)
    stopping = stop_requested()
    state = directory / "server.json"
    written = False
    lifetime = Lifetime(directory, owner, directory_every_s=1.0)
    try:
        while jvm.poll() is None and not stopping():
            if not written and port_open(bolt_port):
                write_json(state, {"pid": jvm.pid, "supervisor": os.getpid(), "bolt_port": bolt_port,
                                   "http_port": http_port, "owner": owner})
                written = True
            reason = lifetime.over()
            if reason is not None:
                print(f"{reason}: stopping Neo4j", flush=True)
                break
            time.sleep(1.0 if written else 0.2)
    finally:
        if written:
            mark_stopping(state)  # from now on a client starts the next server, after this one exits
        if jvm.poll() is None:
            jvm.terminate()
            try:
                jvm.wait(60)
            except subprocess.TimeoutExpired:
                jvm.kill()
                jvm.wait(10)
        print(f"Neo4j (pid {jvm.pid}) exited with code {jvm.returncode}", flush=True)
        if directory.exists():
            data = read_json(state)
            if data is not None and data.get("pid") == jvm.pid:
                state.unlink(missing_ok=True)
            if stopping():  # stopped on purpose: not restarted with this lifetime
                forget_owner(directory)
    return jvm.returncode or 0


if __name__ == "__main__":
    sys.exit(_serve(Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3], int(sys.argv[4]), int(sys.argv[5]),
                    int(sys.argv[6])))
