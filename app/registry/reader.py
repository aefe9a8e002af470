"""Reads: a model caught up with the log within the freshness bound, and its predictions."""

from __future__ import annotations

import asyncio
import logging
import math
import time
from typing import Any

from app.errors import EngineFailure, InvalidInput, NotCaughtUp, SeqAhead
from app.registry.common import (
    clean_proba,
    engine,
    error_field,
    n_values,
    off_loop,
    store_call,
)
from app.registry.handles import Handle
from app.registry.keeper import PredictionKeeper
from app.registry.loaded import LoadedModels

log = logging.getLogger("chorus.registry")


def _predict(
    model: Any, X: list[dict[str, Any]], explain: bool = False
) -> tuple[list[dict], list[list[str]]]:
    """The engine's probabilities for each row of ``X`` (``explain``: each row's explanation,
    ``predict_explain_one``, whose probabilities are the prediction's) and the features of each
    it ignores (unknown to the model); an error names its row (``learners.at_row``). Run by
    :func:`~app.registry.common.off_loop`."""
    _, learners = engine()
    run = model.predict_explain_one if explain else model.predict_proba_one
    out = []
    for r, x in enumerate(X):
        try:
            out.append(run(x))
        except ValueError as exc:
            if getattr(exc, "field", None) != "explain":  # (about the model, not the row)
                learners.at_row(exc, r)
            raise
    knows = model.knows_feature
    return out, [[f for f in x if knows(f) is False] for x in X]


class ModelReader:
    """Answers predictions from the loaded models (never learns).

    Parameters
    ----------
    models
        The loaded models (and through them the store and the settings).
    keeper
        Keeps served predictions for delayed labels (``CHORUS_KEEP_PREDICTIONS``).
    """

    def __init__(self, models: LoadedModels, keeper: PredictionKeeper) -> None:
        self.models = models
        self.keeper = keeper
        self.store = models.store
        self.settings = models.settings

    async def fresh(self, name: str, min_seq: int | None = None, *, always: bool = False) -> Handle:
        """The model for a read: the store's incarnation, caught up with the log within the
        freshness bound.

        When the model was last checked against the store more than ``read_staleness`` seconds
        ago (``always``: on every call) its incarnation is checked (:meth:`LoadedModels.verify`:
        a deleted model answers 404, one created again is loaded), and with a shared store it
        applies the other processes' entries. With ``min_seq`` it waits (up to ``min_seq_wait``
        seconds) until it has applied at least that log sequence number, then answers
        :class:`NotCaughtUp` (503).
        """
        h = await self.models.get(name)
        shared = self.settings.shared_store and self.settings.durability == "log"
        behind = min_seq is not None and h.seq < min_seq
        stale = time.monotonic() - h.last_refresh >= self.settings.read_staleness
        if shared and (always or behind or stale):
            await self.models.catch_up(h)
        elif always or stale:
            await self.models.verify(h)
        if min_seq is None or h.seq >= min_seq:
            return h
        last = await store_call(self.store.last_seq(name))
        if min_seq > last:
            raise SeqAhead(
                f"min_seq: {min_seq} is beyond model {name!r}'s log (last seq {last}); pass a "
                "seq that a write returned"
            )
        deadline = time.monotonic() + self.settings.min_seq_wait
        while time.monotonic() < deadline:
            await asyncio.sleep(0.01)
            h = await self.models.get(name)
            if shared:
                await self.models.catch_up(h)
            if h.seq >= min_seq:
                return h
        raise NotCaughtUp(
            f"min_seq: model {name!r} is at seq {h.seq}, {min_seq} not reached within "
            f"{self.settings.min_seq_wait:g} s; retry"
        )

    async def predict(
        self,
        name: str,
        X: list[dict[str, Any]],
        raw: dict[str, str] | None,
        min_seq: int | None,
        *,
        many: bool = False,
        explain: bool = False,
    ) -> list[dict[str, Any]]:
        """``raw`` holds the query-string values of a single row: a feature the model knows as
        categorical (say a zip code) that looked numeric is retried as text. ``explain``: each
        result has the prediction's ``explanation`` (``predict_explain_one``)."""
        h = await self.fresh(name, min_seq)
        _, learners = engine()
        explanations: list[dict] | None = None
        try:
            try:
                probas, ignored = await off_loop(h, n_values(X), _predict, h.model, X, explain)
                if explain:
                    explanations = probas
                    probas = [e["probabilities"] for e in explanations]
            except learners.FeatureTypeError as exc:
                f = exc.feature
                v = X[0].get(f)
                if not raw or f not in raw or not isinstance(v, float) or math.isinf(v):
                    raise
                X = [{**X[0], f: raw[f]}]
                return await self.predict(
                    name,
                    X,
                    {k: v for k, v in raw.items() if k != f},
                    min_seq,
                    many=many,
                    explain=explain,
                )
        except InvalidInput:
            raise  # from the retry as text
        except (learners.FeatureTypeError, learners.LabelError, ValueError) as exc:
            rows = list(range(len(X))) if many else None
            field = "explain" if getattr(exc, "field", None) == "explain" else None
            raise InvalidInput(f"{field or error_field(exc, rows)}: {exc}") from exc
        except Exception as exc:  # noqa: BLE001 - an engine bug, not the client's input
            log.exception("model %s: engine failed on predict", name)
            raise EngineFailure(
                f"model {name}: internal engine error while predicting (logged on the server)"
            ) from exc
        results = []
        for proba, unknown in zip(probas, ignored, strict=True):
            proba = clean_proba(proba)
            results.append({"prediction": learners.argmax_label(proba), "probabilities": proba,
                            "prediction_id": None, "ignored_features": unknown})  # fmt: skip
        if explanations is not None:
            for r, e in zip(results, explanations, strict=True):
                r["explanation"] = e
        if self.settings.keep_predictions:
            served = [(x, r["prediction"], r["probabilities"]) for x, r in zip(X, results)]  # noqa: B905
            kept = await self.keeper.keep(name, h.incarnation, served, many=many)
            for r, pid in zip(results, kept):  # noqa: B905
                r["prediction_id"] = pid
        return results
