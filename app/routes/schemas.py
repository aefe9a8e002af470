"""Request and response bodies of the HTTP API (docs/http-api.md), each with an OpenAPI example."""

from __future__ import annotations

from typing import Annotated, Any, Literal, NotRequired, Self

import orjson
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictFloat,
    StrictInt,
    StrictStr,
    ValidationError,
    WithJsonSchema,
    model_validator,
)
from typing_extensions import TypedDict

from app.names import NAME_PATTERN, NAME_RE, NAME_RULE
from app.registry.handles import Example
from app.validate import MAX_WEIGHT

# Feature values are checked by the engine (numbers, strings, booleans, null; anything else is a
# FeatureTypeError naming the feature), so pydantic only documents them: validating a union per
# value costs more than the engine's whole update.
Value = Annotated[
    Any,
    WithJsonSchema(
        {"anyOf": [{"type": "number"}, {"type": "string"}, {"type": "boolean"}, {"type": "null"}]}
    ),
]
Label = StrictBool | StrictInt | StrictStr
Features = dict[str, Value]
Weight = Annotated[StrictFloat, Field(ge=0, le=MAX_WEIGHT, allow_inf_nan=False)]  # never a bool
KEY_MAX = 200  # characters of an idempotency id or a prediction id
Key = Annotated[str, Field(min_length=1, max_length=KEY_MAX)]
MinSeq = Annotated[
    int | None,
    Field(
        ge=0,
        le=2**63 - 1,
        description="Read-your-writes: answer from a model that applied at least this log "
        "sequence number (a `seq` a write returned); waits up to CHORUS_MIN_SEQ_WAIT s, then 503",
    ),
]
Name = Field(pattern=NAME_PATTERN, description=f"Model name: {NAME_RULE}")

from app.errors import InvalidInput, validation_message  # noqa: E402


class _Body(BaseModel):
    """A request body parsed from raw JSON by pydantic itself (hot paths skip FastAPI's parsing)."""

    @classmethod
    def parse_body(cls, raw: bytes) -> Self:
        """Validate raw JSON; errors become 422 messages naming the field."""
        try:
            return cls.model_validate_json(raw)
        except ValidationError as exc:
            raise InvalidInput(validation_message(list(exc.errors()))) from None


_FEATURES_EX = {"age": 31, "dept": "cs", "remote": True}


class EngineSpec(BaseModel):
    """What builds an engine: ensemble, base learner, size, seed, parameters, limits."""

    model_config = ConfigDict(extra="forbid")

    ensemble: Literal["bagging", "boosting", "single", "arf", "srp"] = "bagging"
    learner: str = Field(
        "hoeffding_tree",
        pattern=r"^([A-Za-z0-9_]{1,64}|river:[A-Za-z0-9_.]{1,200})$",
        description="hoeffding_tree | naive_bayes | stump | mlp | exact_tree | river:<module.Class>",
    )
    n_models: int | None = Field(
        None, ge=1, le=1000, description="Ensemble size (engine default: 10, 1 for single)"
    )
    seed: int | None = Field(None, ge=0, description="Seed of the Poisson draws (engine default)")
    params: dict[str, Any] = Field(default_factory=dict)
    limits: dict[str, int | str] | None = Field(
        None,
        description="Per-model limits (engine defaults for the ones left out): max_features, "
        "max_values, max_classes, max_nodes, max_state_bytes, over_limit ('reject' | 'other')",
    )


class ChallengerSpec(EngineSpec):
    """A challenger: a name unique within its model, and the engine it runs."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={"examples": [{"name": "arf", "ensemble": "arf", "n_models": 10}]},
    )

    name: str = Field(pattern=NAME_PATTERN, description=f"Candidate name: {NAME_RULE}")


class PromotionPolicy(BaseModel):
    """Auto-promotion: a challenger becomes the champion when, over its last ``window``
    examples paired with the champion's, it is better by McNemar's test at ``alpha`` and by at
    least ``margin`` accuracy, with at least ``min_examples`` examples since the last
    promotion (the hysteresis)."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {"auto": True, "window": 1000, "min_examples": 1000, "alpha": 0.01, "margin": 0.01}
            ]
        },  # fmt: skip
    )

    auto: StrictBool = True
    window: int = Field(1000, ge=10, le=1_000_000)
    min_examples: int = Field(1000, ge=1, le=100_000_000)
    alpha: float = Field(0.01, ge=1e-12, le=0.5, allow_inf_nan=False)
    margin: float = Field(0.01, ge=0.0, le=1.0, allow_inf_nan=False)


