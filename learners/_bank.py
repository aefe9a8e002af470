"""A bank of M trees with one schema: array allocation, growth by doubling, encoding, state.

Used by the standalone native learners (M = 1) and by the ensembles (M = n_models), which run
their own compiled kernels over ``bank.T`` (ARCHITECTURE §3: no Python loop over members).
"""

from __future__ import annotations

import math

import numpy as np

from ._tree import NUM_STATS, TreeParams, TreeState, make_bank
from .base import check_weights
from .schema import FeatureTypeError, Schema

_INT_FIELDS = ("kind", "attr", "slot", "child", "sibling", "branch", "depth", "n_nodes", "nvals",
               "free", "n_free", "n_slots")  # fmt: skip


def _alloc(M: int, N: int, L: int, K: int, A: int, J: int, C: int) -> TreeState:
    i64 = np.int64
    return TreeState(
        kind=np.zeros((M, N), i64),
        attr=np.full((M, N), -1, i64),
        thr=np.zeros((M, N)),
        slot=np.full((M, N), -1, i64),
        child=np.full((M, N), -1, i64),
        sibling=np.full((M, N), -1, i64),
        branch=np.zeros((M, N), i64),
        depth=np.zeros((M, N), i64),
        dist=np.zeros((M, N, C)),
        n_nodes=np.zeros(M, i64),
        cat=np.zeros((M, L, K, C)),
        catw=np.zeros((M, L, A, C)),
        nvals=np.zeros((M, L, A), i64),
        num=np.zeros((M, L, J, C, NUM_STATS)),
        last=np.zeros((M, L)),
        mc_ok=np.zeros((M, L)),
        nb_ok=np.zeros((M, L)),
        free=np.zeros((M, L), i64),
        n_free=np.zeros(M, i64),
        n_slots=np.zeros(M, i64),
    )


def _dims(T: TreeState) -> tuple[int, ...]:
    M, N = T.kind.shape
    _, L, K, C = T.cat.shape
    A = T.catw.shape[2]
    J = T.num.shape[2]
    return M, N, L, K, A, J, C


def _copy_into(new: TreeState, old: TreeState) -> TreeState:
    for name in TreeState._fields:
        src = getattr(old, name)
        dst = getattr(new, name)
        dst[tuple(slice(0, n) for n in src.shape)] = src
    return new


