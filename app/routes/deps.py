"""Shared route dependencies: registry, bearer-token check, JSON responses."""

from __future__ import annotations

import secrets
from typing import Annotated, Any

from fastapi import Depends, Request
from starlette.responses import Response

from app.errors import PayloadTooLarge, Unauthorized
from app.registry import Registry, dumps
from app.routes.schemas import Error


async def get_registry(request: Request) -> Registry:
    """The app's model registry."""
    return request.app.state.registry


RegistryDep = Annotated[Registry, Depends(get_registry)]


async def require_key(request: Request) -> None:
    """When ``CHORUS_API_KEY`` is set, demand ``Authorization: Bearer <key>`` (a dependency)."""
    check_key(request)


def check_key(request: Request) -> None:
    """When ``CHORUS_API_KEY`` is set, demand ``Authorization: Bearer <key>``."""
    key = request.app.state.settings.api_key
    if not key:
        return
    auth = request.headers.get("authorization", "")
    scheme, _, token = auth.partition(" ")
    if scheme.lower() != "bearer" or not secrets.compare_digest(token.strip(), key):
        raise Unauthorized("missing or wrong bearer token (Authorization: Bearer <CHORUS_API_KEY>)")


def check_batch(request: Request, examples: list) -> None:
    """413 when a batch has more examples than ``CHORUS_MAX_BATCH``."""
    limit = request.app.state.settings.max_batch
    if len(examples) > limit:
        raise PayloadTooLarge(f"examples: {len(examples)} over the limit of {limit}")


def check_values(request: Request, rows: list[dict], field: str = "examples") -> None:
    """413 when the feature dicts ``rows`` of one request hold more values than
    ``CHORUS_MAX_BATCH_VALUES``: the bound on one request's engine work, checked before it
    starts (``field``: what the request calls them)."""
    limit = request.app.state.settings.max_batch_values
    n = sum(map(len, rows))
    if n > limit:
        raise PayloadTooLarge(
            f"{field}: {n:,} feature values, over the limit of {limit:,} per request "
            "(CHORUS_MAX_BATCH_VALUES); send fewer examples per request"
        )


def json_response(obj: Any, status_code: int = 200) -> Response:
    """Serialise with orjson (labels that are not strings become string keys)."""
    return Response(dumps(obj), status_code=status_code, media_type="application/json")


def json_body(model: type) -> dict[str, Any]:
    """``openapi_extra`` documenting a JSON body that the route parses itself (hot paths)."""
    ref = {"$ref": f"#/components/schemas/{model.__name__}"}
    return {"requestBody": {"required": True, "content": {"application/json": {"schema": ref}}}}


def errors(*codes: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI ``responses`` entries for the error codes a route can answer."""
    text = {
        401: "Missing or wrong bearer token",
        404: "Unknown model or prediction id",
        409: "Model exists (create), or the model is broken (the message gives the reason)",
        410: "Prediction id expired",
        413: "Body or batch over the limit",
        422: "Malformed input (the message names the field)",
        503: "Store unreachable or not ready; nothing applied (unless the detail says the outcome "
        "is unknown: header X-Chorus-Outcome: unknown)",
    }
    return {c: {"model": Error, "description": text[c]} for c in codes}
