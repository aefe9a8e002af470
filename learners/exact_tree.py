"""A lossless incremental decision tree: at every moment equal to the batch tree on the data so far.

Oza (2001, §3.5.2) used ITI (Utgoff, Berkman & Clouse, 1997) as the decision-tree base model
because it is *lossless*: the tree it holds after any number of incremental updates is the tree
its batch algorithm would grow on the same examples. ``ExactTree`` gives the same guarantee by
construction: it keeps every (weighted) training example, and one function chooses the test of a
node from the examples that reach it. Incremental updates re-check the tests on the path of each
new example and regrow a subtree whose test changed, so the tree always equals the batch
ID3/C4.5-style tree.

Memory grows with the stream: ``O(n_examples * n_features)`` floats for the examples plus
``O(n_examples * depth)`` indices in the nodes -- about 8 bytes per feature plus 8 bytes per level
per stored example, e.g. ~1.5 MB for Nursery's 10k examples of 8 features, plus a table of
weighted class counts per categorical value at every internal node; an ensemble multiplies
this by its number of members (online bagging stores ~63% of the examples in each member). Use it for small and medium streams (the thesis'
UCI datasets, a calendar with thousands of appointments); use the Hoeffding tree for unbounded ones.
"""

from __future__ import annotations

import math
from typing import Any

import numba as nb
import numpy as np

from learners.base import (
    MAX_WEIGHT,
    BatchMixin,
    Label,
    RiverEstimator,
    State,
    argmax_label,
    check_weight,
)
from learners.schema import (
    FeatureTypeError,
    category_text,
    check_label_kind,
    normalize_label,
    number_value,
)

__all__ = ["ExactTree"]

_MISSING = -1  # branch key of the examples whose test attribute is missing
_CAT, _NUM = "categorical", "numeric"


def _xlogx(a: np.ndarray) -> np.ndarray:
    """Elementwise ``a * log2(a)`` with ``0 log 0 = 0``."""
    out = np.zeros_like(a, dtype=np.float64)
    pos = a > 0
    out[pos] = a[pos] * np.log2(a[pos])
    return out


@nb.njit(cache=True)
def _xl(a: float) -> float:
    return a * math.log2(a) if a > 0.0 else 0.0


@nb.njit(cache=True)
def _cat_gains(counts, starts, sizes, rank, total, h_parent, binary, gain_out, code_out):  # noqa: ANN001
    """Information gain of every categorical feature from a node's count table.

    ``counts[slot, class]``: weighted class counts, one slot per known value of each feature plus a
    last slot (per feature) for missing values; feature ``j`` owns slots ``starts[j]`` to
    ``starts[j] + sizes[j] - 1``. Writes ``gain_out[j]`` (``-1``: no valid test) and, for binary
    ``x == v`` tests, the best value's code in ``code_out[j]`` (ties: lowest ``rank``, i.e. the
    value whose name sorts first)."""
    C = counts.shape[1]
    known = np.zeros(C)
    slot_gain = np.empty(counts.shape[0])
    for j in range(starts.shape[0]):
        gain_out[j] = -1.0
        code_out[j] = -1
        lo = starts[j]
        miss = lo + sizes[j] - 1
        nonempty = 0
        xl_branch = 0.0
        xl_counts = 0.0
        for s in range(lo, miss + 1):
            bw = 0.0
            for k in range(C):
                c = counts[s, k]
                bw += c
                xl_counts += _xl(c)
            if bw > 0.0:
                nonempty += 1
            xl_branch += _xl(bw)
        if nonempty < 2:
            continue
        if not binary:
            gain_out[j] = h_parent - (xl_branch - xl_counts) / total
            continue
        miss_w = 0.0
        xl_miss = 0.0
        for k in range(C):
            known[k] = 0.0
            miss_w += counts[miss, k]
            xl_miss += _xl(counts[miss, k])
        for s in range(lo, miss):
            for k in range(C):
                known[k] += counts[s, k]
        best = -1.0
        for s in range(lo, miss):
            bw = 0.0
            rest_w = 0.0
            xl_c = 0.0
            xl_rest = 0.0
            for k in range(C):
                c = counts[s, k]
                r = known[k] - c
                bw += c
                rest_w += r
                xl_c += _xl(c)
                xl_rest += _xl(r)
            g = -1.0
            if bw > 0.0 and rest_w + miss_w > 0.0:
                h = (_xl(bw) + _xl(rest_w) + _xl(miss_w) - xl_c - xl_rest - xl_miss) / total
                g = h_parent - h
            slot_gain[s] = g
            if g > best:
                best = g
        if best < 0.0:
            continue
        best_code = -1
        for s in range(lo, miss):  # ties: the value whose name sorts first
            if slot_gain[s] >= best - 1e-12 and (best_code < 0 or rank[s] < rank[lo + best_code]):
                best_code = s - lo
        gain_out[j] = slot_gain[lo + best_code]
        code_out[j] = best_code


