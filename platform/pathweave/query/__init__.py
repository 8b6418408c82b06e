"""The query entry point: the registry of retrieval modes (:mod:`.modes`) and the
:class:`~.retriever.Retriever` that checks a request, dispatches it to its mode with the
query resources, runs the answer step and writes the reasoning record. Sits above
:mod:`pathweave.retrieval` and :mod:`pathweave.apr`, whose modes it dispatches to."""
