"""A bank's arrays: their capacities (``Capacity``), allocation, growth by copying into larger
ones (``BankArrays``, the part of a ``TreeBank`` that holds them and the struct kernels view
them through), and the axes of each array that a capacity sizes (what a saved state cuts to the
rows in use, ``AXES``)."""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import numpy as np

from learners.jit import MODE, interpreting
from learners.jit import kernel as jit_kernel
from learners.limits import LimitError, Limits
from learners.schema import Schema

from .layout import (
    DIRECT,
    MAX_SLOTS,
    NUM_STATS,
    STATE_FIELDS,
    WIDTH_CAT,
    WIDTH_NUM,
    TreeParams,
    TreeState,
)
from .rows import build_index, new_leaf, tree_reset_dealt, tree_reset_keyed
from .structs import interpreted_bank, make_bank, pools

# the axis of every saved array that is a capacity, and the pool it counts
AXES = {
    **{name: "N" for name in ("kind", "attr", "thr", "slot", "child", "sibling", "branch",
                              "depth", "d_at", "d_len", "merit", "split_seen")},
    **{name: "L" for name in ("last", "mc_ok", "nb_ok", "f_head", "f_tail", "f_pend", "o_head",
                              "o_tail", "o_pend", "free")},
    **{name: "F" for name in ("fw_at", "fw_len", "nvals", "f_attr", "f_next", "v_head",
                              "v_tail", "v_pend")},
    **{name: "E" for name in ("vw_at", "vw_len", "v_code", "v_next")},
    **{name: "O" for name in ("g_at", "g_len", "o_fresh", "o_attr", "o_next")},
    "wc": "P", "wv": "P", "gc": "Q", "gv": "Q",
}  # fmt: skip

POOL_OF_AXIS = {"N": "nodes", "L": "slots", "F": "features", "E": "values", "O": "observers",
         "P": "weights", "Q": "gaussians"}  # fmt: skip
VALUES_PER_ENTRY = {"gv": NUM_STATS}  # values per class entry, where not 1


class Capacity(NamedTuple):
    """Array capacities: nodes, leaf slots, categorical feature rows, value rows, numeric
    observers, index keys (a power of 2), entries of the two class-entry pools (weights,
    Gaussians), and the categorical / numeric features found through the per-slot direct index
    (``f_of`` / ``o_of``)."""

    nodes: int
    slots: int
    features: int
    values: int
    observers: int
    keys: int
    weights: int
    gaussians: int
    cat_direct: int = 1
    num_direct: int = 1


def alloc(M: int, cap: Capacity) -> TreeState:
    i64 = np.int64
    N, L, F, E, O, H, P, Q, AD, JD = cap  # noqa: E741

    def links(n: int) -> np.ndarray:
        return np.full((M, n), -1, i64)

    def zeros(n: int) -> np.ndarray:
        return np.zeros((M, n), i64)

    return TreeState(
        kind=zeros(N), attr=links(N), thr=np.zeros((M, N)), slot=links(N),
        child=links(N), sibling=links(N), branch=zeros(N), depth=zeros(N), d_at=links(N),
        d_len=zeros(N), merit=np.zeros((M, N)), split_seen=links(N), n_nodes=np.zeros(M, i64),
        last=np.zeros((M, L)), mc_ok=np.zeros((M, L)), nb_ok=np.zeros((M, L)),
        f_head=links(L), f_tail=links(L), f_pend=links(L), o_head=links(L), o_tail=links(L),
        o_pend=links(L), free=zeros(L), n_free=np.zeros(M, i64), n_slots=np.zeros(M, i64),
        fw_at=links(F), fw_len=zeros(F), nvals=zeros(F), f_attr=links(F),
        f_next=links(F), v_head=links(F), v_tail=links(F), v_pend=links(F),
        n_f=np.zeros(M, i64), f_freed=np.full(M, -1, i64),
        vw_at=links(E), vw_len=zeros(E), v_code=links(E), v_next=links(E),
        n_v=np.zeros(M, i64), v_freed=np.full(M, -1, i64),
        g_at=links(O), g_len=zeros(O), o_fresh=zeros(O), o_attr=links(O), o_next=links(O),
        n_o=np.zeros(M, i64), o_freed=np.full(M, -1, i64),
        wc=links(P), wv=np.zeros((M, P)), w_used=np.zeros(M, i64), w_dead=np.zeros(M, i64),
        gc=links(Q), gv=np.zeros((M, Q * NUM_STATS)), g_used=np.zeros(M, i64),
        g_dead=np.zeros(M, i64),
        hkey=links(H), hval=links(H), n_keys=np.zeros(M, i64),
        f_of=np.full((M, L, AD), -1, i64), o_of=np.full((M, L, JD), -1, i64),
        width=np.ones(2, i64), wsum=np.zeros((M, L)), pgen=np.zeros(1, i64),
    )  # fmt: skip


