"""The row index and pools: the class-entry blocks of the two per-member pools, the hash index that
finds a leaf's statistics rows, the rows' free lists and sorted lists, and the allocation of leaves
and slots (the layout: :mod:`learners.tree.layout`).
"""

from __future__ import annotations

import numba as nb
import numpy as np

from learners.jit import one_specialisation

from .layout import (
    CATEGORICAL_SPLIT,
    GPOOL,
    KEY_CHILD,
    KEY_FEATURE,
    KEY_OBSERVER,
    KEY_VALUE,
    LEAF,
    MAX,
    MAX_ID,
    MIN,
    NO_SPLIT_SEEN,
    NUM_STATS,
    VAR,
    WIDTH_CAT,
    WIDTH_NUM,
    WPOOL,
    W,
)
from .subspace import dealt_thr, reset_thr


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
def child_key(node, branch):
    """Index key of the child of categorical split ``node`` for category ``branch``."""
    return stat_key(node, branch if branch >= 0 else MAX_ID - 1, KEY_CHILD)


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
def order_of(keys):
    """``np.argsort(keys)`` of distinct keys (a list's items have one key each), by a heap sort:
    numba's ``np.argsort`` compiles a generic quicksort (~8 s of a cold compile, numba's
    compile events, ``benchmarks/compiletime.py``) for pending lists a few items long."""
    n = keys.shape[0]
    order = np.arange(n)
    for root in range(n // 2 - 1, -1, -1):
        sift_down(keys, order, root, n)
    for end in range(n - 1, 0, -1):
        first = order[0]
        order[0] = order[end]
        order[end] = first
        sift_down(keys, order, 0, end)
    return order


@nb.njit(cache=True)
def sift_down(keys, order, root, end):
    """Restore the max-heap of ``order[:end]`` (by key) below ``root``."""
    while True:
        child = 2 * root + 1
        if child >= end:
            return
        if child + 1 < end and keys[order[child + 1]] > keys[order[child]]:
            child += 1
        if keys[order[root]] >= keys[order[child]]:
            return
        top = order[root]
        order[root] = order[child]
        order[child] = top
        root = child


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
    order = order_of(keys)
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
    T.merit[m, n] = 0.0
    T.split_seen[m, n] = NO_SPLIT_SEEN
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
def tree_reset_keyed(T, m, key):
    """``tree_reset``, the new root's random feature subspace keyed by ``key`` (an ensemble
    passes a hash of the example at which it replaces the tree, so that a replacement draws
    anew: ``learners.tree.subspace``)."""
    tree_reset(T, m)
    T.thr[m, 0] = reset_thr(key)


@nb.njit(cache=True)
def tree_reset_dealt(T, m, member):
    """``tree_reset``, the new root's subspace dealt as member ``member``'s of a forest whose
    first trees take distinct subspaces (``learners.tree.subspace``, "Dealt roots")."""
    tree_reset(T, m)
    T.thr[m, 0] = dealt_thr(member)


@nb.njit(cache=True)
def has_room(T, P, need):
    """True if every member can take ``need`` more nodes and slots, and the statistics rows and
    index keys of one example of ``width = (categorical, numeric)`` features, without growing
    arrays (the class-entry pools grow by themselves)."""
    A = T.width[WIDTH_CAT]
    J = T.width[WIDTH_NUM]
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


one_specialisation(globals())  # after every kernel: one compiled version per argument type
