"""A loaded state's structure: ``check_structure`` refuses arrays that do not hold together as the
kernels' own states do (after ``TreeBank``'s bounds check), naming the problem
(``STRUCTURE_PROBLEMS``).
"""

from __future__ import annotations

import numba as nb
import numpy as np

from learners.jit import compiled_cold, one_specialisation

from .layout import CATEGORICAL_SPLIT, LEAF, NUM_STATS, NUMERIC_SPLIT, OTHER_BRANCH, SETTLED, VAR
from .rows import block_cap

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
# their numbers (``out[OUT_PROBLEM]``; 0: none). A list's three are its rows', its tail's and its
# keys' (``_check_lists``: problem + LIST_ROWS / LIST_TAIL / LIST_KEYS)
(NO_ROOT, BAD_KIND, BAD_SLOT, BAD_FREE, BAD_CHILDREN, BAD_BRANCH, FEATURE_LIST, _, _, VALUE_LIST,
 _, _, BAD_NVALS, OBSERVER_LIST, _, _, W_ORDER, W_USED, G_ORDER, G_USED, W_WEIGHT, G_VALUES,
 BAD_FRESH) = range(1, len(STRUCTURE_PROBLEMS) + 1)  # fmt: skip
LIST_ROWS, LIST_TAIL, LIST_KEYS = 0, 1, 2
OUT_PROBLEM, OUT_MEMBER, OUT_ROW = 0, 1, 2  # what ``out`` gets: the problem, where


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
    ``out`` set to (``problem + LIST_ROWS``: a row past ``count`` or on two lists, ``problem +
    LIST_TAIL``: the sorted list's tail is not its last row, ``problem + LIST_KEYS``: a key twice
    or of another feature; member m; the row, or the owner for a tail)."""
    rows = 0
    for j in range(2):
        n_rows, last = _walk(nxt, key, m, head[m, owner] if j == 0 else pend[m, owner], count,
                             seen, marks, owner, code_attr, want)  # fmt: skip
        if n_rows < 0:
            out[OUT_PROBLEM] = problem + (LIST_ROWS if n_rows == -1 else LIST_KEYS)
            out[OUT_ROW] = last
            return -1
        if j == 0 and last != tail[m, owner]:
            out[OUT_PROBLEM] = problem + LIST_TAIL
            out[OUT_ROW] = owner
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
    """Whether a loaded state (``bounds.check_bounds`` passed: every index is inside its array,
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
    out[OUT_PROBLEM] = 0
    for m in range(T.kind.shape[0]):
        out[OUT_MEMBER] = m
        out[OUT_ROW] = 0
        if T.n_nodes[m] < 1:
            out[OUT_PROBLEM] = NO_ROOT
            return
        slot_of = np.full(T.last.shape[1], -1, np.int64)  # the leaf of each slot (-2: free)
        if not _check_nodes(T, m, code_attr, slot_of, out) or not _check_free(T, m, slot_of, out):
            return
        f_seen = np.zeros(T.nvals.shape[1], np.bool_)  # the rows on a list
        v_seen = np.zeros(T.v_code.shape[1], np.bool_)
        o_seen = np.zeros(T.o_attr.shape[1], np.bool_)
        if not _check_rows(T, m, code_attr, n_cat, n_num, slot_of, f_seen, v_seen, o_seen, out):
            return
        o_live = o_seen.copy()  # (freed rows' marks are stale: never read, reset when taken)
        for r, problem in (
            (_walk_free(T.f_next, m, T.f_freed[m], T.n_f[m], f_seen), FEATURE_LIST),
            (_walk_free(T.v_next, m, T.v_freed[m], T.n_v[m], v_seen), VALUE_LIST),
            (_walk_free(T.o_next, m, T.o_freed[m], T.n_o[m], o_seen), OBSERVER_LIST),
        ):
            if r >= 0:
                out[OUT_PROBLEM] = problem + LIST_ROWS
                out[OUT_ROW] = r
                return
        if not _check_blocks(T, m, f_seen, v_seen, o_seen, out):
            return
        if not _check_observers(T, m, o_live, out):
            return


@nb.njit(cache=True)
def _check_nodes(T, m, code_attr, slot_of, out):
    """Member m's nodes: a leaf has a slot of its own (``slot_of``) and no child, a split no
    slot and its branches (``_check_branches``); False with ``out`` set if not."""
    branch_seen = np.full(code_attr.shape[0] + 1, -1, np.int64)  # (the last entry: OTHER_BRANCH)
    for n in range(T.n_nodes[m]):
        out[OUT_ROW] = n
        kd = T.kind[m, n]
        s = T.slot[m, n]
        if kd == LEAF:
            if s < 0 or s >= T.n_slots[m] or slot_of[s] >= 0:
                out[OUT_PROBLEM] = BAD_SLOT
                return False
            slot_of[s] = n
            if T.child[m, n] >= 0:
                out[OUT_PROBLEM] = BAD_CHILDREN
                return False
            continue
        if kd != NUMERIC_SPLIT and kd != CATEGORICAL_SPLIT:
            out[OUT_PROBLEM] = BAD_KIND
            return False
        if s >= 0:
            out[OUT_PROBLEM] = BAD_SLOT
            return False
        if not _check_branches(T, m, n, code_attr, branch_seen, out):
            return False
    return True


@nb.njit(cache=True)
def _check_branches(T, m, n, code_attr, branch_seen, out):
    """Split node n's children: a numeric split has its branches 0 and 1, a categorical one at
    least one branch, each a category of its feature (or OTHER_BRANCH), once (``branch_seen``:
    the node that last had each branch)."""
    nn = T.n_nodes[m]
    n_codes = code_attr.shape[0]
    kd = T.kind[m, n]
    a = T.attr[m, n]
    seen_left = False
    seen_right = False
    k = 0
    c = T.child[m, n]
    while c >= 0 and k <= nn:  # (bounded: no node is reached twice)
        b = T.branch[m, c]
        if kd == NUMERIC_SPLIT:
            if (b == 0 and not seen_left) or (b == 1 and not seen_right):
                seen_left = seen_left or b == 0
                seen_right = seen_right or b == 1
            else:
                out[OUT_PROBLEM] = BAD_BRANCH
                out[OUT_ROW] = c
                return False
        else:
            at = n_codes if b == OTHER_BRANCH else b
            if (
                (b != OTHER_BRANCH and (b < 0 or b >= n_codes or code_attr[b] != a))
                or branch_seen[at] == n
            ):  # fmt: skip
                out[OUT_PROBLEM] = BAD_BRANCH
                out[OUT_ROW] = c
                return False
            branch_seen[at] = n
        k += 1
        c = T.sibling[m, c]
    if (kd == NUMERIC_SPLIT and not (seen_left and seen_right)) or k == 0:
        out[OUT_PROBLEM] = BAD_CHILDREN
        return False
    return True


@nb.njit(cache=True)
def _check_free(T, m, slot_of, out):
    """Member m's free slots: below n_slots, no leaf's, each once (marked -2 in ``slot_of``)."""
    for i in range(T.n_free[m]):
        s = T.free[m, i]
        out[OUT_ROW] = i
        if s < 0 or s >= T.n_slots[m] or slot_of[s] != -1:
            out[OUT_PROBLEM] = BAD_FREE
            return False
        slot_of[s] = -2  # (taken: free once)
    return True


@nb.njit(cache=True)
def _check_rows(T, m, code_attr, n_cat, n_num, slot_of, f_seen, v_seen, o_seen, out):
    """Member m's lists: every leaf's feature rows and observers, every listed feature row's
    value rows (``_check_lists``, marking the rows seen) and its ``nvals``."""
    n_codes = code_attr.shape[0]
    f_marks = np.full(max(n_cat, 1), -1, np.int64)
    o_marks = np.full(max(n_num, 1), -1, np.int64)
    v_marks = np.full(max(n_codes, 1), -1, np.int64)
    for s in range(T.last.shape[1]):
        if slot_of[s] < 0:
            continue
        if _check_lists(T.f_next, T.f_attr, T.f_head, T.f_tail, T.f_pend, m, s, T.n_f[m],
                        f_seen, f_marks, code_attr, -1, FEATURE_LIST, out) < 0:  # fmt: skip
            return False
        if _check_lists(T.o_next, T.o_attr, T.o_head, T.o_tail, T.o_pend, m, s, T.n_o[m],
                        o_seen, o_marks, code_attr, -1, OBSERVER_LIST, out) < 0:  # fmt: skip
            return False
    for f in range(T.n_f[m]):
        if not f_seen[f]:
            continue  # (freed: its value lists are stale)
        values = _check_lists(T.v_next, T.v_code, T.v_head, T.v_tail, T.v_pend, m, f,
                              T.n_v[m], v_seen, v_marks, code_attr, T.f_attr[m, f], VALUE_LIST,
                              out)  # fmt: skip
        if values < 0:
            return False
        if values != T.nvals[m, f]:
            out[OUT_PROBLEM] = BAD_NVALS
            out[OUT_ROW] = f
            return False
    return True


@nb.njit(cache=True)
def _check_blocks(T, m, f_seen, v_seen, o_seen, out):
    """Member m's class blocks: classes increasing, weights > 0 (``_bad_block``), and the blocks
    below the counts within the part of each pool in use."""
    nn = T.n_nodes[m]
    nodes = np.ones(nn, np.bool_)
    for cls, val, width, at, ln, live, disorder, no_weight in (
        (T.wc, T.wv, 1, T.d_at, T.d_len, nodes, W_ORDER, W_WEIGHT),
        (T.wc, T.wv, 1, T.fw_at, T.fw_len, f_seen, W_ORDER, W_WEIGHT),
        (T.wc, T.wv, 1, T.vw_at, T.vw_len, v_seen, W_ORDER, W_WEIGHT),
        (T.gc, T.gv, NUM_STATS, T.g_at, T.g_len, o_seen, G_ORDER, G_VALUES),  # (W is first)
    ):
        r, fault = _bad_block(cls, val, width, at, ln, m, live)
        if r >= 0:
            out[OUT_PROBLEM] = no_weight if fault else disorder
            out[OUT_ROW] = r
            return False
    out[OUT_ROW] = 0
    if (_caps(T.d_len, m, nn) + _caps(T.fw_len, m, T.n_f[m]) + _caps(T.vw_len, m, T.n_v[m])
            > T.w_used[m]):  # fmt: skip
        out[OUT_PROBLEM] = W_USED
        return False
    if _caps(T.g_len, m, T.n_o[m]) > T.g_used[m]:
        out[OUT_PROBLEM] = G_USED
        return False
    return True


@nb.njit(cache=True)
def _check_observers(T, m, o_live, out):
    """Member m's live observers: a freshness mark naming one of their entries, fresh cached
    variances that can be divided by (``_variances_ok``)."""
    for o in range(T.n_o[m]):
        if o_live[o]:
            if T.o_fresh[m, o] > SETTLED + T.g_len[m, o]:  # (entry q of SETTLED + 1 + q)
                out[OUT_PROBLEM] = BAD_FRESH
                out[OUT_ROW] = o
                return False
            if not _variances_ok(T, m, o):
                out[OUT_PROBLEM] = G_VALUES
                out[OUT_ROW] = o
                return False
    return True


compiled_cold(check_structure)  # run once per model or state (learners.jit)
one_specialisation(globals())  # after every kernel: one compiled version per argument type
