"""Python client for a Chorus server (sync :class:`ChorusClient` and async :class:`AsyncChorusClient`).

Both clients speak the HTTP API of ``docs/http-api.md`` over httpx and return typed results.
Requests that fail with 503 (store unreachable, nothing applied; or, for a learn, outcome unknown:
its ids make the retry safe), 429, or a connection error are retried a bounded number of times with exponential backoff and jitter. A request that may have
reached the server before failing (a read timeout, a dropped connection) is retried only when
repeating it cannot apply it twice: ``learn`` calls always carry an idempotency ``id`` (one is
generated when you don't give one), so the server answers a repeat with ``"duplicate": true``
instead of learning the example again.

Examples
--------
>>> from app.client import ChorusClient
>>> with ChorusClient("http://127.0.0.1:8000") as chorus:  # doctest: +SKIP
...     chorus.create_model("m1", ensemble="bagging", learner="hoeffding_tree", n_models=10)
...     r = chorus.learn("m1", {"age": 31, "dept": "cs"}, "yes")
...     p = chorus.predict("m1", {"age": 40, "dept": "math"})
...     chorus.label("m1", p.prediction_id, "no")
...     chorus.metrics("m1").accuracy
"""

from __future__ import annotations

import asyncio
import random
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

import httpx

__all__ = [
    "AsyncChorusClient",
    "BatchLearnResult",
    "ChorusClient",
    "ChorusError",
    "Conflict",
    "Gone",
    "LearnResult",
    "Metrics",
    "ModelInfo",
    "NotFound",
    "PayloadTooLarge",
    "Prediction",
    "Unauthorized",
    "Unavailable",
    "ValidationFailed",
]

Label = str | int | bool
T = TypeVar("T")

DEFAULT_URL = "http://127.0.0.1:8000"
DEFAULT_TIMEOUT = 120.0  # seconds; covers a first request that compiles kernels on a cold cache


# ---------------------------------------------------------------------------------- errors


class ChorusError(Exception):
    """An error answer from the server (or no answer at all).

    Attributes
    ----------
    status
        HTTP status code, or ``None`` when the server could not be reached.
    detail
        The server's ``detail`` message.
    """

    def __init__(self, status: int | None, detail: str) -> None:
        self.status = status
        self.detail = detail
        super().__init__(f"{status}: {detail}" if status is not None else detail)


class Unauthorized(ChorusError):
    """401: missing or wrong API key."""


class NotFound(ChorusError):
    """404: unknown model or prediction id."""


class Conflict(ChorusError):
    """409: the model already exists."""


class Gone(ChorusError):
    """410: the prediction id has expired."""


class PayloadTooLarge(ChorusError):
    """413: the payload or batch is over the server's limit."""


class ValidationFailed(ChorusError):
    """422: malformed input (the detail names the field)."""


class Unavailable(ChorusError):
    """503 or a connection failure that persisted through every retry."""


_ERRORS: dict[int, type[ChorusError]] = {
    401: Unauthorized,
    404: NotFound,
    409: Conflict,
    410: Gone,
    413: PayloadTooLarge,
    422: ValidationFailed,
    503: Unavailable,
}


# ---------------------------------------------------------------------------------- results


@dataclass(frozen=True)
class Metrics:
    """Live prequential metrics of a model (``None`` until something was scored)."""

    accuracy: float | None = None
    kappa: float | None = None
    window_accuracy: float | None = None
    n_scored: int = 0
    majority_rate: float | None = None
    balanced_accuracy: float | None = None
    g_mean: float | None = None
    macro_f1: float | None = None
    window_balanced_accuracy: float | None = None
    window_g_mean: float | None = None
    window_macro_f1: float | None = None
    per_class: dict[str, list] | None = None  # classes (recall, precision...), confusion cells

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None) -> Metrics:
        data = data or {}
        scores = {k: data.get(k) for k in ("accuracy", "kappa", "window_accuracy",
                                           "majority_rate", "balanced_accuracy", "g_mean",
                                           "macro_f1", "window_balanced_accuracy",
                                           "window_g_mean", "window_macro_f1")}  # fmt: skip
        return cls(**scores, n_scored=int(data.get("n_scored") or 0),
                   per_class=data.get("per_class"))  # fmt: skip


