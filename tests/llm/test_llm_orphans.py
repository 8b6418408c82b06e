"""No orphaned model servers (issue 35): the managed llama.cpp server started on demand belongs
to the process that started it and stops within seconds of its exit, SIGKILL too; any managed
model server stops when its data directory is deleted. Real server, packaged 0.5B model, each
test in its own data directory."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from pathweave.servers import llm_server
from pathweave.servers.processes import managed_servers, pid_alive


def _gone_within(pid: int, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while pid_alive(pid):
        assert time.monotonic() < deadline, f"model server {pid} still runs after {seconds:.0f} s"
        time.sleep(0.5)


def test_a_model_server_stops_when_its_owner_is_killed(tmp_path, llm_settings):
    data_dir = tmp_path / "data"
    owner = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    try:
        info = llm_server.start(data_dir, llm_settings, owner=owner.pid)
        assert llm_server.status(data_dir) == info
        cmdline = Path(f"/proc/{info.pid}/cmdline").read_bytes().split(b"\0")
        assert b"llama_cpp.server" not in cmdline and cmdline[3] == str(owner.pid).encode()  # -m pathweave.servers.llm_server
        [found] = [s for s in managed_servers() if s.pid == info.pid]  # the server's own pid (its RSS is the model's)
        assert (found.kind, found.directory, found.owner, found.port) == ("llm", data_dir / "llm", owner.pid, info.port)
        assert found.owner_alive and found.rss_mib > 100
        owner.kill()
        owner.wait(10)
        _gone_within(info.pid, 60)
        assert llm_server.status(data_dir) is None
        assert "owner process" in (data_dir / "llm" / "server.log").read_text()
    finally:
        owner.kill()
        llm_server.stop(data_dir)


def test_a_model_server_stops_when_its_data_dir_is_deleted(tmp_path, llm_settings):
    data_dir = tmp_path / "data"
    info = llm_server.start(data_dir, llm_settings)  # no owner: as `pathweave llm start`, until stop...
    try:
        assert pid_alive(info.pid)
        shutil.rmtree(data_dir)  # ...or until its data dir is gone
        _gone_within(info.pid, 60)
    finally:
        llm_server.stop(data_dir)


def test_a_client_follows_its_managed_server_when_it_is_restarted_elsewhere(tmp_path, llm_settings):
    """The model server is SIGKILLed under a client: the next request says that it exited (its
    signal and log, not "unreachable"); the one after it starts it again (on another port,
    with the owner it had) and is answered there. A second client, whose server was restarted
    by the first, just follows it."""
    import os
    import signal

    from pathweave.llm.client import connect

    data_dir = tmp_path / "data"
    try:
        client = connect(data_dir, llm_settings)
        other = connect(data_dir, llm_settings)
        first = llm_server.status(data_dir)
        assert client.chat([{"role": "user", "content": "Say OK."}], max_tokens=2).text
        os.kill(first.pid, signal.SIGKILL)
        _gone_within(first.pid, 30)
        with pytest.raises(llm_server.LLMServerExited, match=f"pid {first.pid}.*exited with signal SIGKILL") as raised:
            client.chat([{"role": "user", "content": "Say OK."}], max_tokens=2)
        assert raised.value.exit.log == str(data_dir / "llm" / "server.log") and raised.value.exit.ready
        answer = client.chat([{"role": "user", "content": "Say OK."}], max_tokens=2)
        second = llm_server.status(data_dir)
        assert answer.text and second is not None and second.pid != first.pid
        assert client.base_url == second.base_url
        assert client.usage().failures == 1
        assert other.chat([{"role": "user", "content": "Say OK."}], max_tokens=2).text  # told once: it follows
        assert other.base_url == second.base_url and other.usage().failures == 0
    finally:
        llm_server.stop(data_dir)


def test_a_server_is_ready_only_once_it_has_generated_a_token(tmp_path, llm_settings):
    """Readiness is a one-token chat completion, not ``GET /v1/models``: when ``start``
    returns, the server's log shows the completion answered before it was announced."""
    data_dir = tmp_path / "data"
    try:
        info = llm_server.start(data_dir, llm_settings, owner=os.getpid())
        lines = (data_dir / "llm" / "server.log").read_text().splitlines()
        completion = next(i for i, line in enumerate(lines) if "POST /v1/chat/completions" in line and " 200" in line)
        ready = next(i for i, line in enumerate(lines) if line.startswith("ready: generated 1 token"))
        assert completion < ready, lines[-20:]
        assert llm_server.status(data_dir) == info
    finally:
        llm_server.stop(data_dir)
    assert llm_server.last_exit(data_dir) is None  # stopped on purpose: no exit recorded


def test_a_server_that_dies_while_starting_is_reported_with_its_signal_and_log(tmp_path, llm_settings):
    """The server faults before it could generate (SIGSEGV while it loads the model): ``start``
    raises LLMServerExited naming the signal, the log and the log's tail, at once (not after
    the start timeout), and the next start launches a new one."""
    data_dir = tmp_path / "data"
    outcome: dict = {}

    def starting() -> None:
        try:
            outcome["info"] = llm_server.start(data_dir, llm_settings, owner=os.getpid())
        except Exception as exc:  # noqa: BLE001 - the test looks at what was raised
            outcome["error"] = exc

    thread = threading.Thread(target=starting)
    began = time.monotonic()
    thread.start()
    try:
        deadline = time.monotonic() + 60
        while not (found := [s for s in managed_servers() if s.directory == data_dir / "llm" and s.supervisor]):
            assert time.monotonic() < deadline and thread.is_alive(), outcome
            time.sleep(0.02)
        [child] = found
        assert child.supervisor != child.pid  # the supervisor (its parent) records how it ends
        os.kill(child.pid, signal.SIGSEGV)
        thread.join(60)
        error = outcome.get("error")
        assert isinstance(error, llm_server.LLMServerExited), outcome
        message = str(error)
        assert f"pid {child.pid}" in message and "exited with signal SIGSEGV" in message, message
        assert "before it could generate" in message and str(data_dir / "llm" / "server.log") in message
        assert time.monotonic() - began < llm_settings.start_timeout_s / 2
        assert llm_server.status(data_dir) is None
        _gone_within(child.supervisor, 10)  # the supervisor ends once it has written the record
        again = llm_server.start(data_dir, llm_settings, owner=os.getpid())  # reported: the next start launches
        assert again.pid != child.pid and llm_server.status(data_dir) == again
    finally:
        thread.join(60)
        llm_server.stop(data_dir)
