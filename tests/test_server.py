"""The managed ArcadeDB server's lifecycle: start, status, password file, stale pid, stop."""

import json
import os
import stat

import pytest

from pathweave import server
from pathweave.settings import Settings


@pytest.fixture()
def own_settings(tmp_path):
    return Settings(data_dir=tmp_path / "data", server_start_timeout_s=60)


def test_start_status_stop_and_stale_pid(own_settings):
    info = server.start(own_settings)
    try:
        assert server.status(own_settings) == info
        assert server.start(own_settings) == info  # one server per data dir
        password = own_settings.data_dir / "server" / "password"
        assert stat.S_IMODE(os.stat(password).st_mode) == 0o600
        assert info.bolt_uri.startswith("bolt://127.0.0.1:")
    finally:
        assert server.stop(own_settings)
    assert server.status(own_settings) is None
    assert server.stop(own_settings) is False
    state = own_settings.data_dir / "server" / "server.json"
    state.write_text(json.dumps({"pid": 999999, "bolt_port": 1, "http_port": 2}))
    assert server.status(own_settings) is None  # stale pid detected and removed
    assert not state.exists()


def test_start_times_out_with_a_clear_error(own_settings, monkeypatch):
    monkeypatch.setattr(server, "_port_open", lambda port: False)
    quick = own_settings.model_copy(update={"server_start_timeout_s": 1.0})
    with pytest.raises(server.ServerError, match="not ready after"):
        server.start(quick)
    server.stop(quick)
