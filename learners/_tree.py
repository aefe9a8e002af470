"""Compiled kernels for a bank of M incremental trees held in arrays (ARCHITECTURE §3).

One data structure serves all three native learners:

* ``HoeffdingTree`` — VFDT (Domingos & Hulten 2000, as MOA's HoeffdingTree): leaves keep
  sufficient statistics, every ``grace_period`` weight a leaf compares the best two split merits
  (information gain or Gini) with the Hoeffding bound and splits.
* ``NaiveBayes`` — a tree that never splits (``max_depth = 0``) whose single leaf predicts with
  naive Bayes.
* ``DecisionStump`` — a root that never splits and predicts with the best split computed from its
  statistics at prediction time (so it always equals the batch stump on the data so far).

Kernels take ``(T, P, ...)``: the state arrays and the parameters. Entry points receive one
``Bank`` struct holding both and pass it as ``T`` and ``P``.

Layout (leading axis = member ``m``; every other axis is a capacity that Python doubles when a
kernel reports that it needs room, see ``has_room``, except the two class-entry pools, which the
kernels grow themselves). Statistics are *sparse* on every axis: a leaf holds rows only for the
features and values that reached it, and a row holds entries only for the classes that reached
it — never a block over the global vocabulary or over all classes.

* nodes ``[M, N]``: kind (0 leaf, 1 numeric split, 2 categorical split), attr, thr, slot (leaf
  statistics slot or -1), child (first child), sibling (next sibling), branch (0/1 for numeric
  splits, the category code for categorical ones), depth; class weights in ``d_at``/``d_len``.
* leaf slots ``[M, L]``: ``last`` weight at the last split attempt, ``mc_ok``/``nb_ok`` correct
  weight of the two leaf predictors, and the heads of two lists: the leaf's categorical features
  (``f_head``) and its numeric observers (``o_head``).
* categorical feature rows ``[M, F]`` (one per (leaf, feature) seen): observed weight per class
  in ``fw_at``/``fw_len``, ``nvals`` distinct values seen, ``f_attr`` the feature, ``v_head`` its
  list of value rows.
* value rows ``[M, E]`` (one per (leaf, category code) seen): weight per class in
  ``vw_at``/``vw_len``, ``v_code`` the code.
* numeric observers ``[M, O]`` (one per (leaf, numeric feature) seen): one Gaussian estimator per
  class in ``g_at``/``g_len`` (weight, mean, M2, min, max, and the naive-Bayes variance, cached:
  ``o_fresh`` says which of them are stale, see ``gaussian_cache``; a seventh float, LOGVAR, held
  the variance's log until ``nb_proba`` took one log per class; it is no longer written or read,
  and stays so that saved states keep their layout), ``o_attr`` the feature.

Class entries. A row's per-class statistics are one *block* of a per-member pool: ``wc``/``wv``
(class code, weight) for the weight rows of nodes, feature rows and value rows, ``gc``/``gv``
(class code, ``NUM_STATS`` floats) for the Gaussian observers. ``*_at`` is the block's first
entry (-1: none) and ``*_len`` its number of entries, sorted by class code; the block holds
``block_cap(len)`` entries (0, 1, 2, 4, 8, ...). A class new to a row is sorted in; a full block
moves to a new one of twice the size at the pool's end and its old entries become garbage
(``w_dead``/``g_dead``). A member's blocks are compacted when at least half of what it used is
garbage (decided on those counts only, so the layout never depends on capacities); a pool out of
room doubles (for every member; ``pgen`` counts the
reallocations so that Python picks the new arrays up). So a row costs O(classes it saw) bytes and
a leaf's prediction O(classes seen at the leaf), and every sum over classes runs in class-code
order over the entries present: the same floating-point sums as over the dense ``[.., C]``
blocks this replaced (absent classes added 0.0, which changes no sum), hence the same results.
Every entry present has weight > 0 (entries are created by learning with w > 0, or copied from a
positive estimate when a leaf splits), so "the node has weight" is "it has an entry". A leaf's
total weight is kept approximately in ``wsum`` (derived, never saved) so that the grace-period
test sums the leaf's entries in class order only when the total may have reached the threshold.

Outputs. ``tree_proba`` writes a member's probabilities sparsely: class codes ``pk`` and values
``pv`` (the classes of the leaf, in code order) and returns their number (0: no prediction).

Lists are singly linked through ``*_next`` and kept sorted by key (feature, code) so that every
sum runs in the order of the dense layout it replaced: an item whose key is above the list's tail
is appended (the usual case: codes are handed out in order of first appearance), others wait in a
``*_pend`` list merged in by ``list_sort`` before the list is read in order. Freed rows go on
per-pool free lists (``*_freed``, threaded through ``*_next``). An index, rebuilt on load and
never saved, finds a leaf's rows: ``f_of [M, L, a]`` / ``o_of [M, L, j]`` for the first
``DIRECT`` features (one load in the hot loops), and for the rest and for values a per-member
open-addressing hash table (``hkey``/``hval``, linear probing, backward-shift deletion) keyed by
(slot, kind, id).

Saved state. ``canonical`` gives what ``to_state`` saves: each member's live rows renumbered in
the order of a walk of its tree and its class blocks laid out as a compaction would, without
freed rows, dead entries or capacity (so a state depends only on what the model holds); every
list keeps its items, order and pending part, so a loaded copy goes on exactly.

Codes: ``xn`` numeric values (NaN = missing), ``xc`` category codes (-1 missing, -2 unseen).
"""

from __future__ import annotations

import math
from types import SimpleNamespace
from typing import NamedTuple

import numba as nb
import numpy as np
from numba.core import cgutils, types
from numba.experimental import structref
from numba.extending import intrinsic, overload
from numba.np.arrayobj import make_array, populate_array

from learners.jit import one_specialisation

LEAF, NUMERIC_SPLIT, CATEGORICAL_SPLIT = 0, 1, 2
PRED_MC, PRED_NB, PRED_NBA, PRED_STUMP = 0, 1, 2, 3
CRIT_INFO_GAIN, CRIT_GINI = 0, 1
W, MEAN, M2, MIN, MAX, VAR, LOGVAR = 0, 1, 2, 3, 4, 5, 6
NO_NB = -2  # hint[m, 1] / [m, 3]: not computed (argmax gives -1 for "none")
SETTLED = 2  # o_fresh: the variances are fresh and the pooled variance is positive for good
NUM_STATS = 7
WPOOL, GPOOL = 0, 1  # the class-entry pools: weights, Gaussian estimators
KEY_VALUE, KEY_FEATURE, KEY_OBSERVER, KEY_CHILD = 0, 1, 2, 3  # kinds of index keys
OTHER_BRANCH = -3  # branch of a categorical split shared by the values it has no branch for
ID_BITS = 36  # a key is (slot << 38) | (id << 2) | kind: ids < 2**36, slots < 2**25
MAX_ID = 1 << ID_BITS
MAX_SLOTS = 1 << 25
DIRECT = 32  # features (of each kind) whose rows a leaf finds through f_of / o_of
PRODUCT_FOLD = 1e-250  # nb_proba takes the log of a product of quotients before it gets smaller
VAR_FOLD = 1e-150  # and the log of a product of variances before it leaves [1e-150, 1e150]
WSUM_SLACK = 1e-6  # relative error bound of the running leaf totals ``wsum`` (see tree_learn)

NODE_FIELDS = ("kind", "attr", "thr", "slot", "child", "sibling", "branch", "depth", "d_at",
               "d_len", "n_nodes")  # fmt: skip
SLOT_FIELDS = ("last", "mc_ok", "nb_ok", "f_head", "f_tail", "f_pend", "o_head", "o_tail",
               "o_pend", "free", "n_free", "n_slots")  # fmt: skip
FEATURE_FIELDS = ("fw_at", "fw_len", "nvals", "f_attr", "f_next", "v_head", "v_tail", "v_pend",
                  "n_f", "f_freed")  # fmt: skip
VALUE_FIELDS = ("vw_at", "vw_len", "v_code", "v_next", "n_v", "v_freed")
OBSERVER_FIELDS = ("g_at", "g_len", "o_fresh", "o_attr", "o_next", "n_o", "o_freed")
POOL_FIELDS = ("wc", "wv", "w_used", "w_dead", "gc", "gv", "g_used", "g_dead")
STATE_FIELDS = (NODE_FIELDS + SLOT_FIELDS + FEATURE_FIELDS + VALUE_FIELDS + OBSERVER_FIELDS
                + POOL_FIELDS)  # fmt: skip
INDEX_FIELDS = ("hkey", "hval", "n_keys", "f_of", "o_of", "width", "wsum", "pgen")  # never saved
PARAM_FIELDS = (
    "grace_period", "delta", "tau", "criterion", "leaf_prediction", "nb_threshold",
    "max_depth", "max_nodes", "n_split_points", "min_branch_frac",
)  # fmt: skip


class TreeState(NamedTuple):
    """The arrays, as Python sees them (kernels mutate them in place)."""

    kind: np.ndarray
    attr: np.ndarray
    thr: np.ndarray
    slot: np.ndarray
    child: np.ndarray
    sibling: np.ndarray
    branch: np.ndarray
    depth: np.ndarray
    d_at: np.ndarray
    d_len: np.ndarray
    n_nodes: np.ndarray
    last: np.ndarray
    mc_ok: np.ndarray
    nb_ok: np.ndarray
    f_head: np.ndarray
    f_tail: np.ndarray
    f_pend: np.ndarray
    o_head: np.ndarray
    o_tail: np.ndarray
    o_pend: np.ndarray
    free: np.ndarray
    n_free: np.ndarray
    n_slots: np.ndarray
    fw_at: np.ndarray
    fw_len: np.ndarray
    nvals: np.ndarray
    f_attr: np.ndarray
    f_next: np.ndarray
    v_head: np.ndarray
    v_tail: np.ndarray
    v_pend: np.ndarray
    n_f: np.ndarray
    f_freed: np.ndarray
    vw_at: np.ndarray
    vw_len: np.ndarray
    v_code: np.ndarray
    v_next: np.ndarray
    n_v: np.ndarray
    v_freed: np.ndarray
    g_at: np.ndarray
    g_len: np.ndarray
    o_fresh: np.ndarray
    o_attr: np.ndarray
    o_next: np.ndarray
    n_o: np.ndarray
    o_freed: np.ndarray
    wc: np.ndarray
    wv: np.ndarray
    w_used: np.ndarray
    w_dead: np.ndarray
    gc: np.ndarray
    gv: np.ndarray
    g_used: np.ndarray
    g_dead: np.ndarray
    hkey: np.ndarray
    hval: np.ndarray
    n_keys: np.ndarray
    f_of: np.ndarray
    o_of: np.ndarray
    width: np.ndarray
    wsum: np.ndarray
    pgen: np.ndarray


class TreeParams(NamedTuple):
    """Learner parameters as the kernels read them."""

    grace_period: float
    delta: float
    tau: float
    criterion: int
    leaf_prediction: int
    nb_threshold: float
    max_depth: int
    max_nodes: int
    n_split_points: int
    min_branch_frac: float


assert TreeState._fields == STATE_FIELDS + INDEX_FIELDS and TreeParams._fields == PARAM_FIELDS


@structref.register
class BankType(types.StructRef):
    """Numba type of a bank: all state arrays and parameters in one struct, so a kernel call
    unboxes one object (~1 µs) instead of fifty."""

    def preprocess_fields(self, fields):
        return tuple((name, types.unliteral(typ)) for name, typ in fields)


class Bank(structref.StructRefProxy):
    """Python handle of a ``BankType``; Python reads the arrays through ``TreeState`` (and the
    pools, which kernels may replace, through ``pools``)."""


structref.define_proxy(Bank, BankType, list(STATE_FIELDS + INDEX_FIELDS + PARAM_FIELDS))


@intrinsic
def _unowned(typingctx, arr):
    def codegen(context, builder, sig, args):
        ary = make_array(arr)(context, builder, value=args[0])
        out = make_array(arr)(context, builder)
        populate_array(out, data=ary.data, shape=ary.shape, strides=ary.strides,
                       itemsize=ary.itemsize, meminfo=cgutils.get_null_value(ary.meminfo.type),
                       parent=ary.parent)  # fmt: skip
        return out._getvalue()

    return arr(arr), codegen


def unowned(arr):
    """The array ``arr`` without its reference count, in a kernel: a null meminfo, the same
    data, shape and parent object. Passing or reading it then costs no atomic increment and
    decrement, which took most of a kernel's time (a pair per bank field read, per array
    argument). Only for arrays something else keeps alive for as long as the view is used: the
    bank's arrays are owned by the ``TreeState`` it is made from (see ``make_bank``); a kernel's
    own buffers by a variable used after the view's last use (``keep_alive``). In Python (the
    interpreted twins) the array itself; anything not an array is given as it is."""
    return arr


@overload(unowned)
def _unowned_kernel(arr):
    if isinstance(arr, types.Array):
        return lambda arr: _unowned(arr)
    return lambda arr: arr  # (anything else as it is: a struct argument of make_run_io)


def keep_alive(*arrays):
    """A use of ``arrays``: numba frees an array after its variable's last use, and ``unowned``
    views of it do not count; call this after the views' last use."""
    return None


@overload(keep_alive)
def _keep_alive_kernel(*arrays):
    return lambda *arrays: None


