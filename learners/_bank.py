"""A bank of M trees with one schema: array allocation, growth by doubling, encoding, state.

Used by the standalone native learners (M = 1) and by the ensembles (M = n_models), which run
their own compiled kernels over ``bank.T`` (ARCHITECTURE §3: no Python loop over members).
"""

from __future__ import annotations

import numpy as np

from ._tree import TreeParams, TreeState, make_bank
from .schema import Schema

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
        num=np.zeros((M, L, J, C, 5)),
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
        self._set(_alloc(n_members, N=8, L=8, K=4, A=1, J=1, C=2))
        self._init_roots()

    def _set(self, T: TreeState) -> None:
        self.T = T
        self.B = make_bank(T, self.params)

    def _init_roots(self) -> None:
        from ._tree import new_leaf

        for m in range(self.M):
            new_leaf(self.B, m, 0, 0)

    # --------------------------------------------------------------------------- capacity
    def need(self) -> int:
        """Nodes/slots one learned example may take at most (a multiway split + a new branch)."""
        return max(2, self.schema.max_values()) + 2

    def fit_schema(self) -> None:
        """Grow arrays so every code, feature and class of the schema has room."""
        s = self.schema
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
        for name in TreeState._fields:
            a = getattr(T, name)
            out[prefix + name] = np.ascontiguousarray(a[cut[name]] if name in cut else a)
        return out

    def load_arrays(self, arrays: dict[str, np.ndarray], prefix: str = "tree.") -> None:
        parts = {}
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
