"""Compiled kernels of the stacked vote (``vote="stacking"``, ``ensembles.stacking`` is the
readable reference): a meta-learner, multinomial logistic regression, that learns to combine the
members' class probabilities.

They run inside the adaptive kernels (``_adaptive.adaptive_loop``) and the forests'
(``_forest.forest_loop``, over ``ForestState.meta``) over the meta-learner's arrays in the
``AdaptiveStruct`` ``st``:

* ``st.meta_x`` [M + 1, K]: row m < M holds member m's class probabilities of the current
  example (dense, zeros for the classes it does not give), kept by the vote *before* any member
  learns the example; row M is scratch for the meta-learner's softmax;
* ``st.meta_w`` [K, M K + 1]: the weights, row o for output class o, column ``m K + c`` for
  member m's probability of class c, column ``M K`` the bias;
* ``st.meta_n`` [1]: examples the meta-learner has learned (``LEARNED``).

K is a capacity (classes), doubled when a class beyond it arrives (``meta_room``: the arrays are
replaced in the struct, as the trees' class-entry pools are; ``_adaptive.AdaptiveStruct`` gives
Python the current ones); results never depend on it. A class's weights start at ``INIT`` on
every member's probability of that class, 0 elsewhere, and its bias at -inf: a class takes part
in the softmax (its probability exp(-inf) = 0 until then) from the first example of it the
meta-learner learns, whose step sets its bias to 0 first. So classes known but never learned (a
``declare``, a label learned with weight 0) change nothing.

Per learned example, after the vote and before the members learn it (no leakage: the features
are what the members said before seeing the label), one SGD step on the cross-entropy:
``W[o, j] -= step (g_o x_j + l2 W[o, j])`` for the features present (x_j != 0, river's
``SoftmaxRegression`` regularises those), ``b_o -= step g_o``, with ``g_o = p_o - [o = y]``,
``p`` the meta-learner's softmax and ``step = rate min(w, MAX_WEIGHT)``.
"""

from __future__ import annotations

import math

import numba as nb
import numpy as np

from learners.jit import one_specialisation

# the meta-learner's parameters in the adaptive kernels' fpar (after ``_adaptive.LAMBDA``,
# ``_adaptive.DELTA``): its SGD learning rate, L2 penalty and initial weight of a member's
# probability of a class for that class (``stacking.RATE``, ``L2``, ``INIT``)
META_RATE, META_L2, META_INIT = 2, 3, 4
LEARNED = 0  # meta_n[LEARNED]: examples learned
# an example's weight scales its SGD step up to this: a step of rate * w with w = 1e12 (a valid
# sample weight) would throw the weights to ~1e10 in one example
MAX_WEIGHT = 10.0


@nb.njit(cache=True)
def meta_room(st, n):
    """Room for ``n`` classes in the meta-learner's arrays: K doubled (from 2) until K >= n,
    the weights and the kept features copied to their places in the new layout; a new class
    o starts with weight ``INIT`` on each member's probability of o, 0 elsewhere, and bias
    -inf (not learned yet)."""
    x = st.meta_x
    K = x.shape[1]
    if K >= n:
        return
    M = x.shape[0] - 1
    K2 = max(K, 2)
    while K2 < n:
        K2 *= 2
    old = st.meta_w
    w = np.zeros((K2, M * K2 + 1))
    for o in range(K):
        for m in range(M):
            for c in range(K):
                w[o, m * K2 + c] = old[o, m * K + c]
        w[o, M * K2] = old[o, M * K]
    init = st.fpar[META_INIT]
    for o in range(K, K2):
        for m in range(M):
            w[o, m * K2 + o] = init
        w[o, M * K2] = -np.inf
    grown = np.zeros((M + 1, K2))
    for m in range(M + 1):
        for c in range(K):
            grown[m, c] = x[m, c]
    st.meta_w = w
    st.meta_x = grown


@nb.njit(cache=True)
def keep_member(st, m, pk, pv, k):
    """Member m's sparse class probabilities (``k`` codes ``pk``, values ``pv``; k = 0: none)
    as row m of the meta-learner's features; call ``meta_room`` for the classes first."""
    row = st.meta_x[m]
    row[:] = 0.0
    for i in range(k):
        row[pk[i]] = pv[i]


@nb.njit(cache=True)
def meta_proba(st, n_in, n_out, out):
    """The meta-learner's class probabilities: ``out[o] = softmax_o(b_o + sum_{m, c < n_in}
    W[o, m K + c] x[m, c])`` for the ``n_out`` classes (the features of classes >= n_in are 0:
    no member gave them; a class not learned yet, b_o = -inf, gets 0). At least one class must
    have been learned."""
    W = st.meta_w
    x = st.meta_x
    M = x.shape[0] - 1
    K = x.shape[1]
    top = -np.inf
    for o in range(n_out):
        z = W[o, M * K]
        if z != -np.inf:
            for m in range(M):
                for c in range(n_in):
                    v = x[m, c]
                    if v != 0.0:
                        z += W[o, m * K + c] * v
        out[o] = z
        if z > top:
            top = z
    total = 0.0
    for o in range(n_out):
        e = math.exp(out[o] - top)
        out[o] = e
        total += e
    for o in range(n_out):
        out[o] /= total


@nb.njit(cache=True)
def meta_vote(st, n, out_row):
    """The stacked vote of the ``n`` classes into ``out_row`` once the meta-learner has learned
    an example (returns True), else False (the caller's average vote stands)."""
    if st.meta_n[LEARNED] == 0 or n == 0:
        return False
    meta_proba(st, n, n, out_row)
    return True


@nb.njit(cache=True)
def meta_learn(st, n_in, n_out, y, w):
    """One SGD step of the meta-learner on the kept features (classes < ``n_in``, what the
    members gave before learning) and class ``y`` of ``n_out``, weight ``w`` (module doc)."""
    meta_room(st, n_out)
    W = st.meta_w
    x = st.meta_x
    M = x.shape[0] - 1
    K = x.shape[1]
    if W[y, M * K] == -np.inf:  # y's first example: its class joins the softmax
        W[y, M * K] = 0.0
    p = x[M]
    meta_proba(st, n_in, n_out, p)
    step = st.fpar[META_RATE] * min(w, MAX_WEIGHT)
    l2 = st.fpar[META_L2]
    for o in range(n_out):
        if W[o, M * K] == -np.inf:  # (not learned yet: p_o = 0, no gradient, no penalty)
            continue
        g = p[o] - 1.0 if o == y else p[o]
        for m in range(M):
            for c in range(n_in):
                v = x[m, c]
                if v != 0.0:
                    j = m * K + c
                    W[o, j] -= step * (g * v + l2 * W[o, j])
        W[o, M * K] -= step * g
    st.meta_n[LEARNED] += 1


# after every kernel: one compiled version per argument type
one_specialisation(globals())
