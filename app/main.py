"""The FastAPI application: lifespan (store, recovery, snapshots), routers, error mapping."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import time
from collections.abc import AsyncIterator, Iterable
from typing import Any

from fastapi import FastAPI
from starlette.middleware.cors import CORSMiddleware

from app.consume.run import start_in_app
from app.errors import StoreDamaged, install_error_handlers
from app.guard import BODY_METHODS, Guard, InFlight
from app.registry import Registry
from app.routes import learn, models, ops, predict
from app.routes.docs import install_docs
from app.server import long_lived_gc
from app.settings import Settings, get_settings
from app.stores import Store, StoreConfigError, StoreCorrupt, make_store
from app.tasks import cancel_and_wait
from app.warmup import ENSEMBLES, Warmup, parse_kinds

log = logging.getLogger("chorus")
WARMUP_WAIT = 5.0  # seconds start-up waits for the kernels before serving /readyz 503s

DESCRIPTION = """
Streaming online bagging and boosting (Oza 2001) as a durable predict-then-learn service.

Declare a model (`POST /models`), stream labelled examples (`POST /learn` answers with the
prediction made *before* learning), ask for predictions (`GET /predict`), give late labels
(`POST /learn {prediction_id, label}`). Every acknowledged example is in the model's log before
the answer; recovery = snapshot + log replay reproduces the model exactly.
"""


async def _recover_until_ready(
    registry: Registry, store: Store, settings: Settings, warmup: Warmup
) -> None:
    """Open the store and recover every model, retrying while the store fails. The warm-up of
    the stored models' kinds starts first: on a cold numba cache the interpreted kernels then
    load the snapshots and replay the logs while the compiled ones are built elsewhere.

    A store that answers but cannot be opened or list its models because its data is damaged is
    not retried (that will not help): ``/readyz`` and one ERROR line say so, and what to do. A
    damaged model's own data only breaks that model (:class:`~app.registry.loaded.LoadedModels`).
    """
    delay = 0.1
    while True:
        try:
            await store.open(timeout=settings.startup_timeout)
            await registry.recover(
                lambda specs: warmup.start(_warm_kinds(specs.values(), settings))
            )
            return
        except StoreConfigError:
            raise  # retrying will not help: start-up fails with the message
        except (StoreCorrupt, StoreDamaged) as exc:
            registry.damaged = (
                f"the store is damaged: it cannot be opened or list its models ({exc}); nothing "
                "is served. Check it and salvage every readable model into a new store with "
                "`chorus doctor --salvage NEW_DIR`, then serve the copy (CHORUS_DATA_DIR=NEW_DIR)"
            )
            log.error("%s", registry.damaged)
            return
        except Exception as exc:  # noqa: BLE001 - keep retrying; /readyz says 503 meanwhile
            log.warning("recovery failed (%s: %s); retrying", type(exc).__name__, exc)
            await asyncio.sleep(delay)
            delay = min(delay * 2, 5.0)


def _warm_kinds(specs: Iterable[dict[str, Any]], settings: Settings) -> list[str]:
    """Ensemble kinds to compile at start-up: those of the stored native models (``specs``),
    then ``CHORUS_WARMUP``'s."""
    stored = [
        spec.get("ensemble", "bagging")
        for spec in specs
        if not str(spec.get("learner", "")).startswith("river:")
    ]
    return [k for k in stored if k in ENSEMBLES] + parse_kinds(settings.warmup)


