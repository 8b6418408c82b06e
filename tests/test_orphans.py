"""No orphaned servers (issue 35): a managed store started on demand belongs to the process
that started it. A `pathweave serve` and a `pathweave bench` killed with SIGKILL leave no
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

from pathweave.processes import free_port, pid_alive


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PATHWEAVE_") or k.startswith("PATHWEAVE_TEST_")}
    return {**env, "PATHWEAVE_DATA_DIR": str(tmp_path / "data"), "HF_HUB_OFFLINE": "1", "TMPDIR": str(tmp_path),
            "OMP_WAIT_POLICY": "passive", **extra}


def _server_pid(pattern: str, root: Path, process: subprocess.Popen, timeout: float = 180) -> int:
    """The pid in the first ``root/<pattern>`` server.json, once the store server runs."""
    deadline = time.monotonic() + timeout
    while True:
        assert process.poll() is None, "the command ended before its store server started"
        for state in root.glob(pattern):
            try:
                pid = json.loads(state.read_text())["pid"]
            except (OSError, ValueError, KeyError):
                continue
            if pid_alive(pid):
                return pid
        assert time.monotonic() < deadline, "no store server started"
        time.sleep(0.5)


def _gone_within(pid: int, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while pid_alive(pid):
        assert time.monotonic() < deadline, f"store server {pid} outlived its owner by {seconds:.0f} s"
        time.sleep(0.5)


@pytest.mark.arcadedb_only
def test_a_killed_serve_leaves_no_store_server(tmp_path):
    port = free_port()
    serve = subprocess.Popen([sys.executable, "-m", "pathweave_cli.main", "serve", "--port", str(port)],
                             env=_env(tmp_path), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        pid = _server_pid("data/server/server.json", tmp_path, serve)
        deadline = time.monotonic() + 180
        while httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=10).status_code != 200:
            assert time.monotonic() < deadline, "the API never got ready"
            time.sleep(1)
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
