"""LLM features' core: settings, the OpenAI-compatible client, the managed local model
server (llama.cpp) and its packaged GGUF models, and answer-token confidence.

Optional: the client needs ``openai`` and the managed server ``llama-cpp-python``
(extra ``pathweave[llm]``); nothing LLM-free imports this package.
"""