def capacity_of(T: TreeState) -> Capacity:
    return Capacity(
        nodes=T.kind.shape[1], slots=T.last.shape[1], features=T.nvals.shape[1],
        values=T.v_code.shape[1], observers=T.o_attr.shape[1], keys=T.hkey.shape[1],
        weights=T.wc.shape[1], gaussians=T.gc.shape[1], cat_direct=T.f_of.shape[2],
        num_direct=T.o_of.shape[2],
    )  # fmt: skip


def used_of(T: TreeState) -> Capacity:
    """What is in use (high-water marks, over members): what a saved state keeps."""
    return Capacity(
        nodes=int(T.n_nodes.max()), slots=int(T.n_slots.max()), features=int(T.n_f.max()),
        values=int(T.n_v.max()), observers=int(T.n_o.max()), keys=0,
        weights=int(T.w_used.max()), gaussians=int(T.g_used.max()),
    )  # fmt: skip


def cut(name: str, a: np.ndarray, size: Capacity) -> tuple[slice, ...]:
    idx = [slice(None)] * a.ndim
    axis = AXES.get(name)
    if axis is not None:
        idx[1] = slice(0, getattr(size, POOL_OF_AXIS[axis]) * VALUES_PER_ENTRY.get(name, 1))
    return tuple(idx)


def copy_into(new: TreeState, old: TreeState) -> TreeState:
    for name in STATE_FIELDS:
        src = getattr(old, name)
        dst = getattr(new, name)
        dst[tuple(slice(0, n) for n in src.shape)] = src
    new.width[:] = old.width
    return new


def direct_width(n_features: int) -> int:
    """Direct-index width for ``n_features`` features: a power of 2, at most ``DIRECT``."""
    return min(1 << max(0, n_features - 1).bit_length(), DIRECT)


def index_size(n_keys: int) -> int:
    """Power of 2 that keeps the index at most half full."""
    return 1 << max(6, int(2 * n_keys).bit_length())


