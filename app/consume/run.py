"""Running a consumer: on its own (``chorus consume``) or inside ``chorus serve``
(``CHORUS_CONSUME``).

On its own it is the service without HTTP: the store the ``CHORUS_*`` settings select, the same
registry (recovery, snapshots every ``CHORUS_SNAPSHOT_EVERY`` examples or
``CHORUS_SNAPSHOT_INTERVAL`` seconds, a snapshot of every model at SIGTERM / SIGINT), and the
consumer loop. Inside ``chorus serve`` the loop is one more task of the app's lifespan, on the app's
registry, and its counters are in the app's ``/metrics``.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import signal
import time
from typing import Any

from prometheus_client import CollectorRegistry

from app.consume.config import ConsumeConfig, ConsumeConfigError
from app.consume.consumer import Bus, Consumer
from app.consume.metrics import ConsumeMetrics
from app.registry import Registry
from app.server import long_lived_gc
from app.settings import Settings
from app.tasks import cancel_and_wait

log = logging.getLogger("chorus.consume")
OPEN_RETRY = 5.0  # seconds between two tries to reach the bus inside `chorus serve`


def make_bus(config: ConsumeConfig) -> Bus:
    """The bus the configuration's URL names."""
    if config.kind == "nats":
        from app.consume.nats_bus import NatsBus

        return NatsBus(config)
    from app.consume.redis_bus import RedisBus

    return RedisBus(config)


def make_consumer(registry: Registry, config: ConsumeConfig,
                  metrics: ConsumeMetrics | None = None) -> Consumer:  # fmt: skip
    """A consumer of ``config``'s bus into ``registry``, counting into ``metrics`` (if any)."""
    return Consumer(registry, make_bus(config), config, metrics)


async def consume(settings: Settings, config: ConsumeConfig, *, metrics_port: int | None = None,
                  once: bool = False, stop: asyncio.Event | None = None) -> dict[str, int]:  # fmt: skip
    """``chorus consume``: open the store, recover the models, consume until SIGTERM / SIGINT
    (``once``: until the streams are drained), snapshot every model, close. Returns the
    consumer's counts. Raises :class:`ConsumeConfigError` (bus) or the store's
    ``StoreConfigError`` when either cannot work as configured."""
    from app.stores import make_store

    stop = stop or asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, stop.set)
    prom = CollectorRegistry()
    store = make_store(settings)
    registry = Registry(store, settings)
    consumer = make_consumer(registry, config, ConsumeMetrics(prom))
    if metrics_port is not None:
        from prometheus_client import start_http_server

        start_http_server(metrics_port, addr="127.0.0.1", registry=prom)
    await store.open(timeout=settings.startup_timeout)
    periodic: asyncio.Task | None = None
    thresholds: tuple[int, ...] | None = None
    try:
        await registry.recover()
        periodic = asyncio.create_task(registry.periodic())
        thresholds = long_lived_gc()  # as the server does: batches stay clear of GC scans
        await consumer.run(stop, once=once)
    finally:
        if thresholds is not None:
            gc.set_threshold(*thresholds)
        if periodic is not None:
            await cancel_and_wait(periodic)  # (a cancellation can be lost in a store read)
        try:
            if registry.ready:
                n = await registry.snapshot_all()
                log.info("stopped: wrote %d snapshot(s)", n)
        finally:
            await consumer.bus.close()
            await store.close()
    return consumer.counts


async def consume_in_app(registry: Registry, settings: Settings, prom: CollectorRegistry,
                         stop: asyncio.Event) -> None:  # fmt: skip
    """``CHORUS_CONSUME`` inside ``chorus serve``: the loop on the app's registry, until ``stop``.
    A bus that cannot be reached is tried again every few seconds (the HTTP service serves on);
    one that cannot work as configured is logged at ERROR and not consumed."""
    assert settings.consume is not None
    config = ConsumeConfig.from_url(settings.consume)  # checked when the settings were read
    consumer = make_consumer(registry, config, ConsumeMetrics(prom))
    logged = 0.0
    while not stop.is_set():
        try:
            await consumer.run(stop)
            return
        except ConsumeConfigError as exc:
            if time.monotonic() - logged > 60:
                log.error("CHORUS_CONSUME: %s; trying again every %g s", exc, OPEN_RETRY)
                logged = time.monotonic()
        except Exception:  # a failure of its own: logged, and the consumer starts again
            log.exception("CHORUS_CONSUME: the consumer failed; starting it again in %g s",
                          OPEN_RETRY)  # fmt: skip
        finally:
            with contextlib.suppress(Exception):
                await consumer.bus.close()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), OPEN_RETRY)


def start_in_app(registry: Registry, settings: Settings, prom: Any) -> tuple[asyncio.Task, asyncio.Event] | None:  # fmt: skip
    """The lifespan's hook: the consumer task (and its stop event) when ``CHORUS_CONSUME`` is
    set, else ``None``."""
    if not settings.consume:
        return None
    stop = asyncio.Event()
    return asyncio.create_task(consume_in_app(registry, settings, prom, stop)), stop
