"""Rows encoded once, re-coded for many native learners (the batch ensembles' fast path).

Encoding dicts (``Schema.encode_rows``) is the costly part of fitting a native learner on a data
set: a batch ensemble that lets each of its members encode the training set, then encode it again
to predict it, spends most of its time there. ``EncodedRows`` encodes the rows once, with a schema
of its own, and gives each learner the arrays it would have built itself:

* ``learn_arrays(rows)`` — the schema and arrays that ``learn_many`` on ``X[rows]`` builds in a
  fresh learner. That schema numbers features, category values and classes in order of first
  appearance *in those rows* (which can differ from their order in all of ``X``), and that order
  decides ties and summation order in the kernels, so it is rebuilt exactly, dict order included.
* ``predict_arrays(schema)`` — the arrays that ``predict_many`` on ``X`` builds under a learner's
  ``schema`` (features it does not know are ignored, categories it does not know are unseen).

``NativeLearner.learn_encoded`` / ``predict_encoded`` use them; results are identical to
``learn_many`` / ``predict_many`` on the dicts (``tests/test_batch_fast.py``).
"""

from __future__ import annotations

from typing import Any

import numba as nb
import numpy as np

from .schema import MISSING, UNSEEN, Schema, feature_order, normalize_label


@nb.njit(cache=True)
def _first_seen(xn, xc, yc, rows, n_codes, n_classes):
    """Position in ``rows`` of the first row where each numeric feature, categorical feature,
    category code and class occurs (-1: never)."""
    J = xn.shape[1]
    A = xc.shape[1]
    first_num = np.full(J, -1, dtype=np.int64)
    first_cat = np.full(A, -1, dtype=np.int64)
    first_code = np.full(n_codes, -1, dtype=np.int64)
    first_cls = np.full(n_classes, -1, dtype=np.int64)
    for i in range(rows.shape[0]):
        r = rows[i]
        for j in range(J):
            if first_num[j] < 0 and not np.isnan(xn[r, j]):
                first_num[j] = i
        for a in range(A):
            code = xc[r, a]
            if code >= 0:
                if first_cat[a] < 0:
                    first_cat[a] = i
                if first_code[code] < 0:
                    first_code[code] = i
        if first_cls[yc[r]] < 0:
            first_cls[yc[r]] = i
    return first_num, first_cat, first_code, first_cls


@nb.njit(cache=True)
def _recode(xn, xc, rows, num_cols, cat_cols, code_map):
    """Rows ``rows`` with numeric columns ``num_cols`` and categorical columns ``cat_cols``, category
    codes mapped through ``code_map`` (indexed by code + 2, so that -2 and -1 map too)."""
    R = rows.shape[0]
    xn2 = np.full((R, max(num_cols.shape[0], 1)), np.nan)
    xc2 = np.full((R, max(cat_cols.shape[0], 1)), MISSING, dtype=np.int64)
    for i in range(R):
        r = rows[i]
        for j in range(num_cols.shape[0]):
            xn2[i, j] = xn[r, num_cols[j]]
        for a in range(cat_cols.shape[0]):
            xc2[i, a] = code_map[xc[r, cat_cols[a]] + 2]
    return xn2, xc2