@nb.njit(cache=True)
def _count_table(X, idx, y, w, cols, sizes, starts, n_cls):  # noqa: ANN001
    """The count table (see ``_cat_gains``) of the stored examples ``idx``, summed in order."""
    n_slots = 0
    for j in range(sizes.shape[0]):
        n_slots += sizes[j]
    counts = np.zeros((n_slots, n_cls))
    for i in idx:
        k = y[i]
        for j in range(cols.shape[0]):
            v = X[i, cols[j]]
            slot = starts[j] + (sizes[j] - 1 if np.isnan(v) else int(v))
            counts[slot, k] += w[i]
    return counts


@nb.njit(cache=True)
def _entropy(dist):  # noqa: ANN001
    """``(total weight, entropy in bits, number of classes present)`` of a class distribution."""
    total = 0.0
    xl = 0.0
    present = 0
    for c in dist:
        total += c
        xl += _xl(c)
        if c > 0.0:
            present += 1
    if total <= 0.0:
        return total, 0.0, present
    return total, math.log2(total) - xl / total, present


class _Node:
    __slots__ = ("idx", "dist", "test", "children", "cc", "ver")

    def __init__(self, idx: np.ndarray, dist: np.ndarray) -> None:
        self.idx = idx  # indices of the stored examples reaching this node, in arrival order
        self.dist = dist  # weighted class counts of those examples
        self.test: tuple[int, float | None] | None = None  # (column, threshold or None)
        self.children: dict[int, _Node] = {}
        self.cc: np.ndarray | None = None  # categorical count table (see _cat_gains)
        self.ver = -1  # layout version the count table was made for


