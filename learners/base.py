"""The learner protocol every base learner and ensemble follows (river's API, ARCHITECTURE §2)."""

from __future__ import annotations

import copy
import numbers
from collections.abc import Iterable, Iterator, Sequence
from operator import itemgetter
from typing import Any, Protocol, runtime_checkable

import numpy as np
from river import base as river_base

Label = str | int | bool
Features = dict[str, Any]
State = dict[str, Any]  # {"header": JSON-able dict, "arrays": dict[str, numpy.ndarray]}


@runtime_checkable
class Learner(Protocol):
    """An incremental classifier.

    ``learn_one`` honours sample weights (``w=0`` does nothing), ``predict_proba_one`` returns
    ``{}`` before any training and otherwise probabilities summing to 1, ``clone`` returns a fresh
    untrained copy with the same parameters, and ``to_state``/``from_state`` round-trip the
    learned state without pickle.
    """

    def learn_one(self, x: Features, y: Label, *, w: float = 1.0) -> None: ...

    def predict_proba_one(self, x: Features) -> dict[Label, float]: ...

    def predict_one(self, x: Features) -> Label | None: ...

    def clone(self) -> Learner: ...

    def to_state(self) -> State: ...


def at_row(exc: BaseException, r: int) -> None:
    """Mark an input error (a ``ValueError``; anything else is left alone) of a ``*_many`` call
    with the index of the row it is about: ``exc.row`` (kept if already set: the innermost call
    knows best). A refusal of the whole call (``max_state_bytes``, a wrong number of weights)
    has no ``row``."""
    if isinstance(exc, ValueError) and getattr(exc, "row", None) is None:
        exc.row = r  # type: ignore[attr-defined]


MAX_WEIGHT = 1e12  # the largest sample weight a model takes


class WeightError(ValueError):
    """A sample weight that is not a number from 0 to ``MAX_WEIGHT`` (``field = "weight"``).

    The bound keeps every sum a model keeps finite: a member learns an example with its weight
    times a Poisson count (at most 2^31 - 1 in boosting), so 1e12 leaves 1e260 of room; at 1.7e308
    one example made a class weight infinite and every later probability NaN."""

    field = "weight"


def check_weight(w: Any) -> None:
    """``WeightError`` unless the sample weight ``w`` is a number from 0 to ``MAX_WEIGHT`` (not a
    string, ``None``, an array: those raised a bare ``TypeError`` or ``ValueError``)."""
    ok = isinstance(w, numbers.Real) and 0.0 <= float(w) <= MAX_WEIGHT  # (bool and numpy too)
    if not ok:
        raise WeightError(f"w must be a number from 0 to {MAX_WEIGHT:g}, got {w!r}")


def check_weights(ws: Any, n: int) -> np.ndarray:
    """Sample weights as a float array, or ``WeightError`` unless there are ``n``, from 0 to 1e12
    (``.row``: the first bad one's, see :func:`at_row`)."""
    if hasattr(ws, "__iter__") and not hasattr(ws, "__len__"):
        ws = list(ws)  # (a generator: its items)
    try:
        raw = np.asarray(ws)
    except ValueError:  # ragged ([1.0, [1.0]]): the items as given, one per cell
        raw = np.empty(len(ws), dtype=object)
        for r, v in enumerate(ws):
            raw[r] = v
    if raw.shape != (n,):
        raise WeightError(
            f"sample weights must be one per row: {n} rows, weights of shape {raw.shape}"
        )
    if raw.dtype.kind not in "biuf":  # strings, None, objects: each must be a number
        items = raw.tolist() if isinstance(ws, np.ndarray) else list(ws)  # (as given: numpy
        for r, v in enumerate(items):  # makes [1.0, "1"] strings)
            if not isinstance(v, numbers.Real):
                exc = WeightError(
                    f"sample weights must be numbers from 0 to {MAX_WEIGHT:g}, got {v!r} (row {r})"
                )
                at_row(exc, r)
                raise exc
    w = raw.astype(np.float64, copy=False)
    ok = (w >= 0.0) & (w <= MAX_WEIGHT)
    if not ok.all():
        r = int(np.flatnonzero(~ok)[0])
        exc = WeightError(
            f"sample weights must be numbers from 0 to {MAX_WEIGHT:g}, got {float(w[r])!r} (row {r})"
        )
        at_row(exc, r)
        raise exc
    return w