class EncodedRows:
    """Rows ``X`` (and labels ``y``) encoded once under ``schema``.

    Build with ``EncodedRows.for_learning(X, y)`` (a fresh schema grown on the rows, as a fresh
    learner grows its own) or ``EncodedRows.for_prediction(X, schema)`` (an existing schema, not
    grown: unknown features are ignored, unknown categories encode as unseen). Both raise what
    ``Schema.encode_rows`` raises (``FeatureTypeError``, ``LabelError``).

    Examples
    --------
    >>> from learners import EncodedRows, NaiveBayes
    >>> X = [{"colour": "red", "size": 1.0}, {"colour": "green", "size": 7.0}]
    >>> enc = EncodedRows.for_learning(X, ["cherry", "apple"])
    >>> nb = NaiveBayes()
    >>> nb.learn_encoded(enc, [0, 1])  # learns X[1] only, as nb.learn_many([X[1]], ["apple"])
    >>> nb.classes, nb.predict_encoded(enc).tolist()
    (['apple'], [0, 0])
    """

    def __init__(self, X: list[dict], y: list | None, schema: Schema, arrays: tuple) -> None:
        self.X = X
        self.y = y
        self.schema = schema
        self.xn, self.xc, self.yc = arrays

    @classmethod
    def for_learning(cls, X: list[dict], y: list) -> EncodedRows:
        X, y = list(X), list(y)
        if len(X) != len(y):
            raise ValueError(f"{len(X)} rows but {len(y)} labels")
        schema = Schema()
        xn, xc, yc, _ = schema.encode_rows(X, grow=True, ys=y)
        return cls(X, y, schema, (xn, xc, yc))

    @classmethod
    def for_prediction(cls, X: list[dict], schema: Schema) -> EncodedRows:
        X = list(X)
        xn, xc, _, _ = schema.encode_rows(X, grow=False)
        return cls(X, None, schema, (xn, xc, None))

    def __len__(self) -> int:
        return len(self.X)

    # ------------------------------------------------------------------------- learning
    def learn_arrays(self, rows: np.ndarray) -> tuple[Schema, tuple[np.ndarray, ...]]:
        """What a fresh learner's ``learn_many([X[i] for i in rows], [y[i] for i in rows])``
        encodes: its schema, and ``(xn, xc, yc, n_cls)`` as ``Schema.encode_rows`` returns them.

        ``rows`` must be increasing (the order the learner sees them in).
        """
        if self.y is None:
            raise ValueError("rows encoded for prediction have no labels to learn")
        rows = np.asarray(rows, dtype=np.int64)
        if rows.size and not (rows[0] >= 0 and rows[-1] < len(self) and np.all(np.diff(rows) > 0)):
            raise ValueError("rows must be increasing indices of the encoded rows")
        s = self.schema
        first_num, first_cat, first_code, first_cls = _first_seen(
            self.xn, self.xc, self.yc, rows, s.n_codes, s.n_classes
        )
        # A schema numbers what it meets in row order; within a row, features by name
        # (Schema.feature_order) and categories in the dict's key order.
        key_pos: dict[int, dict[str, int]] = {}

        def in_order(items: list[int], first: np.ndarray, name: Any, by_name: bool) -> list[int]:
            def key(i: int) -> tuple[int, Any]:
                p = int(first[i])
                if by_name:
                    return p, feature_order(name(i))
                if p not in key_pos:
                    key_pos[p] = {k: n for n, k in enumerate(self.X[rows[p]])}
                return p, key_pos[p][name(i)]

            return sorted((i for i in items if first[i] >= 0), key=key)

        num = in_order(list(range(s.n_num)), first_num, s.num_names.__getitem__, True)
        cat = in_order(list(range(s.n_cat)), first_cat, s.cat_names.__getitem__, True)
        codes = in_order(
            list(range(s.n_codes)), first_code, lambda c: s.cat_names[s.code_attr[c]], False
        )
        classes = sorted((c for c in range(s.n_classes) if first_cls[c] >= 0), key=first_cls.item)
        cat_pos = {a: n for n, a in enumerate(cat)}
        own = Schema.from_header({
            "numeric": [s.num_names[j] for j in num],
            "categorical": [s.cat_names[a] for a in cat],
            "code_attr": [cat_pos[s.code_attr[c]] for c in codes],
            "code_value": [s.code_value[c] for c in codes],
            # the label as the learner first meets it (True and 1 are one class, either spelling)
            "classes": [normalize_label(self.y[rows[first_cls[c]]]) for c in classes],
        })  # fmt: skip
        code_map = np.full(s.n_codes + 2, UNSEEN, dtype=np.int64)
        code_map[1] = MISSING
        code_map[np.asarray(codes, dtype=np.int64) + 2] = np.arange(len(codes))
        xn, xc = _recode(self.xn, self.xc, rows, np.asarray(num, dtype=np.int64),
                         np.asarray(cat, dtype=np.int64), code_map)  # fmt: skip
        class_map = np.full(max(s.n_classes, 1), -1, dtype=np.int64)
        class_map[np.asarray(classes, dtype=np.int64)] = np.arange(len(classes))
        yc = class_map[self.yc[rows]]
        # classes known before each row: those first met at an earlier position
        n_cls = np.searchsorted(np.sort(first_cls[classes]), np.arange(rows.size), side="left")
        return own, (xn, xc, yc, n_cls.astype(np.int64))

    # ------------------------------------------------------------------------- prediction
    def predict_arrays(self, schema: Schema) -> tuple[np.ndarray, np.ndarray] | None:
        """``(xn, xc)`` as ``schema.encode_rows(X, grow=False)`` gives them, or ``None`` when
        ``schema`` knows a feature, a category or a declaration that this encoding does not (it
        could read the dicts differently: the caller must encode them)."""
        s = self.schema
        if schema.declared != s.declared:
            return None
        num = [s.num_index.get(name, -1) for name in schema.num_names]
        cat = [s.cat_index.get(name, -1) for name in schema.cat_names]
        if -1 in num or -1 in cat:
            return None
        code_map = np.full(s.n_codes + 2, UNSEEN, dtype=np.int64)
        code_map[1] = MISSING
        for a, values in enumerate(schema.cat_values):
            ours = s.cat_values[cat[a]]
            for value, code in values.items():
                if value not in ours:
                    return None
                code_map[ours[value] + 2] = code
        rows = np.arange(len(self), dtype=np.int64)
        return _recode(self.xn, self.xc, rows, np.asarray(num, dtype=np.int64),
                       np.asarray(cat, dtype=np.int64), code_map)  # fmt: skip