@nb.njit(cache=True)
def _make_bank(kind, attr, thr, slot, child, sibling, branch, depth, d_at, d_len, n_nodes, last,
               mc_ok, nb_ok, f_head, f_tail, f_pend, o_head, o_tail, o_pend, free, n_free,
               n_slots, fw_at, fw_len, nvals, f_attr, f_next, v_head, v_tail, v_pend, n_f,
               f_freed, vw_at, vw_len, v_code, v_next, n_v, v_freed, g_at, g_len, o_fresh,
               o_attr, o_next, n_o, o_freed, wc, wv, w_used, w_dead, gc, gv, g_used, g_dead,
               hkey, hval, n_keys, f_of, o_of, width, wsum, pgen, grace_period, delta, tau,
               criterion, leaf_prediction, nb_threshold, max_depth, max_nodes, n_split_points,
               min_branch_frac):  # fmt: skip
    return Bank(unowned(kind), unowned(attr), unowned(thr), unowned(slot), unowned(child),
                unowned(sibling), unowned(branch), unowned(depth), unowned(d_at), unowned(d_len),
                unowned(n_nodes), unowned(last), unowned(mc_ok), unowned(nb_ok), unowned(f_head),
                unowned(f_tail), unowned(f_pend), unowned(o_head), unowned(o_tail),
                unowned(o_pend), unowned(free), unowned(n_free), unowned(n_slots),
                unowned(fw_at), unowned(fw_len), unowned(nvals), unowned(f_attr),
                unowned(f_next), unowned(v_head), unowned(v_tail), unowned(v_pend), unowned(n_f),
                unowned(f_freed), unowned(vw_at), unowned(vw_len), unowned(v_code),
                unowned(v_next), unowned(n_v), unowned(v_freed), unowned(g_at), unowned(g_len),
                unowned(o_fresh), unowned(o_attr), unowned(o_next), unowned(n_o),
                unowned(o_freed), unowned(wc), unowned(wv), unowned(w_used), unowned(w_dead),
                unowned(gc), unowned(gv), unowned(g_used), unowned(g_dead), unowned(hkey),
                unowned(hval), unowned(n_keys), unowned(f_of), unowned(o_of), unowned(width),
                unowned(wsum), unowned(pgen), grace_period, delta, tau, criterion,
                leaf_prediction, nb_threshold, max_depth, max_nodes, n_split_points,
                min_branch_frac)  # fmt: skip


@nb.njit(cache=True)
def pools(T):
    """The class-entry pool arrays ``(wc, wv, gc, gv)`` the bank holds now (kernels replace them
    when they grow)."""
    return T.wc, T.wv, T.gc, T.gv


def make_bank(T: TreeState, P: TreeParams) -> Bank:
    """One struct over the arrays of ``T`` (shared memory) and the parameters ``P``.

    The struct holds ``unowned`` views: it does not keep ``T``'s arrays alive, so whoever holds
    the bank holds ``T`` too (``TreeBank._set`` sets both). Arrays a kernel puts in the bank
    (grown pools) are owned by the bank until ``TreeBank.sync`` hands them to a new ``T``."""
    return _make_bank(*T, *_typed_params(P))  # type: ignore[call-arg]


def interpreted_bank(T: TreeState, P: TreeParams) -> SimpleNamespace:
    """What ``make_bank`` gives, for the interpreted twins: the same arrays, as attributes."""
    return SimpleNamespace(**T._asdict(), **_typed_params(P)._asdict())


def _typed_params(P: TreeParams) -> TreeParams:
    p = P._replace(
        grace_period=float(P.grace_period), delta=float(P.delta), tau=float(P.tau),
        criterion=int(P.criterion), leaf_prediction=int(P.leaf_prediction),
        nb_threshold=float(P.nb_threshold), max_depth=int(P.max_depth),
        max_nodes=int(P.max_nodes), n_split_points=int(P.n_split_points),
        min_branch_frac=float(P.min_branch_frac),
    )  # fmt: skip
    return p


LOG2PI_HALF = 0.5 * math.log(2.0 * math.pi)
INV_LN2 = 1.0 / math.log(2.0)


# --------------------------------------------------------------------------- the row index
@nb.njit(cache=True)
def stat_key(s, ident, kind):
    """Hash key of the statistics row of ``kind`` (KEY_VALUE: ident = category code,
    KEY_FEATURE: categorical feature, KEY_OBSERVER: numeric feature) at leaf slot ``s``."""
    return (s << 38) | (ident << 2) | kind


@nb.njit(cache=True)
def key_home(key, mask):
    h = np.uint64(key) * np.uint64(0x9E3779B97F4A7C15)
    h ^= h >> np.uint64(32)
    return np.int64(h & np.uint64(mask))


@nb.njit(cache=True)
def index_find(T, m, key):
    """The row stored under ``key`` in member m's index, -1 if none."""
    return index_get(T.hkey, T.hval, m, key)


@nb.njit(cache=True)
def index_get(hkey, hval, m, key):
    """``index_find`` in the index arrays ``hkey``/``hval`` (a hot loop reads the bank's fields
    once: each read costs a reference count; kernels never replace these two arrays)."""
    mask = hkey.shape[1] - 1
    i = key_home(key, mask)
    while True:
        k = hkey[m, i]
        if k == key:
            return hval[m, i]
        if k < 0:
            return -1
        i = (i + 1) & mask


@nb.njit(cache=True)
def index_add(T, m, key, row):
    """Store ``row`` under ``key`` (not present; the table has room: see ``has_room``)."""
    hkey = T.hkey
    mask = hkey.shape[1] - 1
    i = key_home(key, mask)
    while hkey[m, i] >= 0:
        i = (i + 1) & mask
    hkey[m, i] = key
    T.hval[m, i] = row
    T.n_keys[m] += 1


@nb.njit(cache=True)
def index_remove(T, m, key):
    """Remove ``key`` (present), shifting back the keys probed past it (no tombstones)."""
    hkey = T.hkey
    hval = T.hval
    mask = hkey.shape[1] - 1
    i = key_home(key, mask)
    while hkey[m, i] != key:
        i = (i + 1) & mask
    j = i
    while True:
        j = (j + 1) & mask
        k = hkey[m, j]
        if k < 0:
            break
        h = key_home(k, mask)
        stays = (i < h <= j) if i <= j else (h > i or h <= j)
        if not stays:
            hkey[m, i] = k
            hval[m, i] = hval[m, j]
            i = j
    hkey[m, i] = -1
    T.n_keys[m] -= 1


@nb.njit(cache=True)
def row_find(T, m, s, ident, kind):
    """The row of (slot s, ident) of ``kind`` (KEY_FEATURE, KEY_OBSERVER, KEY_VALUE), -1 if none."""
    if kind == KEY_FEATURE and ident < T.f_of.shape[2]:
        return T.f_of[m, s, ident]
    if kind == KEY_OBSERVER and ident < T.o_of.shape[2]:
        return T.o_of[m, s, ident]
    return index_find(T, m, stat_key(s, ident, kind))


@nb.njit(cache=True)
def row_set(T, m, s, ident, kind, row):
    """Index ``row`` (-1: unindex it) as the row of (slot s, ident) of ``kind``."""
    if kind == KEY_FEATURE and ident < T.f_of.shape[2]:
        T.f_of[m, s, ident] = row
    elif kind == KEY_OBSERVER and ident < T.o_of.shape[2]:
        T.o_of[m, s, ident] = row
    elif row >= 0:
        index_add(T, m, stat_key(s, ident, kind), row)
    else:
        index_remove(T, m, stat_key(s, ident, kind))


@nb.njit(cache=True)
def index_list(T, m, s, nxt, ident, i, kind):
    """Index every row of the list starting at ``i`` (rows of slot s, ids in ``ident``)."""
    while i >= 0:
        row_set(T, m, s, ident[m, i], kind, i)
        i = nxt[m, i]


@nb.njit(cache=True)
def build_index(T):
    """Rebuild the index (and the leaves' running totals ``wsum``) from the leaves' lists, e.g.
    after loading a state."""
    T.hkey[:] = -1
    T.n_keys[:] = 0
    T.f_of[:] = -1
    T.o_of[:] = -1
    for m in range(T.kind.shape[0]):
        for n in range(T.n_nodes[m]):
            if T.kind[m, n] == CATEGORICAL_SPLIT:
                c = T.child[m, n]
                while c >= 0:
                    index_add(T, m, child_key(n, T.branch[m, c]), c)
                    c = T.sibling[m, c]
            s = T.slot[m, n]
            if s < 0:
                continue
            T.wsum[m, s] = block_sum(T.wv, m, T.d_at[m, n], T.d_len[m, n])
            index_list(T, m, s, T.o_next, T.o_attr, T.o_head[m, s], KEY_OBSERVER)
            index_list(T, m, s, T.o_next, T.o_attr, T.o_pend[m, s], KEY_OBSERVER)
            for f in (T.f_head[m, s], T.f_pend[m, s]):
                while f >= 0:
                    row_set(T, m, s, T.f_attr[m, f], KEY_FEATURE, f)
                    index_list(T, m, s, T.v_next, T.v_code, T.v_head[m, f], KEY_VALUE)
                    index_list(T, m, s, T.v_next, T.v_code, T.v_pend[m, f], KEY_VALUE)
                    f = T.f_next[m, f]


# --------------------------------------------------------------------------- class entries
@nb.njit(cache=True)
def block_cap(n):
    """Entries of the block of a row with n class entries: 0, 1, 2, 4, 8, ... (most value rows
    of a high-cardinality feature see one class)."""
    if n == 0:
        return 0
    c = 1
    while c < n:
        c *= 2
    return c


@nb.njit(cache=True)
def pool_of(T, pool):
    """(class codes, values, values per entry, used, garbage) of ``pool`` (WPOOL or GPOOL)."""
    if pool == WPOOL:
        return T.wc, T.wv, 1, T.w_used, T.w_dead
    return T.gc, T.gv, NUM_STATS, T.g_used, T.g_dead


@nb.njit(cache=True)
def entry_pos(cls, m, a, n, k):
    """Offset of class k in the block at ``a`` with n entries, else -1 - where it goes."""
    if k < n and cls[m, a + k] == k:  # the block holds classes 0..k (the usual few classes)
        return k
    lo = 0
    hi = n
    while lo < hi:
        mid = (lo + hi) >> 1
        if cls[m, a + mid] < k:
            lo = mid + 1
        else:
            hi = mid
    if lo < n and cls[m, a + lo] == k:
        return lo
    return -1 - lo


@nb.njit(cache=True)
def n_below(cls, m, a, n, k):
    """Entries of the block at ``a`` with n entries whose class is below k."""
    while n > 0 and cls[m, a + n - 1] >= k:
        n -= 1
    return n


@nb.njit(cache=True)
def block_sum(wv, m, a, n):
    """Sum of the weights of n entries from ``a`` (in class order)."""
    tot = 0.0
    for i in range(n):
        tot += wv[m, a + i]
    return tot


@nb.njit(cache=True)
def compact_rows(cls, val, width, at, ln, n_rows, m, tc, tv, pos):
    """Copy the blocks of rows ``0..n_rows`` into ``tc``/``tv`` from ``pos``; returns the end."""
    for r in range(n_rows):
        n = ln[m, r]
        if n == 0:
            continue
        a = at[m, r]
        for i in range(n):
            tc[pos + i] = cls[m, a + i]
        for i in range(n * width):
            tv[pos * width + i] = val[m, a * width + i]
        at[m, r] = pos
        pos += block_cap(n)
    return pos


@nb.njit(cache=True)
def must_compact(used, dead, m):
    """Whether member m's blocks are compacted before its next new block: when at least half of
    what it used is garbage. Decided on used and garbage only, never on the capacity, so that the
    layout does not depend on when arrays grew (a saved state is canonical either way: see
    ``canonical``)."""
    return dead[m] >= 32 and 2 * dead[m] >= used[m]


@nb.njit(cache=True)
def pool_make_room(T, pool, m, size):
    """Room for a block of ``size`` entries in member m's part of ``pool``: its blocks are
    compacted when ``must_compact``, and the pool (every member's part) doubles if there is not
    room enough."""
    cls, val, width, used, dead = pool_of(T, pool)
    if must_compact(used, dead, m):
        tc = np.full(used[m], -1, np.int64)  # (entries past a block's length stay clean)
        tv = np.zeros(used[m] * width)
        if pool == WPOOL:
            pos = compact_rows(cls, val, width, T.d_at, T.d_len, T.n_nodes[m], m, tc, tv, 0)
            pos = compact_rows(cls, val, width, T.fw_at, T.fw_len, T.n_f[m], m, tc, tv, pos)
            pos = compact_rows(cls, val, width, T.vw_at, T.vw_len, T.n_v[m], m, tc, tv, pos)
        else:
            pos = compact_rows(cls, val, width, T.g_at, T.g_len, T.n_o[m], m, tc, tv, 0)
        cls[m, : used[m]] = tc
        val[m, : used[m] * width] = tv
        used[m] = pos
        dead[m] = 0
    have = cls.shape[1]
    if used[m] + size <= have:
        return
    grown = max(2 * have, used[m] + size)
    new_cls = np.full((cls.shape[0], grown), -1, np.int64)
    new_val = np.zeros((cls.shape[0], grown * width))
    new_cls[:, :have] = cls
    new_val[:, : have * width] = val
    if pool == WPOOL:
        T.wc = new_cls
        T.wv = new_val
    else:
        T.gc = new_cls
        T.gv = new_val
    T.pgen[0] += 1