@dataclass(frozen=True)
class ModelInfo:
    """A model's description: its spec, examples seen, classes, state size, metrics, members."""

    name: str
    spec: dict[str, Any]
    n_seen: int
    classes: list[Any]
    state_bytes: int = 0
    metrics: Metrics = field(default_factory=Metrics)
    members: list[dict[str, Any]] = field(default_factory=list)
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ModelInfo:
        return cls(
            name=data["name"],
            spec=dict(data.get("spec") or {}),
            n_seen=int(data.get("n_seen") or 0),
            classes=list(data.get("classes") or []),
            state_bytes=int(data.get("state_bytes") or 0),
            metrics=Metrics.from_json(data.get("metrics")),
            members=list(data.get("members") or []),
            raw=dict(data),
        )


@dataclass(frozen=True)
class LearnResult:
    """The answer to a predict-then-learn: what the model predicted *before* learning the example.

    Attributes
    ----------
    prediction
        The label predicted before learning (``None`` for an untrained model).
    probabilities
        The class probabilities behind ``prediction``.
    seq
        The example's position in the model's log.
    accuracy
        The model's running accuracy after this example.
    duplicate
        ``True`` if the server had already learned this ``id``; nothing was learned again.
    id
        The idempotency key sent with the example.
    """

    prediction: Label | None
    probabilities: dict[Any, float]
    seq: int | None
    accuracy: float | None
    duplicate: bool
    id: str | None = None

    @classmethod
    def from_json(cls, data: Mapping[str, Any], id: str | None = None) -> LearnResult:
        return cls(
            prediction=data.get("prediction"),
            probabilities=dict(data.get("probabilities") or {}),
            seq=data.get("seq"),
            accuracy=data.get("accuracy"),
            duplicate=bool(data.get("duplicate", False)),
            id=id,
        )


@dataclass(frozen=True)
class BatchLearnResult:
    """The answer to a batch ``learn``: one :class:`LearnResult` per example, in order."""

    results: list[LearnResult]
    accuracy: float | None


@dataclass(frozen=True)
class Prediction:
    """A prediction; pass ``prediction_id`` to ``label()`` when the true label arrives."""

    prediction: Label | None
    probabilities: dict[Any, float]
    prediction_id: str | None = None
    ignored_features: list[str] = field(default_factory=list)
    # with ``explain=True``: why (members' probabilities and vote weights, tree paths, agreeing
    # members, margin; docs/http-api.md)
    explanation: dict[str, Any] | None = None

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Prediction:
        return cls(
            prediction=data.get("prediction"),
            probabilities=dict(data.get("probabilities") or {}),
            prediction_id=data.get("prediction_id"),
            ignored_features=list(data.get("ignored_features") or []),
            explanation=data.get("explanation"),
        )


# ---------------------------------------------------------------------------------- sans-IO core


@dataclass
class _Call:
    """One API call, independent of sync/async: what to send and how to read the answer."""

    method: str
    path: str
    parse: Callable[[httpx.Response], Any]
    json: Any = None
    params: Mapping[str, Any] | None = None
    idempotent: bool = True

    @property
    def headers(self) -> dict[str, str]:
        """``X-Chorus-Model: <name>`` for a call about one model: a load balancer in front of
        several instances hashes on it, so each model's requests go to one instance
        (deploy/nginx-cluster.conf). Names are ASCII-safe by the model-name rule."""
        model = self.json.get("model") if isinstance(self.json, dict) else None
        if model is None and self.params:
            model = self.params.get("model")
        return {ROUTE_HEADER: model} if isinstance(model, str) and model.isascii() else {}


ROUTE_HEADER = "X-Chorus-Model"


def new_id() -> str:
    """A fresh idempotency key."""
    return uuid.uuid4().hex


def _raise_for(response: httpx.Response) -> None:
    if response.status_code < 400:
        return
    try:
        detail = response.json().get("detail", response.text)
    except ValueError:
        detail = response.text
    if not isinstance(detail, str):
        detail = str(detail)
    cls = _ERRORS.get(response.status_code, ChorusError)
    raise cls(response.status_code, detail or response.reason_phrase)