class TreeBank:
    """M trees sharing a schema, parameters and compiled kernels."""

    def __init__(self, params: TreeParams, n_members: int, schema: Schema | None = None):
        self.params = params
        self.M = n_members
        self.schema = schema or Schema()
        self.n_seen = 0  # examples learned with w > 0: the sequence counter of the Poisson draws
        self._set(_alloc(n_members, N=8, L=8, K=4, A=1, J=1, C=2))
        self._init_roots()
        # one-row buffers for the per-example fast path
        self._y1 = np.zeros(1, np.int64)
        self._w1 = np.zeros(1)
        self._seq1 = np.zeros(1, np.int64)
        self._ncls1 = np.zeros(1, np.int64)
        self._last: tuple | None = None  # the last predict-mode one-row encoding (see _encode_one)

    def _set(self, T: TreeState) -> None:
        self.T = T
        self.B = make_bank(T, self.params)
        self._caps = (T.cat.shape[2], T.catw.shape[2], T.num.shape[2], T.dist.shape[2])
        self._out1 = np.zeros((1, T.dist.shape[2]))

    def _init_roots(self) -> None:
        from ._tree import new_leaf

        for m in range(self.M):
            new_leaf(self.B, m, 0, 0)

    # --------------------------------------------------------------------------- capacity
    def need(self) -> int:
        """Nodes/slots one learned example may take at most (a multiway split + a new branch)."""
        return max(2, self.schema._max_values) + 2

    def fit_schema(self) -> None:
        """Grow arrays so every code, feature and class of the schema has room."""
        s = self.schema
        K, A, J, C = self._caps
        if s.n_codes <= K and s.n_cat <= A and s.n_num <= J and s.n_classes <= C:
            return
        M, N, L, K, A, J, C = _dims(self.T)
        want = (max(K, s.n_codes), max(A, s.n_cat), max(J, s.n_num), max(C, s.n_classes))
        if want != (K, A, J, C):
            grow = [n if n <= have else max(n, 2 * have)
                    for n, have in zip(want, (K, A, J, C), strict=True)]  # fmt: skip
            self._resize(N, L, *grow)

    def grow_nodes(self, need: int) -> None:
        M, N, L, K, A, J, C = _dims(self.T)
        n_nodes = int(self.T.n_nodes.max())
        used_slots = int((self.T.n_slots - self.T.n_free).max())
        N2 = N if n_nodes + need <= N else max(2 * N, n_nodes + need)
        L2 = L if used_slots + need <= L else max(2 * L, used_slots + need)
        self._resize(N2, max(L2, L), K, A, J, C)

    def _resize(self, N: int, L: int, K: int, A: int, J: int, C: int) -> None:
        new = _alloc(self.M, N, L, K, A, J, C)
        new.num[..., 3] = np.inf  # fresh slots are re-initialised on allocation anyway
        new.num[..., 4] = -np.inf
        self._set(_copy_into(new, self.T))

    def adopt_schema(self, schema: Schema) -> None:
        """Replace the (empty) schema of an untrained bank, e.g. by one built for pre-encoded rows."""
        self.schema = schema
        self._last = None
        self.fit_schema()

    # --------------------------------------------------------------------------- running kernels
    def run(self, kernel, ipar, fstate, X, ys, ws, do_predict: bool, do_learn: bool) -> list[dict]:
        """Run ``kernel`` (signature of ``_tree.single_run``) over rows; returns the predictions
        (made before each row is learned) when ``do_predict``."""
        schema = self.schema
        R = len(X)
        if ws is None:
            w = np.ones(R)
        else:  # checked before encoding: a rejected call leaves no trace in the schema
            w = check_weights(ws, R)
        xn, xc, yc, n_cls = schema.encode_rows(X, grow=do_learn, ys=ys if do_learn else None)
        out = self.run_encoded(kernel, ipar, fstate, xn, xc, yc, w, n_cls, do_predict, do_learn)
        if not do_predict:
            return []
        return [schema.proba_dict(out[r], int(n_cls[r])) for r in range(R)]

    def run_encoded(self, kernel, ipar, fstate, xn, xc, yc, w, n_cls, do_predict: bool,
                    do_learn: bool) -> np.ndarray:  # fmt: skip
        """``run`` on rows already encoded under ``self.schema`` (as ``Schema.encode_rows``
        returns them; ``w`` checked). Returns the probabilities ``[R, C]`` (over the ``n_cls[r]``
        classes known at row r; a row of zeros when there is no prediction)."""
        R = xn.shape[0]
        if do_learn:
            self.fit_schema()
        out = np.zeros((R, self.T.dist.shape[2]))
        learned = w > 0.0
        seqs = self.n_seen + np.cumsum(learned) - 1  # sequence number of each learned row
        need = self.need() if do_learn else 0
        start = 0
        while True:
            start = kernel(self.B, ipar, fstate, xn, xc, yc, w, seqs, start, do_predict, do_learn, out,
                           n_cls, self.schema.code_attr_array, need)  # fmt: skip
            if start >= R:
                break
            self.grow_nodes(need)
        if do_learn:
            self.n_seen += int(learned.sum())
        return out

    def _encode_one(self, x: dict, grow: bool) -> tuple[np.ndarray, np.ndarray]:
        """One row as ``[1, J]`` / ``[1, A]`` arrays.

        A predict-mode encoding of a row whose features and categories were all known is kept:
        the usual ``predict_one(x)`` then ``learn_one(x, y)`` encodes ``x`` once (the dict must
        be the same object, unchanged, and the schema no wider)."""
        s = self.schema
        J = len(s.num_names) or 1
        A = len(s.cat_names) or 1
        last = self._last
        if last is not None and last[0] is x and last[2] == J and last[3] == A and x == last[1]:
            return last[4], last[5]
        num, cat, known = s._encode_row(x, grow)
        if len(num) < J:
            num.extend([math.nan] * (J - len(num)))
        if len(cat) < A:
            cat.extend([-1] * (A - len(cat)))
        xn = np.array([num], dtype=np.float64)
        xc = np.array([cat], dtype=np.int64)
        if known and not grow:
            self._last = (x, dict(x), J, A, xn, xc)
        return xn, xc

    def run_one(self, kernel, ipar, fstate, x, y, w: float, do_predict: bool, do_learn: bool,
                label_only: bool = False):  # fmt: skip
        """The per-example fast path of ``run`` (same results, less overhead); with
        ``label_only`` the prediction is returned as the most probable label."""
        s = self.schema
        if type(x) is not dict and not isinstance(x, dict):
            raise FeatureTypeError("features", f"expected a dict, got {type(x).__name__}")
        if do_learn:
            if not (0.0 <= w < math.inf):
                raise ValueError(f"w must be finite and >= 0, got {w!r}")
            mark = s.mark()
            try:
                xn, xc = self._encode_one(x, True)
                n_cls = len(s.classes)
                yc = s.class_index.get(y)
                if yc is None or type(y) is not type(s.classes[yc]):  # 1 is not True
                    yc = s.class_code(y, grow=True)
            except Exception:
                s.rollback(mark)
                raise
            self.fit_schema()
        else:
            xn, xc = self._encode_one(x, False)
            n_cls = len(s.classes)
            yc = 0
        self._y1[0] = yc
        self._w1[0] = w
        self._seq1[0] = self.n_seen
        self._ncls1[0] = n_cls
        need = self.need() if do_learn else 0
        out = self._out1
        while not kernel(self.B, ipar, fstate, xn, xc, self._y1, self._w1, self._seq1, 0, do_predict,
                         do_learn, out, self._ncls1, s.code_attr_array, need):  # fmt: skip
            self.grow_nodes(need)
            out = self._out1
        if do_learn and w > 0.0:
            self.n_seen += 1
        if do_predict:
            if label_only:  # argmax without building the dict (ties: first class, as argmax_label)
                row = out[0, :n_cls]
                return s.classes[int(row.argmax())] if n_cls and row.any() else None
            return s.proba_dict(out[0], n_cls)
        return None

    # --------------------------------------------------------------------------- state
    def state_arrays(self, prefix: str = "tree.") -> dict[str, np.ndarray]:
        """Arrays trimmed to what is used (capacity does not affect results)."""
        T = self.T
        s = self.schema
        N = int(T.n_nodes.max())
        L = int(T.n_slots.max())
        K, A, J, C = max(s.n_codes, 1), max(s.n_cat, 1), max(s.n_num, 1), max(s.n_classes, 1)
        K, A, J, C = (min(K, T.cat.shape[2]), min(A, T.catw.shape[2]), min(J, T.num.shape[2]),
                      min(C, T.dist.shape[2]))  # fmt: skip
        cut = {
            "kind": (slice(None), slice(0, N)), "attr": (slice(None), slice(0, N)),
            "thr": (slice(None), slice(0, N)), "slot": (slice(None), slice(0, N)),
            "child": (slice(None), slice(0, N)), "sibling": (slice(None), slice(0, N)),
            "branch": (slice(None), slice(0, N)), "depth": (slice(None), slice(0, N)),
            "dist": (slice(None), slice(0, N), slice(0, C)),
            "cat": (slice(None), slice(0, L), slice(0, K), slice(0, C)),
            "catw": (slice(None), slice(0, L), slice(0, A), slice(0, C)),
            "nvals": (slice(None), slice(0, L), slice(0, A)),
            "num": (slice(None), slice(0, L), slice(0, J), slice(0, C)),
            "last": (slice(None), slice(0, L)), "mc_ok": (slice(None), slice(0, L)),
            "nb_ok": (slice(None), slice(0, L)), "free": (slice(None), slice(0, L)),
        }  # fmt: skip
        out = {}
        for name in TreeState._fields:  # copies: the model goes on learning in place
            a = getattr(T, name)
            out[prefix + name] = np.array(a[cut[name]] if name in cut else a, copy=True)
        return out

    def load_arrays(self, arrays: dict[str, np.ndarray], prefix: str = "tree.") -> None:
        parts: dict[str, np.ndarray] = {}
        for name in TreeState._fields:
            a = np.asarray(arrays[prefix + name])
            want = np.int64 if name in _INT_FIELDS else np.float64
            if a.dtype != want:
                raise ValueError(f"state array {prefix + name} has dtype {a.dtype}, want {want}")
            parts[name] = np.array(a, dtype=want, copy=True)
        T = TreeState(**parts)
        if T.kind.shape[0] != self.M:
            raise ValueError(f"state has {T.kind.shape[0]} members, model has {self.M}")
        # pad to at least 1 node/slot so that kernels can index safely; slots freshly allocated
        M, N, L, K, A, J, C = _dims(T)
        new = _alloc(self.M, max(N, 1), max(L, 1), max(K, 1), max(A, 1), max(J, 1), max(C, 2))
        self._set(_copy_into(new, T))

    @property
    def nbytes(self) -> int:
        return int(sum(a.nbytes for a in self.state_arrays().values()))