@nb.njit(cache=True)
def entry_of(T, pool, at, ln, m, row, k):
    """Index in ``pool`` of the entry of class k of ``row`` (block headers ``at``/``ln``); a new
    one is sorted in (weight 0, or an empty Gaussian) if the row has none. May move blocks and
    replace the pool's arrays: read them again after a call."""
    cls, val, width, used, dead = pool_of(T, pool)
    n = ln[m, row]
    a = at[m, row]
    p = entry_pos(cls, m, a, n, k)
    if p >= 0:
        return a + p
    p = -1 - p
    if n == block_cap(n):  # full (or none): a block twice the size
        size = block_cap(n + 1)
        if used[m] + size > cls.shape[1] or must_compact(used, dead, m):
            pool_make_room(T, pool, m, size)
            cls, val, width, used, dead = pool_of(T, pool)
            a = at[m, row]  # compaction moves blocks
        b = used[m]
        used[m] += size
        for i in range(n):
            cls[m, b + i] = cls[m, a + i]
        for i in range(n * width):
            val[m, b * width + i] = val[m, a * width + i]
        dead[m] += block_cap(n)
        at[m, row] = b
        a = b
    for i in range(n, p, -1):
        cls[m, a + i] = cls[m, a + i - 1]
        for t in range(width):
            val[m, (a + i) * width + t] = val[m, (a + i - 1) * width + t]
    cls[m, a + p] = k
    for t in range(width):
        val[m, (a + p) * width + t] = 0.0
    if pool == GPOOL:  # an empty Gaussian estimator
        val[m, (a + p) * width + MIN] = np.inf
        val[m, (a + p) * width + MAX] = -np.inf
    ln[m, row] = n + 1
    return a + p


@nb.njit(cache=True)
def add_weight(T, at, ln, m, row, k, w):
    """Add w to the weight of class k of a weight row (headers ``at``/``ln``)."""
    a = at[m, row]
    if k < ln[m, row] and T.wc[m, a + k] == k:  # the usual few classes: no search, no call
        T.wv[m, a + k] += w
    else:
        i = entry_of(T, WPOOL, at, ln, m, row, k)  # first: it may replace T.wv
        T.wv[m, i] += w


@nb.njit(cache=True)
def block_free(T, pool, at, ln, m, row):
    """The row's block becomes garbage; the row has no entries."""
    cls, val, width, used, dead = pool_of(T, pool)
    dead[m] += block_cap(ln[m, row])
    ln[m, row] = 0
    at[m, row] = -1


@nb.njit(cache=True)
def weights_below(T, at, ln, m, row, n_classes):
    """(first entry, entries) of the weight row's classes below ``n_classes``."""
    a = at[m, row]
    return a, n_below(T.wc, m, a, ln[m, row], n_classes)


@nb.njit(cache=True)
def node_weight(T, m, node, n_classes):
    """Total class weight of a node (classes below ``n_classes``, in class order)."""
    a, n = weights_below(T, T.d_at, T.d_len, m, node, n_classes)
    return block_sum(T.wv, m, a, n)


@nb.njit(cache=True)
def has_weight(T, m, node, n_classes):
    """Whether the node has weight for a class below ``n_classes`` (entries are > 0)."""
    return T.d_len[m, node] > 0 and T.wc[m, T.d_at[m, node]] < n_classes


# --------------------------------------------------------------------------- pools and lists
@nb.njit(cache=True)
def pool_take(nxt, freed, used, m):
    """A row of a pool: the last one freed, else a new one past the ``used`` high-water mark."""
    i = freed[m]
    if i >= 0:
        freed[m] = nxt[m, i]
    else:
        i = used[m]
        used[m] += 1
    return i


@nb.njit(cache=True)
def list_add(nxt, key, head, tail, pend, m, owner, item):
    """Add ``item`` to owner's list: appended when its key is above the tail's (the list stays
    sorted), else put aside in the pending list until ``list_sort``."""
    t = tail[m, owner]
    nxt[m, item] = -1
    if t < 0:
        head[m, owner] = item
        tail[m, owner] = item
    elif key[m, item] > key[m, t]:
        nxt[m, t] = item
        tail[m, owner] = item
    else:
        nxt[m, item] = pend[m, owner]
        pend[m, owner] = item


@nb.njit(cache=True)
def list_sort(nxt, key, head, tail, pend, m, owner):
    """Merge owner's pending items into its sorted list (ascending key): O(n + p log p)."""
    p = pend[m, owner]
    if p < 0:
        return
    n = 0
    i = p
    while i >= 0:
        n += 1
        i = nxt[m, i]
    items = np.empty(n, np.int64)
    keys = np.empty(n, np.int64)
    i = p
    for t in range(n):
        items[t] = i
        keys[t] = key[m, i]
        i = nxt[m, i]
    order = np.argsort(keys)
    a = head[m, owner]
    b = 0
    first = -1
    prev = -1
    while a >= 0 or b < n:
        if b >= n or (a >= 0 and key[m, a] < keys[order[b]]):
            cur = a
            a = nxt[m, a]
        else:
            cur = items[order[b]]
            b += 1
        if prev < 0:
            first = cur
        else:
            nxt[m, prev] = cur
        prev = cur
    nxt[m, prev] = -1
    head[m, owner] = first
    tail[m, owner] = prev
    pend[m, owner] = -1


@nb.njit(cache=True)
def release_list(T, m, s, nxt, ident, freed, i, kind, pool, at, ln):
    """Unindex the rows of a list starting at ``i``, free their class blocks (headers
    ``at``/``ln`` in ``pool``) and put them on the pool's free list."""
    while i >= 0:
        after = nxt[m, i]
        row_set(T, m, s, ident[m, i], kind, -1)
        block_free(T, pool, at, ln, m, i)
        nxt[m, i] = freed[m]
        freed[m] = i
        i = after


@nb.njit(cache=True)
def clear_lists(T, m, s):
    """Empty the feature and observer lists of slot s."""
    T.f_head[m, s] = -1
    T.f_tail[m, s] = -1
    T.f_pend[m, s] = -1
    T.o_head[m, s] = -1
    T.o_tail[m, s] = -1
    T.o_pend[m, s] = -1


@nb.njit(cache=True)
def release_slot(T, m, s):
    """Free every statistics row of leaf slot s (its leaf has split)."""
    for o in (T.o_head[m, s], T.o_pend[m, s]):
        release_list(T, m, s, T.o_next, T.o_attr, T.o_freed, o, KEY_OBSERVER, GPOOL, T.g_at,
                     T.g_len)  # fmt: skip
    for f in (T.f_head[m, s], T.f_pend[m, s]):
        while f >= 0:
            for e in (T.v_head[m, f], T.v_pend[m, f]):
                release_list(T, m, s, T.v_next, T.v_code, T.v_freed, e, KEY_VALUE, WPOOL,
                             T.vw_at, T.vw_len)  # fmt: skip
            after = T.f_next[m, f]
            row_set(T, m, s, T.f_attr[m, f], KEY_FEATURE, -1)
            block_free(T, WPOOL, T.fw_at, T.fw_len, m, f)
            T.f_next[m, f] = T.f_freed[m]
            T.f_freed[m] = f
            f = after
    clear_lists(T, m, s)


@nb.njit(cache=True)
def add_feature(T, m, s, a):
    """A new (empty) categorical feature row for feature a at slot s."""
    f = pool_take(T.f_next, T.f_freed, T.n_f, m)
    T.fw_at[m, f] = -1
    T.fw_len[m, f] = 0
    T.nvals[m, f] = 0
    T.f_attr[m, f] = a
    T.v_head[m, f] = -1
    T.v_tail[m, f] = -1
    T.v_pend[m, f] = -1
    list_add(T.f_next, T.f_attr, T.f_head, T.f_tail, T.f_pend, m, s, f)
    row_set(T, m, s, a, KEY_FEATURE, f)
    return f


@nb.njit(cache=True)
def add_value(T, m, s, f, code):
    """A new (empty) value row for category ``code`` of feature row f at slot s."""
    e = pool_take(T.v_next, T.v_freed, T.n_v, m)
    T.vw_at[m, e] = -1
    T.vw_len[m, e] = 0
    T.v_code[m, e] = code
    list_add(T.v_next, T.v_code, T.v_head, T.v_tail, T.v_pend, m, f, e)
    row_set(T, m, s, code, KEY_VALUE, e)
    T.nvals[m, f] += 1
    return e


@nb.njit(cache=True)
def add_observer(T, m, s, j):
    """A new (empty) Gaussian observer for numeric feature j at slot s."""
    o = pool_take(T.o_next, T.o_freed, T.n_o, m)
    T.g_at[m, o] = -1
    T.g_len[m, o] = 0
    T.o_fresh[m, o] = 0
    T.o_attr[m, o] = j
    list_add(T.o_next, T.o_attr, T.o_head, T.o_tail, T.o_pend, m, s, o)
    row_set(T, m, s, j, KEY_OBSERVER, o)
    return o


@nb.njit(cache=True)
def fill_weights(T, at, ln, m, row, dense):
    """Entries of a new weight row from a dense vector over classes (its positive values), e.g.
    when an older state is loaded."""
    for k in range(dense.shape[0]):
        if dense[k] > 0.0:
            add_weight(T, at, ln, m, row, k, dense[k])


@nb.njit(cache=True)
def fill_gaussians(T, m, o, dense):
    """Entries of a new observer from dense ``[C, NUM_STATS]`` estimators (those with weight).
    Their cached variances are kept (as the dense layout did: they were computed by the code
    that wrote them) unless one is stale (0)."""
    fresh = 1
    for k in range(dense.shape[0]):
        if dense[k, W] > 0.0:
            i = entry_of(T, GPOOL, T.g_at, T.g_len, m, o, k)
            for t in range(NUM_STATS):
                T.gv[m, i * NUM_STATS + t] = dense[k, t]
            if dense[k, VAR] == 0.0:
                fresh = 0
    T.o_fresh[m, o] = fresh


# --------------------------------------------------------------------------- allocation helpers
@nb.njit(cache=True)
def alloc_slot(T, m):
    """Take an empty leaf-statistics slot for member m."""
    if T.n_free[m] > 0:
        T.n_free[m] -= 1
        s = T.free[m, T.n_free[m]]
    else:
        s = T.n_slots[m]
        T.n_slots[m] += 1
    clear_lists(T, m, s)
    T.f_of[m, s] = -1
    T.o_of[m, s] = -1
    T.last[m, s] = 0.0
    T.mc_ok[m, s] = 0.0
    T.nb_ok[m, s] = 0.0
    T.wsum[m, s] = 0.0
    return s


@nb.njit(cache=True)
def new_leaf(T, m, depth, branch):
    n = T.n_nodes[m]
    T.n_nodes[m] += 1
    T.kind[m, n] = LEAF
    T.attr[m, n] = -1
    T.thr[m, n] = 0.0
    T.child[m, n] = -1
    T.sibling[m, n] = -1
    T.branch[m, n] = branch
    T.depth[m, n] = depth
    T.d_at[m, n] = -1
    T.d_len[m, n] = 0
    T.slot[m, n] = alloc_slot(T, m)
    return n


@nb.njit(cache=True)
def tree_reset(T, m):
    """Make member m a fresh, untrained tree (a root leaf), as a new bank's member: its pools,
    free lists and index emptied (rows past the counters are re-initialised when taken)."""
    T.n_nodes[m] = 0
    T.n_slots[m] = 0
    T.n_free[m] = 0
    T.n_f[m] = 0
    T.f_freed[m] = -1
    T.n_v[m] = 0
    T.v_freed[m] = -1
    T.n_o[m] = 0
    T.o_freed[m] = -1
    T.hkey[m] = -1
    T.n_keys[m] = 0
    T.f_of[m] = -1
    T.o_of[m] = -1
    T.w_used[m] = 0  # the class-entry pools: every block of the member is gone
    T.w_dead[m] = 0
    T.g_used[m] = 0
    T.g_dead[m] = 0
    new_leaf(T, m, 0, 0)


@nb.njit(cache=True)
def has_room(T, P, need):
    """True if every member can take ``need`` more nodes and slots, and the statistics rows and
    index keys of one example of ``width = (categorical, numeric)`` features, without growing
    arrays (the class-entry pools grow by themselves)."""
    A = T.width[0]
    J = T.width[1]
    n_nodes = T.n_nodes
    n_slots = T.n_slots
    n_free = T.n_free
    n_f = T.n_f
    n_v = T.n_v
    n_o = T.n_o
    n_keys = T.n_keys
    N = T.kind.shape[1] - need
    L = T.last.shape[1] - need
    F = T.nvals.shape[1] - A
    E = T.v_code.shape[1] - A
    O = T.o_attr.shape[1] - J  # noqa: E741
    H = T.hkey.shape[1] // 2 - 2 * A - J - need
    for m in range(n_nodes.shape[0]):
        if n_nodes[m] > N or n_slots[m] - n_free[m] > L:
            return False
        if n_f[m] > F or n_v[m] > E or n_o[m] > O or n_keys[m] > H:
            return False
    return True


# --------------------------------------------------------------------------- routing
@nb.njit(cache=True)
def heaviest_child(T, m, node, n_classes):
    best, best_w = -1, -1.0
    c = T.child[m, node]
    while c >= 0:
        w = node_weight(T, m, c, n_classes)
        if w > best_w:
            best, best_w = c, w
        c = T.sibling[m, c]
    return best


@nb.njit(cache=True)
def child_key(node, branch):
    """Index key of the child of categorical split ``node`` for category ``branch``."""
    return stat_key(node, branch if branch >= 0 else MAX_ID - 1, KEY_CHILD)


@nb.njit(cache=True)
def add_child(T, m, node, prev, branch):
    """A new leaf under ``node`` for ``branch``, linked after child ``prev`` (-1: first)."""
    c = new_leaf(T, m, T.depth[m, node] + 1, branch)
    if prev < 0:
        T.sibling[m, c] = T.child[m, node]
        T.child[m, node] = c
    else:
        T.sibling[m, prev] = c
    if T.kind[m, node] == CATEGORICAL_SPLIT:
        index_add(T, m, child_key(node, branch), c)
    return c


