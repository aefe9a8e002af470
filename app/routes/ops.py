"""Operations: ``/healthz``, ``/readyz``, Prometheus ``/metrics`` and the request-metrics middleware."""

from __future__ import annotations

import time
from typing import Any

from fastapi import APIRouter, Depends, Request
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Histogram,
    generate_latest,
)
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.guard import InFlight
from app.registry import Registry
from app.routes.deps import RegistryDep, errors, json_response, require_key
from app.routes.schemas import Error, Status

router = APIRouter(tags=["operations"])
CLIENT_CLOSED = 499  # nginx's status for a request its client abandoned before the answer


@router.get("/healthz", response_model=Status, summary="Liveness")
async def healthz() -> Response:
    """The process answers (no auth)."""
    return json_response({"status": "ok"})


@router.get(
    "/readyz",
    response_model=Status,
    responses={503: {"model": Error, "description": "Recovering or store unreachable"}},
    summary="Readiness",
)
async def readyz(reg: RegistryDep, request: Request) -> Response:
    """200 once every model is recovered, the engine can answer (its kernels loaded from numba's
    cache, or, while they compile, their interpreted twins) and the store answers; 503 before
    (no auth). 503 too when the store is found to have lost its data under the running server
    (a Redis restarted empty): the models held in memory are dropped then, so the next call
    answers as the store now is; or for good when the store is too damaged to list its models (the
    detail says what to do). Ready with ``detail`` when damaged store data broke some models."""
    if not reg.ready:
        return json_response({"detail": reg.recovery_status()}, 503)
    warmup = request.app.state.warmup
    if not warmup.serving:  # kernels loading; on a cold cache the interpreted ones serve at once
        return json_response({"detail": warmup.status()}, 503)
    if not await reg.ping():
        return json_response({"detail": f"{reg.store.name} store unreachable"}, 503)
    lost = await reg.check_store()
    if lost is not None:
        return json_response({"detail": lost}, 503)
    damage = reg.damage()  # ready: the other models serve
    if damage is not None:
        return json_response({"status": "ready", "engine": warmup.engine, "detail": damage})
    return json_response({"status": "ready", "engine": warmup.engine})


@router.get(
    "/metrics",
    responses=errors(401),
    dependencies=[Depends(require_key)],
    summary="Prometheus metrics",
    response_class=Response,
)
async def prometheus(request: Request) -> Response:
    """Requests, latency histograms, examples learned and accuracy per model (text format)."""
    return Response(generate_latest(request.app.state.prom), media_type=CONTENT_TYPE_LATEST)


class ModelCollector:
    """Per-model gauges read from the registry at scrape time (no cost on the hot path)."""

    def __init__(self, registry: Registry) -> None:
        self.registry = registry

    def collect(self):
        learned = CounterMetricFamily(
            "chorus_examples_learned", "Examples learned by the model", labels=["model"]
        )
        acc = GaugeMetricFamily("chorus_model_accuracy", "Prequential accuracy", labels=["model"])
        wacc = GaugeMetricFamily(
            "chorus_model_window_accuracy", "Accuracy over the last window", labels=["model"]
        )
        balanced = GaugeMetricFamily(
            "chorus_model_balanced_accuracy", "Prequential balanced accuracy (mean class recall)",
            labels=["model"],
        )  # fmt: skip
        gmean = GaugeMetricFamily(
            "chorus_model_g_mean", "Prequential G-mean (geometric mean of class recalls)",
            labels=["model"],
        )  # fmt: skip
        lag = GaugeMetricFamily(
            "chorus_model_unsnapshotted", "Log entries not yet in a snapshot", labels=["model"]
        )
        drifts = CounterMetricFamily(
            "chorus_model_drifts", "Members reset after a detected drift", labels=["model"]
        )
        diversity = GaugeMetricFamily(
            "chorus_model_diversity", "Members' mean pairwise diversity over the window",
            labels=["model", "measure"],
        )  # fmt: skip
        importance = GaugeMetricFamily(
            "chorus_model_feature_importance",
            f"Share of the weight the members' tree splits on the feature were made on (the top "
            f"{TOP_FEATURES} features)",
            labels=["model", "feature"],
        )
        merit = GaugeMetricFamily(
            "chorus_model_feature_merit_share",
            f"Share of the merit (information gain or Gini gain when made) of the members' tree "
            f"splits on the feature (the top {TOP_FEATURES} features by merit)",
            labels=["model", "feature"],
        )
        for name, n_learned, rep, since_snapshot, model in self.registry.gauges():
            _adaptive_metrics(name, model, drifts, diversity)
            _importance_metrics(name, model, importance, merit)
            learned.add_metric([name], float(n_learned))
            if rep["accuracy"] is not None:
                acc.add_metric([name], rep["accuracy"])
            if rep["window_accuracy"] is not None:
                wacc.add_metric([name], rep["window_accuracy"])
            if rep["balanced_accuracy"] is not None:
                balanced.add_metric([name], rep["balanced_accuracy"])
                gmean.add_metric([name], rep["g_mean"])
            lag.add_metric([name], float(since_snapshot))
        yield from (learned, acc, wacc, balanced, gmean, lag, drifts, diversity, importance,
                    merit)  # fmt: skip
        yield from _candidate_metrics(self.registry)
        mem = self.registry.memory()
        yield GaugeMetricFamily("chorus_models_loaded", "Models held in memory", mem["loaded"])
        yield GaugeMetricFamily(
            "chorus_models_bytes", "Estimated bytes of the models in memory", mem["bytes"]
        )
        yield GaugeMetricFamily(
            "chorus_memory_budget_bytes", "CHORUS_MEMORY_MB in bytes (0 = none)", mem["budget"]
        )
        yield CounterMetricFamily(
            "chorus_models_evicted", "Models unloaded to fit the memory budget", mem["evicted"]
        )


