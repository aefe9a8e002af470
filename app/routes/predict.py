"""``GET /predict`` (query string) and ``POST /predict`` (JSON, batches)."""

from __future__ import annotations

from fastapi import APIRouter, Request
from starlette.responses import Response

from app.errors import InvalidInput
from app.names import NAME_RE, NAME_RULE
from app.routes.deps import check_batch, check_key, check_values, errors, json_body, json_response
from app.routes.schemas import PredictBatchResult, PredictRequest, PredictResult

router = APIRouter(tags=["predicting"])


_GET_PARAMS = {
    "parameters": [
        {
            "name": "model",
            "in": "query",
            "required": True,
            "description": "Model name",
            "schema": {"type": "string", "pattern": NAME_RE.pattern},
            "example": "meetings",
        },
        {
            "name": "explain",
            "in": "query",
            "required": False,
            "description": "`true`: the answer has the prediction's `explanation` (members' "
            "probabilities and vote weights, tree paths, agreeing members, margin); not a "
            "feature name here",
            "schema": {"type": "boolean", "default": False},
        },
        {
            "name": "features",
            "in": "query",
            "required": False,
            "description": "Every other parameter is a feature, e.g. `age=31&dept=cs`",
            "schema": {"type": "object", "additionalProperties": {"type": "string"}},
            "style": "form",
            "explode": True,
            "example": {"age": "31", "dept": "cs"},
        },
    ]
}


def explain_flag(value: str) -> bool:
    """The ``explain`` query parameter: ``true``/``false`` (``1``/``0``), else 422 naming it."""
    flag = {"true": True, "1": True, "false": False, "0": False}.get(value.lower())
    if flag is None:
        raise InvalidInput(f"explain: must be true or false, got {value[:40]!r}")
    return flag


@router.get(
    "/predict",
    response_model=PredictResult,
    responses=errors(401, 404, 409, 413, 422, 503),
    summary="Predict from query parameters",
    openapi_extra=_GET_PARAMS,
)
async def predict_get(request: Request) -> Response:
    """``/predict?model=NAME&age=31&dept=cs``: every other parameter is a feature.

    Values are typed by the model's declared features; undeclared numeric-looking values are
    numbers, the rest categories, empty values missing. ``explain=true`` (not a feature here):
    the answer has the prediction's ``explanation``.
    """
    reg = request.app.state.registry
    check_key(request)
    params: dict[str, str] = {}
    model = None
    explain = False
    for k, v in request.query_params.multi_items():
        if k == "model":
            model = v
        elif k == "explain":
            explain = explain_flag(v)
        elif k in params:
            raise InvalidInput(f"{k}: given more than once")
        else:
            params[k] = v
    check_values(request, [params], "features")
    if model is None:
        raise InvalidInput("model: query parameter required")
    if not NAME_RE.match(model):
        raise InvalidInput(f"model: {model!r} is not a model name ({NAME_RULE})")
    return json_response(await reg.predict_query(model, params, explain=explain))


@router.post(
    "/predict",
    response_model=PredictResult | PredictBatchResult,
    responses=errors(401, 404, 409, 413, 422, 503),
    summary="Predict from a JSON body",
    openapi_extra=json_body(PredictRequest),
)
async def predict_post(request: Request) -> Response:
    """``{"model", "features"}`` for one prediction, ``{"model", "examples": [...]}`` for many;
    ``?explain=true``: each answer has its ``explanation``."""
    reg = request.app.state.registry
    check_key(request)
    explain = explain_flag(request.query_params.get("explain", "false"))
    body = PredictRequest.parse_body(await request.body())
    if body.examples is not None:
        check_batch(request, body.examples)
        X = [e["features"] for e in body.examples]
        check_values(request, X)
        results = await reg.predict(body.model, X, min_seq=body.min_seq, many=True,
                                    explain=explain)  # fmt: skip
        return json_response({"results": results})
    check_values(request, [body.features], "features")
    (result,) = await reg.predict(body.model, [body.features], min_seq=body.min_seq,
                                  explain=explain)  # fmt: skip
    return json_response(result)
