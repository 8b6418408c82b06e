"""AutoPrunedRetriever (spec §3; seed apr-pruning-minimal-reasoning-graphs.md): the codebook
in the graph, runs, coarse-to-fine retrieval over facts / earlier questions / earlier
answers, selection per channel, the compact prompt and reuse across a session.

Modules: :mod:`.codebook` (codes and the id-indexed view), :mod:`.runs` (segmentation),
:mod:`.writes` (run rows), :mod:`.scoring` (coarse and fine scores), :mod:`.channel_actions`
(per-channel actions), :mod:`.prompt` (three renderings), :mod:`.memory` (sessions and
reuse), :mod:`.retrieval` (:func:`retrieve`, mode ``apr``).

:func:`retrieve` is the entry point for one question with a choice of actions per channel
(the DPO selector's environment)::

    from pathweave.apr import retrieve
    out = retrieve(retriever.resources, "Who founded X?", session_id=None,
                   actions={"facts": "unique", "questions": "include_all", "answers": "not_include"})
    out.context.prompt_tokens          # tokens of the prompt sent
    recall = len(gold_doc_ids & set(out.context.doc_ids)) / len(gold_doc_ids)
"""

from pathweave.apr.retrieval import AprOutcome, retrieve
from pathweave.apr.channel_actions import ACTIONS, CHANNELS

__all__ = ["ACTIONS", "CHANNELS", "AprOutcome", "retrieve"]