TOP_FEATURES = 20  # features per model in chorus_model_feature_importance (bounded labels)


def _importance_metrics(name: str, model: Any, importance: Any, merit: Any) -> None:
    """The top features' share of the model's split weight and, by merit, their share of its
    splits' merit (issue 41); nothing for a model whose members are not native trees, or one a
    worker thread runs on (``None``)."""
    if model is None:
        return
    try:
        features = model.feature_importance()["features"]
    except ValueError:
        return
    for feature, d in list(features.items())[:TOP_FEATURES]:
        importance.add_metric([name, feature], d["share"])
    by_merit = sorted(features.items(), key=lambda kv: (-kv[1]["merit"], kv[0]))
    for feature, d in by_merit[:TOP_FEATURES]:
        if d["merit"] > 0.0:
            merit.add_metric([name, feature], d["merit_share"])


def _candidate_metrics(registry: Registry) -> list[Any]:
    """Per candidate of the models with challengers (issue 38): accuracy, windowed accuracy,
    McNemar's p against the champion, examples learned; promotions per model."""
    labels = ["model", "candidate", "role"]
    acc = GaugeMetricFamily("chorus_candidate_accuracy", "A candidate's prequential accuracy",
                            labels=labels)  # fmt: skip
    wacc = GaugeMetricFamily("chorus_candidate_window_accuracy",
                             "A candidate's accuracy over the last window", labels=labels)  # fmt: skip
    pval = GaugeMetricFamily("chorus_candidate_mcnemar_p",
                             "McNemar p-value of a challenger against the champion",
                             labels=["model", "candidate"])  # fmt: skip
    learned = CounterMetricFamily("chorus_candidate_examples_learned",
                                  "Examples a candidate learned", labels=labels)  # fmt: skip
    promotions = CounterMetricFamily("chorus_model_promotions",
                                     "Challengers promoted to champion", labels=["model"])  # fmt: skip
    for name, lb in registry.boards():
        promotions.add_metric([name], float(lb["promotions"]))
        for c in lb["candidates"]:
            key = [name, c["name"], c["role"]]
            learned.add_metric(key, float(c["learned"]))
            m = c["metrics"]
            if m["accuracy"] is not None:
                acc.add_metric(key, m["accuracy"])
                wacc.add_metric(key, m["window_accuracy"])
            if c["mcnemar"] is not None:
                pval.add_metric([name, c["name"]], c["mcnemar"]["p_value"])
    return [acc, wacc, pval, learned, promotions]


def _adaptive_metrics(name: str, model: Any, drifts: Any, diversity: Any) -> None:
    """Drifts and diversity of an adaptive bagging or boosting model (issue 18); nothing for
    others."""
    if not getattr(model, "adaptive", False):
        return
    if model.drift is not None:
        drifts.add_metric([name], float(model.n_drifts))
    div = model.diversity()
    for measure in ("disagreement", "q_statistic", "kappa"):
        if div is not None and div[measure] is not None:
            diversity.add_metric([name, measure], div[measure])


def make_prometheus(
    registry: Registry, inflight: InFlight
) -> tuple[CollectorRegistry, Counter, Histogram]:
    """A per-app Prometheus registry with request counters, latency histograms, model gauges and
    the request bodies held (``app.guard``)."""
    prom = CollectorRegistry()
    requests = Counter(
        "chorus_requests", "HTTP requests", ["method", "route", "status"], registry=prom
    )
    latency = Histogram(
        "chorus_request_duration_seconds",
        "HTTP request latency",
        ["method", "route"],
        buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0, 5.0),
        registry=prom,
    )
    prom.register(ModelCollector(registry))
    prom.register(InFlightCollector(inflight))
    return prom, requests, latency


class InFlightCollector:
    """The request bodies the process holds (being received or served), read at scrape time."""

    def __init__(self, inflight: InFlight) -> None:
        self.inflight = inflight

    def collect(self):
        yield GaugeMetricFamily(
            "chorus_inflight_bodies", "Request bodies held (CHORUS_MAX_INFLIGHT_BODIES)",
            self.inflight.bodies,
        )  # fmt: skip
        yield GaugeMetricFamily(
            "chorus_inflight_body_bytes", "Their bytes (CHORUS_MAX_INFLIGHT_BYTES)",
            self.inflight.bytes,
        )  # fmt: skip


class ObserveMiddleware:
    """Pure-ASGI middleware: request metrics. A request that ends without an answer (the client
    left mid-body, ``app.guard``) counts as 499, one that raised as 500.

    Parameters
    ----------
    app
        The wrapped ASGI app.
    requests, latency
        The Prometheus collectors to feed.
    """

    def __init__(self, app: ASGIApp, requests: Counter, latency: Histogram) -> None:
        self.app = app
        self.requests = requests
        self.latency = latency

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        t0 = time.perf_counter()
        status = 0  # no answer (yet)

        async def send_wrapper(msg: Message) -> None:
            nonlocal status
            if msg["type"] == "http.response.start":
                status = msg["status"]
            await send(msg)

        try:
            await self.app(scope, receive, send_wrapper)
        except BaseException:
            status = status or 500
            raise
        finally:
            self._observe(scope, status or CLIENT_CLOSED, t0)

    def _observe(self, scope: Scope, status: int, t0: float) -> None:
        route = scope.get("route")  # none when answered before routing (app.guard): "unmatched"
        path = getattr(route, "path", None) or "unmatched"
        method = scope.get("method", "")
        self.requests.labels(method, path, str(status)).inc()
        self.latency.labels(method, path).observe(time.perf_counter() - t0)