def _example(
    features: Mapping[str, Any], label: Any, id: str | None, weight: float | None = None
) -> dict[str, Any]:
    row = {"features": dict(features), "label": label, "id": id or new_id()}
    if weight is not None:
        row["weight"] = weight
    return row


class _Core:
    """Request builders shared by both clients."""

    @staticmethod
    def create_model(
        name: str,
        *,
        ensemble: str = "bagging",
        learner: str = "hoeffding_tree",
        n_models: int | None = None,
        seed: int | None = None,
        params: Mapping[str, Any] | None = None,
        features: Mapping[str, str] | None = None,
        classes: Iterable[Any] | None = None,
        challengers: Iterable[Mapping[str, Any]] | None = None,
        promotion: Mapping[str, Any] | None = None,
        champion: str | None = None,
    ) -> _Call:
        body: dict[str, Any] = {
            "name": name,
            "ensemble": ensemble,
            "learner": learner,
            "params": dict(params or {}),
            "features": dict(features) if features else None,
            "classes": list(classes) if classes else None,
        }
        if n_models is not None:  # otherwise the server's defaults apply
            body["n_models"] = n_models
        if seed is not None:
            body["seed"] = seed
        if challengers is not None:
            body["challengers"] = [dict(c) for c in challengers]
        if promotion is not None:
            body["promotion"] = dict(promotion)
        if champion is not None:
            body["champion"] = champion
        return _Call(
            "POST", "/models", lambda r: ModelInfo.from_json(r.json()), json=body, idempotent=False
        )

    @staticmethod
    def list_models(after: str | None = None) -> _Call:
        """One page: ``([ModelInfo], the next page's after or None)``."""
        return _Call(
            "GET",
            "/models",
            lambda r: ([ModelInfo.from_json(m) for m in r.json()["models"]], r.json().get("next")),
            params={"after": after} if after is not None else None,
        )

    @staticmethod
    def get_model(name: str) -> _Call:
        return _Call("GET", f"/models/{name}", lambda r: ModelInfo.from_json(r.json()))

    @staticmethod
    def delete_model(name: str) -> _Call:
        return _Call("DELETE", f"/models/{name}", lambda r: None, idempotent=False)

    @staticmethod
    def metrics(name: str) -> _Call:
        return _Call("GET", f"/models/{name}/metrics", lambda r: Metrics.from_json(r.json()))

    @staticmethod
    def leaderboard(name: str) -> _Call:
        return _Call("GET", f"/models/{name}/leaderboard", lambda r: r.json())

    @staticmethod
    def add_challengers(
        name: str, challengers: Iterable[Mapping[str, Any]], promotion: Any = ...
    ) -> _Call:
        body: dict[str, Any] = {"challengers": [dict(c) for c in challengers]}
        if promotion is not ...:
            body["promotion"] = dict(promotion) if promotion is not None else None
        return _Call("POST", f"/models/{name}/challengers", lambda r: r.json(), body,
                     idempotent=False)  # fmt: skip

    @staticmethod
    def promote(name: str, challenger: str) -> _Call:
        # promoting the champion again changes nothing: a retry is safe
        return _Call("POST", f"/models/{name}/promote", lambda r: r.json(),
                     {"challenger": challenger})  # fmt: skip

    @staticmethod
    def remove_challenger(name: str, challenger: str) -> _Call:
        return _Call("DELETE", f"/models/{name}/challengers/{challenger}", lambda r: None,
                     idempotent=False)  # fmt: skip

    @staticmethod
    def learn(
        model: str, features: Mapping[str, Any], label: Any, id: str | None, weight: float | None
    ) -> _Call:
        body = {"model": model, **_example(features, label, id, weight)}
        return _Call("POST", "/learn", lambda r: LearnResult.from_json(r.json(), body["id"]), body)

    @staticmethod
    def learn_many(
        model: str,
        examples: Iterable[Mapping[str, Any] | tuple],
        ids: Iterable[str | None] | None = None,
    ) -> _Call:
        rows = []
        id_list = list(ids) if ids is not None else None
        for i, ex in enumerate(examples):
            if id_list is not None and i >= len(id_list):
                raise ValueError(f"got {len(id_list)} ids for more examples")
            given = id_list[i] if id_list is not None else None
            if isinstance(ex, Mapping):
                rows.append(
                    _example(ex["features"], ex["label"], ex.get("id") or given, ex.get("weight"))
                )
            else:
                features, label, *rest = ex
                rows.append(_example(features, label, given, rest[0] if rest else None))
        if id_list is not None and len(id_list) != len(rows):
            raise ValueError(f"got {len(id_list)} ids for {len(rows)} examples")
        body = {"model": model, "examples": rows}

        def parse(r: httpx.Response) -> BatchLearnResult:
            data = r.json()
            results = [
                LearnResult.from_json(item, row["id"])
                for item, row in zip(data["results"], rows, strict=True)
            ]
            return BatchLearnResult(results=results, accuracy=data.get("accuracy"))

        return _Call("POST", "/learn", parse, body)

    @staticmethod
    def label(model: str, prediction_id: str, label: Any) -> _Call:
        body = {"model": model, "prediction_id": prediction_id, "label": label}
        # the prediction id doubles as the idempotency key: a repeat answers "duplicate": true
        return _Call("POST", "/learn", lambda r: LearnResult.from_json(r.json()), body)

    @staticmethod
    def predict(model: str, features: Mapping[str, Any], explain: bool = False) -> _Call:
        body = {"model": model, "features": dict(features)}
        params = {"explain": "true"} if explain else None
        return _Call("POST", "/predict", lambda r: Prediction.from_json(r.json()), body, params)

    @staticmethod
    def importance(name: str, decay: float | None = None,
                   half_life: float | None = None) -> _Call:  # fmt: skip
        params = {k: v for k, v in (("decay", decay), ("half_life", half_life)) if v is not None}
        return _Call("GET", f"/models/{name}/importance", lambda r: r.json(),
                     params=params or None)  # fmt: skip

    @staticmethod
    def predict_many(model: str, rows: Iterable[Mapping[str, Any]]) -> _Call:
        body = {"model": model, "examples": [{"features": dict(f)} for f in rows]}
        return _Call(
            "POST",
            "/predict",
            lambda r: [Prediction.from_json(p) for p in r.json()["results"]],
            body,
        )

    @staticmethod
    def health() -> _Call:
        return _Call("GET", "/healthz", lambda r: r.json())

    @staticmethod
    def ready() -> _Call:
        return _Call("GET", "/readyz", lambda r: r.json())


