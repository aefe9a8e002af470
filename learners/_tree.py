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
kernel reports that it needs room, see ``has_room``). Leaf statistics are *sparse*: a leaf holds
rows only for the features, values and classes that reached it, never a block over the global
vocabulary.

* nodes ``[M, N]``: kind (0 leaf, 1 numeric split, 2 categorical split), attr, thr, slot (leaf
  statistics slot or -1), child (first child), sibling (next sibling), branch (0/1 for numeric
  splits, the category code for categorical ones), depth; ``dist [M, N, C]`` class weights.
* leaf slots ``[M, L]``: ``last`` weight at the last split attempt, ``mc_ok``/``nb_ok`` correct
  weight of the two leaf predictors, and the heads of two lists: the leaf's categorical features
  (``f_head``) and its numeric observers (``o_head``).
* categorical feature rows ``[M, F]`` (one per (leaf, feature) seen): ``catw [M, F, C]`` observed
  weight per class, ``nvals`` distinct values seen, ``f_attr`` the feature, ``v_head`` its list
  of value rows.
* value rows ``[M, E]`` (one per (leaf, category code) seen): ``cat [M, E, C]`` weight per class,
  ``v_code`` the code.
* numeric observers ``[M, O]`` (one per (leaf, numeric feature) seen): ``num [M, O, C, 7]``
  (weight, mean, M2, min, max, and the naive-Bayes variance and its log, cached lazily:
  0 = stale), ``o_attr`` the feature.

Lists are singly linked through ``*_next`` and kept sorted by key (feature, code) so that every
sum runs in the order of the dense layout it replaced: an item whose key is above the list's tail
is appended (the usual case: codes are handed out in order of first appearance), others wait in a
``*_pend`` list merged in by ``list_sort`` before the list is read in order. Freed rows go on
per-pool free lists (``*_freed``, threaded through ``*_next``). An index, rebuilt on load and
never saved, finds a leaf's rows: ``f_of [M, L, a]`` / ``o_of [M, L, j]`` for the first
``DIRECT`` features (one load in the hot loops), and for the rest and for values a per-member
open-addressing hash table (``hkey``/``hval``, linear probing, backward-shift deletion) keyed by
(slot, kind, id).

