"""No orphaned servers (issue 35): a managed store started on demand runs while the process
that started it, or any other process using it, runs. A `pathweave serve` and a `pathweave bench` killed with SIGKILL leave no
store server behind: it notices its owner is gone and stops within seconds (a minute at
most). Their own data dirs: the session's store is not touched."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from pathweave.servers.processes import free_port, pid_alive
from waiting import wait_until

pytestmark = pytest.mark.store_contract  # the store is its subject: it runs on Neo4j too (conftest)


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PATHWEAVE_") or k.startswith("PATHWEAVE_TEST_")}
    return {**env, "PATHWEAVE_DATA_DIR": str(tmp_path / "data"), "HF_HUB_OFFLINE": "1", "TMPDIR": str(tmp_path),
            "OMP_WAIT_POLICY": "passive", **extra}


def _server_pid(pattern: str, root: Path, process: subprocess.Popen, timeout: float = 180) -> int:
    """The pid in the first ``root/<pattern>`` server.json, once the store server runs."""
    def running_pid() -> int | None:
        assert process.poll() is None, "the command ended before its store server started"
        for state in root.glob(pattern):
            try:
                pid = json.loads(state.read_text())["pid"]
            except (OSError, ValueError, KeyError):
                continue
            if pid_alive(pid):
                return pid
        return None

    return wait_until(running_pid, timeout, "a store server started", interval_s=0.5,
                      until=lambda pid: pid is not None)


def _gone_within(pid: int, seconds: float) -> None:
    wait_until(lambda: not pid_alive(pid), seconds, f"store server {pid} gone (it outlives its owner)", interval_s=0.5)


@pytest.mark.arcadedb_only
def test_a_killed_serve_leaves_no_store_server(tmp_path):
    port = free_port()
    serve = subprocess.Popen([sys.executable, "-m", "pathweave_cli.main", "serve", "--port", str(port)],
                             env=_env(tmp_path), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        pid = _server_pid("data/server/server.json", tmp_path, serve)
        wait_until(lambda: httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=10).status_code, 180,
                   "the API ready (/readyz 200)", interval_s=1, until=lambda status: status == 200)
    finally:
        serve.send_signal(signal.SIGKILL)
        serve.wait(30)
    _gone_within(pid, 60)


@pytest.mark.arcadedb_only
def test_a_killed_benchmark_leaves_no_store_server(tmp_path):
    data = tmp_path / "musique"
    data.mkdir()
    corpus = [{"title": f"Town {i}", "text": f"Town {i} lies on river {i % 7}. Its mayor is person {i}. "
               f"Person {i} was born in Town {(i + 1) % 300}."} for i in range(300)]
    (data / "musique_train_corpus.json").write_text(json.dumps(corpus))
    paragraphs = [{"idx": 0, "title": "Town 1", "paragraph_text": corpus[1]["text"], "is_supporting": True}]
    (data / "musique_train.json").write_text(json.dumps([{
        "id": "q1", "question": "Which river does Town 1 lie on?", "answer": "river 1", "paragraphs": paragraphs,
        "question_decomposition": [{"question": "Which river does Town 1 lie on?", "answer": "river 1",
                                    "paragraph_support_idx": 0}]}]))
    bench = subprocess.Popen([sys.executable, "-m", "pathweave_cli.main", "bench", "musique", "--data", str(data),
                              "--extractions", "default", "--out", str(tmp_path / "out")],
                             env=_env(tmp_path), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        pid = _server_pid("pathweave-bench-*/**/server/server.json", tmp_path, bench)
        time.sleep(2)  # ingesting
    finally:
        bench.send_signal(signal.SIGKILL)
        bench.wait(30)
    _gone_within(pid, 60)


def _sleeper() -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])


def test_a_crashed_server_is_relaunched_with_the_owner_it_had(tmp_path):
    """launch_owner: whoever relaunches a server that died unstopped gives it the lifetime it
    had (its owner while that runs; 0 = db start's, until stop); a stopped one starts afresh."""
    from pathweave.servers.processes import forget_owner, launch_owner

    first = _sleeper()
    try:
        assert launch_owner(tmp_path, first.pid) == first.pid  # nothing recorded: the starter owns it
        assert (tmp_path / "owner.json").stat().st_mode & 0o077 == 0  # private, like every state file
        assert launch_owner(tmp_path, os.getpid()) == first.pid  # crashed, its owner runs: kept
        first.kill()
        first.wait(10)
        assert launch_owner(tmp_path, os.getpid()) == os.getpid()  # its owner is gone: the restarter
        forget_owner(tmp_path)
        assert launch_owner(tmp_path, None) == 0  # db start: no owner
        assert launch_owner(tmp_path, os.getpid()) == 0  # a db start server that crashed stays ownerless
        forget_owner(tmp_path)  # db stop
        assert launch_owner(tmp_path, os.getpid()) == os.getpid()
    finally:
        first.kill()


@pytest.mark.arcadedb_only
def test_a_store_restarted_by_another_process_still_stops_with_its_first_owner(tmp_path):
    """The soak's sequence: the store started on demand by one process (here a sleeper stands
    for the API) is SIGKILLed; another process (this one, a worker) restarts it; when the
    worker later dies the store must not, and when the first owner exits the store stops."""
    from pathweave.servers import store_server
    from pathweave.settings import Settings

    settings = Settings(data_dir=tmp_path / "data", store={"server_start_timeout_s": 120})
    api = _sleeper()
    try:
        first = store_server.start(settings, owner=api.pid)
        os.kill(first.pid, signal.SIGKILL)
        wait_until(lambda: not pid_alive(first.pid), 30, f"the SIGKILLed store server {first.pid} gone",
                   interval_s=0.2)
        second = store_server.start(settings, owner=os.getpid())
        assert second.pid != first.pid
        cmdline = Path(f"/proc/{second.pid}/cmdline").read_bytes().split(b"\0")
        assert int(cmdline[-2]) == api.pid  # the first owner's, not this process's
        api.kill()
        api.wait(10)
        _gone_within(second.pid, 60)
    finally:
        api.kill()
        store_server.stop(settings)


@pytest.mark.arcadedb_only
def test_a_store_shared_by_two_processes_outlives_the_one_that_started_it(tmp_path):
    """A store started on demand by one process (a worker) and used by another (the API,
    registered as a user) keeps running when the first is SIGKILLed, and stops once the
    last of its users has exited."""
    from pathweave.servers import store_server
    from pathweave.settings import Settings

    settings = Settings(data_dir=tmp_path / "data", store={"server_start_timeout_s": 120})
    worker, api = _sleeper(), _sleeper()
    try:
        info = store_server.start(settings, owner=worker.pid)
        store_server.register_user(settings, worker.pid)
        store_server.register_user(settings, api.pid)
        worker.kill()
        worker.wait(10)
        time.sleep(5)  # several of the server's owner checks (one a second)
        assert pid_alive(info.pid), "the store stopped with the process that started it"
        assert store_server.status(settings).pid == info.pid
        api.kill()
        api.wait(10)
        _gone_within(info.pid, 60)
    finally:
        worker.kill()
        api.kill()
        store_server.stop(settings)


@pytest.mark.arcadedb_only
def test_db_status_all_lists_every_managed_server_with_its_owner(tmp_path):
    """`pathweave db status --all` (issue 35): every managed server on this machine, found by
    its command line, with its data dir, ports, owner and RSS."""
    from typer.testing import CliRunner

    from pathweave.servers import store_server
    from pathweave.servers.processes import managed_servers
    from pathweave.settings import Settings
    from pathweave_cli.main import app

    settings = Settings(data_dir=tmp_path / "data", store={"server_start_timeout_s": 120})
    owner = _sleeper()
    try:
        info = store_server.start(settings, owner=owner.pid)
        [found] = [server for server in managed_servers() if server.pid == info.pid]
        assert found.kind == "arcadedb" and found.directory == Path(settings.data_dir) / "server"
        assert found.data_dir == Path(settings.data_dir) and found.directory_exists
        assert found.owner == owner.pid and found.owner_alive
        assert (found.bolt_port, found.http_port) == (info.bolt_port, info.http_port)
        assert found.rss_mib > 50  # the JVM inside the server process
        result = CliRunner().invoke(app, ["db", "status", "--all"], env={"COLUMNS": "400"})
        assert result.exit_code == 0, result.output
        [row] = [line for line in result.stdout.splitlines() if f" {info.pid} " in line]
        assert "arcadedb" in row and str(settings.data_dir) in row and f"{owner.pid} (running)" in row
        assert f"bolt {info.bolt_port}, http {info.http_port}" in row
    finally:
        owner.kill()
        store_server.stop(settings)
