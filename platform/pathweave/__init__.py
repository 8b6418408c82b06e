"""Pathweave core: graph model, store, embeddings, retrieval and evaluation.

The core never imports the ingestion package (``pathweave_ingest``) or the
service (``pathweave_api``).

Native code runs on any x86-64-v3 host: oneDNN (torch's CPU kernels) is capped below
AMX (``ONEDNN_MAX_CPU_ISA=AVX512_CORE_BF16`` unless the environment sets it), since a VM may
advertise AMX, grant the tile permission and still fault on the first tile instruction; the
managed llama.cpp is built without AMX and AVX-512 (``tools/build-llama.sh``).
"""

import os as _os

_os.environ.setdefault("ONEDNN_MAX_CPU_ISA", "AVX512_CORE_BF16")

__version__ = "0.1.0"
