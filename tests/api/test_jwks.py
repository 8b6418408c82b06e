"""End users' ID tokens verified against the issuer's JWKS (``pathweave_api.callers``), served
by a real HTTP server: a token signed by a published key verifies, and tokens naming key ids
the set does not hold (anyone with a delegate key can send them) make the API fetch the set
again at most once per cooldown, not once per request."""

from __future__ import annotations

import json
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa

from pathweave.settings import AccessSettings
from pathweave_api.callers import _jwks_client, id_token_access
from pathweave_api.problems import ApiProblem


@pytest.fixture()
def issuer():
    """A JWKS endpoint holding one RSA key (kid ``k1``): ``(settings, private key, fetch count)``."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    public = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(key.public_key()))
    body = json.dumps({"keys": [{**public, "kid": "k1", "use": "sig", "alg": "RS256"}]}).encode()
    fetches = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - the stdlib's name
            fetches.append(time.monotonic())
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, name="jwks", daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{server.server_address[1]}/jwks-{uuid.uuid4().hex}.json"  # a fresh client per test
    settings = AccessSettings(id_token_issuer="https://idp.example", id_token_audience="pathweave",
                              id_token_jwks_url=url)
    try:
        yield settings, key, fetches
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)
        _jwks_client.cache_clear()


def _token(key, kid: str) -> str:
    claims = {"iss": "https://idp.example", "aud": "pathweave", "sub": "ana", "exp": int(time.time()) + 300,
              "groups": ["finance"]}
    return jwt.encode(claims, key, algorithm="RS256", headers={"kid": kid})


def test_unknown_key_ids_do_not_fetch_the_key_set_per_request(issuer):
    settings, key, fetches = issuer
    access = id_token_access(_token(key, "k1"), settings)
    assert "user:ana" in access.principals and len(fetches) == 1
    for _ in range(20):
        with pytest.raises(ApiProblem) as refused:
            id_token_access(_token(key, f"made-up-{uuid.uuid4().hex[:6]}"), settings)
        assert refused.value.status == 401
    assert len(fetches) <= 2, fetches  # one refetch at most within the cooldown
    assert "user:ana" in id_token_access(_token(key, "k1"), settings).principals
