"""The topologies a query process holds for its tenants, bounded (:class:`TopologyCache`):
whole topologies (:class:`~pathweave.graph.topology.Topology`) or frontiers
(:class:`~pathweave.graph.frontier.FrontierTopology`, setting ``query.topology``)."""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from typing import TYPE_CHECKING

from pathweave.graph.frontier import FrontierTopology
from pathweave.graph.topology import Topology

if TYPE_CHECKING:
    from pathweave.settings import QuerySettings
    from pathweave.store.graph_store import GraphStore


class TopologyCache:
    """Topologies of the tenants this process serves: at most ``max_tenants`` and about
    ``max_bytes`` (:attr:`Topology.bytes`; least recently used evicted first, never the
    topology a query is asking for), none unused for more than ``idle_s`` seconds."""

    def __init__(self, max_tenants: int = 16, idle_s: float = 3600.0, node_cache_entries: int = 50_000,
                 max_bytes: int | None = None, frontier_bytes: int | None = None) -> None:
        self.max_tenants = max_tenants
        self.idle_s = idle_s
        self.node_cache_entries = node_cache_entries
        self.max_bytes = max_bytes
        self.frontier_bytes = frontier_bytes  # None: tenants' topologies are whole
        self.evicted = 0  # topologies evicted over the bounds (not counting idle ones)
        self._topologies: OrderedDict[tuple[str, bool], Topology] = OrderedDict()
        self._lock = threading.Lock()

    @classmethod
    def of(cls, query: QuerySettings) -> TopologyCache:
        """The cache section ``query`` configures (``topology``, its bounds)."""
        return cls(query.topology_max_tenants, query.topology_idle_s, query.node_cache_entries,
                   query.topology_max_mb << 20, query.frontier_max_mb << 20 if query.topology == "frontier" else None)

    def get(self, store: GraphStore, version: int | None = None, whole: bool = False) -> Topology:
        """The tenant's topology, refreshed to the store's graph version (``version``: as the
        caller read it, :meth:`Topology.refresh`): a
        :class:`~pathweave.graph.frontier.FrontierTopology` when the cache holds frontiers
        and ``whole`` is not asked. Then, and after each view a query builds, the others are
        evicted, least recently used first, while the cache holds more than ``max_bytes``."""
        now = time.monotonic()
        key = (store.tenant, whole or self.frontier_bytes is None)
        with self._lock:
            for stale in [k for k, topo in self._topologies.items() if now - topo.last_used > self.idle_s]:
                del self._topologies[stale]
            topology = self._topologies.get(key)
            if topology is None:
                topology = Topology(store.tenant, self.node_cache_entries) if key[1] else \
                    FrontierTopology(store.tenant, self.node_cache_entries, self.frontier_bytes)
                self._topologies[key] = topology
                if self.max_bytes is not None:
                    topology.on_built = lambda tenant: self._shrink(keep=key)
            self._topologies.move_to_end(key)
            while len(self._topologies) > self.max_tenants:
                self._topologies.popitem(last=False)
                self.evicted += 1
        if topology.refresh(store, version) and self.max_bytes is not None:
            self._shrink(keep=key)
        return topology

    def held_version(self, tenant: str) -> int | None:
        """The graph version of ``tenant``'s topology (the kind its queries use) as this
        process holds it (no store read), None when none is held yet."""
        with self._lock:
            topology = self._topologies.get((tenant, self.frontier_bytes is None))
        return topology.version if topology is not None and topology.version >= 0 else None

    def _shrink(self, keep: tuple[str, bool]) -> None:
        """Evict the least recently used topologies other than ``keep`` while the total is
        over ``max_bytes`` (a single tenant larger than the bound stays: its queries need it)."""
        with self._lock:
            total = sum(topo.bytes for topo in self._topologies.values())
            for key in list(self._topologies):
                if total <= self.max_bytes:
                    break
                if key != keep:
                    total -= self._topologies.pop(key).bytes
                    self.evicted += 1

    def stats(self) -> dict[str, int]:
        """What the process holds for its tenants: ``tenants``, ``node_cache_rows``,
        ``node_cache_bytes`` (approximate, :func:`pathweave.graph.node_cache.row_bytes`), the
        topologies' ``topology_bytes`` (approximate, :attr:`Topology.bytes`), ``evicted``
        (over the bounds so far), ``passages`` and ``entities`` (ids interned so far)."""
        with self._lock:
            topologies = list(self._topologies.values())
        return {"tenants": len(topologies), "node_cache_rows": sum(len(t.nodes) for t in topologies),
                "node_cache_bytes": sum(t.nodes.bytes for t in topologies),
                "topology_bytes": sum(t.bytes for t in topologies), "evicted": self.evicted,
                "passages": sum(len(t.passage_ids) for t in topologies),
                "entities": sum(len(t.entity_ids) for t in topologies)}

    def __len__(self) -> int:
        return len(self._topologies)
