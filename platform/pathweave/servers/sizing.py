"""The managed store's memory, derived from the machine it runs on.

``store.server_heap`` and ``store.server_pagecache`` are ``auto`` by default: the managed store
takes :data:`STORE_SHARE` of the machine's memory (:func:`machine_memory`: the physical memory,
or the container's cgroup limit when lower), leaving the rest to the API, the workers, their
models and the operating system's file cache. ArcadeDB keeps its graph and its vector indexes
on the JVM heap, so it gets the whole share as heap; Neo4j holds the store files in its page
cache off the heap, so it gets half as heap and half as page cache (Neo4j's operations manual,
"Memory configuration"). The heap stays at most :data:`MAX_HEAP` (the JVM's compressed object
pointers end above 32 GiB) and at least :data:`MIN_MEMORY`. An explicit size (``2g``, ``512m``)
is used as given.
"""

from __future__ import annotations

from pathlib import Path

import psutil

from pathweave.settings import parse_size

#: Share of the machine's memory the managed store takes (heap plus page cache).
STORE_SHARE = 0.5
#: Least heap and least page cache sized automatically (bytes).
MIN_MEMORY = 512 * 2**20
#: Most heap sized automatically (bytes): below 32 GiB, where compressed object pointers end.
MAX_HEAP = 31 * 2**30
#: A cgroup's "no limit" values are at least this (bytes).
_UNLIMITED = 2**60


def java_size(size: int) -> str:
    """A size in bytes as a Java memory size in whole MiB (``'2048m'``)."""
    return f"{max(1, size // 2**20)}m"


def cgroup_limit(root: Path = Path("/sys/fs/cgroup"), own: Path = Path("/proc/self/cgroup")) -> int | None:
    """The lowest memory limit (bytes) on this process's cgroup and its parents, or None when
    none is set: cgroup v2 ``memory.max`` from the process's group (``own``: ``0::/path``) up to
    ``root``, or v1 ``memory/<path>/memory.limit_in_bytes`` (a systemd ``MemoryMax`` is one
    of these); ``max`` and v1's huge "no limit" values are no limit."""
    try:
        lines = own.read_text().splitlines()
    except OSError:
        lines = []
    candidates: list[Path] = []
    for line in lines:
        _, controllers, path = (line.split(":", 2) + ["", ""])[:3]
        relative = Path(path.lstrip("/"))
        if controllers == "":  # v2
            candidates += [root / part / "memory.max" for part in [relative, *relative.parents]]
        elif "memory" in controllers.split(","):  # v1
            candidates += [root / "memory" / part / "memory.limit_in_bytes" for part in [relative, *relative.parents]]
    candidates += [root / "memory.max", root / "memory" / "memory.limit_in_bytes"]
    limits = []
    for path in candidates:
        try:
            text = path.read_text().strip()
        except OSError:
            continue
        if text.isdigit() and int(text) < _UNLIMITED:
            limits.append(int(text))
    return min(limits) if limits else None


def machine_memory() -> int:
    """The memory this machine gives its processes, in bytes: the physical memory, or the
    cgroup's limit when lower (a container's)."""
    total = psutil.virtual_memory().total
    limit = cgroup_limit()
    return min(total, limit) if limit else total


def store_memory(backend: str, heap: str, pagecache: str, memory: int | None = None) -> tuple[str, str]:
    """The managed store's ``(heap, page cache)`` as Java sizes: each ``auto`` one derived from
    ``memory`` bytes (default :func:`machine_memory`) as the module says, each other one as
    given. ``backend``: ``arcadedb`` (no page cache: its share goes to the heap; the page cache
    returned is unused) or ``neo4j``. Raises ValueError for a size that is neither ``auto`` nor
    a Java size."""
    share = int((memory if memory is not None else machine_memory()) * STORE_SHARE)
    heap_share = share if backend == "arcadedb" else share // 2
    auto_heap = java_size(max(MIN_MEMORY, min(MAX_HEAP, heap_share)))
    auto_pagecache = java_size(max(MIN_MEMORY, share - min(MAX_HEAP, heap_share)))
    return (auto_heap if heap == "auto" else java_size(parse_size(heap)),
            auto_pagecache if pagecache == "auto" else java_size(parse_size(pagecache)))