Codes: ``xn`` numeric values (NaN = missing), ``xc`` category codes (-1 missing, -2 unseen).
"""

from __future__ import annotations

import math
from types import SimpleNamespace
from typing import NamedTuple

import numba as nb
import numpy as np
from numba.core import types
from numba.experimental import structref

from learners.jit import one_specialisation

LEAF, NUMERIC_SPLIT, CATEGORICAL_SPLIT = 0, 1, 2
PRED_MC, PRED_NB, PRED_NBA, PRED_STUMP = 0, 1, 2, 3
CRIT_INFO_GAIN, CRIT_GINI = 0, 1
W, MEAN, M2, MIN, MAX, VAR, LOGVAR = 0, 1, 2, 3, 4, 5, 6
NUM_STATS = 7
KEY_VALUE, KEY_FEATURE, KEY_OBSERVER, KEY_CHILD = 0, 1, 2, 3  # kinds of index keys
OTHER_BRANCH = -3  # branch of a categorical split shared by the values it has no branch for
ID_BITS = 36  # a key is (slot << 38) | (id << 2) | kind: ids < 2**36, slots < 2**25
MAX_ID = 1 << ID_BITS
MAX_SLOTS = 1 << 25
DIRECT = 32  # features (of each kind) whose rows a leaf finds through f_of / o_of

NODE_FIELDS = ("kind", "attr", "thr", "slot", "child", "sibling", "branch", "depth", "dist",
               "n_nodes")  # fmt: skip
SLOT_FIELDS = ("last", "mc_ok", "nb_ok", "f_head", "f_tail", "f_pend", "o_head", "o_tail",
               "o_pend", "free", "n_free", "n_slots")  # fmt: skip
FEATURE_FIELDS = ("catw", "nvals", "f_attr", "f_next", "v_head", "v_tail", "v_pend", "n_f",
                  "f_freed")  # fmt: skip
VALUE_FIELDS = ("cat", "v_code", "v_next", "n_v", "v_freed")
OBSERVER_FIELDS = ("num", "o_attr", "o_next", "n_o", "o_freed")
STATE_FIELDS = NODE_FIELDS + SLOT_FIELDS + FEATURE_FIELDS + VALUE_FIELDS + OBSERVER_FIELDS
INDEX_FIELDS = ("hkey", "hval", "n_keys", "f_of", "o_of", "width")  # derived, never saved
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
    dist: np.ndarray
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
    catw: np.ndarray
    nvals: np.ndarray
    f_attr: np.ndarray
    f_next: np.ndarray
    v_head: np.ndarray
    v_tail: np.ndarray
    v_pend: np.ndarray
    n_f: np.ndarray
    f_freed: np.ndarray
    cat: np.ndarray
    v_code: np.ndarray
    v_next: np.ndarray
    n_v: np.ndarray
    v_freed: np.ndarray
    num: np.ndarray
    o_attr: np.ndarray
    o_next: np.ndarray
    n_o: np.ndarray
    o_freed: np.ndarray
    hkey: np.ndarray
    hval: np.ndarray
    n_keys: np.ndarray
    f_of: np.ndarray
    o_of: np.ndarray
    width: np.ndarray


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
    """Python handle of a ``BankType``; Python reads the arrays through ``TreeState``."""


structref.define_proxy(Bank, BankType, list(STATE_FIELDS + INDEX_FIELDS + PARAM_FIELDS))


@nb.njit(cache=True)
def _make_bank(kind, attr, thr, slot, child, sibling, branch, depth, dist, n_nodes, last, mc_ok,
               nb_ok, f_head, f_tail, f_pend, o_head, o_tail, o_pend, free, n_free, n_slots, catw,
               nvals, f_attr, f_next, v_head, v_tail, v_pend, n_f, f_freed, cat, v_code, v_next,
               n_v, v_freed, num, o_attr, o_next, n_o, o_freed, hkey, hval, n_keys, f_of, o_of,
               width, grace_period, delta, tau, criterion, leaf_prediction, nb_threshold, max_depth,
               max_nodes, n_split_points, min_branch_frac):  # fmt: skip
    return Bank(kind, attr, thr, slot, child, sibling, branch, depth, dist, n_nodes, last, mc_ok,
                nb_ok, f_head, f_tail, f_pend, o_head, o_tail, o_pend, free, n_free, n_slots,
                catw, nvals, f_attr, f_next, v_head, v_tail, v_pend, n_f, f_freed, cat, v_code,
                v_next, n_v, v_freed, num, o_attr, o_next, n_o, o_freed, hkey, hval, n_keys,
                f_of, o_of, width, grace_period, delta, tau, criterion, leaf_prediction, nb_threshold,
                max_depth, max_nodes, n_split_points, min_branch_frac)  # fmt: skip


def make_bank(T: TreeState, P: TreeParams) -> Bank:
    """One struct over the arrays of ``T`` (shared memory) and the parameters ``P``."""
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
    hkey = T.hkey
    mask = hkey.shape[1] - 1
    i = key_home(key, mask)
    while True:
        k = hkey[m, i]
        if k == key:
            return T.hval[m, i]
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
    """Rebuild the index from the leaves' lists, e.g. after loading a state."""
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
            index_list(T, m, s, T.o_next, T.o_attr, T.o_head[m, s], KEY_OBSERVER)
            index_list(T, m, s, T.o_next, T.o_attr, T.o_pend[m, s], KEY_OBSERVER)
            for f in (T.f_head[m, s], T.f_pend[m, s]):
                while f >= 0:
                    row_set(T, m, s, T.f_attr[m, f], KEY_FEATURE, f)
                    index_list(T, m, s, T.v_next, T.v_code, T.v_head[m, f], KEY_VALUE)
                    index_list(T, m, s, T.v_next, T.v_code, T.v_pend[m, f], KEY_VALUE)
                    f = T.f_next[m, f]


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
def release_list(T, m, s, nxt, ident, freed, i, kind):
    """Unindex the rows of a list starting at ``i`` and put them on the pool's free list."""
    while i >= 0:
        after = nxt[m, i]
        row_set(T, m, s, ident[m, i], kind, -1)
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
    release_list(T, m, s, T.o_next, T.o_attr, T.o_freed, T.o_head[m, s], KEY_OBSERVER)
    release_list(T, m, s, T.o_next, T.o_attr, T.o_freed, T.o_pend[m, s], KEY_OBSERVER)
    for f in (T.f_head[m, s], T.f_pend[m, s]):
        while f >= 0:
            release_list(T, m, s, T.v_next, T.v_code, T.v_freed, T.v_head[m, f], KEY_VALUE)
            release_list(T, m, s, T.v_next, T.v_code, T.v_freed, T.v_pend[m, f], KEY_VALUE)
            after = T.f_next[m, f]
            row_set(T, m, s, T.f_attr[m, f], KEY_FEATURE, -1)
            T.f_next[m, f] = T.f_freed[m]
            T.f_freed[m] = f
            f = after
    clear_lists(T, m, s)


