"""A bank of M trees with one schema: array allocation, growth by doubling, encoding, state.

Used by the standalone native learners (M = 1) and by the ensembles (M = n_models), which run
their own compiled kernels over ``bank.T`` (ARCHITECTURE §3: no Python loop over members).
"""

from __future__ import annotations

import math
import struct
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

from ._tree import (
    CATEGORICAL_SPLIT,
    DIRECT,
    INDEX_FIELDS,
    LEAF,
    MAX_SLOTS,
    NUM_STATS,
    NUMERIC_SPLIT,
    POOL_FIELDS,
    STATE_FIELDS,
    STRUCTURE_PROBLEMS,
    TreeParams,
    TreeState,
    W,
    build_index,
    canonical,
    check_structure,
    interpreted_bank,
    make_bank,
    make_run_io,
    pools,
    single_run,
    single_run_io,
)
from ._tree import (
    add_feature as add_feature_,
)
from ._tree import (
    add_observer as add_observer_,
)
from ._tree import (
    add_value as add_value_,
)
from ._tree import (
    fill_gaussians as fill_gaussians_,
)
from ._tree import (
    fill_weights as fill_weights_,
)
from .base import MAX_WEIGHT, argmax_label, check_weight, check_weights
from .jit import MODE, entry_point, interpreting, twin_of
from .jit import kernel as jit_kernel
from .limits import LimitError, Limits
from .schema import FeatureTypeError, Schema

# the integer arrays a saved state stores as int32 when their values fit (version 4)
_NARROW = tuple(name for name in STATE_FIELDS if name not in ("thr", "last", "mc_ok", "nb_ok",
                                                               "wv", "gv"))  # fmt: skip
_I32 = np.iinfo(np.int32)

_NO_CATEGORIES = np.full((2, 1), -1, dtype=np.int64)  # _encode_one's xc without categories
# a batch RunIO's scratch and label: none (see start_encoded)
_NO_PK = np.empty(0, np.int64)
_NO_PV = np.empty(0)
_NO_LABEL = np.empty(0, np.int64)
_FLOAT_INT = frozenset({float, int})  # a row's numbers that _encode_one packs as they are
_NAN1 = (math.nan,)  # the row of a schema without numeric features
# the rows of run_one's two-row buffers: a deferred learn (``defer``) and the current example
_KEPT, _NOW = 0, 1
# run kernel -> its IO run kernel (``_tree.single_run_io``'s signature: the kernel over a
# ``RunIO`` of the call's buffers), for run_one, flush and start_encoded (see register_io_run)
IO_RUNS: dict[Any, Any] = {single_run: single_run_io}


def register_io_run(kernel: Any, io_kernel: Any) -> None:
    """Let ``TreeBank`` call run kernel ``kernel`` through ``io_kernel``, its IO run kernel
    (``learners._tree.single_run_io``'s signature, the same results): per example (``run_one``,
    ``flush``) and in batches (``start_encoded``). Interpreted twins (a kernel module executed
    again in Python) register nothing."""
    if hasattr(kernel, "py_func") and hasattr(io_kernel, "py_func"):
        IO_RUNS[kernel] = io_kernel


def io_run_of(kernel: Any) -> Any:
    """The IO run kernel registered for run kernel ``kernel`` (``register_io_run``), or None."""
    return IO_RUNS.get(kernel)


# the arrays of a version-1 state, in its order (dense leaf blocks "cat", "catw", "nvals", "num")
_V1_FIELDS = ("kind", "attr", "thr", "slot", "child", "sibling", "branch", "depth", "dist",
              "n_nodes", "cat", "catw", "nvals", "num", "last", "mc_ok", "nb_ok", "free", "n_free",
              "n_slots")  # fmt: skip
_ANY, _CLASSES = -1, -2  # axes of a dense class array (_check_dense)
_V1_TREE = _V1_FIELDS[:8] + _V1_FIELDS[9:10] + _V1_FIELDS[14:]  # the arrays v3 has as they are
_V1_INT_FIELDS = ("kind", "attr", "slot", "child", "sibling", "branch", "depth", "n_nodes",
                  "nvals", "free", "n_free", "n_slots")  # fmt: skip
# a version-2 state: the version-3 arrays but for the class blocks, dense over all classes
_V2_DENSE = ("dist", "catw", "cat", "num")
_V2_FIELDS = tuple(name for name in STATE_FIELDS if name not in POOL_FIELDS and not name.endswith(
    ("_at", "_len")) and name != "o_fresh") + _V2_DENSE  # fmt: skip
_FLOAT_FIELDS = ("thr", "last", "mc_ok", "nb_ok", "wv", "gv", *_V2_DENSE)
# the axis of every saved array that is a capacity, and the pool it counts
_AXES = {
    **{name: "N" for name in ("kind", "attr", "thr", "slot", "child", "sibling", "branch",
                              "depth", "d_at", "d_len")},
    **{name: "L" for name in ("last", "mc_ok", "nb_ok", "f_head", "f_tail", "f_pend", "o_head",
                              "o_tail", "o_pend", "free")},
    **{name: "F" for name in ("fw_at", "fw_len", "nvals", "f_attr", "f_next", "v_head",
                              "v_tail", "v_pend")},
    **{name: "E" for name in ("vw_at", "vw_len", "v_code", "v_next")},
    **{name: "O" for name in ("g_at", "g_len", "o_fresh", "o_attr", "o_next")},
    "wc": "P", "wv": "P", "gc": "Q", "gv": "Q",
}  # fmt: skip
# what the index fields of a saved state point at: rows of the group of ``_AXES`` (-1: none)
_POINTS_AT = {"child": "N", "sibling": "N", "slot": "L", "free": "L", "f_head": "F", "f_tail": "F",
              "f_pend": "F", "f_next": "F", "f_freed": "F", "v_head": "E", "v_tail": "E",
              "v_pend": "E", "v_next": "E", "v_freed": "E", "o_head": "O", "o_tail": "O",
              "o_pend": "O", "o_next": "O", "o_freed": "O"}  # fmt: skip
# class-entry blocks: (first entry, entries, pool)
_BLOCKS = (("d_at", "d_len", "wc"), ("fw_at", "fw_len", "wc"), ("vw_at", "vw_len", "wc"),
           ("g_at", "g_len", "gc"))  # fmt: skip
# counts per member, and the group (or pool) whose rows they count
_COUNTS = {"n_nodes": "N", "n_slots": "L", "n_free": "L", "n_f": "F", "n_v": "E", "n_o": "O",
           "w_used": "P", "w_dead": "P", "g_used": "Q", "g_dead": "Q"}  # fmt: skip
# the count of each group's rows in use (per member)
_COUNT_OF = {"N": "n_nodes", "L": "n_slots", "F": "n_f", "E": "n_v", "O": "n_o", "P": "w_used",
             "Q": "g_used"}  # fmt: skip


def _block_caps(n: np.ndarray) -> np.ndarray:
    """``_tree.block_cap`` of every entry count in ``n``: 0, 1, 2, 4, 8, ..."""
    return np.where(n > 1, 2 ** np.ceil(np.log2(np.maximum(n, 1))), n)


