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

Layout (leading axis = member ``m``):

* nodes ``[M, N]``: kind (0 leaf, 1 numeric split, 2 categorical split), attr, thr, slot (leaf
  statistics slot or -1), child (first child), sibling (next sibling), branch (0/1 for numeric
  splits, the category code for categorical ones), depth; ``dist [M, N, C]`` class weights.
* leaf slots ``[M, L]``: ``cat [M, L, K, C]`` weight per category code and class, ``catw [M, L, A, C]``
  observed weight per categorical feature and class, ``nvals [M, L, A]`` distinct values seen,
  ``num [M, L, J, C, 7]`` (weight, mean, M2, min, max, and the naive-Bayes variance and its log,
  cached lazily: 0 = stale) per numeric feature and class, ``last``
  weight at the last split attempt, ``mc_ok``/``nb_ok`` correct weight of the two leaf predictors.

Codes: ``xn`` numeric values (NaN = missing), ``xc`` category codes (-1 missing, -2 unseen).
"""

from __future__ import annotations

import math
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

STATE_FIELDS = (
    "kind", "attr", "thr", "slot", "child", "sibling", "branch", "depth", "dist", "n_nodes",
    "cat", "catw", "nvals", "num", "last", "mc_ok", "nb_ok", "free", "n_free", "n_slots",
)  # fmt: skip
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
    cat: np.ndarray
    catw: np.ndarray
    nvals: np.ndarray
    num: np.ndarray
    last: np.ndarray
    mc_ok: np.ndarray
    nb_ok: np.ndarray
    free: np.ndarray
    n_free: np.ndarray
    n_slots: np.ndarray


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


assert TreeState._fields == STATE_FIELDS and TreeParams._fields == PARAM_FIELDS


@structref.register
class BankType(types.StructRef):
    """Numba type of a bank: all state arrays and parameters in one struct, so a kernel call
    unboxes one object (~1 µs) instead of thirty (~5 µs)."""

    def preprocess_fields(self, fields):
        return tuple((name, types.unliteral(typ)) for name, typ in fields)


class Bank(structref.StructRefProxy):
    """Python handle of a ``BankType``; Python reads the arrays through ``TreeState``."""


structref.define_proxy(Bank, BankType, list(STATE_FIELDS + PARAM_FIELDS))


@nb.njit(cache=True)
def _make_bank(kind, attr, thr, slot, child, sibling, branch, depth, dist, n_nodes, cat, catw,
               nvals, num, last, mc_ok, nb_ok, free, n_free, n_slots, grace_period, delta, tau,
               criterion, leaf_prediction, nb_threshold, max_depth, max_nodes, n_split_points,
               min_branch_frac):  # fmt: skip
    return Bank(kind, attr, thr, slot, child, sibling, branch, depth, dist, n_nodes, cat, catw,
                nvals, num, last, mc_ok, nb_ok, free, n_free, n_slots, grace_period, delta, tau,
                criterion, leaf_prediction, nb_threshold, max_depth, max_nodes, n_split_points,
                min_branch_frac)  # fmt: skip


def make_bank(T: TreeState, P: TreeParams) -> Bank:
    """One struct over the arrays of ``T`` (shared memory) and the parameters ``P``."""
    p = P._replace(
        grace_period=float(P.grace_period), delta=float(P.delta), tau=float(P.tau),
        criterion=int(P.criterion), leaf_prediction=int(P.leaf_prediction),
        nb_threshold=float(P.nb_threshold), max_depth=int(P.max_depth),
        max_nodes=int(P.max_nodes), n_split_points=int(P.n_split_points),
        min_branch_frac=float(P.min_branch_frac),
    )  # fmt: skip
    return _make_bank(*T, *p)  # type: ignore[call-arg]


LOG2PI_HALF = 0.5 * math.log(2.0 * math.pi)
INV_LN2 = 1.0 / math.log(2.0)


# --------------------------------------------------------------------------- allocation helpers
@nb.njit(cache=True)
def alloc_slot(T, m):
    """Take a zeroed leaf-statistics slot for member m."""
    if T.n_free[m] > 0:
        T.n_free[m] -= 1
        s = T.free[m, T.n_free[m]]
    else:
        s = T.n_slots[m]
        T.n_slots[m] += 1
    T.cat[m, s] = 0.0
    T.catw[m, s] = 0.0
    T.nvals[m, s] = 0
    T.num[m, s] = 0.0
    T.num[m, s, :, :, MIN] = np.inf
    T.num[m, s, :, :, MAX] = -np.inf
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
def has_room(T, P, need):
    """True if every member can take ``need`` more nodes and slots without growing arrays."""
    N = T.kind.shape[1]
    L = T.last.shape[1]
    for m in range(T.kind.shape[0]):
        if T.n_nodes[m] + need > N:
            return False
        if (L - T.n_slots[m]) + T.n_free[m] < need:
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
def find_child(T, m, node, branch):
    c = T.child[m, node]
    while c >= 0:
        if T.branch[m, c] == branch:
            return c
        c = T.sibling[m, c]
    return -1


@nb.njit(cache=True)
def sort_to_leaf(T, m, xn, xc, n_classes, grow):
    """Route an example from the root. Returns (node, last_nonempty_node).

    Missing value at a split -> the heaviest child. Unseen category -> with ``grow`` a new leaf
    branch is created (MOA's multiway behaviour); without it the walk stops at the split node.
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
            elif code < 0:
                nxt = -1
            else:
                nxt = find_child(T, m, node, code)
                if nxt < 0 and grow:
                    nxt = new_leaf(T, m, T.depth[m, node] + 1, code)
                    T.sibling[m, nxt] = T.child[m, node]
                    T.child[m, node] = nxt
        if nxt < 0:
            return node, last_nonempty
        node = nxt


# --------------------------------------------------------------------------- statistics
@nb.njit(cache=True)
def update_leaf(T, m, node, xn, xc, y, w, code_attr):
    # Scalar indexing throughout: numba array views cost ~5x in these hot loops.
    s = T.slot[m, node]
    T.dist[m, node, y] += w
    cat = T.cat
    for a in range(xc.shape[0]):
        code = xc[a]
        if code >= 0:
            before = 0.0
            for k in range(cat.shape[3]):
                before += cat[m, s, code, k]
            if before == 0.0:
                T.nvals[m, s, a] += 1
            cat[m, s, code, y] += w
            T.catw[m, s, a, y] += w
    num = T.num
    C = num.shape[3]
    for j in range(xn.shape[0]):
        v = xn[j]
        if not np.isnan(v):
            wn = num[m, s, j, y, W] + w
            d = v - num[m, s, j, y, MEAN]
            mean = num[m, s, j, y, MEAN] + d * (w / wn)
            num[m, s, j, y, MEAN] = mean
            num[m, s, j, y, M2] += w * d * (v - mean)
            num[m, s, j, y, W] = wn
            if v < num[m, s, j, y, MIN]:
                num[m, s, j, y, MIN] = v
            if v > num[m, s, j, y, MAX]:
                num[m, s, j, y, MAX] = v
            for k in range(C):
                num[m, s, j, k, VAR] = 0.0  # stale: nb_proba recomputes it when needed


@nb.njit(cache=True)
def gaussian_cache(num, m, s, j, C):
    """Naive-Bayes variance of every class for feature j at slot s (the unbiased weighted
    variance) and its log. A class with zero variance (one value so far) gets VAR = -1: its
    density is 1 at that value and 0 elsewhere, MOA's GaussianEstimator rule. A feature with zero
    pooled variance is uninformative and contributes nothing."""
    pw = 0.0
    pmean = 0.0
    pm2 = 0.0
    for k in range(C):
        wk = num[m, s, j, k, W]
        if wk > 0.0:
            nw = pw + wk
            dm = num[m, s, j, k, MEAN] - pmean
            pmean += dm * wk / nw
            pm2 += num[m, s, j, k, M2] + dm * dm * pw * wk / nw
            pw = nw
    if pm2 <= 0.0:
        # every observation at this leaf has the same value: the feature tells the classes
        # nothing, so its term is made exactly 0 (VAR = inf, LOGVAR = -log(2 pi))
        for k in range(C):
            num[m, s, j, k, VAR] = np.inf
            num[m, s, j, k, LOGVAR] = -2.0 * LOG2PI_HALF
        return
    for k in range(C):
        wk = num[m, s, j, k, W]
        if wk > 0.0:
            var = num[m, s, j, k, M2] / (wk - 1.0) if wk > 1.0 else 0.0
            if var > 0.0:
                num[m, s, j, k, VAR] = var
                num[m, s, j, k, LOGVAR] = math.log(var)
            else:
                num[m, s, j, k, VAR] = -1.0  # degenerate: a point mass at MEAN


@nb.njit(cache=True)
def normal_cdf(z):
    return 0.5 * math.erfc(-z / math.sqrt(2.0))


@nb.njit(cache=True)
def weight_below(num, m, s, j, k, t):
    """Estimated weight of observations <= t for one (feature, class) Gaussian estimator."""
    w = num[m, s, j, k, W]
    if w <= 0.0:
        return 0.0
    if t < num[m, s, j, k, MIN]:
        return 0.0
    if t >= num[m, s, j, k, MAX]:
        return w
    var = num[m, s, j, k, M2] / (w - 1.0) if w > 1.0 else 0.0
    if var <= 0.0:
        return w if t >= num[m, s, j, k, MEAN] else 0.0
    return w * normal_cdf((t - num[m, s, j, k, MEAN]) / math.sqrt(var))


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
def best_numeric_split(T, P, m, node, j, n_classes, pre_imp, pre_w, lr, best_lhs):
    """Best threshold for numeric feature j (MOA's Gaussian observer: n_split_points equally
    spaced candidates between the smallest and largest value seen). Returns (merit, threshold)."""
    s = T.slot[m, node]
    lo = np.inf
    hi = -np.inf
    num = T.num
    for k in range(n_classes):
        if num[m, s, j, k, W] > 0.0:
            if num[m, s, j, k, MIN] < lo:
                lo = num[m, s, j, k, MIN]
            if num[m, s, j, k, MAX] > hi:
                hi = num[m, s, j, k, MAX]
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
            b = weight_below(num, m, s, j, k, t)
            lr[0, k] = b
            lr[1, k] = num[m, s, j, k, W] - b
        mer = merit_binary(pre_imp, pre_w, lr, n_classes, P.criterion, P.min_branch_frac)
        if mer > best:
            best = mer
            best_t = t
            for k in range(n_classes):
                best_lhs[k] = lr[0, k]
    return best, best_t


@nb.njit(cache=True)
def categorical_merits(T, P, m, node, n_classes, code_attr, pre_imp, pre_w, out):
    """Merit of the multiway split on every categorical feature, written to ``out[a]``."""
    s = T.slot[m, node]
    A = T.catw.shape[2]
    n_codes = code_attr.shape[0]
    tot = np.zeros(A)
    post = np.zeros(A)
    nbig = np.zeros(A, dtype=np.int64)
    for a in range(A):
        for k in range(n_classes):
            tot[a] += T.catw[m, s, a, k]
    cat = T.cat[m, s]  # [K, C]: one view per call
    for code in range(n_codes):
        a = code_attr[code]
        w = 0.0
        for k in range(n_classes):
            w += cat[code, k]
        if w > 0.0:
            post[a] += impurity(cat, code, n_classes, P.criterion)
            if w >= P.min_branch_frac * tot[a]:
                nbig[a] += 1
    for a in range(A):
        if tot[a] <= 0.0 or nbig[a] < 2:
            out[a] = -np.inf
        else:
            out[a] = pre_imp / pre_w - post[a] / tot[a]


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
    J = T.num.shape[2]
    for j in range(J):
        mer, t = best_numeric_split(T, P, m, node, j, n_classes, pre_imp, pre_w, lr, cand_lhs)
        if mer > best:
            second = best
            best = mer
            bkind = NUMERIC_SPLIT
            battr = j
            bthr = t
            for k in range(n_classes):
                split_lhs[k] = cand_lhs[k]
        elif mer > second:
            second = mer
    A = T.catw.shape[2]
    merits = np.empty(A)
    categorical_merits(T, P, m, node, n_classes, code_attr, pre_imp, pre_w, merits)
    for a in range(A):
        mer = merits[a]
        if mer > best:
            second = best
            best = mer
            bkind = CATEGORICAL_SPLIT
            battr = a
            bthr = 0.0
        elif mer > second:
            second = mer
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
    A = min(xc.shape[0], T.catw.shape[2])
    for a in range(A):
        code = xc[a]
        if code < 0:
            continue
        V = T.nvals[m, s, a]
        if V == 0:
            continue  # feature never observed at this leaf
        seen = 0.0
        for k in range(n_classes):
            seen += cat[m, s, code, k]
        if seen <= 0.0:
            continue  # value never learned at this leaf: skipped, like an unseen value
        for k in range(n_classes):
            if dist[m, node, k] > 0.0:
                logp[k] += math.log((cat[m, s, code, k] + 1.0) / (T.catw[m, s, a, k] + V))
    num = T.num
    J = min(xn.shape[0], num.shape[2])
    for j in range(J):
        v = xn[j]
        if np.isnan(v):
            continue
        for k in range(n_classes):
            if dist[m, node, k] <= 0.0 or num[m, s, j, k, W] <= 0.0:
                continue
            if num[m, s, j, k, VAR] == 0.0:
                gaussian_cache(num, m, s, j, num.shape[3])
            z = v - num[m, s, j, k, MEAN]
            if num[m, s, j, k, VAR] < 0.0:  # point mass: density 1 at the value, 0 elsewhere
                if z != 0.0:
                    logp[k] = -np.inf
                continue
            logp[k] += (
                -0.5 * z * z / num[m, s, j, k, VAR] - 0.5 * num[m, s, j, k, LOGVAR] - LOG2PI_HALF
            )
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
        tmp = np.empty(n_classes)
        for k in range(n_classes):
            b = weight_below(T.num, m, s, battr, k, bthr)
            tmp[k] = b if xn[battr] <= bthr else T.num[m, s, battr, k, W] - b
        if normalize_into(tmp, n_classes, out):
            return True
    elif bkind == CATEGORICAL_SPLIT and battr < xc.shape[0] and xc[battr] >= 0:
        code = xc[battr]
        tot = 0.0
        for k in range(n_classes):
            tot += T.cat[m, s, code, k]
        if tot > 0.0:
            for k in range(n_classes):
                out[k] = T.cat[m, s, code, k] / tot
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
    node, last = sort_to_leaf(T, m, xn, xc, n_classes, False)
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
        for k in range(n_classes):  # both children from the feature's observer, as MOA
            b = lhs[k]
            rest = T.num[m, s, battr, k, W] - b
            T.dist[m, left, k] = b
            T.dist[m, right, k] = rest if rest > 0.0 else 0.0
        T.child[m, node] = left
        T.sibling[m, left] = right
    else:
        n_children = 0
        for code in range(code_attr.shape[0]):
            if code_attr[code] == battr:
                w = 0.0
                for k in range(n_classes):
                    w += T.cat[m, s, code, k]
                if w > 0.0:
                    n_children += 1
        if T.n_nodes[m] + n_children > P.max_nodes:
            return
        prev = -1
        for code in range(code_attr.shape[0]):
            if code_attr[code] != battr:
                continue
            w = 0.0
            for k in range(n_classes):
                w += T.cat[m, s, code, k]
            if w <= 0.0:
                continue
            c = new_leaf(T, m, depth + 1, code)
            for k in range(n_classes):
                T.dist[m, c, k] = T.cat[m, s, code, k]
            if prev < 0:
                T.child[m, node] = c
            else:
                T.sibling[m, prev] = c
            prev = c
    T.kind[m, node] = bkind
    T.attr[m, node] = battr
    T.thr[m, node] = bthr
    T.free[m, T.n_free[m]] = s
    T.n_free[m] += 1
    T.slot[m, node] = -1


@nb.njit(cache=True)
def tree_learn(T, P, m, xn, xc, y, w, n_classes, code_attr, scratch, hint):
    """Learn one example with weight w (> 0) in member m.

    ``hint[m]`` may hold (leaf, naive-Bayes argmax) computed by ``tree_proba`` on this same
    example and unchanged state; it is used instead of recomputing, then invalidated."""
    node, _ = sort_to_leaf(T, m, xn, xc, n_classes, True)
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
