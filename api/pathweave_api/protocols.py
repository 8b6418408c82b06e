"""uvicorn HTTP protocols whose own 400 answers are problem documents.

uvicorn rejects a request it cannot parse (a malformed ``Content-Length``, a bad
request line or header) before the application sees it, with a plain-text 400.
These subclasses answer the same 400 as an RFC 9457 ``application/problem+json``
document, like every other error of the API. ``pathweave serve`` uses
:func:`http_protocol` (httptools when installed, else h11).
"""

from __future__ import annotations

import json

from pathweave_api.problems import PROBLEM_MEDIA_TYPE


def problem_400(message: str) -> bytes:
    """The body of a 400 for a request uvicorn could not parse."""
    return json.dumps({"type": "urn:pathweave:problem:malformed-request", "title": "Bad Request", "status": 400,
                       "detail": f"malformed HTTP request: {message}", "instance": None}).encode()


def _headers(body: bytes) -> list[tuple[bytes, bytes]]:
    return [(b"content-type", PROBLEM_MEDIA_TYPE.encode()), (b"content-length", str(len(body)).encode()),
            (b"connection", b"close")]


try:
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

    class ProblemHttpToolsProtocol(HttpToolsProtocol):
        """httptools protocol answering unparsable requests with a problem document."""

        def send_400_response(self, msg: str) -> None:
            body = problem_400(msg)
            head = [b"HTTP/1.1 400 Bad Request\r\n"]
            for name, value in [*self.server_state.default_headers, *_headers(body)]:
                head.extend([name, b": ", value, b"\r\n"])
            self.transport.write(b"".join([*head, b"\r\n", body]))
            self.transport.close()
except ImportError:  # pragma: no cover - httptools is optional
    ProblemHttpToolsProtocol = None  # type: ignore[assignment,misc]

from uvicorn.protocols.http.h11_impl import H11Protocol  # noqa: E402


class ProblemH11Protocol(H11Protocol):
    """h11 protocol answering unparsable requests with a problem document."""

    def send_400_response(self, msg: str) -> None:
        import h11

        body = problem_400(msg)
        event = h11.Response(status_code=400, headers=_headers(body), reason=b"Bad Request")
        self.transport.write(self.conn.send(event))
        self.transport.write(self.conn.send(h11.Data(data=body)))
        self.transport.write(self.conn.send(h11.EndOfMessage()))
        self.transport.close()


def http_protocol() -> type:
    """The protocol class ``pathweave serve`` gives uvicorn (``http=``)."""
    return ProblemHttpToolsProtocol or ProblemH11Protocol