@nb.njit(cache=True)
def find_child(T, m, node, branch):
    if T.kind[m, node] == CATEGORICAL_SPLIT:  # many children: the index
        return index_find(T, m, child_key(node, branch))
    c = T.child[m, node]
    while c >= 0:
        if T.branch[m, c] == branch:
            return c
        c = T.sibling[m, c]
    return -1


@nb.njit(cache=True)
def sort_to_leaf(T, P, m, xn, xc, n_classes, grow):
    """Route an example from the root. Returns (node, last_nonempty_node, final).

    Missing value at a split -> the heaviest child. Unseen category -> with ``grow`` a new leaf
    branch is created (MOA's multiway behaviour); without it the walk stops at the split node.
    A tree with ``max_nodes`` nodes grows no more branches: values without one share a single
    ``OTHER_BRANCH`` leaf per split (created even then: at most one per split node).
    ``final``: the walk with ``grow`` would have ended at the same node (False when, not growing,
    it took the shared branch where learning would give the value a branch of its own).
    """
    node = 0
    last_nonempty = 0
    final = True
    d_at = T.d_at
    d_len = T.d_len
    wc = T.wc  # (routing grows no class blocks)
    while True:
        if d_len[m, node] > 0 and wc[m, d_at[m, node]] < n_classes:  # has_weight
            last_nonempty = node
        kd = T.kind[m, node]
        if kd == LEAF:
            return node, last_nonempty, final
        a = T.attr[m, node]
        if kd == NUMERIC_SPLIT:
            v = xn[a] if a < xn.shape[0] else np.nan
            if np.isnan(v):
                nxt = heaviest_child(T, m, node, n_classes)
            else:
                nxt = find_child(T, m, node, 0 if v <= T.thr[m, node] else 1)
        else:
            code = xc[a] if a < xc.shape[0] else -1
            if code == -1:
                nxt = heaviest_child(T, m, node, n_classes)
            else:
                nxt = find_child(T, m, node, code) if code >= 0 else -1
                if nxt < 0 and grow and code >= 0 and T.n_nodes[m] < P.max_nodes:
                    nxt = add_child(T, m, node, -1, code)
                elif nxt < 0:
                    if code >= 0 and T.n_nodes[m] < P.max_nodes:
                        final = False  # (not growing) learning would add the value's branch
                    # no branch for the value (unseen, or the tree is full): the branch the
                    # values share once the tree has max_nodes nodes, if there is one
                    nxt = find_child(T, m, node, OTHER_BRANCH)
                    if nxt < 0 and grow and code >= 0:
                        nxt = add_child(T, m, node, -1, OTHER_BRANCH)
        if nxt < 0:
            return node, last_nonempty, final
        node = nxt


# --------------------------------------------------------------------------- statistics
@nb.njit(cache=True)
def has_code(xc):
    """Whether a row has a category (a code >= 0)."""
    for a in range(xc.shape[0]):
        if xc[a] >= 0:
            return True
    return False


@nb.njit(cache=True)
def has_number(xn):
    """Whether a row has a numeric value (not NaN)."""
    for j in range(xn.shape[0]):
        if not np.isnan(xn[j]):
            return True
    return False


@nb.njit(cache=True)
def update_leaf(T, m, node, xn, xc, y, w, code_attr):
    # Scalar indexing throughout: numba array views cost ~5x in these hot loops.
    s = T.slot[m, node]
    add_weight(T, T.d_at, T.d_len, m, node, y, w)
    T.wsum[m, s] += w
    if has_code(xc):
        # the struct's arrays read once (each read of a field costs a reference count), and only
        # for rows that have a category; the row headers stay put during a kernel call, the
        # pool may move (add_weight's slow path)
        wc = T.wc
        wv = T.wv
        vw_at = T.vw_at
        vw_len = T.vw_len
        fw_at = T.fw_at
        fw_len = T.fw_len
        f_of = T.f_of
        hkey = T.hkey
        hval = T.hval
        for a in range(xc.shape[0]):
            code = xc[a]
            if code >= 0:
                f = f_of[m, s, a] if a < f_of.shape[2] else row_find(T, m, s, a, KEY_FEATURE)
                if f < 0:
                    f = add_feature(T, m, s, a)
                e = index_get(hkey, hval, m, stat_key(s, code, KEY_VALUE))
                if e < 0:  # a value new to this leaf (w > 0: a row exists iff its weight is > 0)
                    e = add_value(T, m, s, f, code)
                b = vw_at[m, e]  # (add_weight, inline for the usual few classes)
                if y < vw_len[m, e] and wc[m, b + y] == y:
                    wv[m, b + y] += w
                else:
                    add_weight(T, vw_at, vw_len, m, e, y, w)
                    wc = T.wc
                    wv = T.wv
                b = fw_at[m, f]
                if y < fw_len[m, f] and wc[m, b + y] == y:
                    wv[m, b + y] += w
                else:
                    add_weight(T, fw_at, fw_len, m, f, y, w)
                    wc = T.wc
                    wv = T.wv
    if has_number(xn):
        o_of = T.o_of
        g_at = T.g_at
        g_len = T.g_len
        o_fresh = T.o_fresh
        gc = T.gc
        gv = T.gv
        for j in range(xn.shape[0]):
            v = xn[j]
            if not np.isnan(v):
                o = o_of[m, s, j] if j < o_of.shape[2] else row_find(T, m, s, j, KEY_OBSERVER)
                if o < 0:
                    o = add_observer(T, m, s, j)
                ga = g_at[m, o]
                if y < g_len[m, o] and gc[m, ga + y] == y:  # the usual few classes: no search
                    q = y
                    b = (ga + y) * NUM_STATS
                else:  # a search; or a class new to the observer (the pool may grow: read it anew)
                    q = -1  # (an entry may have been inserted: positions in the block moved)
                    b = entry_of(T, GPOOL, g_at, g_len, m, o, y) * NUM_STATS
                    gc = T.gc
                    gv = T.gv
                wn = gv[m, b + W] + w
                d = v - gv[m, b + MEAN]
                mean = gv[m, b + MEAN] + d * (w / wn)
                gv[m, b + MEAN] = mean
                m2_old = gv[m, b + M2]
                m2 = m2_old + w * d * (v - mean)
                gv[m, b + M2] = m2
                gv[m, b + W] = wn
                if v < gv[m, b + MIN]:
                    gv[m, b + MIN] = v
                if v > gv[m, b + MAX]:
                    gv[m, b + MAX] = v
                # the variances cache (gaussian_cache): only entry q is stale if the pooled variance
                # is known positive (SETTLED) and stays so (this M2 finite and not smaller)
                fr = o_fresh[m, o]
                if (q >= 0 and (fr == SETTLED or fr == SETTLED + 1 + q) and 0.0 <= m2_old <= m2
                        and m2 < np.inf):  # fmt: skip
                    o_fresh[m, o] = SETTLED + 1 + q
                else:
                    o_fresh[m, o] = 0  # stale: nb_proba recomputes every variance when needed


@nb.njit(cache=True)
def set_variance(gv, m, b):
    """The naive-Bayes variance (unbiased, weighted) of the estimator at ``gv[m, b:]``;
    VAR = -1 for zero variance (a point mass at MEAN). (Its log is not kept: ``nb_proba`` takes
    one log of each class' product of variances, not one per class and feature.)"""
    wk = gv[m, b + W]
    if wk > 0.0:
        var = gv[m, b + M2] / (wk - 1.0) if wk > 1.0 else 0.0
        if var > 0.0:
            gv[m, b + VAR] = var
        else:
            gv[m, b + VAR] = -1.0  # degenerate: a point mass at MEAN


@nb.njit(cache=True)
def gaussian_cache(T, m, o):
    """Naive-Bayes variance of every class of the numeric observer o (the unbiased weighted
    variance). A class with zero variance (one value so far) gets VAR = -1: its
    density is 1 at that value and 0 elsewhere, MOA's GaussianEstimator rule. A feature with zero
    pooled variance is uninformative and contributes nothing.

    ``o_fresh`` says how much is stale: 0 everything; 1 nothing; SETTLED nothing, and the pooled
    variance is positive for good: some class' M2 is > 0 and every M2 finite and >= 0, so the
    pooled sum of non-negative terms is never <= 0 (``update_leaf`` keeps SETTLED only while a
    learned M2 stays finite and does not shrink); SETTLED + 1 + q only the block's entry q is
    stale (the one class learned since, with the pooled variance settled). This function
    recomputes everything (any other value, e.g. 0); ``nb_proba`` recomputes the one entry of
    SETTLED + 1 + q itself, which gives what recomputing all would: the others' inputs did not
    change."""
    gv = T.gv
    a = T.g_at[m, o]
    n = T.g_len[m, o]
    pw = 0.0
    pmean = 0.0
    pm2 = 0.0
    some = False  # an M2 > 0 (finite)
    tame = True  # every M2 finite and >= 0
    for i in range(n):
        b = (a + i) * NUM_STATS
        wk = gv[m, b + W]
        if wk > 0.0:
            nw = pw + wk
            dm = gv[m, b + MEAN] - pmean
            pmean += dm * wk / nw
            m2 = gv[m, b + M2]
            pm2 += m2 + dm * dm * pw * wk / nw
            pw = nw
            if 0.0 < m2 < np.inf:
                some = True
            elif m2 != 0.0:
                tame = False
    T.o_fresh[m, o] = 1
    if pm2 <= 0.0:
        # every observation at this leaf has the same value: the feature tells the classes
        # nothing, so it has no term (VAR = inf: nb_proba skips it)
        for i in range(n):
            gv[m, (a + i) * NUM_STATS + VAR] = np.inf
        return
    for i in range(n):
        set_variance(gv, m, (a + i) * NUM_STATS)
    if some and tame:
        T.o_fresh[m, o] = SETTLED


@nb.njit(cache=True)
def normal_cdf(z):
    return 0.5 * math.erfc(-z / math.sqrt(2.0))


@nb.njit(cache=True)
def weight_below(gv, m, b, t):
    """Estimated weight of observations <= t for the Gaussian estimator at ``gv[m, b:]``."""
    w = gv[m, b + W]
    if w <= 0.0:
        return 0.0
    if t < gv[m, b + MIN]:
        return 0.0
    if t >= gv[m, b + MAX]:
        return w
    var = gv[m, b + M2] / (w - 1.0) if w > 1.0 else 0.0
    if var <= 0.0:
        return w if t >= gv[m, b + MEAN] else 0.0
    return w * normal_cdf((t - gv[m, b + MEAN]) / math.sqrt(var))


@nb.njit(cache=True)
def impurity(vals, m, lo, n, criterion):
    """``W * H`` of the class weights ``vals[m, lo:lo + n]`` (W their sum; H entropy in bits, or
    Gini), computed without division where possible: entropy as ``W log W - sum w log w``."""
    tot = 0.0
    if criterion == CRIT_GINI:
        sq = 0.0
        for i in range(lo, lo + n):
            v = vals[m, i]
            tot += v
            sq += v * v
        return tot - sq / tot if tot > 0.0 else 0.0
    acc = 0.0
    for i in range(lo, lo + n):
        v = vals[m, i]
        if v > 0.0:
            tot += v
            acc -= v * math.log(v)
    if tot <= 0.0:
        return 0.0
    return (acc + tot * math.log(tot)) * INV_LN2


@nb.njit(cache=True)
def merit_binary(pre_imp, pre_w, lr, n, criterion, min_frac):
    """Merit of a binary split with left/right class weights ``lr[0, :n]`` / ``lr[1, :n]``."""
    wl = 0.0
    wr = 0.0
    for i in range(n):
        wl += lr[0, i]
        wr += lr[1, i]
    tot = wl + wr
    if tot <= 0.0:
        return -np.inf
    if min_frac > 0.0 and (wl < min_frac * tot or wr < min_frac * tot):
        return -np.inf
    post = (impurity(lr, 0, 0, n, criterion) + impurity(lr, 1, 0, n, criterion)) / tot
    return pre_imp / pre_w - post


@nb.njit(cache=True)
def best_numeric_split(T, P, m, o, n_classes, pre_imp, pre_w, lr, best_lhs):
    """Best threshold for the numeric feature of observer o (MOA's Gaussian observer:
    n_split_points equally spaced candidates between the smallest and largest value seen).
    Returns (merit, threshold); ``best_lhs[i]`` the left weight of the observer's i-th class."""
    gv = T.gv
    a = T.g_at[m, o]
    n = n_below(T.gc, m, a, T.g_len[m, o], n_classes)
    lo = np.inf
    hi = -np.inf
    for i in range(n):
        b = (a + i) * NUM_STATS
        if gv[m, b + W] > 0.0:
            if gv[m, b + MIN] < lo:
                lo = gv[m, b + MIN]
            if gv[m, b + MAX] > hi:
                hi = gv[m, b + MAX]
    best = -np.inf
    best_t = 0.0
    if not (lo < hi):
        return best, best_t
    step = (hi - lo) / (P.n_split_points + 1.0)
    for s in range(P.n_split_points):
        t = lo + step * (s + 1.0)
        if not (t > lo and t < hi):
            continue
        for i in range(n):
            b = (a + i) * NUM_STATS
            below = weight_below(gv, m, b, t)
            lr[0, i] = below
            lr[1, i] = gv[m, b + W] - below
        mer = merit_binary(pre_imp, pre_w, lr, n, P.criterion, P.min_branch_frac)
        if mer > best:
            best = mer
            best_t = t
            for i in range(n):
                best_lhs[i] = lr[0, i]
    return best, best_t


