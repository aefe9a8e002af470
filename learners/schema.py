"""Feature/label schema: maps names, category strings and labels to integer codes (ARCHITECTURE §3).

The schema grows as the stream reveals new features, categories and classes. Numeric features get
a column in the numeric block, categorical ones a column in the categorical block; every
(categorical feature, value) pair gets one global *code*, so per-leaf statistics are indexed by code.

Encoding for learning may extend the schema; encoding for prediction never does (an unseen category
encodes as ``UNSEEN``). A failed encoding rolls back whatever it added, so a rejected example leaves
no trace in the model (important for exact replay of the durable log). Growth is bounded by the
model's :class:`~learners.limits.Limits` (features, values per feature, classes): beyond them
encoding raises ``LimitError``, or, with ``over_limit="other"``, maps a categorical feature's
further values to one shared "other" code.
"""

from __future__ import annotations

import math
import sys
from operator import itemgetter
from typing import Any

import numpy as np

from .base import FeatureTypeError, FrameRows, LabelError, argmax_label, at_row, values_of
from .limits import LimitError, Limits

_UNCHECKED = Limits(max_features=1 << 62, max_values=1 << 62, max_classes=1 << 62)

MISSING = -1
UNSEEN = -2
_COLUMNS_FROM = 8  # rows in a batch from which encode_rows tries the column path
_NUMBERS = frozenset({float, int, bool})

NUMERIC = "numeric"
CATEGORICAL = "categorical"
KINDS = (NUMERIC, CATEGORICAL)


LABEL_TYPES = {str: "string", int: "integer", bool: "boolean"}


def normalize_label(y: Any) -> Any:
    """Labels are JSON scalars: a non-empty str, an int or a bool (numpy scalars are converted,
    integral floats become ints)."""
    if isinstance(y, np.generic):  # np.bool_, np.int64, np.str_, ...
        y = y.item()
    if isinstance(y, str):
        if not y:
            raise LabelError("label '': the empty string is not a label (use a name)")
        return str(y)
    if isinstance(y, bool):
        return y
    if isinstance(y, int | np.integer):
        return int(y)
    if isinstance(y, float | np.floating) and float(y).is_integer():
        return int(y)
    raise LabelError(f"label {y!r}: labels must be str, int or bool, not {type(y).__name__}")


def check_label_kind(classes: list, y: Any) -> None:
    """``LabelError`` unless label ``y`` (normalised) is of the kind of the model's ``classes``:
    one model's labels are all strings, all integers or all booleans (``1`` is not ``True``)."""
    if classes and type(y) is not type(classes[0]):
        first = classes[0]
        raise LabelError(
            f"label {y!r}: this model's labels are {LABEL_TYPES[type(first)]}s "
            f"(its first label was {first!r}), not {LABEL_TYPES[type(y)]}s"
        )


def feature_order(name: Any) -> tuple[str, str]:
    """The order in which the new features of one example are registered (by name)."""
    return type(name).__name__, str(name)


FLOAT_MAX_INT = int(sys.float_info.max)  # the largest integer a float holds (~1.8e308)


def number_value(name: str, v: Any) -> float:
    """``float(v)`` of a number, or ``FeatureTypeError`` for an integer beyond a float's range
    (``float`` raises ``OverflowError``)."""
    try:
        return float(v)
    except OverflowError:
        raise FeatureTypeError(
            name, f"integer of {int(v).bit_length()} bits is beyond a float's range (1.8e308)"
        ) from None


def category_text(name: str, v: Any) -> tuple[int, Any]:
    """A number given for a categorical feature is the category of its text, as a query string
    carries it: ``12`` and ``12.0`` are ``"12"``, ``True`` is ``"true"``; NaN is missing and an
    infinity is rejected, as for numeric features. Returns ``(kind, value)`` as ``_value``."""
    if isinstance(v, bool | np.bool_):
        return 1, "true" if v else "false"
    if isinstance(v, int | np.integer):
        try:
            return 1, str(int(v))
        except ValueError:  # more digits than Python converts (4300)
            raise FeatureTypeError(
                name, f"integer of {int(v).bit_length()} bits: too many digits for a category"
            ) from None
    f = float(v)
    if math.isnan(f):
        return -1, None
    if math.isinf(f):
        raise FeatureTypeError(name, f"infinite value {v!r}")
    return 1, str(int(f)) if f.is_integer() else repr(f)


