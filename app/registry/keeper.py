"""Kept predictions: the features behind a ``prediction_id``, until its delayed label arrives.

``GET /predict`` can keep what it served (features, prediction, probabilities) with a TTL; a later
``POST /learn {prediction_id, label}`` learns those features and scores the prediction that was
actually served. One background task writes the kept predictions, a group per store call.
A kept prediction names the incarnation of the model that served it: a label for it is learned
by that incarnation only (ARCHITECTURE §10), never by a model created again under its name.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
from typing import Any

import orjson

from app import validate
from app.errors import InvalidInput, PredictionExpired, PredictionNotFound
from app.registry.common import STORE_ERRORS, dumps, example_field, settle, store_call
from app.settings import Settings
from app.stores.base import Store

log = logging.getLogger("chorus.registry")


class PredictionKeeper:
    """Keeps served predictions in the store and finds them again.

    Parameters
    ----------
    store
        The durable store (``put_predictions`` / ``get_prediction``).
    settings
        ``prediction_ttl``, ``max_kept_bytes`` and ``max_kept_predictions``.
    """

    def __init__(self, store: Store, settings: Settings) -> None:
        self.store = store
        self.settings = settings
        self._queue: list[tuple[str, str, bytes, asyncio.Future]] = []
        self._task: asyncio.Task | None = None

    async def keep(
        self,
        name: str,
        incarnation: str,
        served: list[tuple[dict, Any, dict]],
        *,
        many: bool = False,
    ) -> list[str | None]:
        """Keep each ``(features, prediction, probabilities)`` the model's ``incarnation``
        served; returns their prediction ids (``None`` for one too big to keep or when the
        store failed: it was served, not kept).
        ``many``: a request's ``examples`` (a refusal names ``examples.<i>.features``)."""
        ttl = self.settings.prediction_ttl
        loop = asyncio.get_running_loop()
        ids: list[str | None] = [None] * len(served)
        blobs = []
        for i, (x, pred, proba) in enumerate(served):
            try:
                exp = time.time() + ttl
                blob = dumps({"x": x, "p": pred, "proba": proba, "exp": exp, "inc": incarnation})
            except orjson.JSONEncodeError as exc:
                field = example_field("features", i if many else None)
                validate.check(x, field)
                raise InvalidInput(f"{field}: cannot be stored ({exc})") from None
            if len(blob) <= self.settings.max_kept_bytes:
                blobs.append((i, secrets.token_urlsafe(12), blob))
        waits = []
        for i, pid, blob in blobs:
            fut = loop.create_future()
            self._queue.append((name, pid, blob, fut))
            waits.append((i, pid, fut))
        if waits and self._task is None:
            self._task = asyncio.create_task(self._write())
        for i, pid, fut in waits:
            if await fut:
                ids[i] = pid
        return ids

    async def take(
        self, name: str, incarnation: str, prediction_id: str
    ) -> tuple[dict, tuple[Any, dict]]:
        """The kept ``(features, (prediction, probabilities))`` of a prediction id that the
        model's ``incarnation`` served (410 for one an earlier incarnation served; one kept
        before incarnations is a legacy model's, ``""``)."""
        raw = await store_call(self.store.get_prediction(name, prediction_id))
        if raw is None:
            raise PredictionNotFound(
                f"prediction_id {prediction_id!r} not found for model {name!r}"
            )
        kept = orjson.loads(raw)
        if kept.get("inc", "") != incarnation:
            raise PredictionExpired(
                f"prediction_id {prediction_id!r} was served by an earlier model {name!r}, "
                "deleted since (the model of that name now is a new one): its label is not "
                "learned"
            )
        if kept["exp"] < time.time():
            raise PredictionExpired(
                f"prediction_id {prediction_id!r} expired (TTL {self.settings.prediction_ttl:g} s)"
            )
        return kept["x"], (kept["p"], kept["proba"])

    async def _write(self) -> None:
        """The single writer task: a group of kept predictions per store call (group commit)."""
        try:
            while self._queue:
                group, self._queue = self._queue, []
                try:
                    failed = await self.store.put_predictions(
                        [(n, p, b) for n, p, b, _ in group],
                        self.settings.prediction_ttl,
                        max_per_model=self.settings.max_kept_predictions,
                    )
                except STORE_ERRORS as exc:
                    log.warning("%d prediction(s) not kept: %s", len(group), exc)
                    failed = {n for n, *_ in group}
                if failed:  # a part of the store is down (a cluster master): its models only
                    log.warning("predictions of %d model(s) not kept", len(failed))
                for name, _, _, fut in group:
                    settle(fut, name not in failed)
            self._task = None
        except BaseException:
            self._task = None
            for *_, fut in self._queue:
                settle(fut, False)
            self._queue = []
            raise