class ModelCreate(EngineSpec):
    """Declare a model: ensemble, base learner, size, seed, optional feature types and classes,
    optional challengers and promotion policy."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "name": "meetings",
                    "ensemble": "bagging",
                    "learner": "hoeffding_tree",
                    "n_models": 10,
                    "seed": 1,
                    "params": {"grace_period": 200},
                    "features": {"age": "numeric", "dept": "categorical"},
                    "classes": ["accept", "decline"],
                }
            ]
        },
    )

    name: str = Name
    features: dict[str, Literal["numeric", "categorical"]] | None = None
    classes: list[Label] | None = None
    challengers: list[ChallengerSpec] | None = Field(
        None, max_length=64, description="Candidates that learn the same stream "
        "(at most CHORUS_MAX_CHALLENGERS)")  # fmt: skip
    champion: str | None = Field(
        None, pattern=NAME_PATTERN, description="Candidate name of the model's own engine on "
        "the leaderboard (default `initial`)")  # fmt: skip
    promotion: PromotionPolicy | None = None


class ChallengersAdd(BaseModel):
    """Challengers to add, and optionally the promotion policy to set (``null``: none)."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "challengers": [{"name": "arf", "ensemble": "arf"}],
                    "promotion": {"window": 1000, "alpha": 0.01},
                }
            ]  # fmt: skip
        },
    )

    challengers: list[ChallengerSpec] = Field(default_factory=list, max_length=64)
    promotion: PromotionPolicy | None = None


class PromoteRequest(BaseModel):
    """The challenger to make the champion."""

    model_config = ConfigDict(
        extra="forbid", json_schema_extra={"examples": [{"challenger": "arf"}]}
    )

    challenger: str = Field(pattern=NAME_PATTERN, description="A challenger's name")


class Metrics(BaseModel):
    """Prequential metrics of the predictions a model served."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {"accuracy": 0.91, "kappa": 0.8, "window_accuracy": 0.93, "n_scored": 1200}
            ]
        }
    )

    accuracy: float | None
    kappa: float | None
    window_accuracy: float | None
    n_scored: int
    majority_rate: float | None = Field(
        None, description="Share of the most frequent true class (always predicting it scores "
        "this accuracy)")  # fmt: skip
    balanced_accuracy: float | None = Field(None, description="Mean recall of the true classes")
    g_mean: float | None = Field(None, description="Geometric mean of the classes' recalls")
    macro_f1: float | None = Field(None, description="Mean F1 of the classes")
    window_balanced_accuracy: float | None = None
    window_g_mean: float | None = None
    window_macro_f1: float | None = None
    per_class: dict[str, list] | None = Field(
        None, description="classes: [{label, support, predicted, recall, precision}]; "
        "confusion: [[true, predicted, count]] (non-zero cells)")  # fmt: skip


class ModelDescription(BaseModel):
    """A declared model: its spec, how much it learned, its state size and metrics."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "name": "meetings",
                    "spec": {
                        "ensemble": "boosting",
                        "learner": "hoeffding_tree",
                        "n_models": 2,
                        "seed": 1,
                        "params": {},
                        "features": None,
                        "classes": None,
                    },
                    "n_seen": 1200,
                    "seq": 1200,
                    "classes": ["accept", "decline"],
                    "state_bytes": 48213,
                    "metrics": {
                        "accuracy": 0.91,
                        "kappa": 0.8,
                        "window_accuracy": 0.93,
                        "n_scored": 1200,
                    },
                    "members": [
                        {
                            "epsilon": 0.12,
                            "lambda_sc": 105.0,
                            "lambda_sw": 14.2,
                            "vote_weight": 1.99,
                        },
                        {"epsilon": 0.2, "lambda_sc": 80.1, "lambda_sw": 20.0, "vote_weight": 1.39},
                    ],
                }
            ]
        }
    )

    name: str
    spec: dict[str, Any]
    n_seen: int | None = Field(description="Examples learned (null when broken)")
    seq: int | None = Field(description="Last log sequence number applied (null when broken)")
    classes: list[Any]
    state_bytes: int | None
    metrics: Metrics | None
    members: list[dict[str, Any]] = Field(
        default_factory=list,
        description="Boosting: epsilon, lambda_sc, lambda_sw, vote_weight; adaptive bagging and "
        "boosting: drift_error, drift_window, resets, window_accuracy",
    )
    n_drifts: int | None = Field(
        None,
        description="Adaptive bagging or boosting (`drift`): members reset after a detected drift",
    )
    diversity: dict[str, Any] | None = Field(
        None,
        description="Bagging or boosting with a `window`: the members' mean pairwise disagreement, "
        "q_statistic and kappa over the last `window` (n) examples",
    )
    status: Literal["ok", "broken"] = Field(
        "ok", description="`broken`: the model could not be loaded from the store (see `reason`)"
    )
    reason: str | None = Field(None, description="Why a broken model could not be loaded")


