"""LLM features' core: the OpenAI-compatible client, the managed local model server
(llama.cpp) and its packaged GGUF models, and answer-token confidence. Their settings are
the sections ``llm`` and ``prunerag`` of :mod:`pathweave.settings`.

Optional: the client needs ``openai`` and the managed server ``llama-cpp-python``
(extra ``pathweave[llm]``); nothing LLM-free imports this package.
"""
