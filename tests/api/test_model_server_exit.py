"""A crashed model server is reported as a crash (issue 55): killed with SIGSEGV or SIGKILL,
the next ``POST /v1/query {"answer": true}`` answers 503 with Retry-After saying that the
local model server exited, with its signal and the path of its log, and the request after it
restarts the server and is answered; the next ``pathweave query --answer`` says the same,
fast (nothing is restarted by the command that reports the exit). Real managed server
(0.5B), the session's: it runs again when the test ends."""

from __future__ import annotations

import os
import signal
import time

import pytest
from typer.testing import CliRunner

from pathweave.servers import llm_server as server
from pathweave.servers.processes import pid_alive
from pathweave_cli.main import app as cli

QUESTION = "Where was Marie Curie born?"


def _kill(pid: int, signum: int) -> None:
    os.kill(pid, signum)
    deadline = time.monotonic() + 30
    while pid_alive(pid):
        assert time.monotonic() < deadline, f"model server {pid} survived signal {signum}"
        time.sleep(0.05)


def _flat(text: str) -> str:
    return " ".join(text.split())


@pytest.mark.arcadedb_only  # the model server's lifecycle; the stores are covered by the rest of the suite
def test_a_killed_model_server_is_reported_as_exited_then_started_again(
        client, new_tenant, ingest, docs, runtime, settings, llm_settings, llm_server, monkeypatch):
    from pathweave.llm.client import connect

    tenant, headers = new_tenant()
    assert ingest(headers, docs["core"])["status"] == "done"
    log = str(server.server_dir(settings.data_dir) / "server.log")
    first = server.status(settings.data_dir)
    model = connect(settings.data_dir, llm_settings)
    monkeypatch.setattr(runtime, "_llm", model)
    body = {"question": QUESTION, "k": 2, "answer": True}
    try:
        _kill(first.pid, signal.SIGSEGV)
        refused = client.post("/v1/query", headers=headers, json=body)
        assert refused.status_code == 503, refused.text
        assert refused.headers["Retry-After"] and refused.json()["type"].endswith("llm-unavailable")
        detail = refused.json()["detail"]
        assert f"pid {first.pid}" in detail and "exited with signal SIGSEGV" in detail and log in detail, detail
        assert "unreachable" not in detail

        answered = client.post("/v1/query", headers=headers, json=body)  # the next one starts it again
        assert answered.status_code == 200, answered.text
        assert answered.json()["answer"]["text"] and answered.json()["answer"]["error"] is None
        second = server.status(settings.data_dir)
        assert second is not None and second.pid != first.pid and model.base_url == second.base_url
        assert "exited with signal SIGSEGV" in (server.last_exit(settings.data_dir).describe())

        _kill(second.pid, signal.SIGKILL)
        started = time.monotonic()
        shown = CliRunner().invoke(cli, ["query", QUESTION, "--tenant", tenant, "--k", "2", "--answer"])
        took = time.monotonic() - started
        said = _flat(shown.output)
        assert shown.exit_code == 2, shown.output
        assert f"pid {second.pid}" in said and "exited with signal SIGKILL" in said and "server.log" in said, said
        assert took < 2.0, f"the CLI took {took:.1f} s to say the model server exited"
        assert server.status(settings.data_dir) is None  # the command that reported it started nothing
    finally:
        server.start(settings.data_dir, llm_settings, owner=os.getpid(), report_exit=False)