@nb.njit(cache=True)
def categorical_merit(T, P, m, f, n_classes, pre_imp, pre_w):
    """Merit of the multiway split on the categorical feature of feature row f (its values
    summed in code order)."""
    a, n = weights_below(T, T.fw_at, T.fw_len, m, f, n_classes)
    tot = block_sum(T.wv, m, a, n)
    list_sort(T.v_next, T.v_code, T.v_head, T.v_tail, T.v_pend, m, f)
    post = 0.0
    nbig = 0
    e = T.v_head[m, f]
    while e >= 0:
        a, n = weights_below(T, T.vw_at, T.vw_len, m, e, n_classes)
        w = block_sum(T.wv, m, a, n)
        if w > 0.0:
            post += impurity(T.wv, m, a, n, P.criterion)
            if w >= P.min_branch_frac * tot:
                nbig += 1
        e = T.v_next[m, e]
    if tot <= 0.0 or nbig < 2:
        return -np.inf
    return pre_imp / pre_w - post / tot


@nb.njit(cache=True)
def best_splits(T, P, m, node, n_classes, code_attr, split_lhs):
    """Best and second-best split merits over all features (the null split has merit 0).

    Returns (best_merit, second_merit, best_kind, best_attr, best_thr); ``best_kind`` is -1 when
    no split beats the null split. ``split_lhs`` receives the left class weights of the best
    numeric split (one per class of its observer, in order; at least as long as the node's
    classes).
    """
    da, dn = weights_below(T, T.d_at, T.d_len, m, node, n_classes)
    pre_w = block_sum(T.wv, m, da, dn)
    best = 0.0
    second = 0.0
    bkind = -1
    battr = -1
    bthr = 0.0
    if pre_w <= 0.0:
        return best, second, bkind, battr, bthr
    pre_imp = impurity(T.wv, m, da, dn, P.criterion)
    lr = np.empty((2, dn))
    cand_lhs = np.empty(dn)
    s = T.slot[m, node]
    # the features the leaf saw, in feature order (ties go to the first, as over a dense block)
    list_sort(T.o_next, T.o_attr, T.o_head, T.o_tail, T.o_pend, m, s)
    o = T.o_head[m, s]
    while o >= 0:
        mer, t = best_numeric_split(T, P, m, o, n_classes, pre_imp, pre_w, lr, cand_lhs)
        if mer > best:
            second = best
            best = mer
            bkind = NUMERIC_SPLIT
            battr = T.o_attr[m, o]
            bthr = t
            for i in range(dn):
                split_lhs[i] = cand_lhs[i]
        elif mer > second:
            second = mer
        o = T.o_next[m, o]
    list_sort(T.f_next, T.f_attr, T.f_head, T.f_tail, T.f_pend, m, s)
    f = T.f_head[m, s]
    while f >= 0:
        mer = categorical_merit(T, P, m, f, n_classes, pre_imp, pre_w)
        if mer > best:
            second = best
            best = mer
            bkind = CATEGORICAL_SPLIT
            battr = T.f_attr[m, f]
            bthr = 0.0
        elif mer > second:
            second = mer
        f = T.f_next[m, f]
    return best, second, bkind, battr, bthr


# --------------------------------------------------------------------------- prediction
@nb.njit(cache=True)
def normalize_into(vals, n, pv):
    """``pv[:n]`` = ``vals[:n]`` / their sum; False (and zeros) if the sum is not positive."""
    tot = 0.0
    for i in range(n):
        tot += vals[i]
    if tot <= 0.0:
        for i in range(n):
            pv[i] = 0.0
        return False
    for i in range(n):
        pv[i] = vals[i] / tot
    return True


@nb.njit(cache=True)
def normalize_row(T, at, ln, m, row, n_classes, pk, pv):
    """A weight row's classes (below ``n_classes``) into ``pk`` and their weights normalized
    into ``pv``; returns their number (0 if the row has no weight)."""
    a, n = weights_below(T, at, ln, m, row, n_classes)
    wc = T.wc
    wv = T.wv
    tot = 0.0
    for i in range(n):
        tot += wv[m, a + i]
    if tot <= 0.0:
        return 0
    for i in range(n):
        pk[i] = wc[m, a + i]
        pv[i] = wv[m, a + i] / tot
    return n


@nb.njit(cache=True)
def normalize_node(T, m, node, n_classes, pk, pv):
    """``normalize_row`` of the node's class weights."""
    return normalize_row(T, T.d_at, T.d_len, m, node, n_classes, pk, pv)


@nb.njit(cache=True, error_model="numpy")
def nb_proba(T, m, node, xn, xc, n_classes, pk, pv):
    """Naive Bayes at a leaf: class priors from the leaf's weights, Laplace-smoothed category
    likelihoods ((n + 1) / (n_class + V) with V the values seen at the leaf), Gaussian numeric
    likelihoods (unbiased weighted variance; a class with zero variance has density 1 at its
    value and 0 elsewhere, as MOA's GaussianEstimator). Over the leaf's classes only: the
    statistics rows hold a subset of them, merged in class order.

    (``error_model="numpy"``: no divisor here can be 0 -- n_c + V >= 1, variances are > 0 and the
    normaliser >= 1 -- so numba's check of each divisor, one compare per class and feature, is
    left out; the answers are the same.)"""
    # Scalar indexing throughout: numba array views cost ~5x here.
    s = T.slot[m, node]
    da, dn = weights_below(T, T.d_at, T.d_len, m, node, n_classes)
    if dn == 0:
        return 0
    wc = T.wc
    wv = T.wv
    logp = pv  # log-probabilities are accumulated in place, then exponentiated
    for i in range(dn):
        pk[i] = wc[m, da + i]
        logp[i] = math.log(wv[m, da + i])  # entries have weight > 0
    if has_code(xc):
        # Category likelihoods are multiplied, and the product's log is taken once (or whenever it
        # falls below PRODUCT_FOLD, so it never underflows: each quotient is at least 1 / (n_c + V)):
        # one log per class instead of one per class and feature (MOA multiplies them all).
        # (the struct's fields are read only for rows that have a category: each read of a field
        # costs a reference count, ~10% of a numeric stream's batch)
        nvals = T.nvals
        fw_at = T.fw_at
        fw_len = T.fw_len
        vw_at = T.vw_at
        vw_len = T.vw_len
        f_of = T.f_of
        hkey = T.hkey
        hval = T.hval
        for i in range(dn):
            pv[dn + i] = 1.0  # the product of class i's category likelihoods (pv holds 2C)
        for a in range(xc.shape[0]):
            code = xc[a]
            if code < 0:
                continue
            f = f_of[m, s, a] if a < f_of.shape[2] else row_find(T, m, s, a, KEY_FEATURE)
            if f < 0:
                continue  # feature never observed at this leaf
            V = nvals[m, f]
            e = index_get(hkey, hval, m, stat_key(s, code, KEY_VALUE))
            if e < 0:
                continue  # value never learned at this leaf: skipped, like an unseen value
            fa = fw_at[m, f]
            fn = fw_len[m, f]
            ea = vw_at[m, e]
            en = vw_len[m, e]
            jf = 0
            je = 0
            for i in range(dn):
                k = pk[i]
                # class k's weight in the feature row's block, then in the value row's, scanning from
                # where the last class' search stopped (classes are asked in increasing order)
                if k < fn and wc[m, fa + k] == k:  # the usual few classes: at their own offset
                    cw = wv[m, fa + k]
                    jf = k
                else:
                    while jf < fn and wc[m, fa + jf] < k:
                        jf += 1
                    cw = wv[m, fa + jf] if jf < fn and wc[m, fa + jf] == k else 0.0
                if k < en and wc[m, ea + k] == k:
                    ce = wv[m, ea + k]
                    je = k
                else:
                    while je < en and wc[m, ea + je] < k:
                        je += 1
                    ce = wv[m, ea + je] if je < en and wc[m, ea + je] == k else 0.0
                q = pv[dn + i] * ((ce + 1.0) / (cw + V))
                if q < PRODUCT_FOLD:
                    logp[i] += math.log(q)
                    q = 1.0
                pv[dn + i] = q
        for i in range(dn):
            if pv[dn + i] != 1.0:  # (a numeric stream's terms are exactly as they were)
                logp[i] += math.log(pv[dn + i])
    if has_number(xn):
        # Each class' Gaussian terms are -z^2 / (2 var) - log(var) / 2 - log(2 pi) / 2; the
        # variances are multiplied and the log of the product taken once per class (pv[dn + i],
        # kept within [VAR_FOLD, 1 / VAR_FOLD]: a variance that would take it out goes to the
        # log with it), not once per class and feature: a learn then costs no log (set_variance)
        o_of = T.o_of
        o_fresh = T.o_fresh
        g_at = T.g_at
        g_len = T.g_len
        gc = T.gc
        gv = T.gv
        for i in range(dn):
            pv[dn + i] = 1.0  # the product of class i's variances (pv holds 2C)
        for j in range(xn.shape[0]):
            v = xn[j]
            if np.isnan(v):
                continue
            o = o_of[m, s, j] if j < o_of.shape[2] else row_find(T, m, s, j, KEY_OBSERVER)
            if o < 0:
                continue  # feature never observed at this leaf
            fr = o_fresh[m, o]
            if fr > SETTLED:  # one class learned since: its entry alone (see gaussian_cache)
                set_variance(gv, m, (g_at[m, o] + fr - SETTLED - 1) * NUM_STATS)
                o_fresh[m, o] = SETTLED
            elif fr != 1 and fr != SETTLED:  # everything stale (see gaussian_cache)
                gaussian_cache(T, m, o)
            ga = g_at[m, o]
            gn = g_len[m, o]
            q = 0
            for i in range(dn):
                k = pk[i]
                if k < gn and gc[m, ga + k] == k:  # the usual few classes: at their own offset
                    q = k
                else:
                    while q < gn and gc[m, ga + q] < k:
                        q += 1
                    if q >= gn or gc[m, ga + q] != k:
                        continue  # no weight for the class
                b = (ga + q) * NUM_STATS
                if gv[m, b + W] <= 0.0:
                    continue
                z = v - gv[m, b + MEAN]
                if gv[m, b + VAR] < 0.0:  # point mass: density 1 at the value, 0 elsewhere
                    if z != 0.0:
                        logp[i] = -np.inf
                    continue
                if gv[m, b + VAR] == np.inf:  # an uninformative feature: its term is exactly 0
                    continue  # (computed, z * z / inf is NaN once z * z overflows, |z| > 1.3e154)
                var = gv[m, b + VAR]
                logp[i] += -0.5 * z * z / var - LOG2PI_HALF
                pvar = pv[dn + i] * var  # (0 or inf if it under- or overflowed)
                if VAR_FOLD <= pvar <= 1.0 / VAR_FOLD:
                    pv[dn + i] = pvar
                else:
                    logp[i] -= 0.5 * (math.log(pv[dn + i]) + math.log(var))
                    pv[dn + i] = 1.0
        for i in range(dn):
            if pv[dn + i] != 1.0:
                logp[i] -= 0.5 * math.log(pv[dn + i])
    mx = -np.inf
    for i in range(dn):
        if logp[i] > mx:
            mx = logp[i]
    if mx == -np.inf:
        # every class has density 0 somewhere (e.g. seen once, so zero variance, and x differs):
        # naive Bayes cannot tell them apart, so it predicts the class distribution
        return normalize_node(T, m, node, n_classes, pk, pv)
    tot = 0.0
    for i in range(dn):
        pv[i] = math.exp(logp[i] - mx)
        tot += pv[i]
    for i in range(dn):
        pv[i] /= tot
    return dn


@nb.njit(cache=True)
def stump_split(T, P, m, node, n_classes, code_attr):
    """The split a decision stump predicts with: ``(kind, attr, threshold)`` of the best split of
    the node's statistics (kind -1: none beats the null split)."""
    lhs = np.empty(max(T.d_len[m, node], 1))
    _, _, bkind, battr, bthr = best_splits(T, P, m, node, n_classes, code_attr, lhs)
    return bkind, battr, bthr


@nb.njit(cache=True)
def stump_apply(T, m, node, xn, xc, n_classes, bkind, battr, bthr, pk, pv):
    """The class distribution of x's branch of the split ``(bkind, battr, bthr)``."""
    s = T.slot[m, node]
    if bkind == NUMERIC_SPLIT and battr < xn.shape[0] and not np.isnan(xn[battr]):
        o = row_find(T, m, s, battr, KEY_OBSERVER)
        a = T.g_at[m, o]
        n = n_below(T.gc, m, a, T.g_len[m, o], n_classes)
        tmp = np.empty(n)
        for i in range(n):
            b = (a + i) * NUM_STATS
            below = weight_below(T.gv, m, b, bthr)
            tmp[i] = below if xn[battr] <= bthr else T.gv[m, b + W] - below
            pk[i] = T.gc[m, a + i]
        if normalize_into(tmp, n, pv):
            return n
    elif bkind == CATEGORICAL_SPLIT and battr < xc.shape[0] and xc[battr] >= 0:
        e = index_find(T, m, stat_key(s, xc[battr], KEY_VALUE))
        if e >= 0:  # a value row exists only with weight > 0
            n = normalize_row(T, T.vw_at, T.vw_len, m, e, n_classes, pk, pv)
            if n > 0:
                return n
    return normalize_node(T, m, node, n_classes, pk, pv)


@nb.njit(cache=True)
def stump_proba(T, P, m, node, xn, xc, n_classes, code_attr, pk, pv):
    """Decision stump: the best split of the node's statistics, applied to x."""
    bkind, battr, bthr = stump_split(T, P, m, node, n_classes, code_attr)
    return stump_apply(T, m, node, xn, xc, n_classes, bkind, battr, bthr, pk, pv)


@nb.njit(cache=True)
def scatter(pk, pv, n, out_row):
    """A member's sparse probabilities into a dense row (zeroed first up to ``n_classes``)."""
    for i in range(n):
        out_row[pk[i]] = pv[i]