@nb.njit(cache=True)
def add_feature(T, m, s, a):
    """A new (zeroed) categorical feature row for feature a at slot s."""
    f = pool_take(T.f_next, T.f_freed, T.n_f, m)
    T.catw[m, f] = 0.0
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
    """A new (zeroed) value row for category ``code`` of feature row f at slot s."""
    e = pool_take(T.v_next, T.v_freed, T.n_v, m)
    T.cat[m, e] = 0.0
    T.v_code[m, e] = code
    list_add(T.v_next, T.v_code, T.v_head, T.v_tail, T.v_pend, m, f, e)
    row_set(T, m, s, code, KEY_VALUE, e)
    T.nvals[m, f] += 1
    return e


@nb.njit(cache=True)
def add_observer(T, m, s, j):
    """A new (empty) Gaussian observer for numeric feature j at slot s."""
    o = pool_take(T.o_next, T.o_freed, T.n_o, m)
    T.num[m, o] = 0.0
    T.num[m, o, :, MIN] = np.inf
    T.num[m, o, :, MAX] = -np.inf
    T.o_attr[m, o] = j
    list_add(T.o_next, T.o_attr, T.o_head, T.o_tail, T.o_pend, m, s, o)
    row_set(T, m, s, j, KEY_OBSERVER, o)
    return o


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
    T.dist[m, n] = 0.0
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
    new_leaf(T, m, 0, 0)


@nb.njit(cache=True)
def has_room(T, P, need):
    """True if every member can take ``need`` more nodes and slots, and the statistics rows and
    index keys of one example of ``width = (categorical, numeric)`` features, without growing
    arrays."""
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
    F = T.catw.shape[1] - A
    E = T.cat.shape[1] - A
    O = T.num.shape[1] - J  # noqa: E741
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
        w = 0.0
        for k in range(n_classes):
            w += T.dist[m, c, k]
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
    """Route an example from the root. Returns (node, last_nonempty_node).

    Missing value at a split -> the heaviest child. Unseen category -> with ``grow`` a new leaf
    branch is created (MOA's multiway behaviour); without it the walk stops at the split node.
    A tree with ``max_nodes`` nodes grows no more branches: values without one share a single
    ``OTHER_BRANCH`` leaf per split (created even then: at most one per split node).
    """
    node = 0
    last_nonempty = 0
    while True:
        tot = 0.0
        for k in range(n_classes):
            tot += T.dist[m, node, k]
        if tot > 0.0:
            last_nonempty = node
        kd = T.kind[m, node]
        if kd == LEAF:
            return node, last_nonempty
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
                    # no branch for the value (unseen, or the tree is full): the branch the
                    # values share once the tree has max_nodes nodes, if there is one
                    nxt = find_child(T, m, node, OTHER_BRANCH)
                    if nxt < 0 and grow and code >= 0:
                        nxt = add_child(T, m, node, -1, OTHER_BRANCH)
        if nxt < 0:
            return node, last_nonempty
        node = nxt