class McNemar(BaseModel):
    """McNemar's paired test of a challenger against the champion on the same examples."""

    model_config = ConfigDict(json_schema_extra={"examples": [
        {"b": 3, "c": 14, "n": 17, "p_value": 0.0127, "method": "exact"}]})  # fmt: skip

    b: int = Field(description="Examples only the champion predicted right")
    c: int = Field(description="Examples only the challenger predicted right")
    n: int = Field(description="Examples paired (window_mcnemar) or discordant (mcnemar)")
    p_value: float
    method: Literal["exact", "chi2"] = Field(
        description="exact binomial (b + c < 25), else chi-square with continuity correction"
    )


class Candidate(BaseModel):
    """One candidate of a model's leaderboard."""

    model_config = ConfigDict(json_schema_extra={"examples": [
        {"name": "arf", "role": "challenger",
         "spec": {"ensemble": "arf", "learner": "hoeffding_tree", "n_models": 10},
         "metrics": {"accuracy": 0.91, "kappa": 0.8, "window_accuracy": 0.93, "n_scored": 1200},
         "learned": 1200, "skipped": 0, "engine_seconds": 0.8, "examples_per_s": 1500.0,
         "memory_bytes": 480000,
         "mcnemar": {"b": 30, "c": 61, "n": 91, "p_value": 0.0017, "method": "chi2"},
         "window_mcnemar": {"b": 3, "c": 14, "n": 1000, "p_value": 0.0127, "method": "exact"}}]})  # fmt: skip

    name: str
    role: Literal["champion", "challenger"]
    spec: dict[str, Any]
    metrics: Metrics = Field(description="Its own predict-then-learn predictions, scored")
    learned: int = Field(description="Examples learned since it joined the leaderboard")
    skipped: int = Field(description="Examples it refused (its own limits): not learned")
    engine_seconds: float = Field(description="Its engine time in this process since load")
    examples_per_s: float | None
    memory_bytes: int
    mcnemar: McNemar | None = Field(
        description="Against the champion since it took over (null for the champion)"
    )
    window_mcnemar: McNemar | None = Field(
        description="Against the champion over the policy's window of recent examples"
    )


class Leaderboard(BaseModel):
    """A model's champion and challengers, scored on the same examples."""

    model_config = ConfigDict(json_schema_extra={"examples": [
        {"model": "meetings", "seq": 1200, "champion": "initial", "policy": None,
         "promotions": 0, "since_promotion": 1200, "candidates": []}]})  # fmt: skip

    model: str
    seq: int
    champion: str | None
    policy: dict[str, Any] | None
    promotions: int
    since_promotion: int | None = None
    candidates: list[Candidate]


class ModelList(BaseModel):
    """A page of declared models, in name order."""

    model_config = ConfigDict(json_schema_extra={"examples": [{"models": [], "next": None}]})

    models: list[ModelDescription]
    next: str | None = Field(
        None, description="Pass as ?after= for the next page; null when this page is the last"
    )