@nb.njit(cache=True)
def stump_predict_rows(B, xn, xc, start, out, n_cls, code_attr, pk, pv):
    """``single_run`` predicting (not learning) rows with a standalone decision stump: its state
    does not change between rows, so its split is searched once per number of known classes
    instead of once per row (``tree_proba`` on its single node, a leaf, otherwise)."""
    split_n = -1
    bkind, battr, bthr = -1, -1, 0.0
    for r in range(start, xn.shape[0]):
        n = n_cls[r]
        out[r, :n] = 0.0
        if not has_weight(B, 0, 0, n):
            continue
        if n != split_n:
            bkind, battr, bthr = stump_split(B, B, 0, 0, n, code_attr)
            split_n = n
        k = stump_apply(B, 0, 0, xn[r], xc[r], n, bkind, battr, bthr, pk, pv)
        scatter(pk, pv, k, out[r])
    return xn.shape[0]


@nb.njit(cache=True)
def leaf_proba(T, P, m, node, xn, xc, n_classes, code_attr, pk, pv, hint):
    """Prediction at a leaf. When naive Bayes is computed, ``hint[m, 1]`` = its argmax, so that
    learning the same example right after need not compute it again (see ``tree_proba``)."""
    lp = P.leaf_prediction
    if lp == PRED_STUMP:
        return stump_proba(T, P, m, node, xn, xc, n_classes, code_attr, pk, pv)
    if lp == PRED_MC:
        return normalize_node(T, m, node, n_classes, pk, pv)
    # the leaf's weight is summed only when the threshold can matter (weights are >= 0)
    enough = P.nb_threshold <= 0.0 or node_weight(T, m, node, n_classes) >= P.nb_threshold
    if lp == PRED_NB:
        if enough:
            return nb_proba(T, m, node, xn, xc, n_classes, pk, pv)
        return normalize_node(T, m, node, n_classes, pk, pv)
    # NBA: naive Bayes unless majority class has been more accurate at this leaf (MOA's rule)
    s = T.slot[m, node]
    if T.mc_ok[m, s] > T.nb_ok[m, s] or not enough:
        return normalize_node(T, m, node, n_classes, pk, pv)
    n = nb_proba(T, m, node, xn, xc, n_classes, pk, pv)
    hint[m, 1] = argmax(pk, pv, n)  # (tree_learn reads it only if hint[m, 0] is this leaf)
    return n


@nb.njit(cache=True)
def tree_proba(T, P, m, xn, xc, n_classes, code_attr, pk, pv, hint):
    """Class probabilities of member m for one example, sparse: class codes into ``pk``, their
    probabilities into ``pv`` (both at least as long as the classes of any leaf); returns their
    number, 0 if the member has no prediction.

    ``hint`` ([M, 4]) is what is known of this example in member m's *current* state, for
    ``hint[m, 2]`` classes (a missing value's route depends on them): ``hint[m, 0]`` the leaf it
    reaches (-1: not known), ``hint[m, 1]`` that leaf's naive-Bayes argmax and ``hint[m, 3]``
    the argmax of this function's answer (NO_NB: not computed). ``tree_proba``,
    ``tree_learn`` and ``tree_best`` fill and use it (so the example is routed once for
    predicting and learning it); callers reset ``hint[:, 0] = -1`` before each new example, and
    ``hint[m, 0] = -1`` when they change member m otherwise (``tree_reset``)."""
    node = hint[m, 0]
    if node < 0 or hint[m, 2] != n_classes:
        node, last, final = sort_to_leaf(T, P, m, xn, xc, n_classes, False)
        if T.kind[m, node] != LEAF or not has_weight(T, m, node, n_classes):
            return normalize_node(T, m, last, n_classes, pk, pv)
        if not final:  # (learning would route it elsewhere)
            return leaf_proba(T, P, m, node, xn, xc, n_classes, code_attr, pk, pv, hint)
        hint[m, 0] = node
        hint[m, 1] = NO_NB
        hint[m, 2] = n_classes
    n = leaf_proba(T, P, m, node, xn, xc, n_classes, code_attr, pk, pv, hint)
    hint[m, 3] = argmax(pk, pv, n)
    return n


@nb.njit(cache=True)
def tree_best(T, P, m, xn, xc, n_classes, code_attr, pk, pv, hint):
    """``argmax`` of ``tree_proba``'s answer (-1: no prediction), from ``hint`` when member m
    answered this example in its current state already (``pk``/``pv`` are then not written)."""
    if hint[m, 0] >= 0 and hint[m, 2] == n_classes and hint[m, 3] != NO_NB:
        return hint[m, 3]
    return argmax(pk, pv, tree_proba(T, P, m, xn, xc, n_classes, code_attr, pk, pv, hint))


@nb.njit(cache=True)
def argmax_node(T, m, node, n_classes):
    """The class of the node's largest weight (the first in class order on ties; -1: none)."""
    a, n = weights_below(T, T.d_at, T.d_len, m, node, n_classes)
    wv = T.wv
    best = -1
    bv = 0.0
    for i in range(n):
        v = wv[m, a + i]
        if v > bv:
            bv = v
            best = i
    return T.wc[m, a + best] if best >= 0 else -1


@nb.njit(cache=True)
def argmax(pk, pv, n):
    """The class of the largest of n sparse probabilities (the first on ties; -1: none)."""
    best = -1
    bv = 0.0
    for i in range(n):
        if pv[i] > bv:
            bv = pv[i]
            best = pk[i]
    return best


# --------------------------------------------------------------------------- learning
@nb.njit(cache=True)
def attempt_split(T, P, m, node, n_classes, code_attr):
    da, dn = weights_below(T, T.d_at, T.d_len, m, node, n_classes)
    if dn < 2:  # entries have weight > 0: fewer than two classes
        return
    if T.n_nodes[m] + 2 > P.max_nodes:
        return  # a full tree splits no more (every split adds >= 2 nodes): skip the search
    tot = block_sum(T.wv, m, da, dn)
    lhs = np.empty(dn)
    best, second, bkind, battr, bthr = best_splits(T, P, m, node, n_classes, code_attr, lhs)
    if bkind < 0:
        return
    if P.criterion == CRIT_GINI:
        r = 1.0
    else:
        r = math.log(max(n_classes, 2)) * INV_LN2
    eps = math.sqrt(r * r * math.log(1.0 / P.delta) / (2.0 * tot))
    if not (best - second > eps or eps < P.tau):
        return
    s = T.slot[m, node]
    depth = T.depth[m, node]
    if bkind == NUMERIC_SPLIT:
        if T.n_nodes[m] + 2 > P.max_nodes:
            return
        left = new_leaf(T, m, depth + 1, 0)
        right = new_leaf(T, m, depth + 1, 1)
        o = row_find(T, m, s, battr, KEY_OBSERVER)
        n = n_below(T.gc, m, T.g_at[m, o], T.g_len[m, o], n_classes)
        for i in range(n):  # both children from the feature's observer, as MOA
            k = T.gc[m, T.g_at[m, o] + i]
            b = lhs[i]
            rest = T.gv[m, (T.g_at[m, o] + i) * NUM_STATS + W] - b
            if b > 0.0:
                add_weight(T, T.d_at, T.d_len, m, left, k, b)
            if rest > 0.0:
                add_weight(T, T.d_at, T.d_len, m, right, k, rest)
        T.child[m, node] = left
        T.sibling[m, left] = right
    else:
        f = row_find(T, m, s, battr, KEY_FEATURE)
        n_children = T.nvals[m, f]  # value rows of the leaf (each has weight > 0)
        if T.n_nodes[m] + n_children > P.max_nodes:
            return
        T.kind[m, node] = CATEGORICAL_SPLIT  # before add_child, which indexes the children
        prev = -1
        e = T.v_head[m, f]  # sorted by code (categorical_merit merged the pending ones)
        while e >= 0:
            c = add_child(T, m, node, prev, T.v_code[m, e])
            n = n_below(T.wc, m, T.vw_at[m, e], T.vw_len[m, e], n_classes)
            for i in range(n):  # block positions move as the child's block grows: read anew
                add_weight(T, T.d_at, T.d_len, m, c, T.wc[m, T.vw_at[m, e] + i],
                           T.wv[m, T.vw_at[m, e] + i])  # fmt: skip
            T.wsum[m, T.slot[m, c]] = block_sum(T.wv, m, T.d_at[m, c], T.d_len[m, c])
            prev = c
            e = T.v_next[m, e]
    if bkind == NUMERIC_SPLIT:
        for c in (T.child[m, node], T.sibling[m, T.child[m, node]]):
            T.wsum[m, T.slot[m, c]] = block_sum(T.wv, m, T.d_at[m, c], T.d_len[m, c])
    T.kind[m, node] = bkind
    T.attr[m, node] = battr
    T.thr[m, node] = bthr
    release_slot(T, m, s)
    T.free[m, T.n_free[m]] = s
    T.n_free[m] += 1
    T.slot[m, node] = -1


@nb.njit(cache=True)
def has_class(T, m, node, y):
    """Whether class y has weight at the node."""
    a = T.d_at[m, node]
    n = T.d_len[m, node]
    if y < n and T.wc[m, a + y] == y:  # the usual few classes: at their own offset
        return True
    return entry_pos(T.wc, m, a, n, y) >= 0


@nb.njit(cache=True)
def tree_learn(T, P, m, xn, xc, y, w, n_classes, code_attr, pk, pv, hint):
    """Learn one example with weight w (> 0) in member m.

    ``hint[m]`` (see ``tree_proba``): the leaf and naive-Bayes argmax of this example in member
    m's current state, used instead of recomputing them; afterwards it holds the leaf (learning
    moves no branch: the leaf only gained weight, so it stays the heaviest child where it was)
    unless the leaf split. ``pk`` / ``pv`` are scratch as for ``tree_proba``."""
    hinted = hint[m, 0] >= 0 and hint[m, 2] == n_classes
    if hinted:
        node = hint[m, 0]
    else:
        node, _, _ = sort_to_leaf(T, P, m, xn, xc, n_classes, True)
    s = T.slot[m, node]
    if P.leaf_prediction == PRED_NBA and has_class(T, m, node, y):
        # (a class without weight at the leaf is neither predictor's answer: nothing to count)
        if argmax_node(T, m, node, n_classes) == y:
            T.mc_ok[m, s] += w
        if hinted and hint[m, 1] != NO_NB:
            nb_arg = hint[m, 1]
        else:
            nb_arg = argmax(pk, pv, nb_proba(T, m, node, xn, xc, n_classes, pk, pv))
        if nb_arg == y:
            T.nb_ok[m, s] += w
    update_leaf(T, m, node, xn, xc, y, w, code_attr)
    hint[m, 0] = node
    hint[m, 1] = NO_NB  # (the leaf's statistics changed)
    hint[m, 2] = n_classes
    hint[m, 3] = NO_NB
    if T.depth[m, node] >= P.max_depth:
        return
    # the leaf's weight in class order, computed only when its running total says that the
    # grace period may be over (the two differ by rounding only: WSUM_SLACK bounds it)
    approx = T.wsum[m, s]
    if approx - T.last[m, s] < P.grace_period - WSUM_SLACK * approx:
        return
    tot = node_weight(T, m, node, n_classes)
    if tot - T.last[m, s] >= P.grace_period:
        T.last[m, s] = tot
        attempt_split(T, P, m, node, n_classes, code_attr)
        if T.kind[m, node] != LEAF:
            hint[m, 0] = -1  # split: the example goes on to a child


@nb.njit(cache=True)
def classes_after(n_cls, ys, r):
    """Number of classes known once row r's label is in (labels get codes in order)."""
    return max(n_cls[r], ys[r] + 1)


@nb.njit(cache=True)
def predicted_from(xn, out):
    """The first row a run kernel predicts: ``out`` holds the predictions of the last
    ``len(out)`` rows of ``xn`` (all of them but for a deferred learn, ``TreeBank.run_one``)."""
    return max(xn.shape[0] - out.shape[0], 0)


@nb.njit(cache=True)
def classes_needed(n_cls, ys, start, do_learn):
    """Length of the sparse probability buffers for rows ``start..`` (at least 2)."""
    C = 2
    for r in range(start, n_cls.shape[0]):
        C = max(C, n_cls[r])
        if do_learn:
            C = max(C, ys[r] + 1)
    return C


@nb.njit(cache=True)
def sparse_buffers(C):
    """``pk``/``pv`` for a member's sparse probabilities (at least ``C`` classes, see
    ``classes_needed``; ``pv`` twice that, see ``nb_proba``; also learning's scratch)."""
    return np.empty(C, np.int64), np.empty(2 * C)


@nb.njit(cache=True)
def member_buffers(B, C):
    """A run's scratch: ``pk``/``pv`` (``sparse_buffers``) and ``hint`` ([M, 4], -1: the route
    and results ``tree_proba`` and ``tree_learn`` leave for the same example)."""
    pk, pv = sparse_buffers(C)
    return pk, pv, np.full((B.kind.shape[0], 4), -1, dtype=np.int64)


