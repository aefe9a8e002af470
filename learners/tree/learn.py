"""Learning: a member learns one weighted example (``tree_learn``: update the leaf, count which leaf
predictor was right, and split it when the Hoeffding bound says so, ``attempt_split``).
"""

from __future__ import annotations

import math

import numba as nb
import numpy as np

from learners.jit import one_specialisation

from .layout import (
    CATEGORICAL_SPLIT,
    CRIT_GINI,
    HINT_BEST,
    HINT_CLASSES,
    HINT_LEAF,
    HINT_NB,
    INV_LN2,
    KEY_FEATURE,
    KEY_OBSERVER,
    LEAF,
    NO_NB,
    NUM_STATS,
    NUMERIC_SPLIT,
    PRED_NBA,
    WSUM_SLACK,
    W,
)
from .predict import argmax, argmax_node, nb_proba
from .routing import add_child, sort_to_leaf
from .rows import (
    add_weight,
    block_sum,
    entry_pos,
    n_below,
    new_leaf,
    node_weight,
    release_slot,
    row_find,
    weights_below,
)
from .statistics import best_splits, update_leaf
from .subspace import MODE_ALL, child_thr


@nb.njit(cache=True)
def attempt_split(T, P, m, node, n_classes, code_attr, seq):
    """Split leaf ``node`` of member m when the Hoeffding bound says that its best split beats
    the second best (or the null split) for good, or that the two tie (``tau``): Domingos &
    Hulten (2000), as MOA's HoeffdingTree. A split node keeps ``merit``, the best split's merit
    as ``statistics.best_splits`` computed it for this test (information gain in bits, or Gini
    gain: the leaf's impurity minus its branches' weighted mean impurity, from the leaf's
    statistics now), and ``split_seen``, the model's example count now (``seq``, the number of
    the example being learned, + 1)."""
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
    key = T.thr[m, node]  # (a leaf's thr: its subspace key, learners.tree.subspace)
    if bkind == NUMERIC_SPLIT:
        if T.n_nodes[m] + 2 > P.max_nodes:
            return
        left = new_leaf(T, m, depth + 1, 0)
        right = new_leaf(T, m, depth + 1, 1)
        if P.subspace_mode != MODE_ALL:
            T.thr[m, left] = child_thr(P, key, 0)
            T.thr[m, right] = child_thr(P, key, 1)
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
            c = add_child(T, P, m, node, prev, T.v_code[m, e])
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
    T.merit[m, node] = best
    T.split_seen[m, node] = seq + 1
    # a categorical split keeps its subspace key: its children made later (routing) draw from it
    T.thr[m, node] = key if bkind == CATEGORICAL_SPLIT and P.subspace_mode != MODE_ALL else bthr
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
def tree_learn(T, P, m, xn, xc, y, w, seq, n_classes, code_attr, pk, pv, hint):
    """Learn one example with weight w (> 0) in member m; ``seq`` is its example number (the
    model's count of examples learned before it: what a split it causes records as its time,
    ``attempt_split``).

    ``hint[m]`` (see ``tree_proba``): the leaf and naive-Bayes argmax of this example in member
    m's current state, used instead of recomputing them; afterwards it holds the leaf (learning
    moves no branch: the leaf only gained weight, so it stays the heaviest child where it was)
    unless the leaf split. ``pk`` / ``pv`` are scratch as for ``tree_proba``."""
    hinted = hint[m, HINT_LEAF] >= 0 and hint[m, HINT_CLASSES] == n_classes
    if hinted:
        node = hint[m, HINT_LEAF]
    else:
        node, _, _ = sort_to_leaf(T, P, m, xn, xc, n_classes, True)
    s = T.slot[m, node]
    if P.leaf_prediction == PRED_NBA and has_class(T, m, node, y):
        # (a class without weight at the leaf is neither predictor's answer: nothing to count)
        if argmax_node(T, m, node, n_classes) == y:
            T.mc_ok[m, s] += w
        if hinted and hint[m, HINT_NB] != NO_NB:
            nb_arg = hint[m, HINT_NB]
        else:
            nb_arg = argmax(pk, pv, nb_proba(T, P, m, node, xn, xc, n_classes, pk, pv))
        if nb_arg == y:
            T.nb_ok[m, s] += w
    update_leaf(T, P, m, node, xn, xc, y, w, code_attr)
    hint[m, HINT_LEAF] = node
    hint[m, HINT_NB] = NO_NB  # (the leaf's statistics changed)
    hint[m, HINT_CLASSES] = n_classes
    hint[m, HINT_BEST] = NO_NB
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
        attempt_split(T, P, m, node, n_classes, code_attr, seq)
        if T.kind[m, node] != LEAF:
            hint[m, HINT_LEAF] = -1  # split: the example goes on to a child


one_specialisation(globals())  # after every kernel: one compiled version per argument type