_RETRY_STATUS = {429, 503}  # the server applied nothing
_SAFE_ERRORS = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout)  # never sent


class _Base:
    def __init__(
        self,
        base_url: str = DEFAULT_URL,
        *,
        api_key: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        retries: int = 3,
        backoff: float = 0.1,
        max_backoff: float = 5.0,
    ) -> None:
        if retries < 0:
            raise ValueError("retries must be >= 0")
        self.base_url = base_url.rstrip("/")
        self.retries = retries
        self.backoff = backoff
        self.max_backoff = max_backoff
        self._headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._timeout = timeout

    def _delay(self, attempt: int, response: httpx.Response | None) -> float:
        if response is not None:
            after = response.headers.get("Retry-After")
            if after is not None:
                try:
                    return min(self.max_backoff, max(0.0, float(after)))
                except ValueError:
                    pass
        return min(self.max_backoff, self.backoff * 2**attempt) * (0.5 + random.random() / 2)

    def _should_retry(
        self, call: _Call, attempt: int, response: httpx.Response | None, exc: Exception | None
    ) -> bool:
        if attempt >= self.retries:
            return False
        if response is not None:
            return response.status_code in _RETRY_STATUS
        if isinstance(exc, _SAFE_ERRORS):
            return True
        return call.idempotent and isinstance(exc, httpx.TransportError)

    def _finish(self, call: _Call, response: httpx.Response | None, exc: Exception | None) -> Any:
        if response is None:
            raise Unavailable(
                None,
                f"cannot reach the Chorus server at {self.base_url}: {type(exc).__name__}: {exc} "
                "(is it running? start one with `chorus serve`, or point --server / CHORUS_URL "
                "at it)",
            ) from exc
        _raise_for(response)
        return call.parse(response)


