"""Domain exceptions and their one mapping to HTTP responses (``{"detail": ...}``)."""

from __future__ import annotations

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.responses import JSONResponse

from app.stores.base import StoreDown


class ChorusError(Exception):
    """Base class of every error the service reports to clients.

    Parameters
    ----------
    detail
        Human-readable message; names the offending field or model.
    """

    status_code = 500

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


class InvalidInput(ChorusError):
    """Malformed input (422)."""

    status_code = 422


class ModelNotFound(ChorusError):
    """Unknown model (404)."""

    status_code = 404


class ModelExists(ChorusError):
    """A model with that name already exists (409)."""

    status_code = 409


class PredictionNotFound(ChorusError):
    """Unknown ``prediction_id`` (404)."""

    status_code = 404


class PredictionExpired(ChorusError):
    """``prediction_id`` older than the TTL (410)."""

    status_code = 410


class PayloadTooLarge(ChorusError):
    """Body or batch over the configured limit (413)."""

    status_code = 413


class Unauthorized(ChorusError):
    """Missing or wrong bearer token (401)."""

    status_code = 401


class StoreUnavailable(ChorusError):
    """The store cannot be reached; nothing was applied (503)."""

    status_code = 503


class OutcomeUnknownError(StoreUnavailable):
    """The store did not answer an append that it may have applied (503 whose detail starts
    with "outcome unknown", header ``X-Chorus-Outcome: unknown``): resend with the same ids, or
    read the model's ``seq`` to find out."""


class StoreDamaged(StoreUnavailable):
    """The store answered but cannot read the data asked for (a damaged page): retrying will not
    help; the models whose data it is are marked broken (503 until then)."""


class NotReady(ChorusError):
    """Recovery has not finished yet (503)."""

    status_code = 503


class NotCaughtUp(ChorusError):
    """``min_seq`` was not reached within the wait bound (read-your-writes across replicas)."""

    status_code = 503


class SeqAhead(ChorusError):
    """``min_seq`` lies beyond the model's whole log: no write ever returned that seq."""

    status_code = 409


class EngineFailure(ChorusError):
    """The engine failed on input it should have accepted: a bug, reported as such (the details
    go to the server log, not to the client)."""

    status_code = 500


class ModelBroken(ChorusError):
    """The model could not be loaded from the store (corrupt or unverifiable snapshot, a log
    entry the engine refuses); it answers 409 with the reason until deleted or repaired."""

    status_code = 409


class CorruptSnapshot(Exception):
    """A snapshot failed its checksum or format check (never loaded)."""


def _json(status: int, detail: str, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse({"detail": detail}, status_code=status, headers=headers)


_UNION_TAGS = {"bool", "int", "float", "str", "none", "function-after[_one_mode()]"}
_KIND = {"bool": "boolean", "int": "integer", "float": "number", "str": "string"}


def _loc(loc: tuple) -> tuple[str, list[str]]:
    parts = [str(p) for p in loc if p not in ("body", "query", "path")]
    tags = []
    while parts and parts[-1] in _UNION_TAGS:
        tags.append(parts.pop())
    return ".".join(parts) or "body", tags


def validation_message(errors: list[dict]) -> str:
    """One message per field, naming it (``features.age: expected one of ...``).

    Union alternatives (a feature value may be a boolean, integer, number, string or null) are
    folded into one message instead of one per alternative.
    """
    out: dict[str, str] = {}
    kinds: dict[str, list[str]] = {}
    for e in errors:
        field, tags = _loc(tuple(e.get("loc", ())))
        msg = str(e.get("msg", "invalid")).removeprefix("Value error, ")
        if tags and tags[0] in _KIND:
            kinds.setdefault(field, []).append(_KIND[tags[0]])
            out.setdefault(field, "")
        else:
            out.setdefault(field, msg)
    for field, ks in kinds.items():
        if not out[field]:
            out[field] = "expected a " + " or ".join(dict.fromkeys(ks))
    # a model-level check (no location) already names its field(s) in the message
    return "; ".join(m if f == "body" and ":" in m else f"{f}: {m}" for f, m in out.items())


def install_error_handlers(app: FastAPI) -> None:
    """Map domain, validation and store exceptions to JSON errors, once for the whole app."""

    @app.exception_handler(ChorusError)
    async def _chorus(request: Request, exc: ChorusError) -> JSONResponse:
        headers = {"WWW-Authenticate": "Bearer"} if isinstance(exc, Unauthorized) else None
        if isinstance(exc, StoreUnavailable | NotReady | NotCaughtUp):
            headers = {"Retry-After": "1"}
        if isinstance(exc, OutcomeUnknownError):
            headers = {"Retry-After": "1", "X-Chorus-Outcome": "unknown"}
        return _json(exc.status_code, exc.detail, headers)

    @app.exception_handler(RequestValidationError)
    async def _validation(request: Request, exc: RequestValidationError) -> JSONResponse:
        return _json(422, validation_message(list(exc.errors())))

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        if exc.status_code == 400:  # FastAPI's "error parsing the body": the documented 422
            return _json(422, f"body: not valid JSON ({exc.detail})")
        return _json(exc.status_code, str(exc.detail), getattr(exc, "headers", None))

    @app.exception_handler(StoreDown)
    async def _store_down(request: Request, exc: StoreDown) -> JSONResponse:
        return _json(503, f"store unavailable: {exc}", {"Retry-After": "1"})
