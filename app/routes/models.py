"""``/models``: declare, list, describe and delete models."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Path, Query
from starlette.responses import Response

from app.names import NAME_PATTERN, NAME_RULE
from app.registry import LIST_LIMIT, LIST_MAX
from app.routes.deps import RegistryDep, errors, json_response, require_key
from app.routes.schemas import Metrics, ModelCreate, ModelDescription, ModelList

router = APIRouter(tags=["models"], dependencies=[Depends(require_key)])
MIN_SEQ_DOC = (
    "Read-your-writes: answer once the model applied at least this log sequence number "
    "(waits up to CHORUS_MIN_SEQ_WAIT s, then 503)"
)
NamePath = Annotated[str, Path(pattern=NAME_PATTERN, description=f"Model name: {NAME_RULE}")]


@router.post(
    "/models",
    status_code=201,
    response_model=ModelDescription,
    responses=errors(401, 409, 422, 503),
    summary="Declare a model",
)
async def create_model(body: ModelCreate, reg: RegistryDep) -> Response:
    """Declare a model from a spec (models are declared, never uploaded)."""
    spec = body.model_dump(exclude={"name"})
    return json_response(await reg.create(body.name, spec), 201)


@router.get(
    "/models", response_model=ModelList, responses=errors(401, 422, 503), summary="List models"
)
async def list_models(
    reg: RegistryDep,
    limit: Annotated[int, Query(ge=1, le=LIST_MAX, description="Models per page")] = LIST_LIMIT,
    after: Annotated[
        str | None,
        Query(max_length=64, description="List the models named after this one (a page's next)"),
    ] = None,
) -> Response:
    """Declared models with their descriptions, in name order, a page at a time: ``next`` is
    the ``after`` of the next page (``null`` on the last)."""
    models, next_after = await reg.list_models(limit, after)
    return json_response({"models": models, "next": next_after})


@router.get(
    "/models/{name}",
    response_model=ModelDescription,
    responses=errors(401, 404, 409, 422, 503),
    summary="Describe a model",
)
async def get_model(
    name: NamePath,
    reg: RegistryDep,
    min_seq: Annotated[int | None, Query(ge=0, le=2**63 - 1, description=MIN_SEQ_DOC)] = None,
) -> Response:
    """Spec, examples seen, state bytes, metrics, and per-member ε/λ for boosting."""
    return json_response(await reg.describe(name, min_seq))


@router.delete(
    "/models/{name}",
    status_code=204,
    responses=errors(401, 404, 409, 422, 503),
    summary="Delete a model",
)
async def delete_model(name: NamePath, reg: RegistryDep) -> Response:
    """Drop the model, its log, snapshot, idempotency keys and kept predictions."""
    await reg.delete(name)
    return Response(status_code=204)


@router.get(
    "/models/{name}/metrics",
    response_model=Metrics,
    responses=errors(401, 404, 409, 422, 503),
    summary="Model metrics",
)
async def model_metrics(name: NamePath, reg: RegistryDep) -> Response:
    """Prequential accuracy, Cohen's kappa and accuracy over the last 1,000 scored examples."""
    return json_response(await reg.metrics(name))


@router.get(
    "/models/{name}/importance",
    responses=errors(401, 404, 409, 422, 503),
    summary="Feature importance",
)
async def model_importance(
    name: NamePath,
    reg: RegistryDep,
    decay: Annotated[
        float | None,
        Query(gt=0.0, le=1.0, description="Weight of a split at depth d: decay**d (default 2**-d)"),
    ] = None,
) -> Response:
    """Per feature, the splits of the members' current trees on it: count, the class weight
    they were made on, depth-weighted count and share (docs/http-api.md)."""
    return json_response(await reg.importance(name, decay))