class BankArrays:
    """The arrays of M trees (``T``, a ``TreeState``) and what kernels get of them (``view``: a
    ``Bank`` struct, or a namespace for the interpreted twins): allocated, grown by doubling
    when a kernel asks for room (``grow_nodes``) or the schema widens (``fit_schema``), and the
    pools a kernel grew picked up (``sync``). The calls of kernels (``calls``) and the saved
    state (``persist``) build on it; ``bank.TreeBank`` is all three."""

    limits: Limits
    params: TreeParams
    M: int
    schema: Schema
    T: TreeState
    B: Any
    n_seen: int  # examples learned with w > 0 (calls)
    _namespace: Any
    _max_nodes: int
    _alloc_bytes: int
    _fitted: tuple | None
    _pgen: int
    _pgen_now: Any
    _pending: Any  # (calls: the deferred learn, run by flush)
    _hint_for: Any  # (calls: what the route hint holds, dropped whenever the arrays may change)
    _last: Any  # (calls: the kept encoding, dropped with the schema)

    def flush(self) -> None:
        """Run a deferred learn first (``calls.ExampleCalls.flush``; none here)."""

    def set_arrays(self, T: TreeState) -> None:
        """Make ``T`` the bank's arrays (the struct over them made anew)."""
        self.T = T
        self._hint_for = None  # (new arrays: the hint is not known to hold for them)
        self._alloc_bytes = sum(a.nbytes for a in T)
        # the numba struct over T and the parameters (made on first compiled use: not while the
        # interpreted twins run, which would compile its constructor), and the twins' view of T
        self.B: Any = None if MODE.interpreted and interpreting() else make_bank(T, self.params)
        self._namespace: Any = None
        self._fitted: tuple | None = None  # the schema's sizes fit_schema last saw for this T
        self._pgen = int(T.pgen[0])  # the pools' generation this T holds (see sync)
        self._pgen_now: Any = memoryview(T.pgen)  # type: ignore[arg-type]  # the generation a kernel may have moved on

    def sync(self) -> None:
        """Pick up the class-entry pools a kernel grew (it replaces them in the bank, not in
        ``T``): call after running kernels on ``view()``."""
        if self.T.pgen[0] == self._pgen:
            return
        views = [v for v in (self.B, self._namespace) if v is not None]
        got = [pools(v) if v is self.B else (v.wc, v.wv, v.gc, v.gv) for v in views]
        wc, wv, gc, gv = max(got, key=lambda p: (p[0].shape[1], p[2].shape[1]))
        self.set_arrays(self.T._replace(wc=wc, wv=wv, gc=gc, gv=gv))

    def view(self, interpreted: bool | None = None) -> Any:
        """What the kernels get: the numba struct ``B``, or, while kernels run interpreted
        (``learners.jit.set_interpreted``; or ``interpreted=True``), a namespace over the same
        arrays."""
        if self._pending is not None:  # (whoever reads the arrays sees the deferred learn)
            self.flush()
        self._hint_for = None  # (whoever gets the arrays may change them)
        if interpreted is None:
            interpreted = MODE.interpreted and interpreting()
        if interpreted:
            if self._namespace is None:
                self._namespace = interpreted_bank(self.T, self.params)
            return self._namespace
        if self.B is None:
            self.B = make_bank(self.T, self.params)
        return self.B

    def thread_view(self, B: Any) -> Any:
        """Another struct over this bank's arrays, with the class-entry pools that struct ``B``
        (this bank's) holds now (a kernel may have grown them), for a worker thread.

        numba counts references to a struct on every kernel call, atomically; threads sharing
        one struct contend for that counter (two threads on two cores ran at half the speed of
        one). The struct's fields are unowned views, so it is valid only while these arrays
        are: the caller drops it when the bank's arrays or pools change."""
        wc, wv, gc, gv = pools(B)
        return make_bank(self.T._replace(wc=wc, wv=wv, gc=gc, gv=gv), self.params)

    def _init_roots(self) -> None:
        for m in range(self.M):
            jit_kernel(new_leaf)(self.view(), m, 0, 0)

    def reset_tree(self, m: int, key: int = 0, *, deal: bool = False) -> None:
        """Member m becomes a fresh, untrained tree whose random feature subspaces (if its
        parameters draw any) are keyed by ``key`` (``learners.tree.subspace``); ``deal``: its
        one subspace is the one dealt to member ``key`` of a forest (distinct from members
        0..key-1's while there are enough subsets: "Dealt roots" there)."""
        if not 0 <= m < self.M:
            raise IndexError(f"member {m} of a bank of {self.M}")
        if deal:
            jit_kernel(tree_reset_dealt)(self.view(), m, int(key))
        else:
            jit_kernel(tree_reset_keyed)(self.view(), m, int(key))
        self._hint_for = None

    # --------------------------------------------------------------------------- capacity
    def need(self) -> int:
        """Nodes/slots one learned example may take at most (a multiway split, which is never
        larger than ``max_nodes``, + a new branch). (``run_one`` has it inline.)"""
        return min(max(2, self.schema._max_values), self._max_nodes) + 2

    def direct_widths(self) -> dict[str, int]:
        return {
            "cat_direct": direct_width(self.schema.n_cat),
            "num_direct": direct_width(self.schema.n_num),
        }

    def _set_width(self, n_cat: int, n_num: int) -> None:
        """Features per row (categorical, numeric) the kernels must find room for."""
        width = self.T.width
        width[WIDTH_CAT] = max(n_cat, 1)
        width[WIDTH_NUM] = max(n_num, 1)

    def fit_schema(self) -> None:
        """Record the schema's row width (and widen the direct index); classes need nothing."""
        s = self.schema
        self._room_text = -1  # (a new schema, or new features: the learn's check takes it again)
        fitted = (len(s.cat_names), len(s.num_names))
        if fitted == self._fitted:  # nothing new since the last call (the usual learn)
            return
        self._set_width(s.n_cat, s.n_num)
        cap = capacity_of(self.T)
        direct = self.direct_widths()
        want = cap._replace(
            cat_direct=max(cap.cat_direct, direct["cat_direct"]),
            num_direct=max(cap.num_direct, direct["num_direct"]),
        )
        if want != cap:
            self._resize(want)
        self._fitted = fitted

    def grow_nodes(self, need: int) -> None:
        """Grow whatever ``has_room`` found short: ``need`` nodes/slots, and rows and index keys
        for one example of the current width, for every member (doubling)."""
        self.sync()
        T = self.T
        cap = capacity_of(T)
        A, J = int(T.width[WIDTH_CAT]), int(T.width[WIDTH_NUM])
        used_slots = int((T.n_slots - T.n_free).max())

        def grown(have: int, want: int) -> int:
            return have if want <= have else max(2 * have, want)

        new = cap._replace(
            nodes=grown(cap.nodes, int(T.n_nodes.max()) + need),
            slots=grown(cap.slots, used_slots + need),
            features=grown(cap.features, int(T.n_f.max()) + A),
            values=grown(cap.values, int(T.n_v.max()) + A),
            observers=grown(cap.observers, int(T.n_o.max()) + J),
            keys=max(cap.keys, index_size(int(T.n_keys.max()) + 2 * A + J + need)),
        )
        if new.slots > MAX_SLOTS:
            raise MemoryError(f"a tree would need more than {MAX_SLOTS} leaves")
        self._resize(new)

    def _resize(self, cap: Capacity) -> None:
        self.sync()
        self.set_arrays(copy_into(alloc(self.M, cap), self.T))
        jit_kernel(build_index)(self.view())

    def adopt_schema(self, schema: Schema) -> None:
        """Replace the (empty) schema of an untrained bank, e.g. by one built for pre-encoded rows."""
        self.flush()
        schema.limits = self.limits
        self.schema = schema
        self._last = None
        self._fitted = None
        self.fit_schema()

    # --------------------------------------------------------------------------- memory
    def within_bytes(self) -> bool:
        """Whether ``check_bytes`` passes on its cheap path (the allocated arrays and the
        schema's text within ``max_state_bytes``); ``False`` when only counting the live rows
        can tell."""
        return self._alloc_bytes + self.schema.held_bytes() <= self.limits.max_state_bytes

    @property
    def memory_bytes(self) -> int:
        """Bytes the bank holds in memory: its arrays as allocated, with their room to grow and
        the row index (several times ``nbytes``, the compact saved state), and its schema
        (``Schema.held_bytes``: names, values, labels and their indexes). Reads only: the runs
        hand grown pools to ``T`` (``sync``) before they return."""
        self.flush()
        return sum(a.nbytes for a in self.T) + self.schema.held_bytes()

    @property
    def used_bytes(self) -> int:
        """Bytes of the model's state as ``max_state_bytes`` counts it: the rows and class
        entries in use (``live_bytes``) and the schema (``Schema.held_bytes``). A model's
        ``state_bytes`` and the limit's error give this number."""
        return self.live_bytes + self.schema.held_bytes()

    @property
    def live_bytes(self) -> int:
        """Bytes the rows and class entries in use take in memory (int64 / float64, as wide as
        the largest member's): live class entries, rows up to their high-water marks (freed rows
        are few: a leaf that splits hands its rows to its children). O(members), no copy."""
        self.flush()
        self.sync()
        T = self.T
        size = used_of(T)._replace(
            slots=int((T.n_slots - T.n_free).max()), weights=int((T.w_used - T.w_dead).max()),
            gaussians=int((T.g_used - T.g_dead).max()),
        )  # fmt: skip
        total = 0
        for name in STATE_FIELDS:
            a = getattr(T, name)
            part = cut(name, a, size)
            total += a.itemsize * math.prod(len(range(*sl.indices(n)))
                                            for sl, n in zip(part, a.shape, strict=True))  # fmt: skip
        return total

    def check_bytes(self) -> None:
        """``LimitError`` if the model is over its ``max_state_bytes`` (``used_bytes``: live
        rows in memory + the schema): checked before learning. Cheap while the allocated arrays
        are within it."""
        limit = self.limits.max_state_bytes
        if self._alloc_bytes + self.schema.held_bytes() <= limit:
            return
        used = self.used_bytes
        if used > limit:
            raise LimitError("max_state_bytes", limit, "model",
                             f"the model's state is {used:,} bytes: it learns no more")  # fmt: skip