def argmax_label(proba: dict[Label, float]) -> Label | None:
    """The most probable label; ties go to the label seen first (dict order). ``None`` if empty."""
    best, best_p = None, -1.0
    for label, p in proba.items():
        if p > best_p:
            best, best_p = label, p
    return best


class FrameRows(Sequence):
    """The rows of a pandas DataFrame as dicts (``to_dict(orient="records")``), made on first
    read: ``Schema.encode_rows`` reads the frame's columns instead when it can."""

    def __init__(self, frame: Any) -> None:
        self.frame = frame
        self._rows: list[Features] | None = None

    def rows(self) -> list[Features]:
        if self._rows is None:
            self._rows = self.frame.to_dict(orient="records")
        return self._rows

    def __len__(self) -> int:
        return len(self.frame)

    def __getitem__(self, i: Any) -> Any:
        return self.rows()[i]

    def __iter__(self) -> Iterator[Features]:
        return iter(self.rows())


def rows_of(X: Any, frames: bool = False) -> tuple[Any, Any]:
    """The rows of a batch as dicts, and the pandas index when ``X`` is a DataFrame (else
    ``None``). NaN cells of a DataFrame are missing values, as absent keys are. With
    ``frames``, a DataFrame's rows come as ``FrameRows`` (for learners whose ``_run`` encodes
    through ``Schema.encode_rows``, which reads the columns). A DataFrame whose column names
    are not unique is refused (``FeatureTypeError`` naming the first repeated one): its rows
    as dicts would keep one of the columns and drop the others unseen."""
    if hasattr(X, "columns") and hasattr(X, "to_dict"):
        columns = X.columns
        if not columns.is_unique:  # (as Schema._encode_frame tests it)
            name = columns[columns.duplicated()][0]  # the first name that comes again
            raise FeatureTypeError(
                str(name),
                f"a DataFrame's column names must be unique; {list(columns).count(name)} "
                "columns have this one",
            )
        return (FrameRows(X) if frames else X.to_dict(orient="records")), X.index
    # (a dict is iterable, but its keys are not rows)
    if isinstance(X, dict | str | bytes) or not hasattr(X, "__iter__"):
        raise FeatureTypeError(
            "features", f"expected a list of dicts or a DataFrame, got {type(X).__name__}"
        )
    return list(X), None


class FeatureTypeError(ValueError):
    """A feature value that does not fit the feature's kind. ``.feature`` names the feature."""

    def __init__(self, feature: str, message: str):
        super().__init__(f"feature {feature!r}: {message}")
        self.feature = feature


class LabelError(ValueError):
    """A class label that cannot be used (not a str, int or bool), or a batch's labels that are
    not one per row."""


def labels_of(y: Any, n: int) -> list:
    """Labels of a batch of ``n`` rows as a list of Python scalars (from a list, a Series or an
    array); a ``LabelError`` unless there is one per row (a shorter ``y`` raised an IndexError
    and a longer one lost its extra labels silently)."""
    if y is None or isinstance(y, str | bytes | dict) or not hasattr(y, "__iter__"):
        raise LabelError(f"y: expected one label per row ({n} rows), got {type(y).__name__}")
    labels = y.tolist() if hasattr(y, "tolist") else list(y)
    if not isinstance(labels, list) or len(labels) != n:  # (a 0-d array's tolist is a scalar)
        got = len(labels) if isinstance(labels, list) else "a scalar"
        raise LabelError(f"y: {got} labels for {n} rows")
    return labels