class ExactTree(BatchMixin, RiverEstimator):
    """Lossless incremental decision tree (an ITI stand-in, Utgoff et al. 1997).

    At every moment the tree equals the batch ID3/C4.5-style tree grown on all examples learned so
    far: nodes choose the test with the highest information gain; categorical features give
    multiway splits (one branch per value; ``split="binary"`` gives ITI's ``x == v`` tests
    instead), numeric features binary splits ``x <= t`` at the midpoint ``t`` between consecutive
    distinct sorted values. Missing values (absent keys,
    ``None``, NaN) form a branch of their own at every test; a value with no branch (a category
    unseen at that node, or a missing value where no training example was missing) is predicted
    with the class distribution of the node. Leaves predict their weighted class frequencies.
    There is no pruning. Ties between tests go to the feature whose name sorts first, then to the
    smaller threshold (or the category name that sorts first), so the tree does not depend on
    the order of the examples (up to floating-point rounding of weighted sums).

    The examples are kept (encoded into arrays); ``learn_one`` only stores the example and marks
    the tree dirty. The next prediction brings the tree up to date: a few pending examples are
    inserted along their paths (re-checking the test of each node passed, regrowing the subtree
    below a node whose best test changed), many pending examples trigger one batch build. Both
    routes give the same tree. Internal nodes keep weighted class counts per categorical value,
    updated by each insert, so re-checking a categorical test costs no pass over the node's
    examples (numeric tests still sort them). Memory grows linearly with the stream (see the
    module docstring).

    Parameters
    ----------
    max_depth
        Maximum depth of the tree (``None``: unlimited; the root has depth 0).
    min_gain
        A node is split only if the best test's information gain exceeds this (bits).
    split
        ``"multiway"`` (ID3/C4.5: one branch per category) or ``"binary"`` (ITI: categorical
        tests ``x == v`` against everything else, unseen categories included).

    Examples
    --------
    >>> from learners.exact_tree import ExactTree
    >>> tree = ExactTree()
    >>> tree.predict_proba_one({"outlook": "sunny"})
    {}
    >>> stream = [({"outlook": "sunny", "temp": 30.0}, "no"),
    ...           ({"outlook": "rain", "temp": 18.0}, "yes"),
    ...           ({"outlook": "sunny", "temp": 20.0}, "yes"),
    ...           ({"outlook": "overcast", "temp": 25.0}, "yes")]
    >>> for x, y in stream:
    ...     tree.learn_one(x, y)
    >>> tree.predict_one({"outlook": "sunny", "temp": 29.0})
    'no'
    >>> tree.predict_one({"outlook": "sunny", "temp": 21.0})
    'yes'
    >>> tree.n_nodes, tree.depth
    (3, 1)

    References
    ----------
    Utgoff, P. E., Berkman, N. C. and Clouse, J. A. (1997). Decision tree induction based on
    efficient tree restructuring. Machine Learning 29, 5-44.
    Oza, N. C. (2001). Online Ensemble Learning. PhD thesis, UC Berkeley, §3.5.2.
    """

    def __init__(
        self, *, max_depth: int | None = None, min_gain: float = 1e-9, split: str = "multiway"
    ) -> None:
        if split not in ("multiway", "binary"):
            raise ValueError(f"split must be 'multiway' or 'binary', got {split!r}")
        if max_depth is not None and (not isinstance(max_depth, int) or max_depth < 0):
            raise ValueError("max_depth must be None or an int >= 0")
        if not (isinstance(min_gain, int | float) and min_gain >= 0):
            raise ValueError("min_gain must be a number >= 0")
        self.max_depth = max_depth
        self.min_gain = float(min_gain)
        self.split = split
        self._reset()

    # ------------------------------------------------------------------ state
    def _reset(self) -> None:
        self._features: list[str] = []
        self._col: dict[str, int] = {}
        self._kind: list[str] = []
        self._vocab: list[dict[str, int]] = []  # per column; empty for numeric columns
        self._classes: list[Label] = []
        self._class_idx: dict[Label, int] = {}
        self._X = np.full((16, 4), np.nan)
        self._y = np.zeros(16, dtype=np.int64)
        self._w = np.zeros(16, dtype=np.float64)
        self._n = 0
        self._root: _Node | None = None
        self._n_built = 0  # examples already reflected in the tree
        self._ver = 0  # bumped whenever a feature, a category or a class is added
        self._layout: tuple | None = None  # categorical slot layout for _ver (see _slot_layout)
        self._last: tuple | None = None  # (x, copy of x, _ver, encoded row): the last row encoded

    @property
    def n_seen(self) -> int:
        """Examples learned so far with ``w > 0`` (the name every learner uses)."""
        return self._n

    @property
    def n_examples(self) -> int:
        """Number of stored examples (learned with ``w > 0``): ``n_seen``."""
        return self._n

    @property
    def classes(self) -> list[Label]:
        """Class labels in order of first appearance."""
        return list(self._classes)

    # --------------------------------------------------------------- encoding
    def _add_feature(self, name: str, value: Any) -> int:
        """A new column, of the kind the shared schema rules give ``value`` (``learners.schema``:
        text is categorical, numbers and booleans numeric)."""
        if not isinstance(value, str | bool | int | float):
            raise FeatureTypeError(name, f"unsupported value type {type(value).__name__}")
        col = len(self._features)
        self._ver += 1
        self._features.append(name)
        self._col[name] = col
        self._kind.append(_CAT if isinstance(value, str) else _NUM)
        self._vocab.append({})
        if col >= self._X.shape[1]:
            grown = np.full((self._X.shape[0], 2 * self._X.shape[1]), np.nan)
            grown[:, : self._X.shape[1]] = self._X
            self._X = grown
        return col

    @staticmethod
    def _is_missing(value: Any) -> bool:
        return value is None or (isinstance(value, float) and math.isnan(value))

    def _encode_value(self, col: int, value: Any, grow: bool) -> float:
        """Code of ``value`` in column ``col`` (NaN: missing or unknown), by the shared schema
        rules: a numeric feature takes numbers and booleans, a categorical one text, or a number
        as the text a query string carries (``category_text``)."""
        if self._is_missing(value):
            return math.nan
        name = self._features[col]
        if self._kind[col] == _NUM:
            if isinstance(value, bool | int | float):
                f = number_value(name, value)
                if math.isinf(f):  # as the native learners (learners.schema)
                    raise FeatureTypeError(name, f"infinite value {value!r}")
                return f
            raise FeatureTypeError(
                name, f"is numeric, got {type(value).__name__} {value!r} (declare it categorical?)"
            )
        if isinstance(value, str):
            key = value
        elif isinstance(value, bool | int | float):
            kind, key = category_text(name, value)
            if kind < 0:
                return math.nan
        else:
            raise FeatureTypeError(name, f"unsupported value type {type(value).__name__}")
        vocab = self._vocab[col]
        code = vocab.get(key)
        if code is None:
            if not grow:
                return math.nan
            code = vocab[key] = len(vocab)
            self._ver += 1
        return float(code)

    def _predict_row(self, x: dict[str, Any]) -> np.ndarray:
        """``_row(x, grow=False)``, reusing the last encoding of the same unchanged dict (an
        ensemble asks a member to learn ``x`` and then to predict it)."""
        last = self._last
        if last is not None and last[0] is x and last[2] == self._ver and last[1] == x:
            return last[3]
        row = self._row(x, grow=False)
        self._last = (x, dict(x), self._ver, row)
        return row

    def _row(self, x: dict[str, Any], grow: bool) -> np.ndarray:
        """Encode ``x`` as a row of codes; unseen categories map to ``-2`` when not growing."""
        if not isinstance(x, dict):
            raise FeatureTypeError("features", f"expected a dict, got {type(x).__name__}")
        row = np.full(self._X.shape[1] if grow else len(self._features), np.nan)
        # known columns first: a value that cannot be encoded raises before anything is added
        items = sorted(x.items(), key=lambda kv: kv[0] not in self._col)
        for name, value in items:
            if isinstance(value, np.generic):  # np.float64, np.bool_, np.str_, ...
                value = value.item()
            col = self._col.get(name)
            if col is None:
                if not grow or self._is_missing(value):
                    continue
                if isinstance(value, bool | int | float) and math.isinf(number_value(name, value)):
                    raise FeatureTypeError(name, f"infinite value {value!r}")  # (before adding)
                col = self._add_feature(name, value)
                if col >= row.shape[0]:
                    row = np.concatenate([row, np.full(self._X.shape[1] - row.shape[0], np.nan)])
            code = self._encode_value(col, value, grow)
            if not grow and math.isnan(code) and not self._is_missing(value):
                code = -2.0  # an unseen category: no branch anywhere
            row[col] = code
        return row

    # --------------------------------------------------------------- learning
    def learn_one(self, x: dict[str, Any], y: Label, *, w: float = 1.0) -> None:  # type: ignore[override]
        """Store the example ``(x, y)`` with weight ``w``; ``w = 0`` does nothing."""
        check_weight(w)  # as the native learners (learners.tree.calls)
        if w == 0:
            return
        y = normalize_label(y)
        check_label_kind(self._classes, y)  # (before the row: a refused example adds nothing)
        row = self._row(x, grow=True)
        if y not in self._class_idx:
            self._class_idx[y] = len(self._classes)
            self._classes.append(y)
            self._ver += 1
        self._last = (x, dict(x), self._ver, row[: len(self._features)])
        if self._n == self._X.shape[0]:
            cap = 2 * self._X.shape[0]
            grown = np.full((cap, self._X.shape[1]), np.nan)
            grown[: self._n] = self._X[: self._n]
            self._X = grown
            self._y = np.resize(self._y, cap)
            self._w = np.resize(self._w, cap)
        self._X[self._n, : row.shape[0]] = row
        self._y[self._n] = self._class_idx[y]
        self._w[self._n] = float(w)
        self._n += 1

    def _class_counts(self, idx: np.ndarray) -> np.ndarray:
        return np.bincount(self._y[idx], weights=self._w[idx], minlength=len(self._classes))

    def _slot_layout(self) -> tuple:
        """``(version, categorical columns, slots per column, first slot, rank, by_name)`` of the
        count tables: one slot per known value of each categorical column plus one for missing;
        ``rank`` orders the values of a column by name, ``by_name`` lists ``(column, index among
        the categorical columns or -1)`` by feature name (both for ties)."""
        if self._layout is None or self._layout[0] != self._ver:
            cols = np.array([c for c, k in enumerate(self._kind) if k == _CAT], dtype=np.int64)
            sizes = np.array([len(self._vocab[c]) + 1 for c in cols], dtype=np.int64)
            starts = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
            rank = np.zeros(int(sizes.sum()), dtype=np.int64)
            for j, col in enumerate(cols.tolist()):
                names = list(self._vocab[col])
                for r, code in enumerate(sorted(range(len(names)), key=names.__getitem__)):
                    rank[starts[j] + code] = r
            pos = {col: j for j, col in enumerate(cols.tolist())}
            by_name = [(c, pos.get(c, -1)) for c in sorted(pos.keys() | set(range(len(self._kind))),
                                                          key=self._features.__getitem__)]  # fmt: skip
            self._layout = (self._ver, cols, sizes, starts, rank, by_name)
        return self._layout

    def _slots(self, i: int) -> np.ndarray:
        """Count-table slots of the categorical values of stored example ``i``."""
        _, cols, sizes, starts, _, _ = self._slot_layout()
        xc = self._X[i, cols]
        return np.where(np.isnan(xc), sizes - 1, xc).astype(np.int64) + starts

    def _counts(self, node: _Node) -> np.ndarray:
        """The node's categorical count table ``[slot, class]`` (rebuilt if the layout changed)."""
        if node.ver != self._ver or node.cc is None:
            _, cols, sizes, starts, _, _ = self._slot_layout()
            node.cc = _count_table(self._X, node.idx, self._y, self._w, cols, sizes, starts,
                                   len(self._classes))  # fmt: skip
            node.ver = self._ver
        return node.cc

    def _best_test(self, node: _Node, depth: int) -> tuple | None:
        """The test of ``node``: ``(column, threshold | code | None)``, or ``None`` (a leaf).

        This single function decides every node, for batch builds and incremental updates alike.
        Categorical gains come from the node's count table (compiled ``_cat_gains``), numeric
        ones from a sort of the node's examples.
        """
        if self.max_depth is not None and depth >= self.max_depth:
            return None
        total, h_parent, present = _entropy(node.dist)
        if present < 2:
            return None
        _, cols, sizes, starts, rank, by_name = self._slot_layout()
        gains: list[float] = []
        codes: list[int] = []
        binary = self.split == "binary"
        if cols.size:
            g, c = np.empty(cols.size), np.empty(cols.size, dtype=np.int64)
            _cat_gains(self._counts(node), starts, sizes, rank, total, h_parent, binary, g, c)
            gains, codes = g.tolist(), c.tolist()
        num: dict[int, tuple[float, float | None]] = {}  # column -> (gain, threshold)
        if len(cols) < len(self._kind):
            idx = node.idx
            yv, wv = self._y[idx], self._w[idx]
            n_cls = len(self._classes)
            for col, kind in enumerate(self._kind):
                if kind == _NUM:
                    self._numeric_gain(idx, yv, wv, col, n_cls, total, h_parent, num)
        bar, best = self.min_gain + 1e-12, None  # a test must beat the best so far by 1e-12
        for col, j in by_name:  # ties: the feature whose name sorts first
            if j >= 0:  # categorical; gain -1: no valid test on this column
                if gains[j] > bar:
                    bar, best = gains[j] + 1e-12, (col, float(codes[j]) if binary else None)
            elif col in num and num[col][0] > bar:
                bar, best = num[col][0] + 1e-12, (col, num[col][1])
        return best

    def _numeric_gain(self, idx, yv, wv, col, n_cls, total, h_parent, cand) -> None:
        """Best binary threshold of a numeric feature (midpoints of sorted distinct values)."""
        xv = self._X[idx, col]
        miss = np.isnan(xv)
        known = ~miss
        if np.count_nonzero(known) < 2:
            return
        vals, ys, ws = xv[known], yv[known], wv[known]
        order = np.argsort(vals, kind="stable")
        vals, ys, ws = vals[order], ys[order], ws[order]
        cuts = np.flatnonzero(vals[1:] > vals[:-1])  # split after position cuts[i]
        if cuts.size == 0:
            return
        onehot = np.zeros((vals.size, n_cls))
        onehot[np.arange(vals.size), ys] = ws
        cum = np.cumsum(onehot, axis=0)
        left = cum[cuts]
        right = cum[-1] - left
        miss_counts = np.bincount(yv[miss], weights=wv[miss], minlength=n_cls)
        lw, rw = left.sum(axis=1), right.sum(axis=1)
        mw = miss_counts.sum()
        h_children = (
            _xlogx(lw)
            + _xlogx(rw)
            + float(_xlogx(np.array([mw]))[0])
            - _xlogx(left).sum(axis=1)
            - _xlogx(right).sum(axis=1)
            - _xlogx(miss_counts).sum()
        ) / total
        gains = h_parent - h_children
        k = int(np.flatnonzero(gains >= gains.max() - 1e-12)[0])  # ties: smallest threshold
        threshold = (vals[cuts[k]] + vals[cuts[k] + 1]) / 2.0
        cand[col] = (float(gains[k]), float(threshold))

    def _branch(self, test: tuple, value: float) -> int:
        if math.isnan(value):
            return _MISSING
        col, threshold = test
        if threshold is None:
            return int(value)  # -2 (unseen category) never has a child
        if self._kind[col] == _CAT:
            return 0 if value == threshold else 1  # binary categorical test x == v
        return 0 if value <= threshold else 1

    def _branch_keys(self, test: tuple, values: np.ndarray) -> np.ndarray:
        """``_branch`` of many stored values at once."""
        col, threshold = test
        miss = np.isnan(values)
        if threshold is None:
            keys = np.where(miss, 0.0, values).astype(np.int64)
        elif self._kind[col] == _CAT:
            keys = (values != threshold).astype(np.int64)
        else:
            keys = (values > threshold).astype(np.int64)
        keys[miss] = _MISSING
        return keys

    def _build(self, idx: np.ndarray, depth: int) -> _Node:
        """Batch-grow the subtree for the examples ``idx`` (in arrival order)."""
        node = _Node(idx, self._class_counts(idx))
        node.test = self._best_test(node, depth)
        self._grow_children(node, depth)
        return node

    def _grow_children(self, node: _Node, depth: int) -> None:
        """(Re)build the children of ``node`` under its test."""
        node.children = {}
        if node.test is None:
            return
        keys = self._branch_keys(node.test, self._X[node.idx, node.test[0]])
        for key in dict.fromkeys(keys.tolist()):
            node.children[key] = self._build(node.idx[keys == key], depth + 1)

    def _insert(self, node: _Node, i: int, depth: int, slots: np.ndarray) -> _Node:
        """Add stored example ``i`` (categorical count slots ``slots``) below ``node``; regrow
        where the best test changes."""
        node.idx = np.append(node.idx, i)
        y, w = self._y[i], self._w[i]
        if node.dist.shape[0] < len(self._classes):
            node.dist = self._padded(node.dist)
        node.dist[y] += w  # same summation order as the batch bincount
        if node.cc is not None and node.ver == self._ver:
            node.cc[slots, y] += w
        test = self._best_test(node, depth)
        if test != node.test:
            node.test = test
            self._grow_children(node, depth)
            return node
        if test is None:
            return node
        key = self._branch(test, self._X[i, test[0]])
        child = node.children.get(key)
        if child is None:
            node.children[key] = self._build(np.array([i], dtype=np.int64), depth + 1)
        else:
            node.children[key] = self._insert(child, i, depth + 1, slots)
        return node

    def _update(self) -> None:
        """Bring the tree up to date with the stored examples (the lazy rebuild)."""
        pending = self._n - self._n_built
        if pending == 0:
            return
        if self._root is None or pending > max(8, self._n // 16):
            self._root = self._build(np.arange(self._n, dtype=np.int64), 0)
        else:
            for i in range(self._n_built, self._n):
                self._root = self._insert(self._root, i, 0, self._slots(i))
        self._n_built = self._n

    def rebuild(self) -> None:
        """Regrow the whole tree from the stored examples in one batch build."""
        self._root = self._build(np.arange(self._n, dtype=np.int64), 0) if self._n else None
        self._n_built = self._n

    # ------------------------------------------------------------- prediction
    def predict_proba_one(self, x: dict[str, Any]) -> dict[Label, float]:  # type: ignore[override]
        """Class probabilities: the weighted class frequencies of the leaf ``x`` reaches."""
        if self._n == 0:
            self._row(x, grow=False)  # refused as by a trained tree (a non-dict, an infinity)
            return {}
        self._update()
        row = self._predict_row(x)
        node = self._root
        assert node is not None
        while node.test is not None:
            col = node.test[0]
            value = row[col] if col < row.shape[0] else math.nan
            child = node.children.get(self._branch(node.test, value))
            if child is None:
                break
            node = child
        dist = self._padded(node.dist)
        total = dist.sum()
        return {c: float(dist[k] / total) for k, c in enumerate(self._classes)}

    def _padded(self, dist: np.ndarray) -> np.ndarray:
        """Class counts over all classes (nodes off the path of a new class keep old lengths)."""
        if dist.shape[0] == len(self._classes):
            return dist
        return np.concatenate([dist, np.zeros(len(self._classes) - dist.shape[0])])

    def predict_one(self, x: dict[str, Any]) -> Label | None:  # type: ignore[override]
        """The most probable class (ties: the class seen first); ``None`` before training."""
        return argmax_label(self.predict_proba_one(x))

    # --------------------------------------------------------------- structure
    def _walk(self) -> list[_Node]:
        self._update()
        out, stack = [], [self._root] if self._root is not None else []
        while stack:
            node = stack.pop()
            out.append(node)
            stack.extend(node.children.values())
        return out

    @property
    def n_nodes(self) -> int:
        """Number of nodes (0 before training)."""
        return len(self._walk())

    @property
    def depth(self) -> int:
        """Depth of the tree (a single leaf has depth 0; -1 before training)."""
        self._update()

        def _depth(node: _Node) -> int:
            return 1 + max(map(_depth, node.children.values())) if node.children else 0

        return _depth(self._root) if self._root is not None else -1

    def structure(self) -> Any:
        """The tree as nested tuples of feature names, thresholds/categories and class weights.

        Two trees with equal ``structure()`` make identical predictions; the tests compare the
        incremental tree with a batch build this way.
        """
        self._update()

        def _decode(node: _Node) -> Any:
            dist = tuple(round(float(v), 9) for v in self._padded(node.dist))
            if node.test is None:
                return ("leaf", dist)
            col, threshold = node.test
            names = {v: k for k, v in self._vocab[col].items()}
            kids = []
            for key in sorted(node.children):
                label: Any = (
                    "?"
                    if key == _MISSING
                    else names[key]
                    if threshold is None
                    else (
                        ("<=", ">")[key]
                        if self._kind[col] == _NUM
                        else ("== " + names[int(threshold)], "!=")[key]
                    )
                )
                kids.append((label, _decode(node.children[key])))
            kids.sort(key=lambda kid: str(kid[0]))
            shown: Any = threshold
            if threshold is not None and self._kind[col] == _CAT:
                shown = names[int(threshold)]
            return (self._features[col], shown, dist, tuple(kids))

        return _decode(self._root) if self._root is not None else None

    # ------------------------------------------------------------ persistence
    def params(self) -> dict[str, Any]:
        """The constructor arguments (JSON-able)."""
        return {"max_depth": self.max_depth, "min_gain": self.min_gain, "split": self.split}

    def to_state(self) -> State:
        """The stored examples and schema as ``{"header": JSON-able, "arrays": numpy}``.

        The tree itself is not stored: it is a function of the examples and is rebuilt on load.
        """
        header = {
            "format": "chorus-state",
            "version": 1,
            "type": "ExactTree",
            "learner": "exact_tree",
            "params": self.params(),
            "features": [[f, k] for f, k in zip(self._features, self._kind, strict=True)],
            "vocab": [list(v) for v in self._vocab],
            "classes": list(self._classes),
        }
        arrays = {
            "X": self._X[: self._n, : len(self._features)].copy(),
            "y": self._y[: self._n].copy(),
            "w": self._w[: self._n].copy(),
        }
        return {"header": header, "arrays": arrays}

    @classmethod
    def from_state(cls, state: State) -> ExactTree:
        """Rebuild a tree from ``to_state()`` output."""
        header, arrays = state["header"], state["arrays"]
        if header.get("type") != "ExactTree":
            raise ValueError(f"state is for {header.get('type')!r}, not ExactTree")
        tree = cls(**header["params"])
        X, y, w = _checked_examples(header, arrays)
        for col, (name, kind) in enumerate(header["features"]):
            tree._features.append(name)
            tree._col[name] = col
            tree._kind.append(kind)
            tree._vocab.append({v: k for k, v in enumerate(header["vocab"][col])})
        for label in header["classes"]:
            tree._class_idx[label] = len(tree._classes)
            tree._classes.append(label)
        n, d = X.shape
        tree._X = np.full((max(16, n), max(4, d)), np.nan)
        tree._X[:n, :d] = X
        tree._y = np.zeros(max(16, n), dtype=np.int64)
        tree._y[:n] = y
        tree._w = np.zeros(max(16, n), dtype=np.float64)
        tree._w[:n] = w
        tree._n = n
        return tree

    def __repr__(self) -> str:
        return (
            f"ExactTree(max_depth={self.max_depth!r}, min_gain={self.min_gain!r}, "
            f"split={self.split!r})"
        )


def _checked_examples(header: dict[str, Any], arrays: dict[str, Any]) -> tuple[np.ndarray, ...]:
    """The saved examples ``X``, ``y``, ``w`` as arrays; ``ValueError`` naming what is wrong
    unless they are examples a tree could have stored: features of a known kind with distinct names and categories, distinct classes, and
    one row of ``X``, ``y`` and ``w`` per example, each cell a finite number or NaN (missing) and,
    in a categorical column, a code of its vocabulary; class codes of the classes, weights in
    (0, MAX_WEIGHT]. A forged code indexed past the kernels' tables (heap corruption) or failed
    a later call."""

    def refuse(what: str, name: str = "header") -> None:
        raise ValueError(f"ExactTree state {name}: {what} (a forged or damaged state)")

    features, vocab, classes = header["features"], header["vocab"], header["classes"]
    if len(vocab) != len(features) or any(kind not in (_CAT, _NUM) for _, kind in features):
        refuse("features of an unknown kind, or a vocabulary per feature missing")
    if len({name for name, _ in features}) != len(features) or len(set(classes)) != len(classes):
        refuse("a feature or class named twice")
    if any(len(set(values)) != len(values) for values in vocab):
        refuse("a category twice in a vocabulary")
    X = np.asarray(arrays["X"], dtype=np.float64)
    y, w = np.asarray(arrays["y"]), np.asarray(arrays["w"], dtype=np.float64)
    n = X.shape[0] if X.ndim == 2 else -1
    if X.ndim != 2 or X.shape[1] != len(features) or y.shape != (n,) or w.shape != (n,):
        refuse(f"shapes X {X.shape}, y {y.shape}, w {w.shape}, not one row per example of "
               f"{len(features)} features", "X/y/w")  # fmt: skip
    if y.dtype.kind not in "iu" or ((y < 0) | (y >= len(classes))).any():
        refuse(f"a class code outside 0..{len(classes) - 1}", "y")
    if not ((w > 0) & (w <= MAX_WEIGHT)).all():
        refuse(f"a weight outside (0, {MAX_WEIGHT:g}]", "w")
    if np.isinf(X).any():
        refuse("an infinite value", "X")
    for col, (name, kind) in enumerate(features):
        codes = X[:, col][~np.isnan(X[:, col])]
        if kind == _CAT and ((codes < 0) | (codes >= len(vocab[col])) | (codes % 1 != 0)).any():
            refuse(f"a code of feature {name!r} outside its {len(vocab[col])} categories", "X")
    return X, y, w