class LearnExample(TypedDict):
    """One labelled example inside a batch (``id`` and ``weight`` optional)."""

    __pydantic_config__ = ConfigDict(  # type: ignore[misc]
        extra="forbid",
        json_schema_extra={
            "examples": [{"features": _FEATURES_EX, "label": "accept", "id": "e-17"}]
        },
    )

    features: Features
    label: Label
    id: NotRequired[Key | None]
    weight: NotRequired[Weight]


class LearnRequest(_Body):
    """Single example, batch (``examples``), or delayed label (``prediction_id``)."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {"model": "meetings", "features": _FEATURES_EX, "label": "accept", "id": "e-17"},
                {
                    "model": "meetings",
                    "examples": [
                        {"features": _FEATURES_EX, "label": "accept"},
                        {"features": {"age": 45, "dept": "math"}, "label": "decline"},
                    ],
                },
                {"model": "meetings", "prediction_id": "Jx3k0aQ8c2LmVb1d", "label": "decline"},
            ],
            # exactly one of features / examples / prediction_id (checked by _one_mode)
            "oneOf": [
                {"required": ["features", "label"]},
                {
                    "required": ["examples"],
                    "not": {"anyOf": [{"required": ["label"]}, {"required": ["id"]}]},
                },
                {"required": ["prediction_id", "label"]},
            ],  # fmt: skip
        },
    )

    model: str = Name
    features: Features | None = None
    label: Label | None = None
    id: str | None = Field(None, min_length=1, max_length=KEY_MAX)
    weight: Weight = 1.0
    examples: list[LearnExample] | None = None
    prediction_id: str | None = Field(None, min_length=1, max_length=KEY_MAX)

    @model_validator(mode="after")
    def _one_mode(self) -> LearnRequest:
        modes = [
            self.features is not None,
            self.examples is not None,
            self.prediction_id is not None,
        ]
        if sum(modes) != 1:
            raise ValueError("give exactly one of 'features', 'examples' or 'prediction_id'")
        if self.examples is None and self.label is None:
            raise ValueError("label: required")
        if self.examples is not None and (self.label is not None or self.id is not None):
            raise ValueError("label/id go inside each of 'examples' in a batch")
        return self


# 19 digits in a row may be an integer orjson cannot hold (it reads those outside 64 bits as
# floats, pydantic as integers that the service refuses by name): such bodies go to pydantic.
# (Digits -> "0", the rest -> " ", then a substring search: a regex takes 15x longer.)
_DIGITS_ONLY = bytes(0x30 if 0x30 <= b <= 0x39 else 0x20 for b in range(256))
_LONG_NUMBER = b"0" * 19
_BATCH_KEYS = {"model", "examples"}
_EXAMPLE_KEYS = {"features", "label", "id", "weight"}
_LABEL_TYPES = {str, int, bool}


def plain_json(raw: bytes) -> Any:
    """``raw`` as orjson reads it, or ``None`` when it is not JSON or may hold an integer that
    orjson reads otherwise than pydantic (19 digits or more): then pydantic decides."""
    if _LONG_NUMBER in raw.translate(_DIGITS_ONLY):
        return None
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None


def plain_batch(raw: bytes) -> tuple[str, list[Example]] | None:
    """``(model, examples)`` of a batch ``LearnRequest``, exactly as pydantic validates it, or
    ``None`` when the body is anything else (then pydantic decides, and names the field).

    The hot path of batched ``POST /learn``: one ``orjson.loads`` and a few checks per example
    instead of pydantic's validation of every value. It accepts only what :class:`LearnRequest`
    accepts and gives the same values (``weight`` as a float); ``tests/test_batch_learn.py``
    holds it to that on hostile bodies.
    """
    body = plain_json(raw)
    if type(body) is not dict or body.keys() != _BATCH_KEYS:
        return None
    model, examples = body["model"], body["examples"]
    if type(model) is not str or NAME_RE.fullmatch(model) is None or type(examples) is not list:
        return None
    out = []
    for e in examples:
        if type(e) is not dict:
            return None
        x, y = e.get("features"), e.get("label")
        if type(x) is not dict or type(y) not in _LABEL_TYPES:
            return None
        if len(e) == 2:
            out.append(Example(x, y))
            continue
        if not e.keys() <= _EXAMPLE_KEYS:
            return None
        key, w = e.get("id"), e.get("weight", 1.0)
        if key is not None and (type(key) is not str or not 1 <= len(key) <= KEY_MAX):
            return None
        if type(w) is int:
            w = float(w)
        if type(w) is not float or not (0.0 <= w <= MAX_WEIGHT):
            return None
        out.append(Example(x, y, w, key))
    return (model, out) if out else None


class LearnResult(BaseModel):
    """The prediction made *before* learning the example, and where it sits in the log."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "prediction": "accept",
                    "probabilities": {"accept": 0.8, "decline": 0.2},
                    "seq": 1201,
                    "accuracy": 0.91,
                    "duplicate": False,
                }
            ]
        }
    )

    prediction: Label | None
    probabilities: dict[str, float]
    seq: int
    accuracy: float | None = None
    duplicate: bool = False


