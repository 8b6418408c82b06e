"""One client for any OpenAI-compatible chat endpoint (vLLM, Ollama, llama.cpp, OpenAI),
on the official ``openai`` SDK.

:func:`connect` returns a client for ``LLMSettings.base_url``, or for the managed local
server (started on demand, :mod:`pathweave.servers.llm_server`) when it is empty. Every call
returns a :class:`Completion` with the text, per-token log-probabilities (when asked),
token counts and latency; the client also adds them up (``usage()``), thread-safe, at
most ``concurrency`` requests in flight. Failures (unreachable endpoint, timeout, HTTP
error, no logprobs where asked) raise :class:`LLMError`: callers decide what a failed
call means (PruneRAG: a dead leaf).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlparse

import httpx

from pathweave.errors import LLMUnavailable, PathweaveError
from pathweave.settings import LLMSettings
from pathweave.telemetry import traced


class LLMError(PathweaveError, RuntimeError):
    """An LLM request failed: endpoint unreachable, timeout, HTTP error, missing logprobs.
    Not transient in :func:`pathweave.errors.is_transient`'s sense (that is the store's):
    the callers that ask the model say what a failed request means."""


@dataclass(frozen=True)
class TokenLogprob:
    """One generated token: its text, natural-log probability and UTF-8 bytes (when sent)."""

    token: str
    logprob: float
    bytes: tuple[int, ...] | None = None


@dataclass
class Completion:
    """One chat completion: ``text``; ``tokens`` (with logprobs, empty unless asked);
    ``prompt_tokens``/``completion_tokens`` (tokens, as the endpoint counts them);
    ``latency_ms`` (wall time of the request, ms); ``model`` (as the endpoint names it)."""

    text: str
    tokens: list[TokenLogprob] = field(default_factory=list)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_ms: float = 0.0
    model: str = ""


@dataclass
class Usage:
    """What calls cost, added up: ``calls``, ``prompt_tokens``, ``completion_tokens``
    (tokens), ``latency_ms`` (sum of request times, ms), ``failures``."""

    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_ms: float = 0.0
    failures: int = 0

    def add(self, completion: Completion) -> None:
        self.calls += 1
        self.prompt_tokens += completion.prompt_tokens
        self.completion_tokens += completion.completion_tokens
        self.latency_ms += completion.latency_ms


class LLMClient:
    """Chat completions against one OpenAI-compatible endpoint.

    ``base_url``: ``http://host:port/v1``; ``schema_style``: ``json_schema`` (OpenAI's
    structured outputs) or ``json_object`` (llama-cpp-python's ``{"type": "json_object",
    "schema": ...}``). ``locate``: for the managed server, where it listens now (starting it
    again when it died): a request that finds the endpoint unreachable asks it once and is
    retried there, so the client follows a server restarted on another port. ``exited``: for
    the managed server, given the URL that was unreachable, the error to raise when the server
    there exited unasked (:class:`~pathweave.servers.llm_server.LLMServerExited`: its signal
    and log, raised once; the next request relocates), or None.
    Thread-safe.
    """

    def __init__(self, base_url: str, model: str, api_key: str = "", timeout_s: float = 300.0,
                 max_tokens: int = 256, concurrency: int = 1, temperature: float = 0.0,
                 schema_style: str = "json_schema", locate: Callable[[], str] | None = None,
                 exited: Callable[[str], BaseException | None] | None = None) -> None:
        self.model = model
        self.max_tokens = max_tokens
        self.temperature = temperature
        self.schema_style = schema_style
        self._api_key, self._timeout_s, self._locate, self._exited = api_key or "not-needed", timeout_s, locate, exited
        self._endpoint(base_url)
        self._slots = threading.BoundedSemaphore(max(1, concurrency))
        self._lock = threading.Lock()
        self._usage = Usage()

    def _endpoint(self, base_url: str) -> None:
        from openai import OpenAI

        self.base_url = base_url
        self._openai = OpenAI(base_url=base_url, api_key=self._api_key, timeout=self._timeout_s, max_retries=0)

    def _crashed(self, tried: str) -> None:
        """After ``tried`` was unreachable: raise the managed server's exit when it exited
        unasked (counted as a failure), so the caller hears of a crash as a crash."""
        crashed = self._exited(tried) if self._exited is not None else None
        if crashed is not None:
            self._failed()
            raise crashed

    def _relocated(self, tried: str) -> bool:
        """After ``tried`` was unreachable: move to where :attr:`_locate` says the managed
        server listens now (another thread may have moved already). False without ``locate``
        or when it fails."""
        if self._locate is None:
            return False
        with self._lock:
            if self.base_url != tried:
                return True
            try:
                self._endpoint(self._locate())
            except LLMUnavailable:  # the server met on the way exited (or its restart did): said as it is
                self._failed()
                raise
            except Exception:  # noqa: BLE001 - the original error is what the caller sees
                return False
            return True

    def usage(self) -> Usage:
        """A copy of what this client's calls have cost so far."""
        with self._lock:
            return Usage(**vars(self._usage))

    def response_format(self, schema: dict | None) -> dict:
        """The ``response_format`` asking for JSON (matching ``schema`` when given)."""
        if schema is None:
            return {"type": "json_object"}
        if self.schema_style == "json_object":
            return {"type": "json_object", "schema": schema}
        return {"type": "json_schema", "json_schema": {"name": "output", "schema": schema, "strict": True}}

    def chat(self, messages: list[dict], *, max_tokens: int | None = None, json: bool = False,
             schema: dict | None = None, logprobs: bool = False) -> Completion:
        """One greedy (``temperature``) completion of ``messages`` (``[{role, content}]``).

        ``json``/``schema``: constrain the output to a JSON object (matching ``schema``);
        ``logprobs``: return each generated token's log-probability (raises LLMError when
        the endpoint sends none). Raises :class:`LLMError` on any request failure, and
        :class:`~pathweave.servers.llm_server.LLMServerExited` (an
        :class:`~pathweave.errors.LLMUnavailable`, not an LLMError) when the managed server
        exited unasked. In a
        traced query, a span ``llm.chat`` with the model and the tokens in and out.
        """
        kwargs: dict = {"model": self.model, "messages": messages, "temperature": self.temperature,
                        "max_tokens": max_tokens or self.max_tokens}
        if json or schema is not None:
            kwargs["response_format"] = self.response_format(schema)
        if logprobs:
            kwargs.update(logprobs=True, top_logprobs=1)
        with traced("llm.chat", **{"gen_ai.request.model": self.model, "gen_ai.request.max_tokens":
                                   kwargs["max_tokens"]}) as span:
            completion = self._chat(kwargs, logprobs)
            if span is not None:
                span.set_attributes({"gen_ai.response.model": completion.model,
                                     "gen_ai.usage.input_tokens": completion.prompt_tokens,
                                     "gen_ai.usage.output_tokens": completion.completion_tokens})
            return completion

    def _chat(self, kwargs: dict, logprobs: bool) -> Completion:
        """The request of :meth:`chat` (``kwargs`` for ``chat.completions.create``)."""
        import openai

        started = time.perf_counter()
        try:
            with self._slots:
                endpoint, url = self._openai, self.base_url
                try:
                    response = endpoint.chat.completions.create(**kwargs)
                except openai.APITimeoutError:
                    raise  # the server runs, it is slow: no second try
                except openai.APIConnectionError:
                    self._crashed(url)
                    if not self._relocated(url):
                        raise
                    response = self._openai.chat.completions.create(**kwargs)  # once, where it runs now
        except openai.APITimeoutError as exc:
            self._failed()
            raise LLMError(f"LLM request timed out at {self.base_url}: {exc}") from None
        except openai.APIConnectionError as exc:
            self._failed()
            raise LLMError(f"LLM endpoint {self.base_url} unreachable: {exc}") from None
        except openai.APIError as exc:
            self._failed()
            raise LLMError(f"LLM endpoint {self.base_url} failed: {exc}") from None
        latency = (time.perf_counter() - started) * 1000
        if not response.choices:
            self._failed()
            raise LLMError(f"LLM endpoint {self.base_url} returned no choices")
        choice = response.choices[0]
        tokens = []
        if logprobs:
            content = getattr(choice.logprobs, "content", None) if choice.logprobs is not None else None
            if not content:
                self._failed()
                raise LLMError(f"LLM endpoint {self.base_url} returned no token logprobs "
                               f"(model {self.model}); PruneRAG needs an endpoint that sends them")
            tokens = [TokenLogprob(t.token, float(t.logprob), tuple(t.bytes) if t.bytes is not None else None)
                      for t in content]
        usage = response.usage
        completion = Completion(
            text=choice.message.content or "", tokens=tokens,
            prompt_tokens=usage.prompt_tokens if usage else 0, completion_tokens=usage.completion_tokens if usage else 0,
            latency_ms=round(latency, 1), model=response.model or self.model)
        with self._lock:
            self._usage.add(completion)
        return completion

    def chat_stream(self, messages: list[dict], *, max_tokens: int | None = None) -> "CompletionStream":
        """One greedy (``temperature``) completion of ``messages``, streamed: iterate the
        returned :class:`CompletionStream` for the text as the model writes it; closing it
        early ends the request (the server stops generating). Free text only (no schema:
        a constrained JSON object is no text to show as it comes)."""
        return CompletionStream(self, {"model": self.model, "messages": messages, "temperature": self.temperature,
                                       "max_tokens": max_tokens or self.max_tokens})

    def _stream_request(self, kwargs: dict):
        """The streamed request of :class:`CompletionStream` (before its first piece: an
        unreachable managed server's exit is raised, or the request goes once to where it
        runs now, as :meth:`chat`'s)."""
        import openai

        url = self.base_url
        try:
            return self._openai.chat.completions.create(**kwargs, stream=True, stream_options={"include_usage": True})
        except openai.APITimeoutError:
            raise
        except openai.APIConnectionError:
            self._crashed(url)
            if not self._relocated(url):
                raise
            return self._openai.chat.completions.create(**kwargs, stream=True, stream_options={"include_usage": True})

    def _failed(self) -> None:
        with self._lock:
            self._usage.failures += 1

    def check(self, logprobs: bool = False) -> None:
        """Fail early: one tiny completion (with logprobs when a feature needs them).
        Raises :class:`LLMError` saying what is wrong."""
        self.chat([{"role": "user", "content": "Reply with OK."}], max_tokens=2, logprobs=logprobs)


