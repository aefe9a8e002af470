"""What a message on the bus says: an example, a late label, or a row to predict.

A message's payload is one JSON object (a Redis Stream entry's ``data`` field, a NATS message's
body), in the shapes of ``POST /learn`` and ``POST /predict``:

- ``{"model", "features", "label", "id"?, "weight"?}``: predict, then learn (an example);
- ``{"model", "prediction_id", "label", "id"?}``: the late label of an earlier prediction;
- ``{"model", "features", "id"?}``: predict only (its ``prediction_id`` goes to the output stream,
  for a late label).

:func:`parse` turns a payload into a :class:`Message` or raises :class:`BadMessage` with the
reason that goes with it to the dead-letter stream (the field named as ``POST /learn`` names it).
A plain message is read by orjson and a few type checks; anything else (an integer of more than 64
bits, a wrong type, a missing or extra field) goes through the pydantic model, which accepts
exactly what the fast path accepts and names what is wrong otherwise.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from app.errors import validation_message
from app.names import NAME_RE
from app.routes.schemas import KEY_MAX, Features, Label, Name, Weight, plain_json
from app.validate import MAX_WEIGHT

MAX_MESSAGE_BYTES = 4 * 1024 * 1024  # a payload larger than this is dead-lettered unread

Kind = Literal["learn", "label", "predict"]


class BadMessage(Exception):
    """A message that can never be learned: it goes to the dead-letter stream with ``reason``."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(slots=True)
class Message:
    """One parsed message (``label`` is ``None`` only for ``predict``)."""

    model: str
    kind: Kind
    features: dict[str, Any] | None = None
    label: Any = None
    weight: float = 1.0
    id: str | None = None
    prediction_id: str | None = None


class BusMessage(BaseModel):
    """The JSON schema of a message (documented in docs/service.md, "Examples from a bus")."""

    model_config = ConfigDict(extra="forbid")

    model: str = Name
    features: Features | None = None
    label: Label | None = None
    id: str | None = Field(None, min_length=1, max_length=KEY_MAX)
    weight: Weight = 1.0
    prediction_id: str | None = Field(None, min_length=1, max_length=KEY_MAX)

    @model_validator(mode="after")
    def _one_mode(self) -> BusMessage:
        if (self.features is None) == (self.prediction_id is None):
            raise ValueError("give exactly one of 'features' or 'prediction_id'")
        if self.prediction_id is not None and self.label is None:
            raise ValueError("label: required with 'prediction_id'")
        return self


_KEYS = frozenset(("model", "features", "label", "id", "weight", "prediction_id"))
_LABEL_TYPES = (str, int, bool)


def parse(raw: bytes | str | None) -> Message:
    """The :class:`Message` of a payload, or :class:`BadMessage` saying why there is none.

    Examples
    --------
    >>> parse(b'{"model": "m", "features": {"a": 1}, "label": "yes"}').kind
    'learn'
    >>> parse(b'{"model": "m", "prediction_id": "p1", "label": 0}').kind
    'label'
    >>> parse(b'{"model": "m", "features": {}, "colour": 1}')
    Traceback (most recent call last):
    ...
    app.consume.messages.BadMessage: colour: Extra inputs are not permitted
    """
    if raw is None:
        raise BadMessage("no payload (a Redis entry needs a 'data' field holding the JSON)")
    if isinstance(raw, str):
        try:
            raw = raw.encode()
        except UnicodeEncodeError:
            raise BadMessage("payload: invalid unicode (lone surrogate)") from None
    if len(raw) > MAX_MESSAGE_BYTES:
        raise BadMessage(f"payload: {len(raw):,} bytes, over the limit of {MAX_MESSAGE_BYTES:,}")
    msg = _plain(raw)
    if msg is not None:
        return msg
    try:
        body = BusMessage.model_validate_json(raw)
    except ValidationError as exc:
        raise BadMessage(validation_message(list(exc.errors()))) from None
    if body.prediction_id is not None:
        return Message(body.model, "label", label=body.label, id=body.id,
                       prediction_id=body.prediction_id)  # fmt: skip
    kind: Kind = "predict" if body.label is None else "learn"
    return Message(body.model, kind, body.features, body.label, body.weight, body.id)


def _plain(raw: bytes) -> Message | None:
    """The fast path: a message of the usual shape, read by orjson (the values
    :class:`BusMessage` gives); ``None`` for anything else."""
    body = plain_json(raw)
    if type(body) is not dict or not body.keys() <= _KEYS:
        return None
    model = body.get("model")
    if type(model) is not str or NAME_RE.fullmatch(model) is None:
        return None
    key = body.get("id")
    if key is not None and (type(key) is not str or not 1 <= len(key) <= KEY_MAX):
        return None
    y = body.get("label")
    if y is not None and type(y) not in _LABEL_TYPES:
        return None
    x, pid = body.get("features"), body.get("prediction_id")
    if pid is not None:
        if x is not None or y is None or "weight" in body:
            return None
        if type(pid) is not str or not 1 <= len(pid) <= KEY_MAX:
            return None
        return Message(model, "label", label=y, id=key, prediction_id=pid)
    if type(x) is not dict:
        return None
    w = body.get("weight", 1.0)
    if type(w) is int:
        w = float(w)
    if type(w) is not float or not 0.0 <= w <= MAX_WEIGHT:
        return None
    return Message(model, "predict" if y is None else "learn", x, y, w, key)
