"""The managed store's memory from the machine (pathweave.servers.sizing): the share each store
kind takes, its bounds, explicit sizes kept, bad sizes refused by the settings, and the sizes a
real managed Neo4j was started with (its conf and its JVM's command line)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from pathweave.servers import sizing
from pathweave.servers.sizing import cgroup_limit, java_size, machine_memory, store_memory
from pathweave.settings import Settings, parse_size

GIB = 2**30


def test_java_sizes_are_parsed_and_bad_ones_refused():
    assert parse_size("512m") == 512 * 2**20 and parse_size("2G") == 2 * GIB and parse_size("1048576") == 2**20
    assert parse_size(" 4096k ") == 4 * 2**20 and java_size(3 * GIB) == "3072m"
    for bad in ("", "auto", "2gb", "-1g", "1.5g", "512", "0m", "g"):
        with pytest.raises(ValueError):
            parse_size(bad)


def test_auto_takes_half_the_machine_arcadedb_all_heap_neo4j_half_page_cache():
    assert store_memory("arcadedb", "auto", "auto", 24 * GIB)[0] == "12288m"
    assert store_memory("neo4j", "auto", "auto", 24 * GIB) == ("6144m", "6144m")
    # a large machine: the heap stops below 32 GiB (compressed pointers), the page cache takes the rest
    assert store_memory("neo4j", "auto", "auto", 256 * GIB) == ("31744m", f"{(128 - 31) * 1024}m")
    assert store_memory("arcadedb", "auto", "auto", 256 * GIB)[0] == "31744m"
    # a small one: never below 512 MiB each
    assert store_memory("neo4j", "auto", "auto", 1 * GIB) == ("512m", "512m")


def test_an_explicit_size_is_used_as_given_and_the_other_still_derived():
    assert store_memory("neo4j", "3g", "auto", 24 * GIB) == ("3072m", "6144m")
    assert store_memory("neo4j", "auto", "700m", 24 * GIB) == ("6144m", "700m")


def test_the_machine_memory_is_the_cgroup_limit_when_lower(monkeypatch):
    total = machine_memory()
    assert 0 < total
    monkeypatch.setattr(sizing, "cgroup_limit", lambda: 3 * GIB)
    assert machine_memory() == min(total, 3 * GIB)
    monkeypatch.setattr(sizing, "cgroup_limit", lambda: None)
    assert machine_memory() == sizing.psutil.virtual_memory().total


def test_the_settings_default_to_auto_and_refuse_a_bad_size(monkeypatch):
    monkeypatch.delenv("PATHWEAVE_STORE_SERVER_HEAP", raising=False)
    monkeypatch.delenv("PATHWEAVE_STORE_SERVER_PAGECACHE", raising=False)
    store = Settings().store
    assert (store.server_heap, store.server_pagecache) == ("auto", "auto")
    assert Settings(store={"server_heap": "AUTO", "server_pagecache": "1G"}).store.server_pagecache == "1g"
    with pytest.raises(ValidationError, match="memory size"):
        Settings(store={"server_heap": "lots"})
    monkeypatch.setenv("PATHWEAVE_STORE_SERVER_PAGECACHE", "0k")
    with pytest.raises(ValidationError, match="at least 1m"):
        Settings()


def test_the_cgroup_limit_is_the_lowest_on_the_process_group_and_its_parents(tmp_path):
    root, own = tmp_path / "cgroup", tmp_path / "self-cgroup"

    def limit(path: str, value: str) -> None:
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(value + "\n")

    own.write_text("0::/system.slice/pathweave.service\n")  # v2: a systemd unit's MemoryMax
    assert cgroup_limit(root, own) is None  # no files: no limit
    limit("system.slice/pathweave.service/memory.max", "max")
    limit("system.slice/memory.max", str(6 * GIB))
    limit("memory.max", "max")
    assert cgroup_limit(root, own) == 6 * GIB
    limit("system.slice/pathweave.service/memory.max", str(2 * GIB))
    assert cgroup_limit(root, own) == 2 * GIB
    own.write_text("12:cpu,cpuacct:/docker/abc\n11:memory:/docker/abc\n")  # v1
    limit("memory/docker/abc/memory.limit_in_bytes", "9223372036854771712")  # v1's "no limit"
    assert cgroup_limit(root, own) is None
    limit("memory/docker/memory.limit_in_bytes", str(3 * GIB))
    assert cgroup_limit(root, own) == 3 * GIB
    assert cgroup_limit(root, tmp_path / "absent") is None
