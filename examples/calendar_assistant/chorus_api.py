"""The assistant's only door to Chorus: a thin async adapter over ``app.client.AsyncChorusClient``.

Everything the assistant needs from Chorus is here -- make sure a model exists, delete one, predict (getting a
``prediction_id``), give a delayed label, learn a batch, read a model's description -- so the rest of
the example never depends on the client's exact shapes. The client retries, boundedly, only what
cannot be applied twice (refused connections, 503s; ``learn`` calls carry idempotency ids and a
delayed label's ``prediction_id`` is its own idempotency key).
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from app import client as chorus_client


class ChorusError(Exception):
    """Chorus answered with an error status; ``detail`` is its message."""

    def __init__(self, status: int | None, detail: str) -> None:
        super().__init__(f"Chorus answered {status}: {detail}" if status else detail)
        self.status = status
        self.detail = detail


class ChorusUnavailable(ChorusError):
    """Chorus could not be reached (or kept answering 503) within the retry budget."""


def _translate(exc: chorus_client.ChorusError) -> ChorusError:
    if isinstance(exc, chorus_client.Unavailable):
        return ChorusUnavailable(exc.status or 503, exc.detail)
    return ChorusError(exc.status, exc.detail)


@dataclass
class Prediction:
    """One model's answer for one meeting."""

    prediction: Any
    probabilities: dict[str, float] = field(default_factory=dict)
    prediction_id: str | None = None
    because: str | None = None  # why, in words (``because``), from the prediction's explanation

    @property
    def confidence(self) -> float:
        """Probability the model gives its own suggestion (0 when it has none)."""
        if self.prediction is None:
            return 0.0
        return float(self.probabilities.get(str(self.prediction), 0.0))


def _phrase(step: dict[str, Any]) -> tuple[str, str] | None:
    """One step of a tree's path in words, and what it is about (the feature and the side of a
    numeric test); ``None`` for a step the value did not decide (missing)."""
    if step.get("branch") is None or "missing" in (step.get("why") or ""):
        return None
    name = step["feature"].replace("_", " ")
    if step["kind"] == "numeric":
        sign = "≤" if step["branch"] == "yes" else ">"
        return f"{name} {sign} {step['threshold']:.3g}", f"{name} {sign}"
    if step["branch"] == "other":
        return f"{name} is a value seldom seen", name
    return f"{name} is {step['branch']}", name


def because(explanation: dict[str, Any] | None, most: int = 2) -> str | None:
    """A short reason for a suggestion, from Chorus's explanation (``?explain=true``): the tests
    most of the models that agree with it took on the way to their leaves (at most ``most``),
    and how many agree; without a split yet, what their leaves counted."""
    if not explanation or explanation.get("prediction") is None:
        return None
    agreeing = set(explanation.get("agreeing") or [])
    members = explanation.get("members") or []
    agree = [d for d in members if d["member"] in agreeing]
    counts: Counter[tuple[str, str]] = Counter()
    for d in agree:
        phrases = {_phrase(step) for step in (d.get("tree") or {}).get("path", [])}
        counts.update(p for p in phrases if p)
    reasons: list[str] = []
    about: set[str] = set()
    for (phrase, topic), _ in counts.most_common():  # one phrase per feature (and side)
        if topic not in about and len(reasons) < most:
            about.add(topic)
            reasons.append(phrase)
    if reasons:
        text = "because " + " and ".join(reasons)
    else:
        label = str(explanation["prediction"])
        seen = sum(float((d.get("tree") or {}).get("leaf", {}).get("class_weights", {})
                         .get(label, 0.0)) for d in agree)  # fmt: skip
        text = "because it is the most common value so far" if seen else "because"
    if len(members) > 1:
        text += f" ({len(agree)} of {len(members)} models agree)"
    return text


class ChorusAdapter:
    """Async adapter for the handful of Chorus calls the assistant makes.

    Parameters
    ----------
    base_url
        Where Chorus listens, e.g. ``http://127.0.0.1:8000``.
    api_key
        Bearer token when the server runs with ``CHORUS_API_KEY``.
    """

    def __init__(
        self, base_url: str, *, api_key: str | None = None, timeout: float = 30.0, retries: int = 4
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self._client = chorus_client.AsyncChorusClient(
            self.base_url, api_key=api_key, timeout=timeout, retries=retries
        )

    async def aclose(self) -> None:
        await self._client.aclose()

    async def _call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        try:
            return await getattr(self._client, method)(*args, **kwargs)
        except chorus_client.ChorusError as exc:
            raise _translate(exc) from exc

    async def wait_ready(self, timeout: float = 60.0) -> None:
        """Wait until ``/readyz`` answers 200 (recovery done)."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                await self._client.ready()
                return
            except chorus_client.ChorusError as exc:
                if time.monotonic() > deadline:
                    raise ChorusUnavailable(
                        503, f"Chorus at {self.base_url} not ready: {exc}"
                    ) from exc
            await asyncio.sleep(0.2)

    async def describe(self, name: str) -> dict[str, Any]:
        """``GET /models/{name}``: spec, n_seen, classes, metrics (as the server's JSON)."""
        info = await self._call("get_model", name)
        return dict(info.raw)

    async def ensure_model(self, name: str, spec: dict[str, Any]) -> dict[str, Any]:
        """Create the model unless it exists; return its description either way."""
        try:
            return await self.describe(name)
        except ChorusError as exc:
            if exc.status != 404:
                raise
        try:
            return dict((await self._call("create_model", name, **spec)).raw)
        except ChorusError as exc:
            if exc.status != 409:  # created meanwhile by someone else: fine
                raise
            return await self.describe(name)

    async def leaderboard(self, name: str) -> dict[str, Any]:
        """``GET /models/{name}/leaderboard``: champion, challengers, their metrics and McNemar."""
        return dict(await self._call("leaderboard", name))

    async def ensure_challengers(
        self, name: str, challengers: list[dict[str, Any]], promotion: dict[str, Any] | None
    ) -> None:
        """Give a model made before it had challengers (an older data directory) its challengers
        and promotion policy; a model that has candidates already is left as it is."""
        if not challengers or (await self.leaderboard(name)).get("candidates"):
            return
        await self._call("add_challengers", name, challengers, promotion=promotion)

    async def delete(self, name: str) -> None:
        """``DELETE /models/{name}``; a model that is already gone is fine."""
        try:
            await self._call("delete_model", name)
        except ChorusError as exc:
            if exc.status != 404:
                raise

    async def predict(self, name: str, features: dict[str, Any]) -> Prediction:
        """``POST /predict``: suggestion, probabilities and the id for a later label."""
        answer = await self._call("predict", name, features, explain=True)
        return Prediction(
            prediction=answer.prediction,
            probabilities={str(k): float(v) for k, v in answer.probabilities.items()},
            prediction_id=answer.prediction_id,
            because=because(answer.explanation),
        )

    async def label(self, name: str, prediction_id: str, label: Any) -> Any:
        """Delayed label: ``POST /learn {model, prediction_id, label}``."""
        return await self._call("label", name, prediction_id, label)

    async def learn(
        self, name: str, features: dict[str, Any], label: Any, *, example_id: str | None = None
    ) -> Any:
        """Predict-then-learn one example (used when a meeting is saved without a suggestion)."""
        return await self._call("learn", name, features, label, id=example_id)

    async def learn_many(self, name: str, examples: list[dict[str, Any]]) -> list[Any]:
        """Batched predict-then-learn; row i's prediction is made before row i is learned.

        Returns one result per row, each with a ``prediction`` attribute.
        """
        batch = await self._call("learn_many", name, examples)
        return list(batch.results)
