"""Authentication of ``/v1`` requests (FastAPI dependencies :data:`QueryKey`,
:data:`IngestKey`; scope ``admin`` includes both): the bearer API key, verified against the
keys in the graph store (argon2id), failed attempts throttled per key id and client address
(the address the trusted proxies report), then the key's rate limit, then its scope;
401/429/403 problems otherwise, 503 when the store cannot be reached."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request, Security
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from pathweave_api import metrics
from pathweave_api.keys import ApiKey, KeyStore
from pathweave_api.limits import KdfBusy, too_many
from pathweave_api.problems import ApiProblem
from pathweave_api.services import ServicesDep

bearer = HTTPBearer(auto_error=False, description="An API key: `Authorization: Bearer pw_<id>_<secret>`.")

def principal(request: Request, svc: ServicesDep,
              creds: Annotated[HTTPAuthorizationCredentials | None, Security(bearer)]) -> ApiKey:
    """The request's API key: 401 when missing or invalid, 429 when throttled or over its rate."""
    return authenticate(svc, creds.credentials if creds is not None else None,
                        request.client.host if request.client else None)


def authenticate(svc, token: str | None, address: str | None) -> ApiKey:
    """The API key ``token`` (a bearer credential, None when the request sent none) from the
    client ``address``, under the failed-attempt throttle and the key's rate limit: raises
    :class:`~pathweave_api.problems.ApiProblem` 401 when missing or invalid, 429 when throttled
    or over its rate, 503 when the store cannot be reached (the REST routes and the MCP
    endpoint, :mod:`pathweave_api.mcp_server`)."""
    if not token or not token.strip():
        metrics.AUTH_FAILURES.inc()
        raise ApiProblem(401, "missing API key: send 'Authorization: Bearer <key>'", "missing-api-key",
                         {"WWW-Authenticate": "Bearer"})
    token = token.strip()
    key_id = KeyStore.key_id_of(token)
    if not svc.keys.is_verified(token):  # a token verified lately is never throttled
        wait = svc.auth_throttle.wait(key_id, address)
        if wait > 0:
            metrics.RATE_LIMITED.inc()
            raise too_many("too many failed authentication attempts for this key or client", "auth-throttled",
                           wait)
    try:
        key = svc.guard(svc.keys.authenticate, token, kdf_slot=svc.auth_throttle.kdf_slot)
    except KdfBusy:
        metrics.RATE_LIMITED.inc()
        raise too_many("too many API keys being verified at once", "auth-busy", 1.0) from None
    if key is None:
        metrics.AUTH_FAILURES.inc()
        svc.auth_throttle.failed(key_id, address)
        raise ApiProblem(401, "invalid or revoked API key", "invalid-api-key",
                         {"WWW-Authenticate": 'Bearer error="invalid_token"'})
    rate = svc.api.rate_limit_per_s if key.rate_limit_per_s is None else key.rate_limit_per_s
    wait = svc.limiter.acquire(key.key_id, rate, svc.api.rate_limit_burst)
    if wait > 0:
        metrics.RATE_LIMITED.inc()
        raise too_many(f"rate limit exceeded ({rate:g} requests/s)", "rate-limited", wait)
    return key

Principal = Annotated[ApiKey, Depends(principal)]


def require_scope(key: ApiKey, scope: str) -> ApiKey:
    """``key`` when its scope includes ``scope`` (:data:`pathweave_api.keys.SCOPES`); raises
    :class:`~pathweave_api.problems.ApiProblem` 403 ``insufficient-scope`` otherwise."""
    if not key.allows(scope):
        raise ApiProblem(403, f"this API key has scope {key.scope!r}; this call needs {scope!r} "
                              f"(create one with `pathweave keys create --scope {scope}`)", "insufficient-scope")
    return key


def scoped(scope: str):
    """A dependency: the request's API key (:func:`principal`) when its scope includes
    ``scope`` (:func:`require_scope`)."""
    def check(key: Principal) -> ApiKey:
        return require_scope(key, scope)
    return check


QueryKey = Annotated[ApiKey, Depends(scoped("query"))]
"""A key that may query and read reasoning records (every scope)."""
IngestKey = Annotated[ApiKey, Depends(scoped("ingest"))]
"""A key that may also submit, replace and delete documents and read jobs."""