def create_app(settings: Settings | None = None, store: Store | None = None) -> FastAPI:
    """Build the service.

    Parameters
    ----------
    settings
        Defaults to the environment (``CHORUS_*``).
    store
        Defaults to the store the settings select (Redis if ``redis_url`` is set, else SQLite).

    Returns
    -------
    FastAPI
        The app; its lifespan opens the store, recovers every model (``/readyz`` turns 200
        after), snapshots periodically and once more at shutdown.
    """
    settings = settings or get_settings()
    store = store or make_store(settings)
    registry = Registry(store, settings)

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        warmup: Warmup = app.state.warmup
        recovery = asyncio.create_task(_recover_until_ready(registry, store, settings, warmup))
        # wait (bounded) so a healthy start is ready as soon as it serves; a store that cannot
        # work as configured fails start-up (the store's own wait is startup_timeout, hence + 1)
        await asyncio.wait({recovery}, timeout=settings.startup_timeout + 1.0)
        if recovery.done() and not recovery.cancelled() and recovery.exception() is not None:
            exc = recovery.exception()
            log.critical("start-up failed: %s", exc)
            if warmup.task is not None:  # (a compile subprocess would outlive the server)
                warmup.task.cancel()
                with contextlib.suppress(BaseException):
                    await warmup.task
            raise RuntimeError(f"start-up failed: {exc}") from exc
        # recovery started it with the stored models' kinds; if the store has not answered yet,
        # CHORUS_WARMUP's kinds (the same call then returns this task)
        warming = warmup.start(_warm_kinds(registry.loaded_specs(), settings))
        # from numba's cache this takes well under a second: then the server is ready as it
        # starts listening; a cold cache compiles on, reported by /readyz and the log
        deadline = time.monotonic() + WARMUP_WAIT
        while not (warming.done() or app.state.warmup.serving) and time.monotonic() < deadline:
            await asyncio.wait({warming}, timeout=0.02)
        periodic = asyncio.create_task(registry.periodic())
        consuming = start_in_app(registry, settings, app.state.prom)  # CHORUS_CONSUME
        thresholds = long_lived_gc()
        try:
            yield
        finally:
            gc.set_threshold(*thresholds)
            if consuming is not None:  # stops between two reads: nothing half-acknowledged
                task, stop = consuming
                stop.set()
                with contextlib.suppress(BaseException):
                    await asyncio.wait_for(task, 15)
            warming.cancel()
            await cancel_and_wait(periodic)  # (a cancellation can be lost in a store read)
            await cancel_and_wait(recovery)
            if registry.ready:
                n = await registry.snapshot_all()
                log.info("shutdown: wrote %d snapshot(s)", n)
            await store.close()

    app = FastAPI(
        title="Chorus",
        version="0.1.0",
        description=DESCRIPTION,
        lifespan=lifespan,
        docs_url=None,  # served from local assets by install_docs (no CDN)
        redoc_url=None,
    )
    app.state.settings = settings
    app.state.registry = registry
    app.state.warmup = Warmup()
    inflight = InFlight()
    prom, requests, latency = ops.make_prometheus(registry, inflight)
    app.state.prom = prom
    # the last added is the outermost: metrics, then CORS (if configured), then the guard
    app.add_middleware(Guard, settings=settings, inflight=inflight)
    if settings.origins():  # CORS only when configured: its answers then carry the headers too
        app.add_middleware(
            CORSMiddleware,
            allow_origins=settings.origins(),
            allow_methods=["GET", "POST", "DELETE"],
            allow_headers=["Authorization", "Content-Type", "X-Chorus-Model"],
        )
    app.add_middleware(ops.ObserveMiddleware, requests=requests, latency=latency)
    install_error_handlers(app)
    for r in (models.router, learn.router, predict.router, ops.router):
        app.include_router(r)
    install_docs(app)
    app.openapi = lambda: _openapi(app)  # type: ignore[method-assign]
    return app


def _openapi(app: FastAPI) -> dict:
    """OpenAPI plus the body schemas of the routes that parse their JSON themselves."""
    if app.openapi_schema is None:
        from fastapi.openapi.utils import get_openapi
        from pydantic.json_schema import models_json_schema

        from app.routes.schemas import LearnRequest, PredictRequest

        schema = get_openapi(
            title=app.title, version=app.version, description=app.description, routes=app.routes
        )
        _, defs = models_json_schema(
            [(LearnRequest, "validation"), (PredictRequest, "validation")],
            ref_template="#/components/schemas/{model}",
        )
        schema.setdefault("components", {}).setdefault("schemas", {}).update(defs["$defs"])
        _declare_security(schema, bool(app.state.settings.api_key))
        _declare_edge(schema)
        app.openapi_schema = schema
    return app.openapi_schema


_OPEN_PATHS = {"/healthz", "/readyz"}


def _declare_security(schema: dict, required: bool) -> None:
    """Declare the bearer scheme always; operations require it when ``CHORUS_API_KEY`` is set
    (every operation but the health checks), so clients and fuzzers know the contract."""
    schema["components"].setdefault("securitySchemes", {})["bearerAuth"] = {
        "type": "http",
        "scheme": "bearer",
        "description": "CHORUS_API_KEY; required only when the server sets it",
    }
    if not required:
        return
    for path, operations in schema.get("paths", {}).items():
        if path in _OPEN_PATHS:
            continue
        for op in operations.values():
            if isinstance(op, dict) and "responses" in op:
                op["security"] = [{"bearerAuth": []}]


def _declare_edge(schema: dict) -> None:
    """The answers ``app.guard`` gives before routing: 421 on every operation (a Host not served
    here), 415 on those with a body (not ``application/json``)."""

    def error(description: str) -> dict:
        ref = {"$ref": "#/components/schemas/Error"}
        return {"description": description, "content": {"application/json": {"schema": ref}}}

    for operations in schema.get("paths", {}).values():
        for method, op in operations.items():
            if not isinstance(op, dict) or "responses" not in op:
                continue
            op["responses"].setdefault("421", error("Host not served here (CHORUS_ALLOWED_HOSTS)"))
            if method.upper() in BODY_METHODS:
                op["responses"].setdefault("415", error("Content-Type is not application/json"))


def app_factory() -> FastAPI:
    """``uvicorn --factory app.main:app_factory`` (settings from the environment)."""
    return create_app()