def batch_parts(batch: Any) -> tuple[Any, Any, Any]:
    """``(X, y, w)`` of a stream's batch ``(X, y)`` or ``(X, y, w)``."""
    if not isinstance(batch, tuple | list) or len(batch) not in (2, 3):
        raise ValueError("a batch of a stream is (X, y) or (X, y, w)")
    return batch[0], batch[1], batch[2] if len(batch) == 3 else None


def values_of(keys: list) -> Any:
    """A function of a dict: the tuple of its values of ``keys`` (``itemgetter``, which gives a
    bare value for one key and cannot take none: a tuple always)."""
    if len(keys) > 1:
        return itemgetter(*keys)
    if keys:
        key = keys[0]
        return lambda d: (d[key],)
    return lambda d: ()


class ManyMixin:
    """The batch forms of the model API over one ``_run(X, ys, ws, *, predict, learn)``.

    ``X`` is a list of dicts or a pandas DataFrame; given a DataFrame, the outputs are pandas too
    (probabilities: a DataFrame with a column per class; labels: a Series), indexed like ``X``,
    as river's mini-batch classifiers return them.
    """

    def _run(self, X: list, ys: list | None, ws: Any, *, predict: bool, learn: bool) -> list:
        raise NotImplementedError

    def _reads_frames(self) -> bool:
        """Whether ``_run`` takes ``FrameRows`` (it encodes through ``Schema.encode_rows``)."""
        return False

    @staticmethod
    def _probas_out(probas: list[dict], index: Any) -> Any:
        if index is None:
            return probas
        import pandas as pd

        if probas and probas[0]:  # the usual batch: every row over the same classes, read by name
            cols = list(probas[0])
            n = len(cols)
            if all(len(p) == n for p in probas):
                try:
                    rows = list(map(values_of(cols), probas))
                except KeyError:  # (another class in some row: the general form below)
                    pass
                else:
                    return pd.DataFrame(rows, columns=cols, index=index).fillna(0.0)
        # (not from_records(..., index=index): index labels that are also class labels, a 2-row
        # batch of a model of classes 0 and 1, are taken there for the columns to index by)
        frame = pd.DataFrame.from_records(probas).fillna(0.0)
        frame.index = index
        return frame

    def learn_many(self, X: Any, y: Any, w: Any = None) -> None:
        """Learn rows in order (row i with weight ``w[i]``, default 1)."""
        rows, _ = rows_of(X, self._reads_frames())
        self._run(rows, labels_of(y, len(rows)), w, predict=False, learn=True)

    def predict_proba_many(self, X: Any) -> Any:
        """Class probabilities per row (``{}`` / zeros before any training)."""
        rows, index = rows_of(X, self._reads_frames())
        return self._probas_out(self._run(rows, None, None, predict=True, learn=False), index)

    def predict_many(self, X: Any) -> Any:
        """The most probable label per row (``None`` before any training)."""
        rows, index = rows_of(X, self._reads_frames())
        labels = [argmax_label(p) for p in self._run(rows, None, None, predict=True, learn=False)]
        if index is None:
            return labels
        import pandas as pd

        return pd.Series(labels, index=index)

    def predict_learn_many(self, X: Any, y: Any, w: Any = None) -> Any:
        """Row i is predicted after rows < i were learned, then learned; the probabilities."""
        rows, index = rows_of(X, self._reads_frames())
        ys = labels_of(y, len(rows))
        return self._probas_out(self._run(rows, ys, w, predict=True, learn=True), index)

    def predict_learn_batches(self, batches: Iterable[tuple]) -> Iterator[Any]:
        """``predict_learn_many`` over a stream of ``(X, y)`` or ``(X, y, w)`` batches: yields
        each batch's probabilities, the same as ``predict_learn_many`` called batch after batch.
        A refused batch raises as ``predict_learn_many`` would, after the earlier batches'
        answers (it leaves no trace; a later batch is not read). Online bagging with ``threads``
        overlaps the batches (``ensembles.stream``); here they run one after the other."""
        for batch in batches:
            yield self.predict_learn_many(*batch_parts(batch))

    def learn_batches(self, batches: Iterable[tuple]) -> None:
        """``learn_many`` over a stream of ``(X, y)`` or ``(X, y, w)`` batches, in order (see
        ``predict_learn_batches``)."""
        for batch in batches:
            self.learn_many(*batch_parts(batch))


