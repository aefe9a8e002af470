"""Routing: an example's walk from the root to its leaf (``sort_to_leaf``), and the children of
splits.
"""

from __future__ import annotations

import numba as nb
import numpy as np

from learners.jit import one_specialisation

from .layout import CATEGORICAL_SPLIT, LEAF, NUMERIC_SPLIT, OTHER_BRANCH
from .rows import child_key, index_add, index_find, new_leaf, node_weight
from .subspace import MODE_ALL, child_thr


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
def add_child(T, P, m, node, prev, branch):
    """A new leaf under ``node`` for ``branch``, linked after child ``prev`` (-1: first); in a
    tree with random subspaces, with its subspace key (``subspace.child_thr``)."""
    c = new_leaf(T, m, T.depth[m, node] + 1, branch)
    if P.subspace_mode != MODE_ALL:
        T.thr[m, c] = child_thr(P, T.thr[m, node], branch)
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
                    nxt = add_child(T, P, m, node, -1, code)
                elif nxt < 0:
                    if code >= 0 and T.n_nodes[m] < P.max_nodes:
                        final = False  # (not growing) learning would add the value's branch
                    # no branch for the value (unseen, or the tree is full): the branch the
                    # values share once the tree has max_nodes nodes, if there is one
                    nxt = find_child(T, m, node, OTHER_BRANCH)
                    if nxt < 0 and grow and code >= 0:
                        nxt = add_child(T, P, m, node, -1, OTHER_BRANCH)
        if nxt < 0:
            return node, last_nonempty, final
        node = nxt


one_specialisation(globals())  # after every kernel: one compiled version per argument type