class CompletionStream:
    """A streamed completion (:meth:`LLMClient.chat_stream`): iterating yields the text's
    pieces (str) as they arrive; then :attr:`completion` holds the whole
    :class:`Completion` (tokens as the endpoint counts them when it sends its usage, wall
    time in ms). :meth:`close` ends the request early, also from another thread. Raises
    :class:`LLMError` while iterating when the request fails."""

    def __init__(self, client: LLMClient, kwargs: dict) -> None:
        self._client, self._kwargs = client, kwargs
        self._response = None
        self._closed = False
        self.completion: Completion | None = None

    def __iter__(self):
        """The pieces, under a span ``llm.chat`` (model, tokens in and out) when traced."""
        with traced("llm.chat", **{"gen_ai.request.model": self._kwargs["model"], "pathweave.streamed": True,
                                   "gen_ai.request.max_tokens": self._kwargs["max_tokens"]}) as span:
            yield from self._pieces()
            if span is not None and self.completion is not None:
                span.set_attributes({"gen_ai.response.model": self.completion.model,
                                     "gen_ai.usage.input_tokens": self.completion.prompt_tokens,
                                     "gen_ai.usage.output_tokens": self.completion.completion_tokens})

    def _pieces(self):
        import openai

        started = time.perf_counter()
        parts: list[str] = []
        usage, model = None, self._kwargs["model"]
        try:
            with self._client._slots:
                if self._closed:
                    return
                self._response = self._client._stream_request(self._kwargs)
                for chunk in self._response:
                    if self._closed:  # closed while the request was being made, or between pieces
                        break
                    usage = chunk.usage or usage
                    model = chunk.model or model
                    for choice in chunk.choices:
                        piece = choice.delta.content if choice.delta is not None else None
                        if piece:
                            parts.append(piece)
                            yield piece
                if self._closed:  # closed early: the text is not the whole completion
                    return
        except Exception as exc:  # noqa: BLE001 - closed from another thread: whatever the read raised, it ends
            if self._closed:
                return
            if not isinstance(exc, (openai.APIError, httpx.HTTPError)):
                raise
            self._client._failed()
            raise LLMError(f"LLM endpoint {self._client.base_url} failed: {exc}") from None
        finally:
            self.close()
        self.completion = Completion(
            text="".join(parts), prompt_tokens=usage.prompt_tokens if usage else 0,
            completion_tokens=usage.completion_tokens if usage else len(parts),
            latency_ms=round((time.perf_counter() - started) * 1000, 1), model=model)
        with self._client._lock:
            self._client._usage.add(self.completion)

    def close(self) -> None:
        """End the request (the HTTP response is closed: the server stops generating)."""
        self._closed = True
        response = self._response
        if response is not None:
            response.close()


