"""No orphaned model servers (issue 35): the managed llama.cpp server started on demand belongs
to the process that started it and stops within seconds of its exit, SIGKILL too; any managed
model server stops when its data directory is deleted. Real server, packaged 0.5B model, each
test in its own data directory."""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from pathlib import Path

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
    """The model server is SIGKILLed under a client: the next request starts it again (on
    another port, with the owner it had) and is answered there."""
    import os
    import signal

    from pathweave.llm.client import connect

    data_dir = tmp_path / "data"
    try:
        client = connect(data_dir, llm_settings)
        first = llm_server.status(data_dir)
        assert client.chat([{"role": "user", "content": "Say OK."}], max_tokens=2).text
        os.kill(first.pid, signal.SIGKILL)
        _gone_within(first.pid, 30)
        answer = client.chat([{"role": "user", "content": "Say OK."}], max_tokens=2)
        second = llm_server.status(data_dir)
        assert answer.text and second is not None and second.pid != first.pid
        assert client.base_url == second.base_url
        assert client.usage().failures == 0
    finally:
        llm_server.stop(data_dir)