class BatchMixin(ManyMixin):
    """Batch and prequential forms of the model API, for learners that only implement the
    per-example methods (their natural form). Native learners have compiled versions instead."""

    def _run(self, X: list, ys: list | None, ws: Any, *, predict: bool, learn: bool) -> list:
        do_predict, do_learn = predict, learn
        n = len(X)
        weights = [1.0] * n if ws is None else (ws.tolist() if hasattr(ws, "tolist") else list(ws))
        out = []
        for r, (x, y, w) in enumerate(zip(X, [None] * n if ys is None else ys, weights,
                                           strict=True)):  # fmt: skip
            try:
                if do_predict:
                    out.append(self.predict_proba_one(x))  # type: ignore[attr-defined]
                if do_learn:
                    self.learn_one(x, y, w=w)  # type: ignore[attr-defined]
            except ValueError as exc:  # (the rows before r are learned: one row at a time)
                at_row(exc, r)
                raise
        return out

    def predict_learn_one(self, x: Features, y: Label, *, w: float = 1.0) -> dict[Label, float]:
        """Predict, then learn (prequential). Returns the class *probabilities* the model gave
        before learning ``x`` (not a label: ``argmax_label`` of it is the prediction)."""
        p = self.predict_proba_one(x)  # type: ignore[attr-defined]
        self.learn_one(x, y, w=w)  # type: ignore[attr-defined]
        return p


class MemoryBytesMixin:
    """river's memory figure (``check_bounded_memory_growth``, ``_memory_usage``) is the model's
    ``memory_bytes``, not river's walk of the object graph: from the kernel a pending learn
    keeps, that walk reaches all of numba's compiler (and failed on a dead weak proxy in it)."""

    @property
    def _raw_memory_usage(self) -> int:
        return self.memory_bytes  # type: ignore[attr-defined]


class RiverEstimator(river_base.MiniBatchClassifier):
    """river's estimator contract for every Chorus learner and ensemble.

    A ``river.base.MiniBatchClassifier``: ``_get_params`` (from the constructor signature),
    ``clone(new_params)``, ``mutate``, ``_tags``, ``_unit_test_params``, multiclass. Nothing of
    river runs on the hot path: ``learn_one`` and the predictions are the subclass's own methods.
    ``pickle`` and ``copy.deepcopy`` go through ``to_state()`` / ``from_state()`` (plain arrays,
    no compiled object), so a copy continues exactly as the original would.
    """

    @property
    def _multiclass(self) -> bool:
        return True

    def clone(self, new_params: dict[str, Any] | None = None, include_attributes: bool = False):
        """A fresh, untrained model with the same parameters, updated by ``new_params``.

        ``include_attributes=True`` copies the learned state too (a deep copy); it cannot be
        combined with ``new_params``.
        """
        if include_attributes:
            if new_params:
                raise ValueError("clone: include_attributes=True takes no new_params")
            return copy.deepcopy(self)
        return super().clone(new_params)

    def to_state(self) -> State:
        raise NotImplementedError

    @classmethod
    def from_state(cls, state: State) -> Any:
        raise NotImplementedError

    def __getstate__(self) -> dict[str, Any]:
        try:
            return self.to_state()
        except ValueError:  # no state form (an ensemble over a third-party Python learner):
            return dict(self.__dict__)  # its members are plain Python objects

    def __setstate__(self, state: dict[str, Any]) -> None:
        if set(state) == {"header", "arrays"}:
            state = type(self).from_state(state).__dict__
        self.__dict__.update(state)

    @classmethod
    def _unit_test_params(cls) -> Iterator[dict[str, Any]]:
        yield {}
