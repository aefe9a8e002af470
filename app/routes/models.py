"""``/models``: declare, list, describe and delete models."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Path, Query
from starlette.responses import Response

from app.names import NAME_PATTERN, NAME_RULE
from app.registry import LIST_LIMIT, LIST_MAX
from app.routes.deps import RegistryDep, errors, json_response, require_key
from app.routes.schemas import (
    ChallengersAdd,
    Leaderboard,
    Metrics,
    ModelCreate,
    ModelDescription,
    ModelList,
    PromoteRequest,
)

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
        Query(
            gt=0.0,
            le=1.0,
            description="Weight of a split at depth d: decay**d (default "
            "2**-d); a weight per level of depth, not of time (see half_life)",
        ),
    ] = None,
    half_life: Annotated[
        float | None,
        Query(
            gt=0.0,
            allow_inf_nan=False,
            description="Recency: a split made h examples ago "
            "weighs 0.5**(h / half_life) in recent_splits, recent_merit, recent_share",
        ),
    ] = None,
) -> Response:
    """Per feature, the splits of the members' current trees on it: count, the class weight
    they were made on, depth-weighted count, share, the merit they had when made and its
    share, and with ``half_life`` the same weighted by recency (docs/http-api.md)."""
    return json_response(await reg.importance(name, decay, half_life))


CandidatePath = Annotated[
    str, Path(pattern=NAME_PATTERN, description=f"Challenger name: {NAME_RULE}")
]


@router.post(
    "/models/{name}/challengers",
    status_code=201,
    response_model=Leaderboard,
    responses=errors(401, 404, 409, 422, 503),
    summary="Add challengers",
)
async def add_challengers(name: NamePath, body: ChallengersAdd, reg: RegistryDep) -> Response:
    """Add challengers that learn every example the model learns from now on (one log entry);
    with ``promotion`` set (or ``null``) the auto-promotion policy too. Answers the leaderboard."""
    specs = [c.model_dump() for c in body.challengers]
    policy = body.promotion.model_dump() if body.promotion is not None else None
    set_policy = "promotion" in body.model_fields_set
    return json_response(await reg.add_challengers(name, specs, policy, set_policy), 201)


@router.delete(
    "/models/{name}/challengers/{challenger}",
    status_code=204,
    responses=errors(401, 404, 409, 422, 503),
    summary="Remove a challenger",
)
async def remove_challenger(
    name: NamePath, challenger: CandidatePath, reg: RegistryDep
) -> Response:
    """Drop one challenger (one log entry)."""
    await reg.remove_challenger(name, challenger)
    return Response(status_code=204)


@router.get(
    "/models/{name}/leaderboard",
    response_model=Leaderboard,
    responses=errors(401, 404, 409, 422, 503),
    summary="Champion and challengers, scored on the same examples",
)
async def leaderboard(name: NamePath, reg: RegistryDep) -> Response:
    """Per candidate: prequential metrics (cumulative and windowed), McNemar's test against the
    champion with its counts, examples/s and memory."""
    return json_response(await reg.leaderboard(name))


@router.post(
    "/models/{name}/promote",
    response_model=Leaderboard,
    responses=errors(401, 404, 409, 422, 503),
    summary="Promote a challenger",
)
async def promote(name: NamePath, body: PromoteRequest, reg: RegistryDep) -> Response:
    """Make a challenger the champion (one log entry; the old champion becomes a challenger).
    Promoting the current champion changes nothing (a safe retry)."""
    return json_response(await reg.promote(name, body.challenger))