@nb.njit(cache=True, nogil=True)
def single_run(B, ipar, fstate, xn, xc, ys, ws, seqs, start, do_predict, do_learn, out, n_cls, code_attr,
               need, hint, hinted):  # fmt: skip
    """Predict-then-learn rows ``start..`` with member 0 (a standalone learner).

    All run kernels share this signature: ``B`` the bank, ``ipar``/``fstate`` the ensemble's integer and
    float parameters/state (unused here), rows ``xn``/``xc``/``ys``/``ws`` with sequence numbers
    ``seqs``; ``n_cls[r]`` is the number of classes known when row r is predicted, and row r of
    ``out`` receives its probabilities (``out[r, :n_cls[r]]``, dense). ``out`` may have fewer
    rows than ``xn`` (``predicted_from``): then only the last ``len(out)`` rows are predicted,
    into its rows in order (a deferred learn first, ``TreeBank.run_one``). ``hint`` ([M, 4], see
    ``tree_proba``) is the call's route hint, cleared before each row, except before row
    ``start`` when ``hinted``: then it holds that row's example in the bank's current state
    (what the prediction of a deferred learn's example left, ``TreeBank.run_one``). On return
    it holds the last row's, in the state after the call. Returns the first row not
    processed (``len(ys)`` when done; earlier when arrays must grow by ``need`` nodes/slots
    first)."""
    C = classes_needed(n_cls, ys, start, do_learn)
    pk, pv = sparse_buffers(C)
    # reference-count-free views (``unowned``): the arguments are held by the caller, the
    # buffers by this frame until keep_alive
    done = single_rows(B, unowned(xn), unowned(xc), unowned(ys), unowned(ws), start, do_predict,
                       do_learn, unowned(out), unowned(n_cls), unowned(code_attr), need,
                       unowned(pk), unowned(pv), unowned(hint), hinted)  # fmt: skip
    keep_alive(pk, pv)
    return done


@nb.njit(cache=True)
def single_rows(B, xn, xc, ys, ws, start, do_predict, do_learn, out, n_cls, code_attr, need, pk,
                pv, hint, hinted):  # fmt: skip
    """The rows loop of ``single_run``."""
    if do_predict and not do_learn and B.leaf_prediction == PRED_STUMP and B.n_nodes[0] == 1:
        hint[0, 0] = -1  # (not routed: nothing known of the example)
        return stump_predict_rows(B, xn, xc, start, out, n_cls, code_attr, pk, pv)
    R = xn.shape[0]
    first = predicted_from(xn, out)
    for r in range(start, R):
        if do_learn and not has_room(B, B, need):
            return r
        if r != start or not hinted:
            hint[0, 0] = -1
        if do_predict and r >= first:
            o = out[r - first]
            o[: n_cls[r]] = 0.0
            n = tree_proba(B, B, 0, xn[r], xc[r], n_cls[r], code_attr, pk, pv, hint)
            scatter(pk, pv, n, o)
        if do_learn and ws[r] > 0.0:
            nc = classes_after(n_cls, ys, r)
            tree_learn(B, B, 0, xn[r], xc[r], ys[r], ws[r], nc, code_attr, pk, pv, hint)
    return R


# --------------------------------------------------------------------------- per-call buffers
RUN_IO_FIELDS = ("ipar", "fstate", "xn", "xc", "no_cats", "ys", "ws", "seqs", "out", "out_now",
                 "n_cls", "hint", "pk", "pv", "label")  # fmt: skip


@structref.register
class RunIOType(types.StructRef):
    """Numba type of a ``RunIO``: the buffers of ``TreeBank.run_one``'s kernel calls in one
    struct, so that a call unboxes one object instead of eleven arrays (each array argument
    costs numba's entry a reference-counted wrapper: ~0.4 µs of a ~10 µs example with the
    scratch below, measured in profile.md)."""

    def preprocess_fields(self, fields):
        return tuple((name, types.unliteral(typ)) for name, typ in fields)


class RunIO(structref.StructRefProxy):
    """Python handle of a ``RunIOType``; made by ``make_run_io``, held by the ``TreeBank``
    whose buffers it views."""


structref.define_proxy(RunIO, RunIOType, list(RUN_IO_FIELDS))


@nb.njit(cache=True)
def make_run_io(ipar, fstate, xn, xc, no_cats, ys, ws, seqs, out, out_now, n_cls, hint, pk, pv,
                label):  # fmt: skip
    """A ``RunIO`` of ``unowned`` views of a run kernel's arguments (``single_run``'s, but
    ``out_now``: ``out``'s last row, the ``out`` of a call whose first row is a deferred learn;
    ``no_cats``: the ``xc`` of a row without categories) and of a call's scratch ``pk``/``pv``
    (``sparse_buffers``, for calls needing at most ``len(pk)`` classes); ``label[0]`` receives
    a predicting call's ``label_code`` of row 1 (``io_label``). The arrays must
    outlive it: the bank that makes it holds them, and drops it before replacing any.
    ``fstate`` may be a struct (adaptive ensembles; ``unowned`` gives it as it is): held."""
    return RunIO(unowned(ipar), unowned(fstate), unowned(xn), unowned(xc), unowned(no_cats),
                 unowned(ys), unowned(ws), unowned(seqs), unowned(out), unowned(out_now),
                 unowned(n_cls), unowned(hint), unowned(pk), unowned(pv),
                 unowned(label))  # fmt: skip


@nb.njit(cache=True)
def io_scratch(io, start, do_learn):
    """The ``pk``/``pv`` of a ``RunIO`` call from row ``start`` (``sparse_buffers``): the
    struct's own when they are long enough (``classes_needed``), else new ones."""
    C = classes_needed(io.n_cls, io.ys, start, do_learn)
    if C <= io.pk.shape[0]:
        return io.pk, io.pv
    return sparse_buffers(C)


@nb.njit(cache=True)
def io_rows(io, start, cats):
    """The ``xc`` and ``out`` of a ``RunIO`` call from row ``start`` (what every IO run kernel
    passes on): ``io.xc`` when ``cats``, else ``io.no_cats``; ``io.out_now`` when ``start`` is 0
    (row 0, a deferred learn, is learned and not predicted), else ``io.out``."""
    return (io.xc if cats else io.no_cats), (io.out_now if start == 0 else io.out)


@nb.njit(cache=True)
def label_code(row, n):
    """The class ``predict_one`` answers from a predicted row's first ``n`` probabilities: the
    first of the largest, as ``max`` then ``index`` of a list; -1 when all are 0 (no answer);
    -2 when one is not finite (NaN, an infinity: the caller decides, from the answer's dict)."""
    k = 0
    some = False
    for i in range(n):
        v = row[i]
        if not np.isfinite(v):
            return -2
        if v != 0.0:
            some = True
        if v > row[k]:
            k = i
    return k if some else -1


@nb.njit(cache=True)
def io_label(io, do_predict, done):
    """After an IO run kernel's rows (``done`` the first row not processed): ``io.label[0] =
    label_code`` of the predicted example (row 1 of ``io.out``) when the call predicted it and
    ``io.label`` has room (a batch's ``RunIO`` has none)."""
    if do_predict and done == io.xn.shape[0] and io.label.shape[0] != 0:
        io.label[0] = label_code(io.out[1], io.n_cls[1])


@nb.njit(cache=True, nogil=True)
def single_run_io(B, io, code_attr, start, do_predict, do_learn, need, hinted, cats):
    """``single_run`` over the buffers of ``io`` (a ``RunIO``): the IO run kernel of a
    standalone learner. Every IO run kernel has this signature: ``xc`` is ``io.xc`` when
    ``cats``, else ``io.no_cats``; ``out`` is ``io.out_now`` when ``start`` is 0 (the deferred
    learn's row, not predicted), else ``io.out``; the rest as ``single_run``. A call that
    predicts row 1 also leaves its ``label_code`` in ``io.label[0]`` (``io_label``)."""
    pk, pv = io_scratch(io, start, do_learn)
    xc, out = io_rows(io, start, cats)
    done = single_rows(B, io.xn, xc, io.ys, io.ws, start, do_predict, do_learn, out, io.n_cls,
                       unowned(code_attr), need, unowned(pk), unowned(pv), io.hint, hinted)  # fmt: skip
    keep_alive(pk, pv)
    io_label(io, do_predict, done)
    return done


# --------------------------------------------------------------------------- canonical state
@nb.njit(cache=True)
def _renumbered(mp, i):
    """Row ``i`` renumbered through ``mp`` (-1 stays -1)."""
    return mp[i] if i >= 0 else -1


@nb.njit(cache=True)
def _move_block(cls, val, width, at, ln, m, row, tc, tv, t_at, t_ln, to, pos):
    """Copy the class block of ``row`` (headers ``at``/``ln``) to ``pos`` of ``tc``/``tv`` as the
    block of row ``to`` (headers ``t_at``/``t_ln``); returns the next block's position (blocks
    keep their capacity, ``block_cap``, as compaction lays them)."""
    n = ln[m, row]
    t_ln[m, to] = n
    if n == 0:
        return pos  # (t_at stays -1)
    a = at[m, row]
    t_at[m, to] = pos
    for i in range(n):
        tc[m, pos + i] = cls[m, a + i]
    for i in range(n * width):
        tv[m, pos * width + i] = val[m, a * width + i]
    return pos + block_cap(n)


@nb.njit(cache=True)
def _move_list(mp, head, tail, pend, t_head, t_tail, t_pend, m, old, new):
    """The (head, tail, pending) of list owner ``old``, renumbered through ``mp``, as owner
    ``new``'s."""
    t_head[m, new] = _renumbered(mp, head[m, old])
    t_tail[m, new] = _renumbered(mp, tail[m, old])
    t_pend[m, new] = _renumbered(mp, pend[m, old])


@nb.njit(cache=True)
def _number(nxt, ln, m, head, pend, mp, order, k, entries):
    """Number the rows of a list (its sorted part from ``head``, then its pending part) from
    k: ``mp[old] = new``, ``order[new] = old``; returns the next number and ``entries`` plus
    their blocks' capacity (row lengths ``ln``)."""
    for i in (head, pend):
        while i >= 0:
            mp[i] = k
            order[k] = i
            k += 1
            entries += block_cap(ln[m, i])
            i = nxt[m, i]
    return k, entries


@nb.njit(cache=True)
def canonical(T, C, counts, copy):
    """The live part of each member of ``T``, renumbered in the order of a walk of its tree:
    nodes as they are; leaf slots in node order; a slot's feature rows and observers in list
    order (sorted list, then pending list); a feature row's value rows likewise; the class
    blocks of the weight pool as compaction lays them (nodes, feature rows, value rows, each in
    the new order), those of the Gaussian pool in observer order. Freed rows, dead class entries
    and free lists are dropped. ``counts[m]`` gets (nodes, slots, feature rows, value rows,
    observers, weight entries, Gaussian entries); with ``copy`` the rows are written to ``C``
    (allocated for those counts, fresh). Only row numbers and pool offsets change: every list
    keeps its items, order and pending part, so the model goes on exactly."""
    for m in range(T.kind.shape[0]):
        nn = T.n_nodes[m]
        smap = np.full(T.last.shape[1], -1, np.int64)
        fmap = np.full(T.nvals.shape[1], -1, np.int64)
        vmap = np.full(T.v_code.shape[1], -1, np.int64)
        omap = np.full(T.o_attr.shape[1], -1, np.int64)
        sorder = np.empty(T.last.shape[1], np.int64)
        forder = np.empty(T.nvals.shape[1], np.int64)
        vorder = np.empty(T.v_code.shape[1], np.int64)
        oorder = np.empty(T.o_attr.shape[1], np.int64)
        ns = 0
        nf = 0
        nv = 0
        no = 0
        pw = 0
        pg = 0
        for n in range(nn):
            pw += block_cap(T.d_len[m, n])
        for n in range(nn):
            s = T.slot[m, n]
            if s < 0:
                continue
            smap[s] = ns
            sorder[ns] = s
            ns += 1
            nf, pw = _number(T.f_next, T.fw_len, m, T.f_head[m, s], T.f_pend[m, s], fmap, forder,
                             nf, pw)  # fmt: skip
            no, pg = _number(T.o_next, T.g_len, m, T.o_head[m, s], T.o_pend[m, s], omap, oorder,
                             no, pg)  # fmt: skip
        for i in range(nf):
            f = forder[i]
            nv, pw = _number(T.v_next, T.vw_len, m, T.v_head[m, f], T.v_pend[m, f], vmap, vorder,
                             nv, pw)  # fmt: skip
        counts[m, 0] = nn
        counts[m, 1] = ns
        counts[m, 2] = nf
        counts[m, 3] = nv
        counts[m, 4] = no
        counts[m, 5] = pw
        counts[m, 6] = pg
        if not copy:
            continue
        pos = 0
        for n in range(nn):
            C.kind[m, n] = T.kind[m, n]
            C.attr[m, n] = T.attr[m, n]
            C.thr[m, n] = T.thr[m, n]
            C.slot[m, n] = _renumbered(smap, T.slot[m, n])
            C.child[m, n] = T.child[m, n]
            C.sibling[m, n] = T.sibling[m, n]
            C.branch[m, n] = T.branch[m, n]
            C.depth[m, n] = T.depth[m, n]
            pos = _move_block(T.wc, T.wv, 1, T.d_at, T.d_len, m, n, C.wc, C.wv, C.d_at, C.d_len,
                              n, pos)  # fmt: skip
        for i in range(ns):
            s = sorder[i]
            C.last[m, i] = T.last[m, s]
            C.mc_ok[m, i] = T.mc_ok[m, s]
            C.nb_ok[m, i] = T.nb_ok[m, s]
            _move_list(fmap, T.f_head, T.f_tail, T.f_pend, C.f_head, C.f_tail, C.f_pend, m, s, i)
            _move_list(omap, T.o_head, T.o_tail, T.o_pend, C.o_head, C.o_tail, C.o_pend, m, s, i)
        for i in range(nf):
            f = forder[i]
            C.nvals[m, i] = T.nvals[m, f]
            C.f_attr[m, i] = T.f_attr[m, f]
            C.f_next[m, i] = _renumbered(fmap, T.f_next[m, f])
            _move_list(vmap, T.v_head, T.v_tail, T.v_pend, C.v_head, C.v_tail, C.v_pend, m, f, i)
            pos = _move_block(T.wc, T.wv, 1, T.fw_at, T.fw_len, m, f, C.wc, C.wv, C.fw_at,
                              C.fw_len, i, pos)  # fmt: skip
        for i in range(nv):
            e = vorder[i]
            C.v_code[m, i] = T.v_code[m, e]
            C.v_next[m, i] = _renumbered(vmap, T.v_next[m, e])
            pos = _move_block(T.wc, T.wv, 1, T.vw_at, T.vw_len, m, e, C.wc, C.wv, C.vw_at,
                              C.vw_len, i, pos)  # fmt: skip
        pos_g = 0
        for i in range(no):
            o = oorder[i]
            # saved as 0/1 (stale / fresh), what code before SETTLED reads: a one-entry stale
            # cache becomes all stale, SETTLED fresh (recomputing gives the same numbers)
            fr = T.o_fresh[m, o]
            C.o_fresh[m, i] = 1 if fr == 1 or fr == SETTLED else 0
            C.o_attr[m, i] = T.o_attr[m, o]
            C.o_next[m, i] = _renumbered(omap, T.o_next[m, o])
            pos_g = _move_block(T.gc, T.gv, NUM_STATS, T.g_at, T.g_len, m, o, C.gc, C.gv,
                                C.g_at, C.g_len, i, pos_g)  # fmt: skip
        C.n_nodes[m] = nn
        C.n_slots[m] = ns
        C.n_free[m] = 0
        C.n_f[m] = nf
        C.f_freed[m] = -1
        C.n_v[m] = nv
        C.v_freed[m] = -1
        C.n_o[m] = no
        C.o_freed[m] = -1
        C.w_used[m] = pos
        C.w_dead[m] = 0
        C.g_used[m] = pos_g
        C.g_dead[m] = 0


