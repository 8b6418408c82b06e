"""An installed Pathweave (``pip install`` of the wheel, outside the repository) finds its
named Cypher statements and the managed Neo4j's build as package data: it starts the managed
store, ingests the fixture documents and answers a query with no setting pointing back into
the repository.

The wheel is built without its dependencies and installed into a fresh virtual environment
whose only link to the test's environment is a ``.pth`` line naming that environment's
site-packages (for the dependencies: torch, the driver, spaCy's model): Pathweave itself is
the wheel's copy, and the command runs in a temporary folder with the repository nowhere on
its path."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
FIXTURES = Path(__file__).parent / "fixtures" / "docs"


def _run(command: list[str], cwd: Path, env: dict[str, str], timeout: float = 600) -> subprocess.CompletedProcess:
    done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, f"{command[:3]} exited {done.returncode}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done


def _copy_checkout(target: Path) -> None:
    """The checkout's files (tracked, and new ones git does not ignore; links kept as links)
    into ``target``: the wheel is built from the copy, so the build leaves nothing behind."""
    listed = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=REPO, capture_output=True,
                            check=True).stdout.decode().split("\0")
    for name in filter(None, listed):
        source, copy = REPO / name, target / name
        if source.is_symlink() or source.is_file():
            copy.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, copy, follow_symlinks=False)


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """A fresh virtual environment with the wheel of this checkout installed; its python."""
    root = tmp_path_factory.mktemp("wheel")
    _copy_checkout(root / "source")
    _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(root / "dist"),
          str(root / "source")], root, dict(os.environ))
    [wheel] = (root / "dist").glob("pathweave-*.whl")
    venv = root / "venv"
    _run([sys.executable, "-m", "venv", str(venv)], root, dict(os.environ))
    python = venv / "bin" / "python"
    site = Path(_run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], root,
                     dict(os.environ)).stdout.strip())
    (site / "dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    _run([str(python), "-m", "pip", "install", "-q", "--no-deps", "--no-index", str(wheel)], root, dict(os.environ))
    return python


def _environment(tmp_path: Path) -> dict[str, str]:
    """The environment of the installed commands: no PYTHONPATH and no PATHWEAVE_* of the test
    session (its store, its data dir), the catalog models of the test's installation."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PATHWEAVE_") and k != "PYTHONPATH"}
    from pathweave.settings import get_settings

    env.update(PATHWEAVE_DATA_DIR=str(tmp_path / "data"), PATHWEAVE_TENANT="wheel",
               PATHWEAVE_MODELS_DIRECTORY=str(get_settings().models.models_path), HF_HUB_OFFLINE="1")
    return env


def test_the_wheel_ships_its_statements_and_runs_outside_the_repository(installed, tmp_path):
    env = _environment(tmp_path)
    where = _run([str(installed), "-c", "import pathweave, pathweave.store.statements as s, "
                  "pathweave.servers.neo4j_server as n; print(pathweave.__file__); print(len(s.load_all())); "
                  "print((n.distribution_dir() / 'pom.xml').is_file())"], tmp_path, env).stdout.split()
    assert not where[0].startswith(str(REPO)) and int(where[1]) > 100 and where[2] == "True", where
    cli = str(installed.parent / "pathweave")
    try:
        ingest = _run([cli, "ingest", str(FIXTURES)], tmp_path, env)
        assert "documents: 8 added;" in ingest.stdout + ingest.stderr
        answer = json.loads(_run([cli, "query", "Where was Marie Curie born?", "--json", "--k", "3"],
                                 tmp_path, env).stdout)
        assert "Marie Curie" in [hit["title"] for hit in answer["passages"]]
        assert all(hit["reference"] for hit in answer["passages"])  # cited in the core
    finally:
        subprocess.run([cli, "db", "stop"], cwd=tmp_path, env=env, capture_output=True, timeout=120)