# --------------------------------------------------------------------------- statistics
@nb.njit(cache=True)
def update_leaf(T, m, node, xn, xc, y, w, code_attr):
    # Scalar indexing throughout: numba array views cost ~5x in these hot loops.
    s = T.slot[m, node]
    T.dist[m, node, y] += w
    for a in range(xc.shape[0]):
        code = xc[a]
        if code >= 0:
            f = row_find(T, m, s, a, KEY_FEATURE)
            if f < 0:
                f = add_feature(T, m, s, a)
            e = index_find(T, m, stat_key(s, code, KEY_VALUE))
            if e < 0:  # a value new to this leaf (w > 0: a row exists iff its weight is > 0)
                e = add_value(T, m, s, f, code)
            T.cat[m, e, y] += w
            T.catw[m, f, y] += w
    num = T.num
    C = num.shape[2]
    o_of = T.o_of
    for j in range(xn.shape[0]):
        v = xn[j]
        if not np.isnan(v):
            o = o_of[m, s, j] if j < o_of.shape[2] else row_find(T, m, s, j, KEY_OBSERVER)
            if o < 0:
                o = add_observer(T, m, s, j)
            wn = num[m, o, y, W] + w
            d = v - num[m, o, y, MEAN]
            mean = num[m, o, y, MEAN] + d * (w / wn)
            num[m, o, y, MEAN] = mean
            num[m, o, y, M2] += w * d * (v - mean)
            num[m, o, y, W] = wn
            if v < num[m, o, y, MIN]:
                num[m, o, y, MIN] = v
            if v > num[m, o, y, MAX]:
                num[m, o, y, MAX] = v
            for k in range(C):
                num[m, o, k, VAR] = 0.0  # stale: nb_proba recomputes it when needed


@nb.njit(cache=True)
def gaussian_cache(num, m, o, C):
    """Naive-Bayes variance of every class for the numeric observer o (the unbiased weighted
    variance) and its log. A class with zero variance (one value so far) gets VAR = -1: its
    density is 1 at that value and 0 elsewhere, MOA's GaussianEstimator rule. A feature with zero
    pooled variance is uninformative and contributes nothing."""
    pw = 0.0
    pmean = 0.0
    pm2 = 0.0
    for k in range(C):
        wk = num[m, o, k, W]
        if wk > 0.0:
            nw = pw + wk
            dm = num[m, o, k, MEAN] - pmean
            pmean += dm * wk / nw
            pm2 += num[m, o, k, M2] + dm * dm * pw * wk / nw
            pw = nw
    if pm2 <= 0.0:
        # every observation at this leaf has the same value: the feature tells the classes
        # nothing, so its term is made exactly 0 (VAR = inf, LOGVAR = -log(2 pi))
        for k in range(C):
            num[m, o, k, VAR] = np.inf
            num[m, o, k, LOGVAR] = -2.0 * LOG2PI_HALF
        return
    for k in range(C):
        wk = num[m, o, k, W]
        if wk > 0.0:
            var = num[m, o, k, M2] / (wk - 1.0) if wk > 1.0 else 0.0
            if var > 0.0:
                num[m, o, k, VAR] = var
                num[m, o, k, LOGVAR] = math.log(var)
            else:
                num[m, o, k, VAR] = -1.0  # degenerate: a point mass at MEAN


@nb.njit(cache=True)
def normal_cdf(z):
    return 0.5 * math.erfc(-z / math.sqrt(2.0))


@nb.njit(cache=True)
def weight_below(num, m, o, k, t):
    """Estimated weight of observations <= t for one (feature, class) Gaussian estimator."""
    w = num[m, o, k, W]
    if w <= 0.0:
        return 0.0
    if t < num[m, o, k, MIN]:
        return 0.0
    if t >= num[m, o, k, MAX]:
        return w
    var = num[m, o, k, M2] / (w - 1.0) if w > 1.0 else 0.0
    if var <= 0.0:
        return w if t >= num[m, o, k, MEAN] else 0.0
    return w * normal_cdf((t - num[m, o, k, MEAN]) / math.sqrt(var))


@nb.njit(cache=True)
def impurity(rows, i, n, criterion):
    """``W * H`` of the class weights ``rows[i, :n]`` (W their sum; H entropy in bits, or Gini),
    computed without division where possible: entropy as ``W log W - sum w log w``."""
    tot = 0.0
    if criterion == CRIT_GINI:
        sq = 0.0
        for k in range(n):
            v = rows[i, k]
            tot += v
            sq += v * v
        return tot - sq / tot if tot > 0.0 else 0.0
    acc = 0.0
    for k in range(n):
        v = rows[i, k]
        if v > 0.0:
            tot += v
            acc -= v * math.log(v)
    if tot <= 0.0:
        return 0.0
    return (acc + tot * math.log(tot)) * INV_LN2


