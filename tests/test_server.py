"""The managed ArcadeDB server's lifecycle: start, status, password file, stale pid, stop; the
store's files private to the user on either backend (the managed Neo4j's lifecycle:
tests/test_neo4j_server.py)."""

import json
import os
import stat

import pytest

from pathweave.servers import store_server
from pathweave.settings import Settings
from waiting import wait_until



@pytest.fixture()
def own_settings(tmp_path):
    return Settings(data_dir=tmp_path / "data", store={"server_start_timeout_s": 60})


def test_start_status_stop_and_stale_pid(own_settings):
    info = store_server.start(own_settings)
    try:
        assert store_server.status(own_settings) == info
        assert store_server.start(own_settings) == info  # one server per data dir
        password = own_settings.data_dir / "server" / "password"
        assert stat.S_IMODE(os.stat(password).st_mode) == 0o600
        assert info.bolt_uri.startswith("bolt://127.0.0.1:")
    finally:
        assert store_server.stop(own_settings)
    assert store_server.status(own_settings) is None
    assert store_server.stop(own_settings) is False
    state = own_settings.data_dir / "server" / "server.json"
    state.write_text(json.dumps({"pid": 999999, "bolt_port": 1, "http_port": 2}))
    assert store_server.status(own_settings) is None  # stale pid detected and removed
    assert not state.exists()


@pytest.mark.arcadedb_only
def test_a_server_whose_data_dir_is_gone_stops_itself(own_settings):
    """A killed benchmark or test leaves its temporary data dir to be deleted: the managed
    server notices and stops within a minute (issue 35: no orphaned servers)."""
    import shutil

    from pathweave.servers.processes import pid_alive

    info = store_server.start(own_settings)
    assert pid_alive(info.pid)
    shutil.rmtree(own_settings.data_dir)
    wait_until(lambda: not pid_alive(info.pid), 60,
               f"the store server {info.pid} stopped (it outlives its data directory)", interval_s=0.5)


def test_start_times_out_with_a_clear_error(own_settings, monkeypatch):
    monkeypatch.setattr(store_server, "port_open", lambda port: False)
    quick = own_settings.model_copy(
        update={"store": own_settings.store.model_copy(update={"server_start_timeout_s": 1.0})})
    with pytest.raises(store_server.ServerError, match="not ready after"):
        store_server.start(quick)
    store_server.stop(quick)


def test_store_files_are_private_to_the_user(settings, store):
    """The databases (WAL included: it holds document text) and the logs are 0600 in 0700
    folders, like the password file: no other local user can read a tenant's data. On the
    managed Neo4j too (its JVM runs with umask 077): store files, transaction logs, logs."""
    store.record_change()  # a write: the WAL and the database files exist
    data_dir = settings.data_dir
    assert stat.S_IMODE(os.stat(data_dir).st_mode) == 0o700
    neo4j = settings.store.backend == "neo4j"
    server_dir = data_dir / ("neo4j" if neo4j else "server")
    checked = {"dirs": 0, "files": 0}
    for root, dirs, files in os.walk(server_dir):
        for name in dirs + [""]:
            mode = stat.S_IMODE(os.stat(os.path.join(root, name)).st_mode)
            assert mode & 0o077 == 0, (os.path.join(root, name), oct(mode))
            checked["dirs"] += 1
        for name in files:
            path = os.path.join(root, name)
            mode = stat.S_IMODE(os.lstat(path).st_mode)
            assert mode & 0o077 == 0, (path, oct(mode))
            checked["files"] += 1
    databases = server_dir / "data" / "databases" if neo4j else server_dir / "databases"
    assert (server_dir / "server.log").exists() and databases.is_dir()
    assert checked["files"] > 5, checked


def test_make_private_fixes_files_of_an_older_install(tmp_path):
    old = tmp_path / "server" / "databases" / "pathweave"
    old.mkdir(parents=True, mode=0o755)
    (old / "data.wal").write_text("tenant text")
    os.chmod(old / "data.wal", 0o644)
    store_server.make_private(tmp_path / "server")
    assert stat.S_IMODE(os.stat(old).st_mode) == 0o700
    assert stat.S_IMODE(os.stat(old / "data.wal").st_mode) == 0o600


@pytest.mark.arcadedb_only
def test_the_demo_stops_the_servers_it_started_and_leaves_the_others(own_settings, monkeypatch):
    """`pathweave demo` (its body replaced by one that only starts the store, as the real one
    does on its first store call) stops the store server it started, even when it fails, and
    leaves one that ran before it."""
    from pathweave_cli import demo

    def body(settings, console):
        store_server.start(settings)
        raise RuntimeError("the demo failed half-way")

    monkeypatch.setattr(demo, "_run", body)
    with pytest.raises(RuntimeError):
        demo.run_demo(own_settings)
    assert store_server.status(own_settings) is None  # started by the demo: stopped
    info = store_server.start(own_settings)
    try:
        monkeypatch.setattr(demo, "_run", lambda settings, console: store_server.start(settings))
        demo.run_demo(own_settings)
        assert store_server.status(own_settings) == info  # ran before: runs on
    finally:
        store_server.stop(own_settings)


@pytest.mark.arcadedb_only
def test_a_start_right_after_the_owner_exits_gets_a_new_server_not_the_stopping_one(own_settings, tmp_path):
    """An on-demand server whose owner exited stops by itself; the next command's start at
    that moment must neither connect to the server going away nor open its database files
    before it is gone: it waits for the old one, then starts its own (the lifecycle race of
    one CLI command after another)."""
    import subprocess
    import sys

    from neo4j import GraphDatabase

    from pathweave.servers.processes import mark_stopping, pid_alive

    script = ("import sys; from pathlib import Path; from pathweave.settings import Settings\n"
              "from pathweave.servers import store_server\n"
              f"s = Settings(data_dir=Path({str(own_settings.data_dir)!r}), store={{'server_start_timeout_s': 60}})\n"
              "print(store_server.start(s, owner=__import__('os').getpid()).pid, flush=True)\n")
    owner = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    old = int(owner.stdout.split()[-1])  # its owner has exited: the server stops within seconds
    state = own_settings.data_dir / "server" / "server.json"
    if pid_alive(old):
        mark_stopping(state)  # as the server does first thing when it stops (here before it noticed)
    try:
        info = store_server.start(own_settings)
        assert info.pid != old and not pid_alive(old)
        with GraphDatabase.driver(info.bolt_uri, auth=(info.user, info.password)) as driver:
            driver.verify_connectivity()  # a server that answers, not one going away
    finally:
        store_server.stop(own_settings)