class ChorusClient(_Base):
    """Synchronous client.

    Parameters
    ----------
    base_url
        The server, e.g. ``"http://127.0.0.1:8000"``.
    api_key
        Sent as ``Authorization: Bearer <key>`` (needed when the server sets ``CHORUS_API_KEY``).
    timeout
        Per-request timeout in seconds (default 120: a server whose numba cache is empty compiles
        a model kind on its first request, which can take tens of seconds; a retry after a
        timeout would only wait for the same compilation).
    retries
        Extra attempts after a 503/429 or a connection failure (0 disables retrying).
    backoff
        First retry delay in seconds; doubles each attempt (with jitter), capped at ``max_backoff``.
    max_backoff
        Longest delay between attempts.
    transport
        An httpx transport (tests pass ``httpx.MockTransport`` or an ASGI transport).
    """

    def __init__(
        self,
        base_url: str = DEFAULT_URL,
        *,
        api_key: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        retries: int = 3,
        backoff: float = 0.1,
        max_backoff: float = 5.0,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        super().__init__(
            base_url,
            api_key=api_key,
            timeout=timeout,
            retries=retries,
            backoff=backoff,
            max_backoff=max_backoff,
        )
        self._http = httpx.Client(
            base_url=self.base_url, headers=self._headers, timeout=timeout, transport=transport
        )

    def _send(self, call: _Call) -> Any:
        attempt = 0
        while True:
            response: httpx.Response | None = None
            exc: Exception | None = None
            try:
                response = self._http.request(
                    call.method, call.path, json=call.json, params=call.params, headers=call.headers
                )
            except httpx.TransportError as e:
                exc = e
            if not self._should_retry(call, attempt, response, exc):
                return self._finish(call, response, exc)
            time.sleep(self._delay(attempt, response))
            attempt += 1

    def close(self) -> None:
        """Close the connection pool."""
        self._http.close()

    def __enter__(self) -> ChorusClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- operations

    def health(self) -> dict[str, Any]:
        """``GET /healthz``."""
        return self._send(_Core.health())

    def ready(self) -> dict[str, Any]:
        """``GET /readyz`` (raises :class:`Unavailable` while the server is recovering)."""
        return self._send(_Core.ready())

    # -- models

    def create_model(self, name: str, *, exist_ok: bool = False, **spec: Any) -> ModelInfo:
        """Create a model; raises :class:`Conflict` if the name is taken, unless ``exist_ok``
        (then the existing model is returned as it is; its spec is not compared).

        Keywords: ``ensemble`` ("bagging"), ``learner`` ("hoeffding_tree"), ``n_models`` and
        ``seed`` (server defaults when omitted), ``params``, ``features`` (name -> "numeric" |
        "categorical"), ``classes``; ``challengers`` (specs, each with a ``name``),
        ``promotion`` (the auto-promotion policy) and ``champion`` (the model's own candidate
        name), see :meth:`add_challengers`.
        """
        try:
            return self._send(_Core.create_model(name, **spec))
        except Conflict:
            if not exist_ok:
                raise
            return self.get_model(name)

    def list_models(self) -> list[ModelInfo]:
        """All models, in name order (the server's pages followed)."""
        out: list[ModelInfo] = []
        after = None
        while True:
            page, after = self._send(_Core.list_models(after))
            out += page
            if after is None:
                return out

    def get_model(self, name: str) -> ModelInfo:
        """One model's description; raises :class:`NotFound`."""
        return self._send(_Core.get_model(name))

    def delete_model(self, name: str) -> None:
        """Delete a model; raises :class:`NotFound`."""
        self._send(_Core.delete_model(name))

    def metrics(self, name: str) -> Metrics:
        """A model's live metrics."""
        return self._send(_Core.metrics(name))

    # -- challengers

    def leaderboard(self, name: str) -> dict[str, Any]:
        """``GET /models/{name}/leaderboard``: per candidate its metrics, McNemar against the
        champion (``b``, ``c``, ``p_value``), examples/s and memory."""
        return self._send(_Core.leaderboard(name))

    def add_challengers(
        self, name: str, challengers: Iterable[Mapping[str, Any]], *, promotion: Any = ...
    ) -> dict[str, Any]:
        """Add challengers (specs with a ``name``: ``{"name": "arf", "ensemble": "arf"}``);
        ``promotion`` sets the auto-promotion policy (``None`` clears it). The leaderboard."""
        return self._send(_Core.add_challengers(name, challengers, promotion))

    def promote(self, name: str, challenger: str) -> dict[str, Any]:
        """Make ``challenger`` the champion (safe to retry). The leaderboard."""
        return self._send(_Core.promote(name, challenger))

    def remove_challenger(self, name: str, challenger: str) -> None:
        """Drop one challenger."""
        self._send(_Core.remove_challenger(name, challenger))

    # -- learning and predicting

    def learn(
        self,
        model: str,
        features: Mapping[str, Any],
        label: Any,
        *,
        id: str | None = None,
        weight: float | None = None,
    ) -> LearnResult:
        """Predict-then-learn one example; ``id`` (generated if omitted) makes retries safe."""
        return self._send(_Core.learn(model, features, label, id, weight))

    def learn_many(
        self,
        model: str,
        examples: Iterable[Mapping[str, Any] | tuple],
        *,
        ids: Iterable[str | None] | None = None,
    ) -> BatchLearnResult:
        """Predict-then-learn a batch, in order.

        ``examples`` are ``(features, label[, weight])`` tuples or
        ``{"features", "label", "id", "weight"}`` dicts.
        """
        return self._send(_Core.learn_many(model, examples, ids))

    def label(self, model: str, prediction_id: str, label: Any) -> LearnResult:
        """Supply the delayed label for an earlier :meth:`predict`; the model learns it."""
        return self._send(_Core.label(model, prediction_id, label))

    def predict(
        self, model: str, features: Mapping[str, Any], *, explain: bool = False
    ) -> Prediction:
        """Predict one example (nothing is learned); keep ``prediction_id`` for :meth:`label`.
        ``explain=True``: ``Prediction.explanation`` says why (docs/http-api.md)."""
        return self._send(_Core.predict(model, features, explain))

    def importance(self, name: str, *, decay: float | None = None,
                   half_life: float | None = None) -> dict[str, Any]:  # fmt: skip
        """A model's feature importance: per feature, its trees' splits (count, the weight they
        were made on, depth-weighted count with ``decay`` per level of depth, share, the merit
        they had when made and its share; with ``half_life`` in examples, the splits and merit
        weighted by recency: docs/http-api.md)."""
        return self._send(_Core.importance(name, decay, half_life))

    def predict_many(self, model: str, rows: Iterable[Mapping[str, Any]]) -> list[Prediction]:
        """Predict a batch."""
        return self._send(_Core.predict_many(model, rows))


class AsyncChorusClient(_Base):
    """Asynchronous client with the same methods as :class:`ChorusClient` (``await`` them).

    Examples
    --------
    >>> async def main():  # doctest: +SKIP
    ...     async with AsyncChorusClient("http://127.0.0.1:8000") as chorus:
    ...         return await chorus.learn("m1", {"age": 31}, "yes")
    """

    def __init__(
        self,
        base_url: str = DEFAULT_URL,
        *,
        api_key: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        retries: int = 3,
        backoff: float = 0.1,
        max_backoff: float = 5.0,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        super().__init__(
            base_url,
            api_key=api_key,
            timeout=timeout,
            retries=retries,
            backoff=backoff,
            max_backoff=max_backoff,
        )
        self._http = httpx.AsyncClient(
            base_url=self.base_url, headers=self._headers, timeout=timeout, transport=transport
        )

    async def _send(self, call: _Call) -> Any:
        attempt = 0
        while True:
            response: httpx.Response | None = None
            exc: Exception | None = None
            try:
                response = await self._http.request(
                    call.method, call.path, json=call.json, params=call.params, headers=call.headers
                )
            except httpx.TransportError as e:
                exc = e
            if not self._should_retry(call, attempt, response, exc):
                return self._finish(call, response, exc)
            await asyncio.sleep(self._delay(attempt, response))
            attempt += 1

    async def aclose(self) -> None:
        """Close the connection pool."""
        await self._http.aclose()

    async def __aenter__(self) -> AsyncChorusClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def health(self) -> dict[str, Any]:
        """``GET /healthz``."""
        return await self._send(_Core.health())

    async def ready(self) -> dict[str, Any]:
        """``GET /readyz``."""
        return await self._send(_Core.ready())

    async def create_model(self, name: str, *, exist_ok: bool = False, **spec: Any) -> ModelInfo:
        """See :meth:`ChorusClient.create_model`."""
        try:
            return await self._send(_Core.create_model(name, **spec))
        except Conflict:
            if not exist_ok:
                raise
            return await self.get_model(name)

    async def list_models(self) -> list[ModelInfo]:
        """All models, in name order (the server's pages followed)."""
        out: list[ModelInfo] = []
        after = None
        while True:
            page, after = await self._send(_Core.list_models(after))
            out += page
            if after is None:
                return out

    async def get_model(self, name: str) -> ModelInfo:
        """One model's description."""
        return await self._send(_Core.get_model(name))

    async def delete_model(self, name: str) -> None:
        """Delete a model."""
        await self._send(_Core.delete_model(name))

    async def metrics(self, name: str) -> Metrics:
        """A model's live metrics."""
        return await self._send(_Core.metrics(name))

    async def leaderboard(self, name: str) -> dict[str, Any]:
        """See :meth:`ChorusClient.leaderboard`."""
        return await self._send(_Core.leaderboard(name))

    async def add_challengers(
        self, name: str, challengers: Iterable[Mapping[str, Any]], *, promotion: Any = ...
    ) -> dict[str, Any]:
        """See :meth:`ChorusClient.add_challengers`."""
        return await self._send(_Core.add_challengers(name, challengers, promotion))

    async def promote(self, name: str, challenger: str) -> dict[str, Any]:
        """See :meth:`ChorusClient.promote`."""
        return await self._send(_Core.promote(name, challenger))

    async def remove_challenger(self, name: str, challenger: str) -> None:
        """See :meth:`ChorusClient.remove_challenger`."""
        await self._send(_Core.remove_challenger(name, challenger))

    async def learn(
        self,
        model: str,
        features: Mapping[str, Any],
        label: Any,
        *,
        id: str | None = None,
        weight: float | None = None,
    ) -> LearnResult:
        """See :meth:`ChorusClient.learn`."""
        return await self._send(_Core.learn(model, features, label, id, weight))

    async def learn_many(
        self,
        model: str,
        examples: Iterable[Mapping[str, Any] | tuple],
        *,
        ids: Iterable[str | None] | None = None,
    ) -> BatchLearnResult:
        """See :meth:`ChorusClient.learn_many`."""
        return await self._send(_Core.learn_many(model, examples, ids))

    async def label(self, model: str, prediction_id: str, label: Any) -> LearnResult:
        """See :meth:`ChorusClient.label`."""
        return await self._send(_Core.label(model, prediction_id, label))

    async def predict(
        self, model: str, features: Mapping[str, Any], *, explain: bool = False
    ) -> Prediction:
        """See :meth:`ChorusClient.predict`."""
        return await self._send(_Core.predict(model, features, explain))

    async def importance(self, name: str, *, decay: float | None = None,
                         half_life: float | None = None) -> dict[str, Any]:  # fmt: skip
        """See :meth:`ChorusClient.importance`."""
        return await self._send(_Core.importance(name, decay, half_life))

    async def predict_many(self, model: str, rows: Iterable[Mapping[str, Any]]) -> list[Prediction]:
        """See :meth:`ChorusClient.predict_many`."""
        return await self._send(_Core.predict_many(model, rows))