@nb.njit(cache=True)
def merit_binary(pre_imp, pre_w, lr, n, criterion, min_frac):
    """Merit of a binary split with left/right class weights ``lr[0]`` / ``lr[1]``."""
    wl = 0.0
    wr = 0.0
    for k in range(n):
        wl += lr[0, k]
        wr += lr[1, k]
    tot = wl + wr
    if tot <= 0.0:
        return -np.inf
    if min_frac > 0.0 and (wl < min_frac * tot or wr < min_frac * tot):
        return -np.inf
    post = (impurity(lr, 0, n, criterion) + impurity(lr, 1, n, criterion)) / tot
    return pre_imp / pre_w - post


@nb.njit(cache=True)
def best_numeric_split(T, P, m, o, n_classes, pre_imp, pre_w, lr, best_lhs):
    """Best threshold for the numeric feature of observer o (MOA's Gaussian observer:
    n_split_points equally spaced candidates between the smallest and largest value seen).
    Returns (merit, threshold)."""
    lo = np.inf
    hi = -np.inf
    num = T.num
    for k in range(n_classes):
        if num[m, o, k, W] > 0.0:
            if num[m, o, k, MIN] < lo:
                lo = num[m, o, k, MIN]
            if num[m, o, k, MAX] > hi:
                hi = num[m, o, k, MAX]
    best = -np.inf
    best_t = 0.0
    if not (lo < hi):
        return best, best_t
    step = (hi - lo) / (P.n_split_points + 1.0)
    for i in range(P.n_split_points):
        t = lo + step * (i + 1.0)
        if not (t > lo and t < hi):
            continue
        for k in range(n_classes):
            b = weight_below(num, m, o, k, t)
            lr[0, k] = b
            lr[1, k] = num[m, o, k, W] - b
        mer = merit_binary(pre_imp, pre_w, lr, n_classes, P.criterion, P.min_branch_frac)
        if mer > best:
            best = mer
            best_t = t
            for k in range(n_classes):
                best_lhs[k] = lr[0, k]
    return best, best_t


@nb.njit(cache=True)
def categorical_merit(T, P, m, f, n_classes, pre_imp, pre_w):
    """Merit of the multiway split on the categorical feature of feature row f (its values
    summed in code order)."""
    tot = 0.0
    for k in range(n_classes):
        tot += T.catw[m, f, k]
    list_sort(T.v_next, T.v_code, T.v_head, T.v_tail, T.v_pend, m, f)
    cat = T.cat[m]  # [E, C]: one view per call
    post = 0.0
    nbig = 0
    e = T.v_head[m, f]
    while e >= 0:
        w = 0.0
        for k in range(n_classes):
            w += cat[e, k]
        if w > 0.0:
            post += impurity(cat, e, n_classes, P.criterion)
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
    numeric split.
    """
    pre_w = 0.0
    for k in range(n_classes):
        pre_w += T.dist[m, node, k]
    best = 0.0
    second = 0.0
    bkind = -1
    battr = -1
    bthr = 0.0
    if pre_w <= 0.0:
        return best, second, bkind, battr, bthr
    pre_imp = impurity(T.dist[m], node, n_classes, P.criterion)
    lr = np.empty((2, n_classes))
    cand_lhs = np.empty(n_classes)
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
            for k in range(n_classes):
                split_lhs[k] = cand_lhs[k]
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
def normalize_into(d, n, out):
    tot = 0.0
    for k in range(n):
        tot += d[k]
    if tot <= 0.0:
        for k in range(n):
            out[k] = 0.0
        return False
    for k in range(n):
        out[k] = d[k] / tot
    return True


@nb.njit(cache=True)
def normalize_node(T, m, node, n, out):
    """``normalize_into`` of the node's class weights ``T.dist[m, node, :n]`` (no view)."""
    dist = T.dist
    tot = 0.0
    for k in range(n):
        tot += dist[m, node, k]
    if tot <= 0.0:
        for k in range(n):
            out[k] = 0.0
        return False
    for k in range(n):
        out[k] = dist[m, node, k] / tot
    return True


