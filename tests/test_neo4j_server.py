"""The managed local Neo4j (pathweave.servers.neo4j_server): the real server built from Maven Central
(Neo4j Community 5.26 + Open GDS 2.13), started in its own data directory: one server per
data dir, sized from the machine's memory, a private generated password, GDS loaded, the
CLI's `db start|status|stop --backend neo4j`, and no server left behind when its owner dies or its data dir goes away."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
from neo4j import GraphDatabase
from typer.testing import CliRunner

from pathweave.servers import neo4j_server, sizing, store_server
from pathweave.servers.processes import managed_servers, pid_alive
from pathweave.settings import Settings
from waiting import wait_until


ROOT = Path(__file__).resolve().parents[1]


def own(tmp_path: Path, **store) -> Settings:
    return Settings(data_dir=tmp_path, store={"backend": "neo4j", "server_heap": "512m",
                                               "server_pagecache": "64m", **store})


def wait_gone(pid: int, seconds: float = 60.0, what: str = "") -> bool:
    """True once ``pid`` has exited; fails the test (naming ``what``) when it still runs after ``seconds``."""
    return wait_until(lambda: not pid_alive(pid), seconds, what or f"process {pid} gone", interval_s=0.5)


def test_compose_runs_the_tested_neo4j_version():
    version = re.search(r"<neo4j.version>([^<]+)</neo4j.version>", (ROOT / "neo4j-server/pom.xml").read_text())[1]
    assert f"image: neo4j:{version}-community" in (ROOT / "docker-compose.yml").read_text()


def test_start_status_stop_one_server_per_data_dir_with_gds(tmp_path, monkeypatch):
    # sized from the machine (pathweave.servers.sizing), here a 2 GiB one: a quarter each, at least 512m
    monkeypatch.setattr(sizing, "machine_memory", lambda: 2 * 2**30)
    settings = own(tmp_path, server_heap="auto", server_pagecache="auto")
    info = store_server.start(settings)
    try:
        assert (info.backend, info.user, info.database) == ("neo4j", "neo4j", "neo4j")
        assert "-Xmx512m" in psutil.Process(info.pid).cmdline()
        assert "server.memory.pagecache.size=512m" in (tmp_path / "neo4j" / "conf" / "neo4j.conf").read_text()
        assert "with heap 512m, page cache 512m" in (tmp_path / "neo4j" / "server.log").read_text()
        assert store_server.start(settings) == info and store_server.status(settings) == info
        password = tmp_path / "neo4j" / "password"
        assert password.stat().st_mode & 0o777 == 0o600 and (tmp_path / "neo4j").stat().st_mode & 0o777 == 0o700
        with GraphDatabase.driver(info.bolt_uri, auth=(info.user, password.read_text().strip())) as driver:
            records, _, _ = driver.execute_query(
                "CALL dbms.components() YIELD versions, edition RETURN versions[0] AS v, edition, gds.version() AS gds",
                database_="neo4j")
            assert records[0]["v"].startswith("5.26.") and records[0]["edition"] == "community"
            assert records[0]["gds"].startswith("2.13.")
        with pytest.raises(Exception, match="(?i)unauthorized|authentication"):
            with GraphDatabase.driver(info.bolt_uri, auth=("neo4j", "wrong-password")) as driver:
                driver.verify_connectivity()
        jvm = info.pid
    finally:
        assert store_server.stop(settings)
    assert not pid_alive(jvm) and store_server.status(settings) is None
    assert store_server.stop(settings) is False


def test_cli_db_start_status_stop_backend_neo4j(tmp_path, monkeypatch):
    from pathweave.settings import get_settings
    from pathweave_cli.main import app

    monkeypatch.setenv("PATHWEAVE_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("PATHWEAVE_STORE_SERVER_HEAP", "512m")
    get_settings.cache_clear()
    runner = CliRunner()
    try:
        started = runner.invoke(app, ["db", "start", "--backend", "neo4j"])
        assert started.exit_code == 0, started.output
        assert "neo4j" in started.output and "/browser/" in started.output
        status = runner.invoke(app, ["db", "status", "--backend", "neo4j"])
        assert status.exit_code == 0 and "running: neo4j" in status.output
        assert runner.invoke(app, ["db", "status"]).exit_code == 1  # ArcadeDB of that data dir: not running
        assert runner.invoke(app, ["db", "start", "--backend", "mongo"]).exit_code == 2
    finally:
        stopped = runner.invoke(app, ["db", "stop", "--backend", "neo4j"])
        arcadedb_left = store_server.stop(Settings(data_dir=tmp_path))  # none was asked for
        get_settings.cache_clear()
    assert "stopped" in stopped.output and not arcadedb_left
    assert runner.invoke(app, ["db", "status", "--backend", "neo4j"]).exit_code == 1
    get_settings.cache_clear()


def test_a_server_started_on_demand_stops_when_its_owner_is_killed(tmp_path):
    script = (f"import sys, time\nfrom pathweave.servers import store_server\nfrom pathweave.settings import Settings\n"
              f"s = Settings(data_dir={str(tmp_path)!r}, store={{'backend': 'neo4j', 'server_heap': '512m'}})\n"
              f"info = store_server.start(s, owner=__import__('os').getpid())\nprint(info.pid, flush=True)\ntime.sleep(600)\n")
    owner = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        jvm = int(owner.stdout.readline())
        assert pid_alive(jvm)
    finally:
        owner.send_signal(signal.SIGKILL)
        owner.wait(10)
    wait_gone(jvm, what=f"the Neo4j {jvm} of a SIGKILLed owner stopped")
    assert store_server.status(own(tmp_path)) is None


def test_a_server_whose_data_dir_is_removed_stops(tmp_path):
    data = tmp_path / "data"
    info = store_server.start(own(data))
    supervisor = neo4j_server.read_json(data / "neo4j" / "server.json")["supervisor"]
    [found] = [s for s in managed_servers() if s.pid == info.pid]  # db status --all: the JVM and its supervisor
    assert (found.kind, found.supervisor, found.directory, found.owner) == ("neo4j", supervisor, data / "neo4j", 0)
    assert (found.bolt_port, found.http_port) == (info.bolt_port, info.http_port) and found.rss_mib > 100
    shutil.rmtree(data, ignore_errors=True)
    wait_gone(info.pid, what=f"the Neo4j {info.pid} stopped after its data dir was deleted")
    wait_gone(supervisor, what=f"the Neo4j supervisor {supervisor} stopped after its data dir was deleted")


def test_the_build_is_reused_while_the_pom_is_unchanged():
    target = neo4j_server.build()
    stamp = (target / ".built").stat().st_mtime
    started = time.monotonic()
    assert neo4j_server.build() == target and (target / ".built").stat().st_mtime == stamp
    assert time.monotonic() - started < 5
    assert any(p.name.startswith("proc-2.13.") for p in (target / "plugins").iterdir())
    assert any(p.name.startswith("neo4j-browser-") for p in (target / "lib").iterdir())
    assert os.access(neo4j_server.java_executable(), os.X_OK)


def test_a_killed_server_restarts_on_its_ports_and_open_drivers_reconnect(tmp_path):
    settings = own(tmp_path)
    info = store_server.start(settings)
    try:
        with GraphDatabase.driver(info.bolt_uri, auth=(info.user, info.password)) as driver:
            driver.execute_query("CREATE (:Probe {n: 1})", database_="neo4j")
            os.kill(info.pid, signal.SIGKILL)
            wait_gone(info.pid, what=f"the SIGKILLed Neo4j {info.pid} gone")
            again = store_server.start(settings)  # as the next process that finds it gone does
            assert (again.bolt_port, again.http_port) == (info.bolt_port, info.http_port) and again.pid != info.pid
            records, _, _ = driver.execute_query("MATCH (p:Probe) RETURN count(p) AS n", database_="neo4j")
            assert records[0]["n"] == 1  # the same driver, reconnected; the write survived the kill
    finally:
        store_server.stop(settings)
