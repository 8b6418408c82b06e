"""Who a ``/v1`` request reads for (:data:`Caller`, a FastAPI dependency giving the request's
:class:`pathweave.access.Access`).

A key reads what its principals read (a key without principals: the whole tenant). A key
with ``delegate`` may ask on behalf of an end user instead, with one of two headers:

- ``X-Pathweave-On-Behalf-Of: group:finance,user:4711``: the user's principals, as the
  internal tool knows them;
- ``X-Pathweave-Id-Token: <JWT>``: the user's ID token, verified with PyJWT against the
  configured issuer (``access.id_token_*``: signature by the issuer's JWKS or public key,
  issuer, audience, expiry and subject required); the principals are ``user:<sub>`` and
  ``group:<g>`` for each ``g`` of the configured claim.

Either header from a key without ``delegate`` is a 403 ``delegate-required``; a malformed
principal a 422; a forged, expired or unverifiable token a 401 ``invalid-id-token``. A
delegate key with principals of its own caps the user's: the user reads at most what the
key's principals name.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated

from fastapi import Depends, Request

from pathweave.access import PRINCIPAL_PATTERN, Access
from pathweave.errors import BadRequest
from pathweave.settings import AccessSettings
from pathweave_api.auth import Principal
from pathweave_api.problems import ApiProblem
from pathweave_api.services import ServicesDep

ON_BEHALF_HEADER = "X-Pathweave-On-Behalf-Of"
ID_TOKEN_HEADER = "X-Pathweave-Id-Token"


JWKS_REFETCH_COOLDOWN_S = 60.0
"""The shortest time between two fetches of the issuer's JWKS that a token naming an unknown
``kid`` may cause (s): a key rotation is picked up within it, and tokens with made-up key ids
(any delegate key can send them) cannot make the API fetch the key set per request."""


@functools.lru_cache(maxsize=8)
def _jwks_client(url: str):
    import jwt

    return jwt.PyJWKClient(url, cache_keys=True, lifespan=300, cooldown_duration=JWKS_REFETCH_COOLDOWN_S)


@functools.lru_cache(maxsize=8)
def _pem_file(path: str) -> str:
    return Path(path).read_text()


def _verification_key(token: str, settings: AccessSettings):
    """The key that must have signed ``token``: the configured PEM (inline or a file), else
    the issuer's JWKS entry named by the token's ``kid``."""
    pem = settings.id_token_public_key.strip()
    if pem:
        return pem if pem.startswith("-----BEGIN") else _pem_file(pem)
    return _jwks_client(settings.id_token_jwks_url).get_signing_key_from_jwt(token).key


def id_token_access(token: str, settings: AccessSettings) -> Access:
    """The :class:`~pathweave.access.Access` of an end user's ID ``token``: ``user:<sub>``
    and ``group:<g>`` for each string of the claim ``settings.id_token_principals_claim``
    (values that are no valid principal name are left out). Raises :class:`ApiProblem` 401
    ``invalid-id-token`` when the token is not signed by the configured issuer's key, names
    another issuer or audience, has expired or lacks a subject, and 401
    ``id-token-not-configured`` when no issuer is configured."""
    import jwt

    if not settings.id_token_issuer or not settings.id_token_audience or not (
            settings.id_token_public_key or settings.id_token_jwks_url):
        raise ApiProblem(401, "ID tokens are not accepted here: set access.id_token_issuer, access.id_token_audience "
                              "and access.id_token_public_key or access.id_token_jwks_url", "id-token-not-configured")
    algorithms = [a.strip() for a in settings.id_token_algorithms.split(",") if a.strip()]
    try:
        claims = jwt.decode(token, _verification_key(token, settings), algorithms=algorithms,
                            audience=settings.id_token_audience, issuer=settings.id_token_issuer,
                            options={"require": ["exp", "iss", "aud", "sub"]})
    except (jwt.PyJWTError, ValueError, OSError) as exc:
        raise ApiProblem(401, f"invalid ID token: {exc}", "invalid-id-token",
                         {"WWW-Authenticate": 'Bearer error="invalid_token"'}) from None
    groups = claims.get(settings.id_token_principals_claim) or []
    if isinstance(groups, str):
        groups = [groups]
    candidates = [f"user:{claims['sub']}"] + [f"group:{g}" for g in groups if isinstance(g, str)]
    return Access(frozenset(p for p in candidates if PRINCIPAL_PATTERN.match(p)))


def caller_access(request: Request, key: Principal, svc: ServicesDep) -> Access:
    """The request's :class:`~pathweave.access.Access` (see the module's text)."""
    return access_of(key, request.headers, svc.settings.access)


def access_of(key, headers: Mapping[str, str], settings: AccessSettings) -> Access:
    """What the caller with API ``key`` reads, given its request's ``headers`` (the two
    headers of the module's text; any mapping with case-insensitive lookup, such as
    Starlette's): raises :class:`~pathweave_api.problems.ApiProblem` 403, 422 or 401 as
    described there."""
    on_behalf = headers.get(ON_BEHALF_HEADER)
    token = headers.get(ID_TOKEN_HEADER)
    if on_behalf is None and token is None:
        return Access(None if key.principals is None else frozenset(key.principals))
    if not key.delegate:
        raise ApiProblem(403, f"this API key may not ask on behalf of a user ({ON_BEHALF_HEADER} / {ID_TOKEN_HEADER}); "
                              "create one with `pathweave keys create --delegate`", "delegate-required")
    if token is not None:
        return _capped(id_token_access(token.strip(), settings), key)
    try:
        access = Access.of(on_behalf)
    except BadRequest as exc:
        raise ApiProblem(422, f"{ON_BEHALF_HEADER}: {exc}", "validation-error") from None
    return _capped(access if access.restricted else Access(frozenset()), key)


def _capped(user: Access, key) -> Access:
    """The end user's access, within the delegate key's own principals when it has some (a
    principal neither names is dropped: the user reads at most what the key reads)."""
    if key.principals is None:
        return user
    return Access(user.principals & frozenset(key.principals))


Caller = Annotated[Access, Depends(caller_access)]
"""What the request's caller may read (:func:`caller_access`)."""