@nb.njit(cache=True)
def nb_proba(T, m, node, xn, xc, n_classes, out):
    """Naive Bayes at a leaf: class priors from the leaf's weights, Laplace-smoothed category
    likelihoods ((n + 1) / (n_class + V) with V the values seen at the leaf), Gaussian numeric
    likelihoods (unbiased weighted variance; a class with zero variance has density 1 at its
    value and 0 elsewhere, as MOA's GaussianEstimator)."""
    # Scalar indexing throughout: numba array views cost ~5x here.
    s = T.slot[m, node]
    dist = T.dist
    cat = T.cat
    logp = out  # log-probabilities are accumulated in place, then exponentiated
    any_class = False
    for k in range(n_classes):
        dk = dist[m, node, k]
        if dk > 0.0:
            logp[k] = math.log(dk)
            any_class = True
        else:
            logp[k] = -np.inf
    if not any_class:
        for k in range(n_classes):
            out[k] = 0.0
        return False
    for a in range(xc.shape[0]):
        code = xc[a]
        if code < 0:
            continue
        f = row_find(T, m, s, a, KEY_FEATURE)
        if f < 0:
            continue  # feature never observed at this leaf
        V = T.nvals[m, f]
        e = index_find(T, m, stat_key(s, code, KEY_VALUE))
        if e < 0:
            continue  # value never learned at this leaf: skipped, like an unseen value
        for k in range(n_classes):
            if dist[m, node, k] > 0.0:
                logp[k] += math.log((cat[m, e, k] + 1.0) / (T.catw[m, f, k] + V))
    num = T.num
    o_of = T.o_of
    for j in range(xn.shape[0]):
        v = xn[j]
        if np.isnan(v):
            continue
        o = o_of[m, s, j] if j < o_of.shape[2] else row_find(T, m, s, j, KEY_OBSERVER)
        if o < 0:
            continue  # feature never observed at this leaf
        for k in range(n_classes):
            if dist[m, node, k] <= 0.0 or num[m, o, k, W] <= 0.0:
                continue
            if num[m, o, k, VAR] == 0.0:
                gaussian_cache(num, m, o, num.shape[2])
            z = v - num[m, o, k, MEAN]
            if num[m, o, k, VAR] < 0.0:  # point mass: density 1 at the value, 0 elsewhere
                if z != 0.0:
                    logp[k] = -np.inf
                continue
            logp[k] += -0.5 * z * z / num[m, o, k, VAR] - 0.5 * num[m, o, k, LOGVAR] - LOG2PI_HALF
    mx = -np.inf
    for k in range(n_classes):
        if logp[k] > mx:
            mx = logp[k]
    if mx == -np.inf:
        # every class has density 0 somewhere (e.g. seen once, so zero variance, and x differs):
        # naive Bayes cannot tell them apart, so it predicts the class distribution
        return normalize_node(T, m, node, n_classes, out)
    tot = 0.0
    for k in range(n_classes):
        out[k] = math.exp(logp[k] - mx) if dist[m, node, k] > 0.0 else 0.0
        tot += out[k]
    for k in range(n_classes):
        out[k] /= tot
    return True


@nb.njit(cache=True)
def stump_split(T, P, m, node, n_classes, code_attr):
    """The split a decision stump predicts with: ``(kind, attr, threshold)`` of the best split of
    the node's statistics (kind -1: none beats the null split)."""
    lhs = np.empty(n_classes)
    _, _, bkind, battr, bthr = best_splits(T, P, m, node, n_classes, code_attr, lhs)
    return bkind, battr, bthr


@nb.njit(cache=True)
def stump_apply(T, m, node, xn, xc, n_classes, bkind, battr, bthr, out):
    """The class distribution of x's branch of the split ``(bkind, battr, bthr)``."""
    s = T.slot[m, node]
    if bkind == NUMERIC_SPLIT and battr < xn.shape[0] and not np.isnan(xn[battr]):
        o = row_find(T, m, s, battr, KEY_OBSERVER)
        tmp = np.empty(n_classes)
        for k in range(n_classes):
            b = weight_below(T.num, m, o, k, bthr)
            tmp[k] = b if xn[battr] <= bthr else T.num[m, o, k, W] - b
        if normalize_into(tmp, n_classes, out):
            return True
    elif bkind == CATEGORICAL_SPLIT and battr < xc.shape[0] and xc[battr] >= 0:
        e = index_find(T, m, stat_key(s, xc[battr], KEY_VALUE))
        if e >= 0:  # a value row exists only with weight > 0
            tot = 0.0
            for k in range(n_classes):
                tot += T.cat[m, e, k]
            for k in range(n_classes):
                out[k] = T.cat[m, e, k] / tot
            return True
    return normalize_node(T, m, node, n_classes, out)


