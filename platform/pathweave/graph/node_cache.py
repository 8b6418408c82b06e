"""A bounded least-recently-used cache of node rows read by queries.

Passages, propositions and entities are immutable under their content-hash ids, so a row
read once stays right until the node is deleted; the tenant's topology evicts the ids a
change removed (:mod:`pathweave.graph.topology`). Bounded by entries, so a process never holds
more of a tenant than ``max_entries`` rows whatever the corpus size (a row with a 384-d
vector is ~2 KB: 50,000 rows ~ 100 MB).
"""

from __future__ import annotations

import sys
import threading
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from typing import Any


def row_bytes(key: tuple[str, str], row: Any) -> int:
    """Approximate bytes a cached row holds: its key, the tuple and each field
    (``sys.getsizeof``, so a 2,048-character vector string counts ~2.1 KB)."""
    fields = row if isinstance(row, tuple) else tuple(vars(row).values()) if hasattr(row, "__dict__") else (row,)
    return sys.getsizeof(key) + sys.getsizeof(key[1]) + sys.getsizeof(row) + sum(sys.getsizeof(f) for f in fields)


class NodeCache:
    """``(kind, id) -> row`` with least-recently-used eviction beyond ``max_entries``;
    :attr:`bytes` is the rows' approximate size (:func:`row_bytes`), exported by the API as
    ``pathweave_node_cache_bytes``."""

    def __init__(self, max_entries: int = 50_000) -> None:
        self.max_entries = max_entries
        self._rows: OrderedDict[tuple[str, str], Any] = OrderedDict()
        self._kinds: set[str] = set()  # every kind of row put so far (a handful)
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0
        self.bytes = 0

    def lookup(self, kind: str, ids: Sequence[str]) -> tuple[dict[str, Any], list[str]]:
        """The cached rows of ``ids`` (``{id: row}``, marked recently used) and the ids not
        cached (each once, in order): the caller reads those and :meth:`put` s them."""
        out: dict[str, Any] = {}
        with self._lock:
            for node_id in ids:
                row = self._rows.get((kind, node_id))
                if row is not None:
                    self._rows.move_to_end((kind, node_id))
                    out[node_id] = row
            missing = [i for i in dict.fromkeys(ids) if i not in out]
            self.hits += len(out)
            self.misses += len(missing)
        return out, missing

    def put(self, kind: str, rows: dict[str, Any]) -> None:
        """Cache ``rows`` (``{id: row}``, read from the store), evicting the least recently
        used beyond ``max_entries``."""
        with self._lock:
            self._kinds.add(kind)
            for node_id, row in rows.items():
                key = (kind, node_id)
                old = self._rows.get(key)
                if old is not None:
                    self.bytes -= row_bytes(key, old)
                self._rows[key] = row
                self.bytes += row_bytes(key, row)
            while len(self._rows) > self.max_entries:
                self.bytes -= row_bytes(*self._rows.popitem(last=False))

    def evict(self, ids: Iterable[str]) -> None:
        """Forget every kind of row of ``ids`` (nodes a change removed, passages whose
        documents changed): one lookup per id and kind, whatever the cache holds."""
        gone = set(ids)
        if not gone:
            return
        with self._lock:
            for key in [(kind, node_id) for kind in self._kinds for node_id in gone]:
                row = self._rows.pop(key, None)
                if row is not None:
                    self.bytes -= row_bytes(key, row)

    def __len__(self) -> int:
        return len(self._rows)