def _check_bounds(parts: dict[str, np.ndarray], n_classes: int, n_num: int, n_cat: int,
                  prefix: str) -> None:  # fmt: skip
    """``ValueError`` unless every index a kernel follows in a saved state stays inside the
    arrays a load makes of it. The kernels do not check their indices (numba does not): a
    snapshot with a valid plain SHA-256, which anyone can compute, made a loading process read
    and write outside its arrays (a crash at best) with one child, slot or class-block
    pointer out of range. Checked: every count within the rows saved (so a state cannot ask a
    load for more memory than its own size); in the rows below the counts (the only ones a
    kernel reads: a row is written in full when taken), every row pointer in -1..rows-1, every
    class block inside its pool, each split's and each row's feature among the model's features
    of its kind; every class code of a pool below the model's classes; and that no walk of a
    tree or a list goes on for ever (no node reached twice from the root, every list row
    reaching the end). The rest of a state's consistency (a tail that is not its list's last
    row, a count below the rows in use, a row on two lists, ...), with which a later call could
    still loop, is ``_tree.check_structure``'s, run next on the arrays the load makes. Arrays a
    version-1/2 state does not have are skipped.
    ``CHORUS_SNAPSHOT_KEY`` (HMAC) keeps forged snapshots out (docs/service.md, *Security*)."""
    M = parts["kind"].shape[0]

    def refuse(name: str, what: str) -> None:
        raise ValueError(f"state array {prefix + name}: {what} (a forged or damaged state)")

    rows: dict[str, int] = {}  # rows saved per group: every array of a group has as many
    for name, a in parts.items():
        if a.ndim == 0 or a.shape[0] != M:
            refuse(name, f"shape {a.shape} for {M} members")
        group = _AXES.get(name)
        if group is not None:
            per_row = _WIDTH.get(name, 1)  # (a Gaussian entry's statistics)
            if a.ndim != 2 or a.shape[1] != per_row * rows.setdefault(group, a.shape[1]):
                refuse(name, f"shape {a.shape}, not [{M}, {per_row * rows[group]}] as its group's")
    for name, group in _COUNTS.items():
        if name not in parts:  # (a version-1/2 state has fewer arrays)
            continue
        a = parts[name]
        if a.ndim != 1 or ((a < 0) | (a > rows[group])).any():
            refuse(name, f"a count outside 0..{rows[group]}")

    def in_use(name: str) -> np.ndarray | bool:
        """The rows of array ``name`` a kernel may read: those below their member's count (the
        rest are stale: a row is written in full when taken; a version-3 state keeps what a
        member had before a reset, pointing anywhere), the first n_free of ``free``."""
        group = _AXES.get(name)
        if group is None:
            return True
        count = parts["n_free" if name == "free" else _COUNT_OF[group]]
        return np.arange(parts[name].shape[1] // _WIDTH.get(name, 1)) < count[:, None]

    for name, group in _POINTS_AT.items():
        if name not in parts:
            continue
        a = parts[name]
        if (((a < -1) | (a >= rows[group])) & in_use(name)).any():
            refuse(name, f"a row outside -1..{rows[group] - 1}")
    for at, length, pool in _BLOCKS:
        if at not in parts:
            continue
        first, n = parts[at], parts[length]
        used = first >= 0
        outside = (n < 0) | (first < -1) | (used & (first + _block_caps(n) > parts[pool].shape[1]))
        if (outside & in_use(at)).any():
            refuse(at, f"a class block outside the {pool} pool")
        if (~used & (n > 0) & in_use(at)).any():
            refuse(length, "entries without a block")
    for pool in ("wc", "gc"):
        if pool in parts and ((parts[pool] < -1) | (parts[pool] >= max(n_classes, 1))).any():
            refuse(pool, f"a class code outside -1..{n_classes - 1}")
    kind, attr, nodes_live = parts["kind"], parts["attr"], in_use("kind")
    if (((attr < -1) | ((kind != LEAF) & (attr < 0))) & nodes_live).any():
        refuse("attr", "a split on a negative feature")
    if (
        (
            ((kind == NUMERIC_SPLIT) & (attr >= n_num))
            | ((kind == CATEGORICAL_SPLIT) & (attr >= n_cat))
        )
        & nodes_live
    ).any():
        refuse("attr", "a split on a feature the model does not have")
    for name, width in (("f_attr", n_cat), ("o_attr", n_num)):
        if name in parts and (in_use(name) & ((parts[name] < 0) | (parts[name] >= width))).any():
            refuse(name, f"a feature id outside 0..{width - 1}")
    # no walk goes on for ever (pointers are in range from here on). The tree: nodes are only
    # added (or all dropped), so a member's live nodes 0..n_nodes-1 point at live nodes, and
    # each is the child or the next sibling of at most one of them, the root of none: a walk
    # from the root then meets no node twice
    nodes = parts["child"].shape[1]
    for name in ("child", "sibling"):
        if (nodes_live & (parts[name] >= parts["n_nodes"][:, None])).any():
            refuse(name, "a live node pointing at a node past the member's nodes")
    if nodes:
        base = np.arange(M)[:, None] * nodes
        targets = [(parts[n] + base)[nodes_live & (parts[n] >= 0)] for n in ("child", "sibling")]
        refs = np.bincount(np.concatenate(targets), minlength=M * nodes).reshape(M, nodes)
        if (refs > 1).any() or (refs[:, 0] > 0).any():
            refuse("child", "a node reached twice (a cycle or a shared subtree)")
    # the lists: every row below the count, live or freed, reaches the end (-1) of the list it is
    # on; with pointer doubling, the 2^k-th successor of every row, k up to log2(rows) + 1
    for name in ("f_next", "v_next", "o_next"):
        if name not in parts:
            continue
        nxt = np.where(in_use(name), parts[name], -1)  # (a live row pointing at a stale one:
        R = nxt.shape[1]  # check_structure refuses it, past the count)
        if R == 0:
            continue
        jump = np.append(np.where(nxt >= 0, nxt + np.arange(M)[:, None] * R, -1).ravel(), -1)
        for _ in range(R.bit_length() + 1):
            jump = jump[jump]  # (-1 reads the last entry, -1: the end stays the end)
        if (jump[:-1] >= 0).any():
            refuse(name, "a list that never ends (a cycle)")


def _check_dense(dense: dict[str, tuple[np.ndarray, tuple[int, ...]]], n_classes: int,
                 prefix: str) -> None:  # fmt: skip
    """``ValueError`` unless each dense class array of a version-1/2 state has the shape given
    with it (``_ANY``: any length, ``_CLASSES``: the class axis, any length) and no weight for a
    class the model does not have (a code the load's kernels would index past its classes with)."""
    for name, (a, shape) in dense.items():
        if a.ndim != len(shape) or any(
            want >= 0 and have != want for have, want in zip(a.shape, shape, strict=True)
        ):
            raise ValueError(f"state array {prefix + name}: shape {a.shape}, not {shape} (-1: "
                             "any length, -2: the classes; a forged or damaged state)")  # fmt: skip
        weights = a[..., W] if name == "num" else a  # (a Gaussian's weight)
        extra = np.moveaxis(weights, shape.index(_CLASSES), -1)[..., max(n_classes, 1) :]
        if (extra > 0).any():
            raise ValueError(f"state array {prefix + name}: weight for a class outside "
                             f"0..{n_classes - 1} (a forged or damaged state)")  # fmt: skip


_POOL = {"N": "nodes", "L": "slots", "F": "features", "E": "values", "O": "observers",
         "P": "weights", "Q": "gaussians"}  # fmt: skip
_WIDTH = {"gv": NUM_STATS}  # values per class entry, where not 1


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


def _alloc(M: int, cap: Capacity) -> TreeState:
    i64 = np.int64
    N, L, F, E, O, H, P, Q, AD, JD = cap  # noqa: E741

    def links(n: int) -> np.ndarray:
        return np.full((M, n), -1, i64)

    def zeros(n: int) -> np.ndarray:
        return np.zeros((M, n), i64)

    return TreeState(
        kind=zeros(N), attr=links(N), thr=np.zeros((M, N)), slot=links(N),
        child=links(N), sibling=links(N), branch=zeros(N), depth=zeros(N), d_at=links(N),
        d_len=zeros(N), n_nodes=np.zeros(M, i64),
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


def _capacity(T: TreeState) -> Capacity:
    return Capacity(
        nodes=T.kind.shape[1], slots=T.last.shape[1], features=T.nvals.shape[1],
        values=T.v_code.shape[1], observers=T.o_attr.shape[1], keys=T.hkey.shape[1],
        weights=T.wc.shape[1], gaussians=T.gc.shape[1], cat_direct=T.f_of.shape[2],
        num_direct=T.o_of.shape[2],
    )  # fmt: skip


def _used(T: TreeState) -> Capacity:
    """What is in use (high-water marks, over members): what a saved state keeps."""
    return Capacity(
        nodes=int(T.n_nodes.max()), slots=int(T.n_slots.max()), features=int(T.n_f.max()),
        values=int(T.n_v.max()), observers=int(T.n_o.max()), keys=0,
        weights=int(T.w_used.max()), gaussians=int(T.g_used.max()),
    )  # fmt: skip


def _cut(name: str, a: np.ndarray, size: Capacity) -> tuple[slice, ...]:
    idx = [slice(None)] * a.ndim
    axis = _AXES.get(name)
    if axis is not None:
        idx[1] = slice(0, getattr(size, _POOL[axis]) * _WIDTH.get(name, 1))
    return tuple(idx)


def _copy_into(new: TreeState, old: TreeState) -> TreeState:
    for name in STATE_FIELDS:
        src = getattr(old, name)
        dst = getattr(new, name)
        dst[tuple(slice(0, n) for n in src.shape)] = src
    new.width[:] = old.width
    return new


def _direct(n_features: int) -> int:
    """Direct-index width for ``n_features`` features: a power of 2, at most ``DIRECT``."""
    return min(1 << max(0, n_features - 1).bit_length(), DIRECT)


def _index_size(n_keys: int) -> int:
    """Power of 2 that keeps the index at most half full."""
    return 1 << max(6, int(2 * n_keys).bit_length())


class TreeBank:
    """M trees sharing a schema, parameters and compiled kernels."""

    def __init__(self, params: TreeParams, n_members: int, schema: Schema | None = None,
                 limits: Limits | None = None):  # fmt: skip
        self.limits = limits or Limits()
        self.params = params._replace(max_nodes=min(params.max_nodes, self.limits.max_nodes))
        self._max_nodes = int(self.params.max_nodes)  # (read by every learned example)
        self.M = n_members
        self.schema = schema or Schema(self.limits)
        # run_one's bytes check: max_state_bytes less the schema's held bytes beyond its text
        # (Schema.held_bytes), for the schema's text_bytes it was taken at (-1: take it again)
        self._room, self._room_text = 0, -1
        self.n_seen = 0  # examples learned with w > 0: the sequence counter of the Poisson draws
        # the deferred learn, (kernel, ipar, fstate, need, xn, xc, hinted), or None (see run_one,
        # flush); hinted: _hint1 holds its example's route, from its prediction
        self._pending: tuple | None = None
        # the per-example calls' route hint (a run kernel's ``hint``), kept between them: after a
        # call that predicted row _NOW without learning it, the route of that example in the
        # current state, for the learn of the same example (see run_one). _hint_for is what it
        # is valid for: that call's kept encoding (``_last``), or None; _hint_kernel its kernel.
        # Anything else that runs a kernel or replaces the arrays sets _hint_for to None.
        self._hint1 = np.full((n_members, 4), -1, np.int64)
        self._hint_for: tuple | None = None
        self._hint_kernel: Any = None
        self._learns_only = False  # the last run_one learned without predicting (see run_one)
        # run_one's compiled entry points: kernel -> (ipar, fstate, entry, io), io the RunIO the
        # entry takes (an IO run kernel's, see IO_RUNS) or None (see jit.entry_point); cleared
        # whenever a buffer a RunIO views is replaced
        self._entries: dict[Any, tuple] = {}
        self._set(
            _alloc(
                n_members,
                Capacity(
                    nodes=8,
                    slots=8,
                    features=8,
                    values=16,
                    observers=8,
                    keys=64,
                    weights=64,
                    gaussians=32,
                ),
            )
        )
        self._init_roots()
        # two-row buffers for the per-example fast path: row _NOW the example of the call, row
        # _KEPT a learned example whose kernel call was deferred (``run_one(..., defer=True)``)
        self._y1 = np.zeros(2, np.int64)
        self._w1 = np.zeros(2)
        self._seq1 = np.zeros(2, np.int64)
        self._ncls1 = np.zeros(2, np.int64)
        bufs: tuple[Any, ...] = (self._y1, self._w1, self._seq1, self._ncls1)
        self._one: Any = tuple(memoryview(a) for a in bufs)
        self._last: tuple | None = None  # the last predict-mode one-row encoding (see _encode_one)
        self._xn1 = np.empty((2, 1))  # the encoding buffers (see _encode_one)
        self._xc1 = np.empty((2, 1), np.int64)
        # their bytes, to copy row _NOW to row _KEPT (a memoryview slice: cheaper than numpy's)
        self._xn_bytes = memoryview(self._xn1).cast("B")  # type: ignore[arg-type]
        self._xn_pack = struct.Struct("=1d").pack_into  # writes a row of J floats into them
        self._xc_bytes = memoryview(self._xc1).cast("B")  # type: ignore[arg-type]
        self._xc_pack = struct.Struct("=1q").pack_into  # writes a row of A codes into them

    def _set(self, T: TreeState) -> None:
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
        if not hasattr(self, "_out1"):
            self._set_out(2)

    def _set_out(self, n_cls: int) -> None:
        """The per-example output rows (grown with the classes), and a view of the last one: a
        call that learns a deferred example (row _KEPT) predicts only row _NOW into it
        (``predicted_from``)."""
        self._out1 = np.zeros((2, n_cls))
        self._out_now = self._out1[_NOW:]
        # a call's pk/pv scratch (_tree.sparse_buffers; a call may need one class more than
        # it predicts: a new label's)
        self._pk1 = np.empty(n_cls + 1, np.int64)
        self._pv1 = np.empty(2 * (n_cls + 1))
        self._label1 = np.zeros(1, np.int64)  # an IO call's _tree.label_code of row _NOW
        self._label = memoryview(self._label1)  # type: ignore[arg-type]
        self._entries.clear()  # (their RunIOs view the old buffers)
        # row _NOW's numbers, read as a list by predict_one (cheaper than numpy's row and tolist)
        self._out_vals = memoryview(self._out1).cast("B").cast("d")[n_cls:]  # type: ignore[arg-type]

    def sync(self) -> None:
        """Pick up the class-entry pools a kernel grew (it replaces them in the bank, not in
        ``T``): call after running kernels on ``view()``."""
        if self.T.pgen[0] == self._pgen:
            return
        views = [v for v in (self.B, self._namespace) if v is not None]
        got = [pools(v) if v is self.B else (v.wc, v.wv, v.gc, v.gv) for v in views]
        wc, wv, gc, gv = max(got, key=lambda p: (p[0].shape[1], p[2].shape[1]))
        self._set(self.T._replace(wc=wc, wv=wv, gc=gc, gv=gv))

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
        from ._tree import new_leaf

        for m in range(self.M):
            jit_kernel(new_leaf)(self.view(), m, 0, 0)

    # --------------------------------------------------------------------------- capacity
    def need(self) -> int:
        """Nodes/slots one learned example may take at most (a multiway split, which is never
        larger than ``max_nodes``, + a new branch). (``run_one`` has it inline.)"""
        return min(max(2, self.schema._max_values), self._max_nodes) + 2

    def _direct_widths(self) -> dict[str, int]:
        return {"cat_direct": _direct(self.schema.n_cat), "num_direct": _direct(self.schema.n_num)}

    def _set_width(self, n_cat: int, n_num: int) -> None:
        """Features per row (categorical, numeric) the kernels must find room for."""
        width = self.T.width
        width[0] = max(n_cat, 1)
        width[1] = max(n_num, 1)

    def fit_schema(self) -> None:
        """Record the schema's row width (and widen the direct index); classes need nothing."""
        s = self.schema
        self._room_text = -1  # (a new schema, or new features: run_one's check takes it again)
        fitted = (len(s.cat_names), len(s.num_names))
        if fitted == self._fitted:  # nothing new since the last call (the usual learn)
            return
        self._set_width(s.n_cat, s.n_num)
        cap = _capacity(self.T)
        direct = self._direct_widths()
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
        cap = _capacity(T)
        A, J = int(T.width[0]), int(T.width[1])
        used_slots = int((T.n_slots - T.n_free).max())

        def grown(have: int, want: int) -> int:
            return have if want <= have else max(2 * have, want)

        new = cap._replace(
            nodes=grown(cap.nodes, int(T.n_nodes.max()) + need),
            slots=grown(cap.slots, used_slots + need),
            features=grown(cap.features, int(T.n_f.max()) + A),
            values=grown(cap.values, int(T.n_v.max()) + A),
            observers=grown(cap.observers, int(T.n_o.max()) + J),
            keys=max(cap.keys, _index_size(int(T.n_keys.max()) + 2 * A + J + need)),
        )
        if new.slots > MAX_SLOTS:
            raise MemoryError(f"a tree would need more than {MAX_SLOTS} leaves")
        self._resize(new)

    def _resize(self, cap: Capacity) -> None:
        self.sync()
        self._set(_copy_into(_alloc(self.M, cap), self.T))
        jit_kernel(build_index)(self.view())

    def adopt_schema(self, schema: Schema) -> None:
        """Replace the (empty) schema of an untrained bank, e.g. by one built for pre-encoded rows."""
        self.flush()
        schema.limits = self.limits
        self.schema = schema
        self._last = None
        self._fitted = None
        self.fit_schema()

    # --------------------------------------------------------------------------- running kernels
    def run(self, kernel, ipar, fstate, X, ys=None, ws=None, *, predict: bool = True,
            learn: bool = False) -> list[dict]:  # fmt: skip
        """Run ``kernel`` (signature of ``_tree.single_run``) over rows; returns the predictions
        (made before each row is learned) when ``predict``."""
        do_predict, do_learn = predict, learn  # (run_encoded runs a deferred learn first)
        schema = self.schema
        R = len(X)
        if do_learn:
            self.check_bytes()
        if ws is None:
            w = np.ones(R)
        else:  # checked before encoding: a rejected call leaves no trace in the schema
            w = check_weights(ws, R)
        xn, xc, yc, n_cls = schema.encode_rows(X, grow=do_learn, ys=ys if do_learn else None)
        out = self.run_encoded(kernel, ipar, fstate, xn, xc, yc, w, n_cls, predict=do_predict,
                               learn=do_learn)  # fmt: skip
        if not do_predict:
            return []
        return schema.proba_dicts(out, n_cls)

    def run_encoded(self, kernel, ipar, fstate, xn, xc, yc, w, n_cls, *, predict: bool = True,
                    learn: bool = False) -> np.ndarray:  # fmt: skip
        """``run`` on rows already encoded under ``self.schema`` (as ``Schema.encode_rows``
        returns them; ``w`` checked). Returns the probabilities ``[R, C]`` (over the ``n_cls[r]``
        classes known at row r; a row of zeros when there is no prediction; ``[R, 1]`` of zeros
        when not predicting)."""
        return self.start_encoded(kernel, ipar, fstate, xn, xc, yc, w, n_cls, predict=predict,
                                  learn=learn)()  # fmt: skip

    def start_encoded(self, kernel, ipar, fstate, xn, xc, yc, w, n_cls, *, predict: bool = True,
                      learn: bool = False) -> Callable[[], np.ndarray]:  # fmt: skip
        """``run_encoded`` in two halves: this one, in the calling thread, fits the bank to the
        schema's width and numbers the rows; it returns the other, the kernel loop (growing the
        arrays, counting ``n_seen``), which returns ``run_encoded``'s result. Call the loop once,
        in any thread, before anything else uses the bank; while it runs the schema may grow
        (a pipelined stream encodes the next batch): the loop reads nothing of the schema but
        the ``code_attr`` array taken here (later codes do not change its entries)."""
        do_predict, do_learn = predict, learn
        self.flush()
        self._hint_for = None
        R = xn.shape[0]
        if do_learn:
            self.fit_schema()
            self._set_width(
                max(xc.shape[1], self.schema.n_cat), max(xn.shape[1], self.schema.n_num)
            )
            self._fitted = None  # the width may exceed the schema's: the next fit_schema resets it
        out = np.zeros((R, max(int(n_cls.max()), 1) if do_predict and R else 1))
        learned = w > 0.0
        seqs = self.n_seen + np.cumsum(learned) - 1  # sequence number of each learned row
        n_learned = int(learned.sum())
        need = self.need() if do_learn else 0
        code_attr = self.schema.code_attr_array
        interp = MODE.interpreted and interpreting()  # one mode for the whole call
        run = twin_of(kernel) if interp else kernel
        hint = np.full((self.M, 4), -1, np.int64)  # the batch's own (not the per-example one)
        io_run = None if interp else IO_RUNS.get(kernel)
        if io_run is not None:  # through the IO run kernel, as run_one: one compiled kernel per
            # kind serves both (its run kernel is then never compiled). out serves as out_now
            # (every row predicted), no scratch (each call makes its own), no label. Its views'
            # arrays live as long as loop, whose closure holds them (the branch below names them)
            io = make_run_io(ipar, fstate, xn, xc, xc, yc, w, seqs, out, out, n_cls, hint,
                             _NO_PK, _NO_PV, _NO_LABEL)  # fmt: skip

        def loop() -> np.ndarray:
            start = 0
            while True:
                if io_run is not None:
                    start = io_run(self.view(interp), io, code_attr, start, do_predict, do_learn,
                                   need, False, True)  # fmt: skip
                else:
                    start = run(self.view(interp), ipar, fstate, xn, xc, yc, w, seqs, start,
                                do_predict, do_learn, out, n_cls, code_attr, need, hint, False)  # fmt: skip
                if start >= R:
                    break
                self.grow_nodes(need)
            self.sync()
            if do_learn:
                self.n_seen += n_learned
            return out

        return loop

    def within_bytes(self) -> bool:
        """Whether ``check_bytes`` passes on its cheap path (the allocated arrays and the
        schema's text within ``max_state_bytes``); ``False`` when only counting the live rows
        can tell."""
        return self._alloc_bytes + self.schema.held_bytes() <= self.limits.max_state_bytes

    def _encode_one(self, x: dict, grow: bool) -> tuple[np.ndarray, np.ndarray]:
        """One row into row ``_NOW`` of the ``[2, J]`` / ``[2, A]`` buffers; returns the buffers.

        A predict-mode encoding of a row whose features and categories were all known is kept:
        the usual ``predict_one(x)`` then ``learn_one(x, y)`` encodes ``x`` once (the dict must
        be the same object, unchanged, and the schema no wider)."""
        s = self.schema
        J = len(s.num_names) or 1
        A = len(s.cat_names) or 1
        last = self._last
        if last is not None and last[0] is x and last[2] == J and last[3] == A and x == last[1]:
            return last[4], last[5]
        # a row of exactly the schema's features, of the usual types, all known: read by name
        # and packed without _encode_row (Schema.row_readers says when; same doubles and codes)
        readers = s._readers or s.row_readers()
        if type(x) is dict and len(x) == readers[0]:
            try:
                nums = readers[1](x)
                ok = _FLOAT_INT.issuperset(map(type, nums)) and (t := sum(nums)) - t == 0.0
                codes = None
                if ok and readers[2] is not None:
                    cats = readers[2](x)
                    # every category a str (join: TypeError otherwise, 4x cheaper than a type
                    # check; a str subclass is looked up as the loop looks it up) and known
                    # (__getitem__: KeyError otherwise)
                    "".join(cats)
                    codes = map(dict.__getitem__, readers[3], cats)  # (read by the pack below)
                    ok = len(self._xc_bytes) == 16 * A
                if ok and len(self._xn_bytes) == 16 * J:
                    self._last = None
                    if codes is None:
                        xc = _NO_CATEGORIES
                    else:  # (the codes are all looked up before the pack writes any of them)
                        xc = self._xc1
                        self._xc_pack(self._xc_bytes, 8 * A, *codes)
                    self._xn_pack(self._xn_bytes, 8 * J, *(nums or _NAN1))  # ([nan]: none)
                    if not grow:
                        self._last = (x, dict(x), J, A, self._xn1, xc)
                    return self._xn1, xc
            except (KeyError, TypeError, OverflowError, struct.error):  # a name or category
                pass  # missing, a category not a str, an int beyond a float (a row the pack
                # refused half-written: the loop writes it whole, or raises)
        num, cat, known = s._encode_row(x, grow)
        if len(num) < J:
            num.extend([math.nan] * (J - len(num)))
        # the row goes into this bank's buffers (kernels only read them), which the kept
        # encoding is of: it is dropped or replaced whenever they are written
        self._last = None
        xn = self._xn1
        if xn.shape[1] != len(num):  # (a learned row may have widened the schema)
            self.flush()  # (a deferred learn is in the old buffers)
            xn = self._xn1 = np.empty((2, len(num)))
            self._entries.clear()  # (their RunIOs view the old buffers)
            self._xn_bytes = memoryview(xn).cast("B")  # type: ignore[arg-type]
            self._xn_pack = struct.Struct(f"={len(num)}d").pack_into
        # xn[_NOW] = num (floats and ints: the same doubles as numpy makes of them, cheaper)
        self._xn_pack(self._xn_bytes, len(self._xn_bytes) >> 1, *num)
        if s.cat_names:
            if len(cat) < A:
                cat.extend([-1] * (A - len(cat)))
            xc = self._xc1
            if xc.shape[1] != len(cat):
                self.flush()
                xc = self._xc1 = np.empty((2, len(cat)), np.int64)
                self._entries.clear()
                self._xc_bytes = memoryview(xc).cast("B")  # type: ignore[arg-type]
                self._xc_pack = struct.Struct(f"={len(cat)}q").pack_into
            # xc[_NOW] = cat (codes are ints within int64: the same bits, cheaper than numpy's)
            self._xc_pack(self._xc_bytes, len(self._xc_bytes) >> 1, *cat)
        else:  # no categorical feature (a numeric stream): shared rows of "missing"
            xc = _NO_CATEGORIES
        if known and not grow:
            self._last = (x, dict(x), J, A, xn, xc)
        return xn, xc

    def run_one(self, kernel, ipar, fstate, x, y=None, w: float = 0.0, *, predict: bool = True,
                learn: bool = False, label_only: bool = False, defer: bool = False):  # fmt: skip
        """The per-example fast path of ``run`` (same results, less overhead); with
        ``label_only`` the prediction is returned as the most probable label.

        ``defer`` (with ``learn`` and not ``predict``): the example is checked, encoded and
        counted (``n_seen``) as by an eager learn, every error raised here, but the kernel call
        that learns it is kept for the next call: a prediction then learns it and predicts its
        own example in one kernel call (rows ``_KEPT`` and ``_NOW``), as an eager learn then
        the prediction would (river's loop: ``predict_one`` then ``learn_one``, one compiled
        call per example instead of two). Anything else that runs or reads the bank first
        runs it (``flush``); the owner of the bank must flush before its own reads (the
        models do it in the properties through which they reach the bank)."""
        do_predict, do_learn = predict, learn
        s = self.schema
        if type(x) is not dict and not isinstance(x, dict):
            raise FeatureTypeError("features", f"expected a dict, got {type(x).__name__}")
        kept = self._pending
        if kept is not None and (do_learn or kept[0] is not kernel or kept[1] is not ipar
                                 or kept[2] is not fstate):  # fmt: skip
            self.flush()  # learned before this call's checks see the model
            kept = None
        hint_for = self._hint_for  # (what _hint1 holds the route of, if anything: see below)
        self._hint_for = None
        if do_learn:
            if type(w) is not float or not (0.0 <= w <= MAX_WEIGHT):  # (base.check_weight, inline:
                check_weight(w)  # a str or None is a WeightError there, not a TypeError here)
            text = s.text_bytes  # grows with each name, value and label the schema adds
            if text != self._room_text:
                self._room_text = text
                self._room = self.limits.max_state_bytes - (s.held_bytes() - text)
            if self._alloc_bytes + text > self._room:
                self.check_bytes()  # (its own first test, inline)
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
            if (len(s.cat_names), len(s.num_names)) != self._fitted:
                self.fit_schema()  # (its own first test, inline)
        else:
            xn, xc = self._encode_one(x, False)
            n_cls = len(s.classes)
            yc = 0
            self._learns_only = False
        one = self._one  # memoryviews of the buffers (cheaper to set than numpy's items)
        if do_learn:
            need = s._max_values if s._max_values > 2 else 2  # self.need(), without min/max
            if need > self._max_nodes:  # (builtin calls: ~0.2 us of a ~8 us example)
                need = self._max_nodes
            need += 2
            # kept for the next call (row _KEPT), unless the last call learned too: a loop of
            # learns alone gains nothing (each would run the one kept before) and learns at once
            if defer and not do_predict and w > 0.0 and not self._learns_only:
                self._learns_only = True
                row = self._xn_bytes  # xn[_KEPT] = xn[_NOW]
                half = len(row) >> 1
                row[:half] = row[half:]
                if xc is not _NO_CATEGORIES:
                    row = self._xc_bytes
                    half = len(row) >> 1
                    row[:half] = row[half:]
                one[0][_KEPT] = yc
                one[1][_KEPT] = w
                one[2][_KEPT] = self.n_seen
                one[3][_KEPT] = n_cls
                # the last call predicted this row (the encoding it kept is this one's) and
                # nothing ran since: its route in _hint1 holds for learning it
                hinted = (hint_for is not None and hint_for is self._last
                          and self._hint_kernel is kernel)  # fmt: skip
                self._pending = (kernel, ipar, fstate, need, xn, xc, hinted)
                self.n_seen += 1
                return None
            self._learns_only = not do_predict
            start = _NOW
        elif kept is not None and kept[4] is xn and kept[5] is xc:
            # learn the kept example (row _KEPT), then predict this one (row _NOW, w = 0)
            need, start, do_learn, hinted = kept[3], _KEPT, True, kept[6]
            self._pending = None
        else:
            self.flush()  # (kept in other buffers: not after a flush in _encode_one)
            need, start = 0, _NOW
        one[0][_NOW] = yc
        one[1][_NOW] = w
        one[2][_NOW] = self.n_seen
        one[3][_NOW] = n_cls
        if self._out1.shape[1] < n_cls:
            self._set_out(max(n_cls, 2 * self._out1.shape[1]))
        interp = MODE.interpreted and interpreting()  # one mode for the whole call
        fill = False
        io = None
        if interp:
            run = twin_of(kernel)
        else:  # the kernel's entry point for this bank's argument types, after its first call
            entry = self._entries.get(kernel)
            if entry is not None and entry[0] is ipar and entry[1] is fstate:
                run = entry[2]
                io = entry[3]
            else:
                (run, io), fill = self._first_run(kernel, ipar, fstate), True
        if start != _KEPT:
            hinted = False
        B = self.B
        if interp or B is None:
            B = self.view(interp)
        code_attr = s.code_attr_array
        if io is not None:  # (one struct of the buffers: see _tree.RunIOType)
            cats = xc is not _NO_CATEGORIES
            while (start := run(B, io, code_attr, start, do_predict, do_learn, need, hinted,
                                cats)) < 2:  # fmt: skip
                self.grow_nodes(need)
                B = self.view(interp)  # grown arrays: a new struct
                hinted = False  # (routed again: simpler than proving the route survives growth)
            if fill:  # every argument's type is fixed for this bank from now on
                self._entries[kernel] = (ipar, fstate, entry_point(run, (
                    B, io, code_attr, 0, do_predict, do_learn, need, hinted, cats)), io)  # fmt: skip
        else:
            out = self._out_now if start == _KEPT else self._out1
            hint = self._hint1
            while (start := run(B, ipar, fstate, xn, xc, self._y1, self._w1, self._seq1, start,
                                do_predict, do_learn, out, self._ncls1, code_attr, need, hint,
                                hinted)) < 2:  # fmt: skip
                self.grow_nodes(need)
                B = self.view(interp)
                hinted = False
            if fill:
                self._entries[kernel] = (ipar, fstate, entry_point(kernel, (
                    B, ipar, fstate, xn, xc, self._y1, self._w1, self._seq1, 0, do_predict,
                    do_learn, out, self._ncls1, code_attr, need, hint, hinted)), None)  # fmt: skip
        if do_learn and self._pgen_now[0] != self._pgen:  # (only learning grows the pools)
            self.sync()
        if not learn:  # row _NOW predicted, not learned: _hint1 holds its route in this state
            self._hint_for = self._last
            self._hint_kernel = kernel
        if do_learn and w > 0.0:
            self.n_seen += 1
        if do_predict:
            out = self._out1
            if label_only:  # argmax without building the dict (ties: first class, as argmax_label)
                if io is not None:  # the kernel's label_code of the row
                    k = self._label[0]
                    if k >= 0:
                        return s.classes[k]
                    if k == -1:
                        return None  # (-2, a value not finite: as below)
                if n_cls == 2:  # (two classes, one larger: the max and its first index, read)
                    two = self._out_vals
                    if two[0] > two[1]:
                        return s.classes[0]
                    if two[1] > two[0]:
                        return s.classes[1]
                vals = self._out_vals[:n_cls].tolist()  # (list functions: numpy's cost more)
                t = sum(vals)
                if t != t:  # a NaN: as the answer's dict (proba_dict) would be read
                    return argmax_label(dict(zip(s.classes[:n_cls], vals, strict=True)))
                return s.classes[vals.index(max(vals))] if any(vals) else None
            return s.proba_dict(out[_NOW], n_cls)
        return None

    def _first_run(self, kernel: Any, ipar: Any, fstate: Any) -> tuple[Any, Any]:
        """What a per-example call of run kernel ``kernel`` calls before it has an entry point
        (``run_one``, ``flush``): ``(dispatcher, io)``, the dispatcher of its IO run kernel
        (see IO_RUNS) with a new ``RunIO`` of this bank's per-example buffers (``run_one``
        keeps it in ``_entries``, cleared whenever a buffer is replaced), or ``(kernel,
        None)`` for a kernel without one."""
        io_run = IO_RUNS.get(kernel)
        if io_run is None:
            return kernel, None
        return io_run, make_run_io(ipar, fstate, self._xn1, self._xc1, _NO_CATEGORIES, self._y1,
                                   self._w1, self._seq1, self._out1, self._out_now, self._ncls1,
                                   self._hint1, self._pk1, self._pv1, self._label1)  # fmt: skip

    def flush(self) -> None:
        """Run the learn that ``run_one(..., defer=True)`` kept, if any (its own kernel call)."""
        kept = self._pending
        if kept is None:
            return
        self._pending = None
        self._hint_for = None
        kernel, ipar, fstate, need, xn, xc, hinted = kept
        self._one[1][_NOW] = 0.0  # row _NOW: nothing to do
        interp = MODE.interpreted and interpreting()
        io = None
        if interp:
            run = twin_of(kernel)
        else:
            entry = self._entries.get(kernel)
            if entry is not None and entry[0] is ipar and entry[1] is fstate:
                run, io = entry[2], entry[3]
            else:
                run, io = self._first_run(kernel, ipar, fstate)
        B = self.view(interp)
        start = _KEPT
        code_attr = self.schema.code_attr_array
        if io is not None:
            cats = xc is not _NO_CATEGORIES
            while (start := run(B, io, code_attr, start, False, True, need, hinted, cats)) < 2:
                self.grow_nodes(need)
                B = self.view(interp)
                hinted = False
        else:
            while (start := run(B, ipar, fstate, xn, xc, self._y1, self._w1, self._seq1, start,
                                False, True, self._out1, self._ncls1, code_attr, need,
                                self._hint1, hinted)) < 2:  # fmt: skip
                self.grow_nodes(need)
                B = self.view(interp)
                hinted = False
        if self._pgen_now[0] != self._pgen:
            self.sync()

    # --------------------------------------------------------------------------- state
    def _canonical(self) -> TreeState:
        """The live rows and class entries of every member in canonical order (``canonical``),
        in arrays as wide as the largest member's: what a saved state holds. Capacity, freed
        rows, dead class entries and the index do not affect results."""
        self.flush()
        self.sync()
        counts = np.zeros((self.M, 7), np.int64)
        interp = MODE.interpreted and interpreting()
        run = jit_kernel(canonical)
        src = self.view(interp)
        run(src, src, counts, False)
        most = [int(c) for c in counts.max(axis=0)] if self.M else [0] * 7
        size = Capacity(nodes=most[0], slots=most[1], features=most[2], values=most[3],
                        observers=most[4], keys=1, weights=most[5], gaussians=most[6])  # fmt: skip
        C = _alloc(self.M, size)
        dst = interpreted_bank(C, self.params) if interp else make_bank(C, self.params)
        run(src, dst, counts, True)
        return C

    def state_arrays(self, prefix: str = "tree.") -> dict[str, np.ndarray]:
        """The saved arrays (``STATE_FIELDS``): the live rows and class entries only, renumbered
        canonically (``canonical``: a state depends on what the model holds, not on when its
        arrays grew, were compacted or reloaded), integer arrays as int32 when their values fit
        (all, within the default limits)."""
        C = self._canonical()
        out = {}
        for name in STATE_FIELDS:
            a = getattr(C, name)
            if name in _NARROW and (a.size == 0 or (_I32.min <= a.min() and a.max() <= _I32.max)):
                a = a.astype(np.int32)
            out[prefix + name] = a
        return out

    def load_arrays(self, arrays: dict[str, np.ndarray], prefix: str = "tree.") -> None:
        """Load saved arrays (``state_arrays``; set ``schema`` first). Arrays of older states are
        converted: version 1 (dense per-leaf blocks over the whole vocabulary) and version 2
        (sparse rows, dense over the classes)."""
        self.flush()
        if prefix + "wc" not in arrays and prefix + "dist" in arrays:
            if prefix + "v_code" in arrays:
                self._load_v2(arrays, prefix)
            else:
                self._load_dense(arrays, prefix)
            return
        parts = self._checked(arrays, prefix, STATE_FIELDS)
        saved = TreeState(**parts, **{name: np.zeros((0, 0), np.int64) for name in INDEX_FIELDS})
        size = _used(saved)
        s = self.schema
        _check_bounds(parts, len(s.classes), len(s.num_names), len(s.cat_names), prefix)
        # at least 1 node/slot/row (kernels index safely); room for the index
        cap = Capacity(
            nodes=max(size.nodes, 1),
            slots=max(size.slots, 1),
            features=max(size.features, 1),
            values=max(size.values, 1),
            observers=max(size.observers, 1),
            keys=64,
            weights=max(parts["wc"].shape[1], 64),
            gaussians=max(parts["gc"].shape[1], 32),
        )
        new = _alloc(self.M, cap._replace(keys=self._keys_for(size), **self._direct_widths()))
        for name in STATE_FIELDS:
            src, dst = parts[name], getattr(new, name)
            if src.ndim != dst.ndim or any(
                s > d for s, d in zip(src.shape, dst.shape, strict=True)
            ):
                raise ValueError(f"state array {prefix + name} has shape {src.shape}")
            dst[tuple(slice(0, n) for n in src.shape)] = src
        self._check_structure(new, prefix)
        self._set(new)
        jit_kernel(build_index)(self.view())

    def _check_structure(self, T: TreeState, prefix: str) -> None:
        """``ValueError`` naming the array unless the loaded arrays ``T`` hold together as the
        kernels' own states do (``check_structure``; ``_check_bounds`` first)."""
        s = self.schema
        interp = MODE.interpreted and interpreting()
        bank = interpreted_bank(T, self.params) if interp else make_bank(T, self.params)
        out = np.zeros(3, np.int64)
        jit_kernel(check_structure)(bank, s.code_attr_array, s.n_cat, s.n_num, out)
        if out[0]:
            name, what = STRUCTURE_PROBLEMS[out[0] - 1]
            raise ValueError(f"state array {prefix + name}: {what} (member {out[1]}, row "
                             f"{out[2]}; a forged or damaged state)")  # fmt: skip

    def _checked(self, arrays: dict[str, np.ndarray], prefix: str,
                 names: tuple[str, ...]) -> dict[str, np.ndarray]:  # fmt: skip
        """The arrays ``names`` of a saved state, with their dtypes and member count checked."""
        parts: dict[str, np.ndarray] = {}
        for name in names:
            key = prefix + name
            if key not in arrays:
                raise ValueError(f"state has no array {key} (a state of an older format?)")
            a = np.asarray(arrays[key])
            want = np.float64 if name in _FLOAT_FIELDS else np.int64
            if want is np.int64 and a.dtype == np.int32:  # version 4 narrows what fits
                a = a.astype(np.int64)
            if a.dtype != want:
                raise ValueError(f"state array {key} has dtype {a.dtype}, want {want}")
            parts[name] = a
        if parts["kind"].shape[0] != self.M:
            raise ValueError(f"state has {parts['kind'].shape[0]} members, model has {self.M}")
        return parts

    @staticmethod
    def _keys_for(size: Capacity) -> int:
        """Index size for the rows of ``size`` (+ the children of categorical splits)."""
        return _index_size(size.features + size.values + size.observers + size.nodes)

    def _fill_classes(self, dense_rows) -> None:
        """Give rows their class entries from dense vectors: ``dense_rows`` yields ``(kind, m,
        row, vector)`` with kind "d" (node weights), "f" (feature row), "v" (value row) or "o"
        (observer: ``[C, NUM_STATS]``). Then rebuild the index."""
        B = self.view()
        T = self.T
        fill_w, fill_g = jit_kernel(fill_weights_), jit_kernel(fill_gaussians_)
        heads = {"d": (T.d_at, T.d_len), "f": (T.fw_at, T.fw_len), "v": (T.vw_at, T.vw_len)}
        for kind, m, row, vec in dense_rows:
            if kind == "o":
                fill_g(B, m, row, np.ascontiguousarray(vec))
            else:
                fill_w(B, *heads[kind], m, row, np.ascontiguousarray(vec))
        self.sync()
        jit_kernel(build_index)(self.view())

    def _load_v2(self, arrays: dict[str, np.ndarray], prefix: str) -> None:
        """Load a version-2 state: the same rows and lists, each row's dense class vector turned
        into entries for its classes with weight (in class order)."""
        old = self._checked(arrays, prefix, _V2_FIELDS)
        s = self.schema
        tree = {name: old[name] for name in _V2_FIELDS[: -len(_V2_DENSE)]}
        _check_bounds(tree, len(s.classes), s.n_num, s.n_cat, prefix)
        M = self.M
        N, F, E, O = (old[n].shape[1] for n in ("kind", "nvals", "v_code", "o_attr"))  # noqa: E741
        _check_dense(
            {
                "dist": (old["dist"], (M, N, _CLASSES)),
                "catw": (old["catw"], (M, F, _CLASSES)),
                "cat": (old["cat"], (M, E, _CLASSES)),
                "num": (old["num"], (M, O, _CLASSES, NUM_STATS)),
            },
            len(s.classes),
            prefix,
        )
        C = old["dist"].shape[2]
        if old["catw"].shape[2] != C or old["cat"].shape[2] != C or old["num"].shape[2] < C:
            raise ValueError(f"state arrays {prefix}dist, catw, cat, num: class axes of "
                             "different lengths (a forged or damaged state)")  # fmt: skip
        cap = Capacity(
            nodes=max(old["kind"].shape[1], 1), slots=max(old["last"].shape[1], 1),
            features=max(old["nvals"].shape[1], 1), values=max(old["v_code"].shape[1], 1),
            observers=max(old["o_attr"].shape[1], 1), keys=64, weights=64, gaussians=32,
        )  # fmt: skip
        size = cap._replace(nodes=int(old["n_nodes"].max()))
        T = _alloc(self.M, cap._replace(keys=self._keys_for(size), **self._direct_widths()))
        for name in _V2_FIELDS[: -len(_V2_DENSE)]:
            src, dst = old[name], getattr(T, name)
            dst[tuple(slice(0, n) for n in src.shape)] = src
        self._check_structure(T, prefix)  # (no class entries yet: those are made below)
        self._set(T)
        dist, catw, cat, num = (old[name] for name in _V2_DENSE)

        def rows():
            for m in range(self.M):
                for n in range(int(T.n_nodes[m])):
                    yield "d", m, n, dist[m, n]
                    s = int(T.slot[m, n])
                    if s < 0:
                        continue
                    for f in _chain(T.f_next[m], T.f_head[m, s], T.f_pend[m, s]):
                        yield "f", m, f, catw[m, f]
                        for e in _chain(T.v_next[m], T.v_head[m, f], T.v_pend[m, f]):
                            yield "v", m, e, cat[m, e]
                    for o in _chain(T.o_next[m], T.o_head[m, s], T.o_pend[m, s]):
                        yield "o", m, o, num[m, o, :C]

        self._fill_classes(rows())

    def _load_dense(self, arrays: dict[str, np.ndarray], prefix: str) -> None:
        """Load a version-1 state: a row for every (leaf, feature), (leaf, value) and (leaf,
        numeric feature) with weight, value rows in code order -- the statistics the sparse
        layout would hold after the same stream, so predictions and learning go on unchanged."""
        old = {}
        for name in _V1_FIELDS:
            arr = np.asarray(arrays[prefix + name])
            want = np.int64 if name in _V1_INT_FIELDS else np.float64
            if arr.dtype != want:
                raise ValueError(f"state array {prefix + name} has dtype {arr.dtype}, want {want}")
            old[name] = arr
        kind, slot, n_nodes = old["kind"], old["slot"], old["n_nodes"]
        cat, catw, nvals, num = old["cat"], old["catw"], old["nvals"], old["num"]
        s = self.schema
        tree = {name: old[name] for name in _V1_TREE}
        _check_bounds(tree, len(s.classes), s.n_num, s.n_cat, prefix)
        M, N, L = self.M, kind.shape[1], old["last"].shape[1]
        if kind.shape[0] != M:
            raise ValueError(f"state has {kind.shape[0]} members, model has {M}")
        shapes = {"dist": (old["dist"], (M, N, _CLASSES)), "cat": (cat, (M, L, _ANY, _CLASSES)),
                  "catw": (catw, (M, L, _ANY, _CLASSES)),
                  "num": (num, (M, L, _ANY, _CLASSES, NUM_STATS))}  # fmt: skip
        _check_dense(shapes, len(s.classes), prefix)
        _, _, K, C = cat.shape
        A, J = catw.shape[2], num.shape[2]
        if nvals.shape != (M, L, A) or K > len(s.code_attr) or A > s.n_cat or J > s.n_num:
            raise ValueError(f"state arrays {prefix}cat, catw, nvals, num: more categories or "
                             "features than the model has (a forged or damaged state)")  # fmt: skip
        if catw.shape[3] != C or num.shape[3] != C or old["dist"].shape[2] != C:
            raise ValueError(f"state arrays {prefix}dist, cat, catw, num: class axes of "
                             "different lengths (a forged or damaged state)")  # fmt: skip
        code_attr = np.asarray(self.schema.code_attr, dtype=np.int64)[:K]
        seen_value = np.asarray(cat.sum(axis=3) > 0.0)  # [M, L, K]
        seen_num = np.asarray((num[..., 0] > 0.0).any(axis=3))  # [M, L, J]
        leaves = [slot[m, : n_nodes[m]][slot[m, : n_nodes[m]] >= 0] for m in range(M)]
        rows = np.array([[int((nvals[m, ls] > 0).sum()), int(seen_value[m, ls].sum()),
                          int(seen_num[m, ls].sum())] for m, ls in enumerate(leaves)],
                        dtype=np.int64).reshape(M, 3)  # fmt: skip
        most = rows.max(axis=0)
        cap = Capacity(
            nodes=max(kind.shape[1], 1), slots=max(L, 1), features=int(most[0]) + 1,
            values=int(most[1]) + 1, observers=int(most[2]) + 1,
            keys=_index_size(int(rows.sum(axis=1).max()) + kind.shape[1]), weights=64,
            gaussians=32, **self._direct_widths(),
        )  # fmt: skip
        T = _alloc(self.M, cap)
        for name in _V1_TREE:  # same layout
            src, dst = old[name], getattr(T, name)
            dst[tuple(slice(0, n) for n in src.shape)] = src
        self._check_structure(T, prefix)  # (the tree and slots: no rows yet, made below)
        self._set(T)
        B = self.view()
        add_feature, add_value, add_observer = (
            jit_kernel(add_feature_),
            jit_kernel(add_value_),
            jit_kernel(add_observer_),
        )
        dense = []
        for m in range(M):
            dense += [("d", m, n, old["dist"][m, n]) for n in range(int(n_nodes[m]))]
            for s in leaves[m].tolist():
                for a in np.flatnonzero(nvals[m, s] > 0):
                    f = add_feature(B, m, s, a)
                    dense.append(("f", m, f, catw[m, s, a]))
                    for code in np.flatnonzero(seen_value[m, s] & (code_attr == a)):
                        dense.append(("v", m, add_value(B, m, s, f, code), cat[m, s, code]))
                for j in np.flatnonzero(seen_num[m, s]):
                    dense.append(("o", m, add_observer(B, m, s, j), num[m, s, j]))
        self._fill_classes(dense)

    @property
    def nbytes(self) -> int:
        """Bytes of the saved arrays (``state_arrays``)."""
        return sum(a.nbytes for a in self.state_arrays().values())

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
        size = _used(T)._replace(
            slots=int((T.n_slots - T.n_free).max()), weights=int((T.w_used - T.w_dead).max()),
            gaussians=int((T.g_used - T.g_dead).max()),
        )  # fmt: skip
        total = 0
        for name in STATE_FIELDS:
            a = getattr(T, name)
            cut = _cut(name, a, size)
            total += a.itemsize * math.prod(len(range(*sl.indices(n)))
                                            for sl, n in zip(cut, a.shape, strict=True))  # fmt: skip
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


def _chain(nxt: np.ndarray, *heads: int):
    """The rows of linked lists starting at ``heads`` (``nxt`` one member's links)."""
    for i in heads:
        while i >= 0:
            yield int(i)
            i = nxt[i]