def connect(data_dir: Path, llm: LLMSettings) -> LLMClient:
    """A client for ``llm.base_url``, or for the managed local server of ``data_dir``
    (started on demand, owned by this process: it stops when this process exits; a request
    that finds it exited unasked raises its exit, :class:`~pathweave.servers.llm_server.LLMServerExited`,
    and the next one starts it again). Raises :class:`~pathweave.errors.LLMUnavailable` when
    the extra ``pathweave[llm]`` is missing, the server does not start, or it exited
    (:class:`~pathweave.servers.llm_server.LLMServerExited`, which is one)."""
    if llm.managed:
        from pathweave.servers import llm_server

        def locate() -> str:  # where the managed server runs now, started again when it died
            return llm_server.start(data_dir, llm, owner=os.getpid()).base_url

        def exited(url: str) -> BaseException | None:  # the server at ``url`` crashed: say so, once
            crashed = llm_server.exit_at(data_dir, urlparse(url).port)
            return llm_server.LLMServerExited(crashed) if crashed is not None else None

        try:
            base_url = locate()
        except LLMUnavailable:  # it exited: said as it is
            raise
        except llm_server.LLMServerError as exc:
            raise LLMUnavailable(f"no LLM to answer with: {exc}") from exc
        style, found, died = "json_object", locate, exited
    else:
        base_url, style, found, died = llm.base_url.rstrip("/"), "json_schema", None, None
    if llm.response_format != "auto":
        style = llm.response_format
    return LLMClient(base_url, llm.model, llm.api_key.get_secret_value(), llm.timeout_s, llm.max_tokens,
                     llm.concurrency, llm.temperature, style, locate=found, exited=died)