@nb.njit(cache=True)
def stump_proba(T, P, m, node, xn, xc, n_classes, code_attr, out):
    """Decision stump: the best split of the node's statistics, applied to x."""
    bkind, battr, bthr = stump_split(T, P, m, node, n_classes, code_attr)
    return stump_apply(T, m, node, xn, xc, n_classes, bkind, battr, bthr, out)


@nb.njit(cache=True)
def stump_predict_rows(B, xn, xc, start, out, n_cls, code_attr):
    """``single_run`` predicting (not learning) rows with a standalone decision stump: its state
    does not change between rows, so its split is searched once per number of known classes
    instead of once per row (``tree_proba`` on its single node, a leaf, otherwise)."""
    split_n = -1
    bkind, battr, bthr = -1, -1, 0.0
    for r in range(start, xn.shape[0]):
        n = n_cls[r]
        tot = 0.0
        for k in range(n):
            tot += B.dist[0, 0, k]
        if tot <= 0.0:
            out[r] = 0.0
            continue
        if n != split_n:
            bkind, battr, bthr = stump_split(B, B, 0, 0, n, code_attr)
            split_n = n
        if not stump_apply(B, 0, 0, xn[r], xc[r], n, bkind, battr, bthr, out[r]):
            out[r] = 0.0
    return xn.shape[0]


@nb.njit(cache=True)
def leaf_proba(T, P, m, node, xn, xc, n_classes, code_attr, out, hint):
    """Prediction at a leaf. When naive Bayes is computed, ``hint[m] = (node, its argmax)`` so
    that learning the same example right after need not compute it again."""
    lp = P.leaf_prediction
    if lp == PRED_STUMP:
        return stump_proba(T, P, m, node, xn, xc, n_classes, code_attr, out)
    if lp == PRED_MC:
        return normalize_node(T, m, node, n_classes, out)
    tot = 0.0
    for k in range(n_classes):
        tot += T.dist[m, node, k]
    if lp == PRED_NB:
        if tot >= P.nb_threshold:
            return nb_proba(T, m, node, xn, xc, n_classes, out)
        return normalize_node(T, m, node, n_classes, out)
    # NBA: naive Bayes unless majority class has been more accurate at this leaf (MOA's rule)
    s = T.slot[m, node]
    if T.mc_ok[m, s] > T.nb_ok[m, s] or tot < P.nb_threshold:
        return normalize_node(T, m, node, n_classes, out)
    ok = nb_proba(T, m, node, xn, xc, n_classes, out)
    hint[m, 0] = node
    hint[m, 1] = argmax(out, n_classes) if ok else -1
    return ok


@nb.njit(cache=True)
def tree_proba(T, P, m, xn, xc, n_classes, code_attr, out, hint):
    """Class probabilities of member m for one example into ``out``; False if it has none.

    ``hint`` ([M, 2]) receives (leaf, naive-Bayes argmax) when naive Bayes was computed; callers
    reset ``hint[:, 0] = -1`` before each new example."""
    node, last = sort_to_leaf(T, P, m, xn, xc, n_classes, False)
    if T.kind[m, node] == LEAF:
        tot = 0.0
        for k in range(n_classes):
            tot += T.dist[m, node, k]
        if tot > 0.0:
            return leaf_proba(T, P, m, node, xn, xc, n_classes, code_attr, out, hint)
    return normalize_node(T, m, last, n_classes, out)


@nb.njit(cache=True)
def argmax_node(T, m, node, n):
    """``argmax`` of the node's class weights (no view)."""
    best = -1
    bv = 0.0
    for k in range(n):
        v = T.dist[m, node, k]
        if v > bv:
            bv = v
            best = k
    return best


@nb.njit(cache=True)
def argmax(p, n):
    best = -1
    bv = 0.0
    for k in range(n):
        if p[k] > bv:
            bv = p[k]
            best = k
    return best


