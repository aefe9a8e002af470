"""Observers and statistics: a leaf learning an example (``update_leaf``: class weights,
categorical counts, Gaussian estimators), the naive-Bayes variance cache, and the split merits
(information gain or Gini) the Hoeffding test compares.
"""

from __future__ import annotations

import math

import numba as nb
import numpy as np

from learners.jit import one_specialisation

from .layout import (
    CATEGORICAL_SPLIT,
    CRIT_GINI,
    GPOOL,
    INV_LN2,
    KEY_FEATURE,
    KEY_OBSERVER,
    KEY_VALUE,
    M2,
    MAX,
    MEAN,
    MIN,
    NUM_STATS,
    NUMERIC_SPLIT,
    SETTLED,
    VAR,
    W,
)
from .rows import (
    add_feature,
    add_observer,
    add_value,
    add_weight,
    block_sum,
    entry_of,
    index_get,
    list_sort,
    n_below,
    row_find,
    stat_key,
    weights_below,
)
from .subspace import ALL, CUT_BITS, MODE_ALL, leaf_cut, score_base, score_of

SCORE_ALL = ALL - 1  # a cut every feature's score is within (``update_leaf``)


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
def update_leaf(T, P, m, node, xn, xc, y, w, code_attr):
    """Leaf ``node`` of member m learns a row with weight w: its class weights, each category's
    value row and feature row, each number's Gaussian estimator, and which cached variances go
    stale (``gaussian_cache``); in a tree with random subspaces only the features of the leaf's
    subspace (``learners.tree.subspace``). (One function of ~90 lines: the hot loop of learning,
    reading the struct's fields once, as ``nb_proba``.)"""
    # Scalar indexing throughout: numba array views cost ~5x in these hot loops.
    s = T.slot[m, node]
    add_weight(T, T.d_at, T.d_len, m, node, y, w)
    T.wsum[m, s] += w
    cut = SCORE_ALL  # every feature's score is below it: no subspace
    base = np.uint64(0)
    if P.subspace_mode != MODE_ALL:
        cut = leaf_cut(T, P, m, node, xn, xc)
        base = score_base(P.subspace_seed, np.int64(T.thr[m, node]) >> CUT_BITS)
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
            if code >= 0 and (cut == SCORE_ALL or score_of(base, 2 * a + 1) <= cut):
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
            if not np.isnan(v) and (cut == SCORE_ALL or score_of(base, 2 * j) <= cut):
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


one_specialisation(globals())  # after every kernel: one compiled version per argument type