# Bytes the schema holds per entry beyond its characters: the str object and its places in the
# name -> code dicts and lists, the row readers and ``code_attr_array`` (tracemalloc, CPython
# 3.11: 174-222 per feature, 103-124 per categorical value, 84-108 per label; a categorical
# feature also holds its values' dict).
FEATURE_BYTES, CODE_BYTES, CLASS_BYTES = 256, 128, 112


class Schema:
    """Name <-> code maps for one model, within ``limits`` (defaults: ``Limits()``)."""

    def __init__(self, limits: Limits | None = None) -> None:
        self.limits = limits or Limits()
        self.num_names: list[str] = []
        self.num_index: dict[str, int] = {}
        self.cat_names: list[str] = []
        self.cat_index: dict[str, int] = {}
        self.cat_values: list[dict[str, int]] = []  # per categorical feature: value -> global code
        self.code_attr: list[int] = []  # global code -> categorical feature index
        self.code_value: list[str] = []  # global code -> value string
        self.classes: list[Any] = []
        self.class_index: dict[Any, int] = {}
        self.declared: dict[str, str] = {}
        self._fast: dict[str, tuple[int, int]] = {}  # name -> (0 numeric | 1 categorical, index)
        # code_attr as int64: the first len(code_attr) entries of a buffer that doubles when
        # full (a new value per example costs O(1), not a copy of every code), and the view of
        # them that code_attr_array hands out (None once a code is added or rolled back)
        self._code_attr_buf = np.empty(16, np.int64)
        self._code_attr_arr: np.ndarray | None = None
        self._max_values = 0
        self._other: dict[int, int] = {}  # categorical feature -> its "other" code
        self.text_bytes = 0  # characters of the names, values and labels held
        self._readers: tuple | None = None  # row_readers(), until the features change

    def held_bytes(self) -> int:
        """Estimated bytes the schema holds in memory (O(1)): the characters of its feature
        names, categorical values and labels (``text_bytes``; more for text beyond ASCII) and,
        per entry, its objects and index entries (``FEATURE_BYTES``, ``CODE_BYTES``,
        ``CLASS_BYTES``). What ``max_state_bytes`` and a model's ``state_bytes`` count besides
        the arrays."""
        return (self.text_bytes + FEATURE_BYTES * len(self._fast)
                + CODE_BYTES * len(self.code_attr) + CLASS_BYTES * len(self.classes))  # fmt: skip

    # ----------------------------------------------------------------- declarations
    def declare(self, features: dict[str, str] | None = None, classes: list | None = None) -> None:
        for name, kind in (features or {}).items():
            if kind not in KINDS:
                raise FeatureTypeError(name, f"kind must be one of {KINDS}, got {kind!r}")
            have = self.kind_of(name)
            if have is not None and have != kind:
                raise FeatureTypeError(name, f"already {have}, cannot declare it {kind}")
            self.declared[name] = kind
            if have is None:
                self._add_feature(name, kind)
        for y in classes or []:
            self.class_code(y, grow=True)

    def kind_of(self, name: str) -> str | None:
        """``NUMERIC`` or ``CATEGORICAL`` for a known feature, else ``None``."""
        if name in self.num_index:
            return NUMERIC
        if name in self.cat_index:
            return CATEGORICAL
        return None

    def _add_feature(self, name: str, kind: str) -> None:
        limit = self.limits.max_features
        if len(self.num_names) + len(self.cat_names) >= limit:
            raise LimitError("max_features", limit, "features", f"the model has {limit:,} "
                             f"features, no room for {str(name)[:100]!r}", feature=name)  # fmt: skip
        self.text_bytes += len(str(name))
        self._readers = None
        if kind == NUMERIC:
            self._fast[name] = (0, len(self.num_names))
            self.num_index[name] = len(self.num_names)
            self.num_names.append(name)
        else:
            self._fast[name] = (1, len(self.cat_names))
            self.cat_index[name] = len(self.cat_names)
            self.cat_names.append(name)
            self.cat_values.append({})

    # ----------------------------------------------------------------- rollback
    def mark(self) -> tuple:
        return (
            len(self.num_names),
            len(self.cat_names),
            len(self.code_attr),
            len(self.classes),
        )

    def rollback(self, mark: tuple) -> None:
        """Undo every addition since ``mark()`` (codes first: they refer to features)."""
        n_num, n_cat, n_codes, n_cls = mark
        # O(what is undone), not O(schema): a model at a limit refuses calls at a steady cost
        self.text_bytes -= (sum(len(str(v)) for v in self.code_value[n_codes:])
                            + sum(map(len, self.num_names[n_num:]))
                            + sum(map(len, self.cat_names[n_cat:]))
                            + sum(len(str(y)) for y in self.classes[n_cls:]))  # fmt: skip
        if len(self.code_attr) > n_codes:
            self._code_attr_arr = None
        for code in range(n_codes, len(self.code_attr)):
            a = self.code_attr[code]
            if self._other.get(a) == code:
                del self._other[a]
            else:
                del self.cat_values[a][self.code_value[code]]
        del self.code_attr[n_codes:]
        del self.code_value[n_codes:]
        if len(self.num_names) > n_num or len(self.cat_names) > n_cat:
            self._readers = None
        for name in self.num_names[n_num:]:
            del self.num_index[name]
            del self._fast[name]
        del self.num_names[n_num:]
        for name in self.cat_names[n_cat:]:
            del self.cat_index[name]
            del self._fast[name]
        del self.cat_names[n_cat:]
        del self.cat_values[n_cat:]
        self._max_values = max((self._n_values(a) for a in range(n_cat)), default=0)
        for y in self.classes[n_cls:]:
            del self.class_index[y]
        del self.classes[n_cls:]

    def _n_values(self, a: int) -> int:
        """Codes of categorical feature a (its values, and its "other" code if it has one)."""
        return len(self.cat_values[a]) + (a in self._other)

    # ----------------------------------------------------------------- encoding
    @property
    def n_num(self) -> int:
        return len(self.num_names)

    @property
    def n_cat(self) -> int:
        return len(self.cat_names)

    @property
    def n_codes(self) -> int:
        return len(self.code_attr)

    @property
    def n_classes(self) -> int:
        return len(self.classes)

    def class_code(self, y: Any, grow: bool) -> int:
        """Code of label ``y`` (new classes get the next code when ``grow``, else -1).

        A model's labels all have one type, fixed by its first (or declared) label: a label of
        another type (``1`` in a model of ``"1"``, ``True`` in a model of ``1``) is a
        ``LabelError``, never a new or merged class.
        """
        code = self.class_index.get(y)
        if code is None or type(y) is not type(self.classes[code]):
            y = normalize_label(y)
            check_label_kind(self.classes, y)
            code = self.class_index.get(y)
            if code is None:
                if not grow:
                    return -1
                code = len(self.classes)
                limit = self.limits.max_classes
                if code >= limit:
                    raise LimitError("max_classes", limit, "label", f"the model has {limit:,} "
                                     f"classes, no room for label {str(y)[:100]!r}")  # fmt: skip
                self.text_bytes += len(str(y))
                self.classes.append(y)
                self.class_index[y] = code
        return code

    def _value(self, name: str, v: Any, grow: bool) -> tuple[int, Any]:
        """Return (kind, value) with kind 0 numeric, 1 categorical, -1 missing/ignored."""
        if isinstance(v, np.generic):  # np.bool_, np.int64, np.float32, np.str_, ...
            v = v.item()
        if v is None or (type(v) is float and math.isnan(v)):  # missing, whatever the kind
            return -1, None
        kind = self.num_index.get(name)
        if kind is not None:  # known numeric
            if isinstance(v, bool | int | float | np.integer | np.floating):
                f = number_value(name, v)
                return (-1, None) if math.isnan(f) else (0, f)
            if isinstance(v, str) and self.declared.get(name) == NUMERIC:
                try:
                    f = float(v)
                except ValueError:
                    raise FeatureTypeError(name, f"expected a number, got {v!r}") from None
                return (-1, None) if math.isnan(f) else (0, f)
            raise FeatureTypeError(
                name, f"is numeric, got {type(v).__name__} {v!r} (declare it categorical?)"
            )
        if name in self.cat_index:
            if isinstance(v, str):
                return 1, v
            if isinstance(v, bool | int | float | np.integer | np.floating):
                return category_text(name, v)
            raise FeatureTypeError(name, f"unsupported value type {type(v).__name__}")
        # unknown feature
        if isinstance(v, str):
            if grow:
                self._add_feature(name, CATEGORICAL)
            return 1, v
        if isinstance(v, bool | int | float | np.integer | np.floating):
            f = number_value(name, v)
            if math.isnan(f):
                return -1, None
            if grow:
                self._add_feature(name, NUMERIC)
            return 0, f
        raise FeatureTypeError(name, f"unsupported value type {type(v).__name__}")

    @property
    def code_attr_array(self) -> np.ndarray:
        """``code_attr`` as an int64 array: a view of the schema's buffer, valid until a code is
        added or rolled back (callers take it for one call)."""
        arr = self._code_attr_arr
        if arr is None:
            arr = self._code_attr_arr = self._code_attr_buf[: len(self.code_attr)]
        return arr

    def _new_code(self, a: int, value: str) -> int:
        limit = self.limits.max_values
        if len(self.cat_values[a]) >= limit:
            name = self.cat_names[a]
            if self.limits.over_limit == "reject":
                raise LimitError("max_values", limit, f"features.{name}",
                                 f"categorical feature {name!r} has {limit:,} values, no room "
                                 f"for {value[:100]!r}", feature=name)  # fmt: skip
            code = self._other.get(a)
            if code is None:
                code = self._add_code(a, "")
                self._other[a] = code
            return code
        code = self._add_code(a, value)
        self.cat_values[a][value] = code
        self.text_bytes += len(str(value))
        return code

    def _add_code(self, a: int, value: str) -> int:
        code = len(self.code_attr)
        self._max_values = max(self._max_values, self._n_values(a) + 1)
        buf = self._code_attr_buf
        if code == buf.shape[0]:  # full: double it (amortised O(1) per code)
            buf = self._code_attr_buf = np.concatenate((buf, np.empty_like(buf)))
        buf[code] = a
        self._code_attr_arr = None
        self.code_attr.append(a)
        self.code_value.append(value)
        return code

    def _unknown_code(self, a: int, value: str, grow: bool) -> int:
        """Code of a value of feature a that is not in ``cat_values``."""
        if grow:
            return self._new_code(a, value)
        return self._other.get(a, UNSEEN)  # an over-limit value is an "other" value

    def _encode_row(self, x: dict, grow: bool) -> tuple[list, list, bool]:
        """One row as (numeric values with NaN, category codes) lists, in schema order, and
        whether every feature and category of the row was already known (nothing to grow)."""
        nan = math.nan
        num = [nan] * len(self.num_names)
        cat = [MISSING] * len(self.cat_names)
        fast = self._fast
        known = True
        for name, v in x.items():
            f = fast.get(name)
            tv = type(v)
            if f is not None:  # fast path: known feature, value of its kind
                kind, idx = f
                if kind == 0:
                    if tv is float:
                        if v - v == 0.0 or v != v:  # finite, or NaN (= missing)
                            num[idx] = v
                            continue
                        raise FeatureTypeError(name, f"infinite value {v!r}")
                    if tv is int and -FLOAT_MAX_INT <= v <= FLOAT_MAX_INT:
                        num[idx] = v
                        continue
                elif tv is str:
                    code = self.cat_values[idx].get(v)
                    if code is None:
                        known = False
                        code = self._unknown_code(idx, v, grow)
                    cat[idx] = code
                    continue
            known = False
            if grow and name not in self.num_index and name not in self.cat_index:
                self._add_features_of(x)
                num.extend([nan] * (len(self.num_names) - len(num)))
                cat.extend([MISSING] * (len(self.cat_names) - len(cat)))
            kind, val = self._value(name, v, grow)
            if kind == 0:
                if val is not None and math.isinf(val):
                    raise FeatureTypeError(name, f"infinite value {v!r}")
                j = self.num_index.get(name, -1)
                if j >= 0:
                    if j >= len(num):
                        num.extend([nan] * (j + 1 - len(num)))
                    num[j] = val
            elif kind == 1:
                a = self.cat_index.get(name, -1)
                if a >= 0:
                    code = self.cat_values[a].get(val)
                    if code is None:
                        code = self._unknown_code(a, val, grow)
                    if a >= len(cat):
                        cat.extend([MISSING] * (a + 1 - len(cat)))
                    cat[a] = code
        return num, cat, known

    def row_readers(self) -> tuple:
        """What ``TreeBank._encode_one`` reads a row with when the row has exactly the schema's
        features (``len(x)`` equal to their number, and every name a key): ``(number of
        features, numbers, categories, value codes)``. ``numbers(x)`` is the tuple of the numeric
        features' values in schema order, ``categories(x)`` that of the categorical ones
        (``None`` without categorical features), and ``value codes`` each categorical
        feature's dict of codes. Cached until a feature is added or rolled back.

        The row is then encoded without ``_encode_row`` when its numbers are all of type float
        or int and their sum is finite (so is each), its categories all of type str and known;
        packing the numbers as doubles refuses an int exactly where ``float(v)`` (the loop's
        value) raises ``OverflowError``. Any other row takes ``_encode_row``: its conversions,
        its errors."""
        readers = self._readers
        if readers is None:
            readers = self._readers = (len(self.num_names) + len(self.cat_names),
                                       values_of(self.num_names),
                                       values_of(self.cat_names) if self.cat_names else None,
                                       list(self.cat_values))  # fmt: skip
        return readers

    def _add_features_of(self, x: dict) -> None:
        """Register every feature of ``x`` the schema does not know yet, in name order.

        A feature's index is its order of first appearance, and split ties go to the lower
        index; registering the new features of one example sorted by name (not in the dict's
        order) makes a model independent of the order of a row's keys (river's
        ``check_shuffle_features_no_impact``).
        """
        new = [n for n in x if n not in self.num_index and n not in self.cat_index]
        for name in sorted(new, key=feature_order):
            self._value(name, x[name], True)

    def _encode_columns(self, X: list[dict], grow: bool) -> tuple | None:
        """``(xn, xc)`` of ``encode_rows`` read a feature at a time, for the usual batch: plain
        dicts that all have the same keys, all known features, numbers of type float, int or
        bool (the loop's float(v); NaN is missing) without an infinity, strings for categories
        and, when growing, no new category. ``None`` for any other batch (the row loop then
        encodes it, with its errors and its order of new codes); nothing is changed either
        way."""
        n0 = len(X[0])
        if set(map(type, X)) != {dict} or set(map(len, X)) != {n0}:
            return None
        # every row has the n0 keys of row 0 (else KeyError), so exactly these
        return self._encode_cols(((name, list(map(itemgetter(name), X))) for name in list(X[0])),
                                 len(X), grow)  # fmt: skip

    def _encode_frame(self, frame: Any, grow: bool) -> tuple | None:
        """``_encode_columns`` of a pandas DataFrame's rows, read from its columns (the values
        ``to_dict(orient="records")`` gives, without making the dicts)."""
        if not frame.columns.is_unique:
            return None
        return self._encode_cols(((name, frame[name].tolist()) for name in frame.columns),
                                 len(frame), grow)  # fmt: skip

    def _encode_cols(self, columns: Any, R: int, grow: bool) -> tuple | None:
        """``(xn, xc)`` from ``(feature, its R values)`` pairs, or ``None`` (see
        ``_encode_columns``)."""
        fast = self._fast
        xn = np.full((R, max(len(self.num_names), 1)), math.nan)
        xc = np.full((R, max(len(self.cat_names), 1)), MISSING, dtype=np.int64)
        try:
            for name, col in columns:
                f = fast.get(name)
                if f is None:
                    return None
                kind, idx = f
                if kind == 0:
                    if not set(map(type, col)) <= _NUMBERS:  # (numpy would read "1.5")
                        return None
                    vals = np.array(col, dtype=np.float64)  # as float(v), the loop's value
                    if np.isinf(vals).any():
                        return None  # the loop names the feature
                    xn[:, idx] = vals
                else:
                    codes: list[Any] = list(map(self.cat_values[idx].get, col))
                    if None in codes:  # new values, or not strings (the loop converts those)
                        if grow or any(c is None and type(v) is not str
                                       for c, v in zip(codes, col, strict=True)):  # fmt: skip
                            return None
                        other = self._other.get(idx, UNSEEN)
                        codes = [other if c is None else c for c in codes]
                    xc[:, idx] = codes
        except (KeyError, OverflowError, TypeError, ValueError):
            return None
        return xn, xc

    def encode_rows(
        self, X: list[dict], grow: bool, ys: list | None = None
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Encode rows into (numeric [R, J] with NaN, categorical codes [R, A], labels [R],
        number of classes known before each row [R]). Rolls back on error."""
        if isinstance(X, FrameRows):
            if len(X) >= _COLUMNS_FROM and self._fast:
                cols = self._encode_frame(X.frame, grow)
                if cols is not None:
                    return self._with_labels(X, ys, grow, *cols)
            X = X.rows()
        elif len(X) >= _COLUMNS_FROM and self._fast:
            cols = self._encode_columns(X, grow)
            if cols is not None:
                return self._with_labels(X, ys, grow, *cols)
        mark = self.mark()
        R = len(X)
        nums: list[list] = []
        cats: list[list] = []
        y_codes = [0] * R
        n_cls_before = [0] * R
        r = 0
        try:
            for r, x in enumerate(X):
                if type(x) is not dict and not isinstance(x, dict):
                    raise FeatureTypeError("features", f"row {r} is {type(x).__name__}, not a dict")
                num, cat, _ = self._encode_row(x, grow)
                nums.append(num)
                cats.append(cat)
                n_cls_before[r] = len(self.classes)
                if ys is not None:
                    y = ys[r]
                    code = self.class_index.get(y)
                    if code is None or type(y) is not type(self.classes[code]):
                        code = self.class_code(y, grow=grow)
                    y_codes[r] = code
        except Exception as exc:
            self.rollback(mark)
            at_row(exc, r)  # an input error: which row
            raise
        J = max(len(self.num_names), 1)
        A = max(len(self.cat_names), 1)
        for num in nums:
            if len(num) < J:
                num.extend([math.nan] * (J - len(num)))
        for cat in cats:
            if len(cat) < A:
                cat.extend([MISSING] * (A - len(cat)))
        xn = np.array(nums, dtype=np.float64).reshape(R, J)
        xc = np.array(cats, dtype=np.int64).reshape(R, A)
        return xn, xc, np.array(y_codes, dtype=np.int64), np.array(n_cls_before, dtype=np.int64)

    def _with_labels(self, X: list, ys: list | None, grow: bool, xn: np.ndarray,
                     xc: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:  # fmt: skip
        """``encode_rows``' result for rows whose features are encoded (``_encode_columns``):
        the label codes and the classes known before each row. Rolls back on error."""
        R = len(X)
        if ys is None:  # (a prediction)
            return xn, xc, np.zeros(R, dtype=np.int64), np.full(R, len(self.classes), np.int64)
        if type(ys) is list and len(ys) == R:  # the usual labels: known, of their classes' type
            codes: list = list(map(self.class_index.get, ys))
            if None not in codes:
                types = set(map(type, ys))
                if len(types) == 1:
                    kind = types.pop()
                    classes = self.classes
                    if all(type(classes[c]) is kind for c in set(codes)):
                        return (xn, xc, np.array(codes, dtype=np.int64),
                                np.full(R, len(classes), dtype=np.int64))  # fmt: skip
        y_codes = [0] * R
        n_cls_before = [0] * R
        mark = self.mark()
        r = 0
        try:
            index = self.class_index
            classes = self.classes
            for r in range(R):
                n_cls_before[r] = len(classes)
                y = ys[r]
                code = index.get(y)
                if code is None or type(y) is not type(classes[code]):
                    code = self.class_code(y, grow=grow)
                y_codes[r] = code
        except Exception as exc:
            self.rollback(mark)
            at_row(exc, r)
            raise
        return xn, xc, np.array(y_codes, dtype=np.int64), np.array(n_cls_before, dtype=np.int64)

    def max_values(self) -> int:
        """Values of the categorical feature with the most values."""
        return self._max_values

    # ----------------------------------------------------------------- state
    def to_header(self) -> dict:
        return {
            "numeric": list(self.num_names),
            "categorical": list(self.cat_names),
            "code_attr": list(self.code_attr),
            "code_value": list(self.code_value),
            "classes": list(self.classes),
            "declared": dict(self.declared),
            "other": sorted(self._other.values()),
        }

    @classmethod
    def from_header(cls, h: dict, limits: Limits | None = None) -> Schema:
        """The schema of ``to_header()``, under ``limits`` (what it holds already is kept even
        if over them)."""
        s = cls(_UNCHECKED)
        for name in h["numeric"]:
            s._add_feature(name, NUMERIC)
        for name in h["categorical"]:
            s._add_feature(name, CATEGORICAL)
        other = set(h.get("other", ()))
        for code, (a, v) in enumerate(zip(h["code_attr"], h["code_value"], strict=True)):
            if code in other:
                s._other[a] = s._add_code(a, v)
            else:
                s._new_code(a, v)
        for y in h["classes"]:
            s.class_index[y] = len(s.classes)
            s.classes.append(y)
            s.text_bytes += len(str(y))
        s.declared = dict(h.get("declared", {}))
        s.limits = limits or Limits()
        return s

    def best_classes(self, out: np.ndarray) -> np.ndarray:
        """Per row of probabilities ``out`` (``[R, >= n_classes]``), the index in ``classes`` of
        ``argmax_label(self.proba_dict(row))`` — ties to the first class, -1 for ``None`` —
        without building the dicts."""
        n = self.n_classes
        vals = out[:, :n]
        if n == 0:
            return np.full(out.shape[0], -1, dtype=np.int64)
        best = vals.argmax(axis=1)
        best[~vals.any(axis=1)] = -1  # all 0 (probabilities are >= 0): {} -> None
        # proba_dict renormalizes rows that do not sum to 1 within 1e-12 (never, for the kernels'
        # rows), which could merge near-ties: such rows (and any NaN) take the exact path
        total = vals.sum(axis=1)
        for r in np.flatnonzero(~(np.abs(total - 1.0) <= 1e-13) & (best >= 0)):
            label = argmax_label(self.proba_dict(out[r]))
            best[r] = -1 if label is None else self.class_index[label]
        return best

    def proba_dicts(self, out: np.ndarray, n_cls: np.ndarray) -> list[dict]:
        """``[proba_dict(out[r], n_cls[r]) for r in range(len(out))]``, converting ``out`` to
        Python floats in one call (a row's slice and ``tolist`` cost more than its dict)."""
        classes = self.classes
        fast = self._normalized_dicts(out, n_cls)
        if fast is not None:
            return fast
        c0, c1 = (classes + [None, None])[:2]
        keys: dict[int, list] = {}
        res: list[dict] = []
        for vals, n in zip(out.tolist(), n_cls.tolist(), strict=True):
            if n < len(vals):
                vals = vals[:n]
            total = sum(vals)
            if total <= 0.0:
                res.append({})
                continue
            if abs(total - 1.0) > 1e-12:
                vals = [v / total for v in vals]
            if n == 2:  # (a literal is 3x faster than dict(zip()))
                res.append({c0: vals[0], c1: vals[1]})
                continue
            k = keys.get(n)
            if k is None:
                k = keys[n] = classes[:n]
            res.append(dict(zip(k, vals, strict=False)))  # (as long: vals has n entries)
        return res

    def _normalized_dicts(self, out: np.ndarray, n_cls: np.ndarray) -> list[dict] | None:
        """``proba_dicts`` of the usual batch, checked with numpy: every row over the same classes
        and either normalized (its sum within 1e-12 of 1) or empty (sum <= 0), as the kernels
        answer; ``None`` for any other (the row loop then decides row by row). Each row's sum
        is Python's ``sum`` of it: the columns added left to right."""
        R = out.shape[0]
        if R == 0 or not (n_cls == n_cls[0]).all():
            return None
        n = int(n_cls[0])
        if not 1 <= n <= min(out.shape[1], len(self.classes)):
            return None
        vals = out[:, :n]
        total = vals[:, 0].copy()
        for j in range(1, n):
            total += vals[:, j]
        empty = total <= 0.0
        if not (empty | (np.abs(total - 1.0) <= 1e-12)).all():  # (NaN is neither)
            return None
        rows = vals.tolist()
        if n == 2:  # (a literal is 3x faster than dict(zip()))
            c0, c1 = self.classes[:2]
            res = [{c0: a, c1: b} for a, b in rows]
        else:
            keys = self.classes[:n]
            res = [dict(zip(keys, row, strict=True)) for row in rows]
        if empty.any():
            for r in np.flatnonzero(empty).tolist():
                res[r] = {}
        return res

    def proba_dict(self, row: np.ndarray, n_classes: int | None = None) -> dict:
        """Probabilities as ``{label: p}`` over the classes known (``{}`` if the row is all 0)."""
        n = self.n_classes if n_classes is None else n_classes
        vals = row[:n].tolist()
        total = sum(vals)
        if total <= 0.0:
            return {}
        if abs(total - 1.0) > 1e-12:
            vals = [v / total for v in vals]
        return dict(zip(self.classes[:n], vals, strict=True))