# --------------------------------------------------------------------------- a loaded state's structure
# what ``check_structure`` can find wrong: (the array it names, what is wrong), numbered from 1
STRUCTURE_PROBLEMS = (
    ("n_nodes", "a member without its root node"),
    ("kind", "a node of no known kind"),
    ("slot", "a leaf without a slot of its own, or a split with a slot"),
    ("free", "a free slot past n_slots, twice, or a leaf's"),
    ("child", "a leaf with children, a numeric split without its two branches, or a "
              "categorical split without a branch"),
    ("branch", "a split's child on a branch its split cannot have, or two on one"),
    ("f_next", "a feature row past n_f, or on two lists"),
    ("f_tail", "a list's tail that is not its last row"),
    ("f_attr", "a feature with two rows at one leaf"),
    ("v_next", "a value row past n_v, or on two lists"),
    ("v_tail", "a list's tail that is not its last row"),
    ("v_code", "a category of another feature, or with two rows at one feature row"),
    ("nvals", "a count that is not its feature row's value rows"),
    ("o_next", "an observer past n_o, or on two lists"),
    ("o_tail", "a list's tail that is not its last row"),
    ("o_attr", "a feature with two observers at one leaf"),
    ("wc", "a block's classes out of order"),
    ("w_used", "blocks larger than the pool in use"),
    ("gc", "a block's classes out of order"),
    ("g_used", "blocks larger than the pool in use"),
    ("wv", "a class weight that is not > 0"),
    ("gv", "a Gaussian without weight > 0, or a fresh cached variance not > 0 or -1"),
    ("o_fresh", "a freshness mark past its observer's classes"),
)  # fmt: skip


@nb.njit(cache=True)
def _walk(nxt, key, m, i, count, seen, marks, stamp, code_attr, want):
    """Walk member m's list from row i: each row below ``count`` and on no list walked before
    (``seen``), its key met once among the lists that share ``stamp`` (``marks``) and, with
    ``want >= 0``, a category of feature ``want``. Returns (rows, last row), or (-1, row) for a
    row past ``count`` or seen before, (-2, row) for a key met twice or of another feature."""
    n = 0
    last = -1
    while i >= 0:
        if i >= count or seen[i]:
            return -1, i
        seen[i] = True
        k = key[m, i]
        if k < 0 or k >= marks.shape[0] or marks[k] == stamp:
            return -2, i
        if want >= 0 and code_attr[k] != want:
            return -2, i
        marks[k] = stamp
        n += 1
        last = i
        i = nxt[m, i]
    return n, last


@nb.njit(cache=True)
def _check_lists(nxt, key, head, tail, pend, m, owner, count, seen, marks, code_attr, want,
                 problem, out):  # fmt: skip
    """``_walk`` owner's sorted list, then its pending one. Returns their rows, or -1 with
    ``out`` set to (``problem``: a row past ``count`` or on two lists, ``problem + 1``: the
    sorted list's tail is not its last row, ``problem + 2``: a key twice or of another feature;
    member m; the row, or the owner for a tail)."""
    rows = 0
    for j in range(2):
        n_rows, last = _walk(nxt, key, m, head[m, owner] if j == 0 else pend[m, owner], count,
                             seen, marks, owner, code_attr, want)  # fmt: skip
        if n_rows < 0:
            out[0] = problem if n_rows == -1 else problem + 2
            out[2] = last
            return -1
        if j == 0 and last != tail[m, owner]:
            out[0] = problem + 1
            out[2] = owner
            return -1
        rows += n_rows
    return rows


@nb.njit(cache=True)
def _walk_free(nxt, m, i, count, seen):
    """Walk a free list: each row below ``count`` and on no list before; the row at fault or -1."""
    while i >= 0:
        if i >= count or seen[i]:
            return i
        seen[i] = True
        i = nxt[m, i]
    return -1


@nb.njit(cache=True)
def _bad_block(cls, val, width, at, ln, m, live):
    """The first row r with ``live[r]`` whose class block does not hold strictly increasing
    classes (>= 0), as (r, 0), or an entry whose weight (``val`` at the entry's first of
    ``width`` values) is not > 0, as (r, 1); (-1, 0) if none."""
    for r in range(live.shape[0]):
        if not live[r]:
            continue
        a = at[m, r]
        prev = -1
        for i in range(ln[m, r]):
            k = cls[m, a + i]
            if k <= prev:
                return r, 0
            if not val[m, (a + i) * width] > 0.0:  # (NaN too)
                return r, 1
            prev = k
    return -1, 0


@nb.njit(cache=True)
def _variances_ok(T, m, o):
    """Whether observer o's cached variances, where its cache is fresh (``o_fresh`` != 0; but
    entry q of SETTLED + 1 + q), are > 0 (inf included) or -1 (what ``gaussian_cache`` writes;
    naive Bayes divides by them)."""
    fr = T.o_fresh[m, o]
    for i in range(T.g_len[m, o]):
        var = T.gv[m, (T.g_at[m, o] + i) * NUM_STATS + VAR]
        if fr != 0 and fr != SETTLED + 1 + i and not (var > 0.0 or var == -1.0):
            return False
    return True


@nb.njit(cache=True)
def _caps(ln, m, n_rows):
    tot = 0
    for r in range(n_rows):
        tot += block_cap(ln[m, r])
    return tot


@nb.njit(cache=True)
def check_structure(T, code_attr, n_cat, n_num, out):
    """Whether a loaded state (``_bank._check_bounds`` passed: every index is inside its array,
    no walk goes on for ever) holds together as the kernels assume of the states they make:
    every member has a root; leaves have slots of their own and splits none; the free slots are
    free; a numeric split has its branches 0 and 1, a categorical one at least one branch, each
    a category of its feature (or OTHER_BRANCH), once; every feature row, value row and observer
    is below its pool's count and on at most one list (a leaf's, a feature row's or the free
    list); a list's tail is its last row; a leaf has one row per feature, a feature row one per
    category of its feature, and ``nvals`` of them; a class block's classes increase and its
    weights are > 0; a live observer's freshness mark names one of its entries (a freed one's is
    stale and never read) and its fresh cached variances can be divided by; and the blocks below
    the counts fit in the part of the pool in use (compaction copies them into an array that
    large). States that break one of these made later calls loop for ever (a row on
    two lists is freed twice: a free list onto itself) or write outside the arrays (a leaf
    without a slot, a split without a branch the example takes). ``out`` gets (problem, member,
    row): problem 0 if none, else its number in ``STRUCTURE_PROBLEMS``."""
    out[0] = 0
    n_codes = code_attr.shape[0]
    for m in range(T.kind.shape[0]):
        out[1] = m
        nn = T.n_nodes[m]
        out[2] = 0
        if nn < 1:
            out[0] = 1
            return
        L = T.last.shape[1]
        slot_of = np.full(L, -1, np.int64)  # the leaf of each slot
        branch_seen = np.full(n_codes + 1, -1, np.int64)  # (the last entry: OTHER_BRANCH)
        for n in range(nn):
            out[2] = n
            kd = T.kind[m, n]
            s = T.slot[m, n]
            c = T.child[m, n]
            if kd == LEAF:
                if s < 0 or s >= T.n_slots[m] or slot_of[s] >= 0:
                    out[0] = 3
                    return
                slot_of[s] = n
                if c >= 0:
                    out[0] = 5
                    return
                continue
            if kd != NUMERIC_SPLIT and kd != CATEGORICAL_SPLIT:
                out[0] = 2
                return
            if s >= 0:
                out[0] = 3
                return
            a = T.attr[m, n]
            seen_left = False
            seen_right = False
            k = 0
            while c >= 0 and k <= nn:  # (bounded: no node is reached twice)
                b = T.branch[m, c]
                if kd == NUMERIC_SPLIT:
                    if (b == 0 and not seen_left) or (b == 1 and not seen_right):
                        seen_left = seen_left or b == 0
                        seen_right = seen_right or b == 1
                    else:
                        out[0] = 6
                        out[2] = c
                        return
                else:
                    at = n_codes if b == OTHER_BRANCH else b
                    if (
                        (b != OTHER_BRANCH and (b < 0 or b >= n_codes or code_attr[b] != a))
                        or branch_seen[at] == n
                    ):  # fmt: skip
                        out[0] = 6
                        out[2] = c
                        return
                    branch_seen[at] = n
                k += 1
                c = T.sibling[m, c]
            if (kd == NUMERIC_SPLIT and not (seen_left and seen_right)) or k == 0:
                out[0] = 5
                return
        for i in range(T.n_free[m]):
            s = T.free[m, i]
            out[2] = i
            if s < 0 or s >= T.n_slots[m] or slot_of[s] != -1:
                out[0] = 4
                return
            slot_of[s] = -2  # (taken: free once)
        f_seen = np.zeros(T.nvals.shape[1], np.bool_)
        v_seen = np.zeros(T.v_code.shape[1], np.bool_)
        o_seen = np.zeros(T.o_attr.shape[1], np.bool_)
        f_marks = np.full(max(n_cat, 1), -1, np.int64)
        o_marks = np.full(max(n_num, 1), -1, np.int64)
        v_marks = np.full(max(n_codes, 1), -1, np.int64)
        for s in range(L):
            if slot_of[s] < 0:
                continue
            if _check_lists(T.f_next, T.f_attr, T.f_head, T.f_tail, T.f_pend, m, s, T.n_f[m],
                            f_seen, f_marks, code_attr, -1, 7, out) < 0:  # fmt: skip
                return
            if _check_lists(T.o_next, T.o_attr, T.o_head, T.o_tail, T.o_pend, m, s, T.n_o[m],
                            o_seen, o_marks, code_attr, -1, 14, out) < 0:  # fmt: skip
                return
        for f in range(T.n_f[m]):
            if not f_seen[f]:
                continue  # (freed: its value lists are stale)
            values = _check_lists(T.v_next, T.v_code, T.v_head, T.v_tail, T.v_pend, m, f,
                                  T.n_v[m], v_seen, v_marks, code_attr, T.f_attr[m, f], 10,
                                  out)  # fmt: skip
            if values < 0:
                return
            if values != T.nvals[m, f]:
                out[0] = 13
                out[2] = f
                return
        o_live = o_seen.copy()  # (freed rows' marks are stale: never read, reset when taken)
        for r, problem in (
            (_walk_free(T.f_next, m, T.f_freed[m], T.n_f[m], f_seen), 7),
            (_walk_free(T.v_next, m, T.v_freed[m], T.n_v[m], v_seen), 10),
            (_walk_free(T.o_next, m, T.o_freed[m], T.n_o[m], o_seen), 14),
        ):
            if r >= 0:
                out[0] = problem
                out[2] = r
                return
        nodes = np.ones(nn, np.bool_)
        for cls, val, width, at, ln, live, disorder, no_weight in (
            (T.wc, T.wv, 1, T.d_at, T.d_len, nodes, 17, 21),
            (T.wc, T.wv, 1, T.fw_at, T.fw_len, f_seen, 17, 21),
            (T.wc, T.wv, 1, T.vw_at, T.vw_len, v_seen, 17, 21),
            (T.gc, T.gv, NUM_STATS, T.g_at, T.g_len, o_seen, 19, 22),  # (W is a Gaussian's first)
        ):
            r, fault = _bad_block(cls, val, width, at, ln, m, live)
            if r >= 0:
                out[0] = no_weight if fault else disorder
                out[2] = r
                return
        out[2] = 0
        if (_caps(T.d_len, m, nn) + _caps(T.fw_len, m, T.n_f[m]) + _caps(T.vw_len, m, T.n_v[m])
                > T.w_used[m]):  # fmt: skip
            out[0] = 18
            return
        if _caps(T.g_len, m, T.n_o[m]) > T.g_used[m]:
            out[0] = 20
            return
        for o in range(T.n_o[m]):
            if o_live[o]:
                if T.o_fresh[m, o] > SETTLED + T.g_len[m, o]:  # (entry q of SETTLED + 1 + q)
                    out[0] = 23
                    out[2] = o
                    return
                if not _variances_ok(T, m, o):
                    out[0] = 22
                    out[2] = o
                    return


one_specialisation(globals())  # after every kernel: one compiled version per argument type
