"""Prediction: a member's class probabilities for one example at its leaf (majority class, naive
Bayes, adaptive naive Bayes, a decision stump), sparse over the leaf's classes, and the route
hint that lets a learn of the same example reuse them (``tree_proba``).
"""

from __future__ import annotations

import math

import numba as nb
import numpy as np

from learners.jit import one_specialisation

from .layout import (
    CATEGORICAL_SPLIT,
    HINT_BEST,
    HINT_CLASSES,
    HINT_LEAF,
    HINT_NB,
    KEY_FEATURE,
    KEY_OBSERVER,
    KEY_VALUE,
    LEAF,
    LOG2PI_HALF,
    MEAN,
    NB_ZERO_SKIP,
    NO_NB,
    NUM_STATS,
    NUMERIC_SPLIT,
    PRED_MC,
    PRED_NB,
    PRED_STUMP,
    PRODUCT_FOLD,
    SETTLED,
    VAR,
    VAR_FOLD,
    W,
)
from .routing import sort_to_leaf
from .rows import (
    has_weight,
    index_find,
    index_get,
    n_below,
    node_weight,
    row_find,
    stat_key,
    weights_below,
)
from .statistics import (
    best_splits,
    gaussian_cache,
    has_code,
    has_number,
    set_variance,
    weight_below,
)


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
def nb_proba(T, P, m, node, xn, xc, n_classes, pk, pv):
    """Naive Bayes at a leaf: class priors from the leaf's weights, Laplace-smoothed category
    likelihoods ((n + 1) / (n_class + V) with V the values seen at the leaf), Gaussian numeric
    likelihoods (unbiased weighted variance; a class with zero variance, one value so far however
    heavily weighted, has density 1 at its value and 0 elsewhere, as MOA's GaussianEstimator,
    or with ``P.nb_zero_variance == NB_ZERO_SKIP`` no term for that feature, as river's
    ``do_naive_bayes_prediction``). Over the leaf's classes only: the statistics rows hold a
    subset of them, merged in class order.

    (``error_model="numpy"``: no divisor here can be 0 -- n_c + V >= 1, variances are > 0 and the
    normaliser >= 1 -- so numba's check of each divisor, one compare per class and feature, is
    left out; the answers are the same.)

    (One function of ~150 lines, on purpose: it runs once per member and prediction, and each
    of its two parts, categories and numbers, reads the struct's fields it needs once, into
    locals, only for rows that have such values; split into calls, each call would pass the
    struct and the scratch again, a reference count each, in the hottest loop of naive Bayes.)"""
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
        point_mass = P.nb_zero_variance != NB_ZERO_SKIP
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
                    if z != 0.0 and point_mass:  # (skip: no term, as if the value were unknown)
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
    """Prediction at a leaf. When naive Bayes is computed, ``hint[m, HINT_NB]`` = its argmax, so that
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
            return nb_proba(T, P, m, node, xn, xc, n_classes, pk, pv)
        return normalize_node(T, m, node, n_classes, pk, pv)
    # NBA: naive Bayes unless majority class has been more accurate at this leaf (MOA's rule)
    s = T.slot[m, node]
    if T.mc_ok[m, s] > T.nb_ok[m, s] or not enough:
        return normalize_node(T, m, node, n_classes, pk, pv)
    n = nb_proba(T, P, m, node, xn, xc, n_classes, pk, pv)
    hint[m, HINT_NB] = argmax(
        pk, pv, n
    )  # (tree_learn reads it only if hint[m, HINT_LEAF] is this leaf)
    return n


@nb.njit(cache=True)
def tree_proba(T, P, m, xn, xc, n_classes, code_attr, pk, pv, hint):
    """Class probabilities of member m for one example, sparse: class codes into ``pk``, their
    probabilities into ``pv`` (both at least as long as the classes of any leaf); returns their
    number, 0 if the member has no prediction.

    ``hint`` ([M, 4]) is what is known of this example in member m's *current* state, for
    ``hint[m, HINT_CLASSES]`` classes (a missing value's route depends on them): ``hint[m, HINT_LEAF]`` the leaf it
    reaches (-1: not known), ``hint[m, HINT_NB]`` that leaf's naive-Bayes argmax and ``hint[m, HINT_BEST]``
    the argmax of this function's answer (NO_NB: not computed). ``tree_proba``,
    ``tree_learn`` and ``tree_best`` fill and use it (so the example is routed once for
    predicting and learning it); callers reset ``hint[:, HINT_LEAF] = -1`` before each new example, and
    ``hint[m, HINT_LEAF] = -1`` when they change member m otherwise (``tree_reset``)."""
    node = hint[m, HINT_LEAF]
    if node < 0 or hint[m, HINT_CLASSES] != n_classes:
        node, last, final = sort_to_leaf(T, P, m, xn, xc, n_classes, False)
        if T.kind[m, node] != LEAF or not has_weight(T, m, node, n_classes):
            return normalize_node(T, m, last, n_classes, pk, pv)
        if not final:  # (learning would route it elsewhere)
            return leaf_proba(T, P, m, node, xn, xc, n_classes, code_attr, pk, pv, hint)
        hint[m, HINT_LEAF] = node
        hint[m, HINT_NB] = NO_NB
        hint[m, HINT_CLASSES] = n_classes
    n = leaf_proba(T, P, m, node, xn, xc, n_classes, code_attr, pk, pv, hint)
    hint[m, HINT_BEST] = argmax(pk, pv, n)
    return n


@nb.njit(cache=True)
def tree_best(T, P, m, xn, xc, n_classes, code_attr, pk, pv, hint):
    """``argmax`` of ``tree_proba``'s answer (-1: no prediction), from ``hint`` when member m
    answered this example in its current state already (``pk``/``pv`` are then not written)."""
    if (
        hint[m, HINT_LEAF] >= 0
        and hint[m, HINT_CLASSES] == n_classes
        and hint[m, HINT_BEST] != NO_NB
    ):
        return hint[m, HINT_BEST]
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


one_specialisation(globals())  # after every kernel: one compiled version per argument type