class LearnBatchResult(BaseModel):
    """One result per example, in order."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "results": [
                        {
                            "prediction": "accept",
                            "probabilities": {"accept": 0.8, "decline": 0.2},
                            "seq": 1201,
                            "duplicate": False,
                        }
                    ],
                    "accuracy": 0.91,
                }
            ]
        }
    )

    results: list[LearnResult]
    accuracy: float | None


class PredictExample(TypedDict):
    """Features of one example to predict."""

    __pydantic_config__ = ConfigDict(  # type: ignore[misc]
        extra="forbid", json_schema_extra={"examples": [{"features": _FEATURES_EX}]}
    )

    features: Features


class PredictRequest(_Body):
    """Single (``features``) or batch (``examples``) prediction."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {"model": "meetings", "features": _FEATURES_EX},
                {"model": "meetings", "examples": [{"features": _FEATURES_EX}]},
            ],
            "oneOf": [{"required": ["features"]}, {"required": ["examples"]}],
        },
    )

    model: str = Name
    features: Features | None = None
    examples: list[PredictExample] | None = None
    min_seq: MinSeq = None

    @model_validator(mode="after")
    def _one_mode(self) -> PredictRequest:
        if (self.features is None) == (self.examples is None):
            raise ValueError("give exactly one of 'features' or 'examples'")
        return self


class PredictResult(BaseModel):
    """A prediction; ``prediction_id`` (kept for the TTL) accepts a delayed label."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "prediction": "accept",
                    "probabilities": {"accept": 0.8, "decline": 0.2},
                    "prediction_id": "Jx3k0aQ8c2LmVb1d",
                    "ignored_features": [],
                }
            ]
        }
    )

    prediction: Label | None
    probabilities: dict[str, float]
    prediction_id: str | None = Field(
        description="null when predictions are not kept or the store was unreachable"
    )
    ignored_features: list[str] = Field(
        default_factory=list,
        description="features of the request the model has never learned (so they did not "
        "count; a typo shows up here)",
    )


class PredictBatchResult(BaseModel):
    """One prediction per example, in order."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "results": [
                        {
                            "prediction": "accept",
                            "probabilities": {"accept": 1.0},
                            "prediction_id": "Jx3k0aQ8c2LmVb1d",
                        }
                    ]
                }
            ]
        }
    )

    results: list[PredictResult]


class Error(BaseModel):
    """Every error: a message naming the field, model or condition."""

    model_config = ConfigDict(
        json_schema_extra={"examples": [{"detail": "features.age: expected numeric, got 'old'"}]}
    )

    detail: str


class Status(BaseModel):
    """Health/readiness."""

    model_config = ConfigDict(json_schema_extra={"examples": [{"status": "ok"}]})

    status: str
    engine: str | None = Field(
        None,
        description='readiness only: "compiled", or "interpreted" while the kernels compile',
    )
    detail: str | None = Field(
        None,
        description="readiness only: models broken by damaged store data (the others serve)",
    )