# --------------------------------------------------------------------------- learning
@nb.njit(cache=True)
def attempt_split(T, P, m, node, n_classes, code_attr):
    d = T.dist[m, node]
    tot = 0.0
    n_nonzero = 0
    for k in range(n_classes):
        tot += d[k]
        if d[k] > 0.0:
            n_nonzero += 1
    if n_nonzero < 2:
        return
    lhs = np.empty(n_classes)
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
        for k in range(n_classes):  # both children from the feature's observer, as MOA
            b = lhs[k]
            rest = T.num[m, o, k, W] - b
            T.dist[m, left, k] = b
            T.dist[m, right, k] = rest if rest > 0.0 else 0.0
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
            for k in range(n_classes):
                T.dist[m, c, k] = T.cat[m, e, k]
            prev = c
            e = T.v_next[m, e]
    T.kind[m, node] = bkind
    T.attr[m, node] = battr
    T.thr[m, node] = bthr
    release_slot(T, m, s)
    T.free[m, T.n_free[m]] = s
    T.n_free[m] += 1
    T.slot[m, node] = -1


@nb.njit(cache=True)
def tree_learn(T, P, m, xn, xc, y, w, n_classes, code_attr, scratch, hint):
    """Learn one example with weight w (> 0) in member m.

    ``hint[m]`` may hold (leaf, naive-Bayes argmax) computed by ``tree_proba`` on this same
    example and unchanged state; it is used instead of recomputing, then invalidated."""
    node, _ = sort_to_leaf(T, P, m, xn, xc, n_classes, True)
    s = T.slot[m, node]
    if P.leaf_prediction == PRED_NBA:
        if argmax_node(T, m, node, n_classes) == y:
            T.mc_ok[m, s] += w
        if hint[m, 0] == node:
            nb_arg = hint[m, 1]
        elif nb_proba(T, m, node, xn, xc, n_classes, scratch):
            nb_arg = argmax(scratch, n_classes)
        else:
            nb_arg = -1
        if nb_arg == y:
            T.nb_ok[m, s] += w
    hint[m, 0] = -1
    update_leaf(T, m, node, xn, xc, y, w, code_attr)
    if T.depth[m, node] >= P.max_depth:
        return
    tot = 0.0
    for k in range(n_classes):
        tot += T.dist[m, node, k]
    if tot - T.last[m, s] >= P.grace_period:
        T.last[m, s] = tot
        attempt_split(T, P, m, node, n_classes, code_attr)


@nb.njit(cache=True)
def classes_after(n_cls, ys, r):
    """Number of classes known once row r's label is in (labels get codes in order)."""
    return max(n_cls[r], ys[r] + 1)


@nb.njit(cache=True)
def single_run(B, ipar, fstate, xn, xc, ys, ws, seqs, start, do_predict, do_learn, out, n_cls, code_attr,
               need):  # fmt: skip
    """Predict-then-learn rows ``start..`` with member 0 (a standalone learner).

    All run kernels share this signature: ``B`` the bank, ``ipar``/``fstate`` the ensemble's integer and
    float parameters/state (unused here), rows ``xn``/``xc``/``ys``/``ws`` with sequence numbers
    ``seqs``; ``n_cls[r]`` is the number of classes known when row r is predicted. Returns the
    first row not processed (``len(ys)`` when done; earlier when arrays must grow by ``need``
    nodes/slots first)."""
    if do_predict and not do_learn and B.leaf_prediction == PRED_STUMP and B.n_nodes[0] == 1:
        return stump_predict_rows(B, xn, xc, start, out, n_cls, code_attr)
    R = xn.shape[0]
    C = B.dist.shape[2]
    scratch = np.empty(C)
    hint = np.full((1, 2), -1, dtype=np.int64)
    for r in range(start, R):
        if do_learn and not has_room(B, B, need):
            return r
        hint[0, 0] = -1
        if do_predict:
            if not tree_proba(B, B, 0, xn[r], xc[r], n_cls[r], code_attr, out[r], hint):
                out[r] = 0.0
        if do_learn and ws[r] > 0.0:
            nc = classes_after(n_cls, ys, r)
            tree_learn(B, B, 0, xn[r], xc[r], ys[r], ws[r], nc, code_attr, scratch, hint)
    return R


one_specialisation(globals())  # after every kernel: one compiled version per argument type
