"""``POST /learn``: predict-then-learn (single, batch, delayed label)."""

from __future__ import annotations

from fastapi import APIRouter, Request
from starlette.responses import Response

from app.registry import Example
from app.routes.deps import check_batch, check_key, check_values, errors, json_body, json_response
from app.routes.schemas import LearnBatchResult, LearnRequest, LearnResult, plain_batch

router = APIRouter(tags=["learning"])


@router.post(
    "/learn",
    response_model=LearnResult | LearnBatchResult,
    responses=errors(401, 404, 409, 410, 413, 422, 503),
    summary="Predict, then learn",
    openapi_extra=json_body(LearnRequest),
)
async def learn(request: Request) -> Response:
    """Predict with the current model, append the example to the log, learn it, answer.

    The answer carries the prediction made *before* learning, the log sequence number and the
    model's running accuracy. A repeated ``id`` is not learned again (``duplicate: true``).
    With ``prediction_id`` the features kept by ``/predict`` are learned with ``label``.
    """
    # hot path: no FastAPI dependencies, pydantic parses the raw JSON itself
    reg = request.app.state.registry
    check_key(request)
    raw = await request.body()
    batch = plain_batch(raw)  # a plain batch parsed by orjson, else pydantic (which names errors)
    if batch is None:
        body = LearnRequest.parse_body(raw)
        if body.examples is not None:
            batch = (
                body.model,
                [
                    Example(e["features"], e["label"], e.get("weight", 1.0), e.get("id"))
                    for e in body.examples
                ],
            )
    if batch is not None:
        model, exs = batch
        check_batch(request, exs)
        check_values(request, [ex.features for ex in exs])
        results = await reg.learn(model, exs, batch=True)
        return json_response({"results": results, "accuracy": reg.accuracy(model)})
    if body.prediction_id is not None:
        result = await reg.learn_delayed(body.model, body.prediction_id, body.label, body.id)
    else:
        check_values(request, [body.features], "features")
        ex = Example(body.features, body.label, body.weight, body.id)
        (result,) = await reg.learn(body.model, [ex])
    result["accuracy"] = reg.accuracy(body.model)
    return json_response(result)
