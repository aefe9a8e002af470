"""Random feature subspaces: which features a leaf of a tree may learn and split on.

A Hoeffding tree with ``subspace_mode`` set (``TreeParams``) lets each leaf observe only a random
subset of the features, as the trees of an Adaptive Random Forest do (Gomes et al. 2017: each
leaf draws ``k`` of the ``M`` features when it first learns, and its statistics, its naive-Bayes
prediction and its split candidates are those ``k``; ``subspace_scope = SCOPE_LEAF``), or one
subset for the whole tree, as the members of Streaming Random Patches do (Gomes, Read & Bifet
2019; ``SCOPE_TREE``: a child inherits its parent's subset).

Nothing is drawn from a generator and nothing is kept but two small integers per leaf, held in
the leaf's ``thr`` (a leaf has no threshold; ``learners.tree.layout`` lists the field) as
``key * 2**CUT_BITS + stored cut``:

* the *key* (``KEY_BITS`` bits) names the leaf's draw: a tree's root has the key its reset gave it
  (0 for a new tree; ``tree_reset_keyed``: an ensemble keys each member's tree by the member and
  the example at which the tree was made), a child gets ``mix(parent's key, branch)``
  (``SCOPE_LEAF``) or its parent's key and cut (``SCOPE_TREE``);
* feature ``f`` (numeric feature j is ``2j``, categorical feature a is ``2a + 1``) has the score
  ``feature_score(seed, key, f)``, a 26-bit hash;
* the *cut* is fixed when the leaf first learns an example: the ``k``-th lowest score among the
  features that example has (``k = subspace_size(P, F)`` of those ``F``), stored plus one (0: not
  fixed yet). The leaf's subspace is every feature whose score is at most the cut: the ``k``
  features of that first example, and any feature that first arrives later with a score as low
  (a stream's new feature joins a fraction ``k / F`` of the leaves).

So a leaf's subspace is a pure function of (seed, key, the features of its first example): the same stream gives the same subspaces in one call or in batches of any size, after
recovery and on a replica. ``thr`` is saved with the tree, so a loaded tree goes on with them.

*Dealt* roots (``dealt_thr``; Streaming Random Patches' first trees): a forest's first trees
should not share a subspace while there are enough subsets to go round (MOA's SRP deals the
C(F, k) subsets without repeats to its members). The root of member d's first tree holds the
stored cut ``DEAL`` and the key d until its first example; then ``dealt_key`` deals the
members in order, 0 to d: member j takes the first key of the sequence ``deal_key(j, 0),
deal_key(j, 1), ...`` whose subspace (under the seed, among that example's F features) no
member before it took, and member d keeps its key and cut as any tree would. Members d >=
C(F, k) take member (d mod C(F, k))'s subspace (each subset at most ceil(M / C(F, k)) times,
as MOA's cyclic copies); members from ``DEAL_MEMBERS`` on draw independently. So the dealt
subspaces are a pure function of (seed, member, the features of the tree's first example),
distinct among members whose first trees start on examples with the same features.
"""

from __future__ import annotations

import math

import numba as nb
import numpy as np

from learners.jit import one_specialisation

MODE_ALL, MODE_COUNT, MODE_FRACTION, MODE_SQRT, MODE_LOG2 = 0, 1, 2, 3, 4
SCOPE_LEAF, SCOPE_TREE = 0, 1
CUT_BITS = 27  # stored cut + 1 in [1, 2**26]: 2**26 admits every score
KEY_BITS = 25  # key * 2**27 + stored cut < 2**52: exact in the float64 ``thr``
SCORE_BITS = 26
CUT_MASK = (1 << CUT_BITS) - 1
KEY_MASK = (1 << KEY_BITS) - 1
ALL = 1 << SCORE_BITS  # a stored cut that admits every feature (k >= F)
DEAL = ALL + 1  # a stored cut not fixed yet, of a dealt root whose key is its member (dealt_thr)
DEAL_MEMBERS = 1024  # members dealt distinct subspaces; later ones draw independently
_SUBSETS_CAP = 1 << 62  # n_subsets saturates here
_DEAL_TRIES = 1 << 20  # keys tried for one member before it takes a repeat (never reached)

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_S30 = np.uint64(30)
_S27 = np.uint64(27)
_S31 = np.uint64(31)
_SCORE_SHIFT = np.uint64(64 - SCORE_BITS)
_TAG = 16  # added to a branch before hashing (OTHER_BRANCH is -3)


@nb.njit(cache=True, inline="always")
def _mix(z):
    z = (z ^ (z >> _S30)) * _M1
    z = (z ^ (z >> _S27)) * _M2
    return z ^ (z >> _S31)


@nb.njit(cache=True, inline="always")
def score_base(seed, key):
    """The part of ``feature_score`` shared by every feature of one leaf."""
    h = _mix(np.uint64(seed) + _GOLDEN)
    return _mix(h ^ (np.uint64(key) * _M2 + _GOLDEN))


@nb.njit(cache=True, inline="always")
def score_of(base, fid):
    """Feature ``fid``'s score (26 bits) at a leaf whose ``score_base`` is ``base``."""
    return np.int64(_mix(base ^ (np.uint64(fid) + _M2)) >> _SCORE_SHIFT)


@nb.njit(cache=True)
def feature_score(seed, key, fid):
    """Feature ``fid``'s score at a leaf whose key is ``key`` (module doc)."""
    return score_of(score_base(seed, key), fid)


@nb.njit(cache=True)
def subspace_size(P, F):
    """k: how many of ``F`` features a leaf draws (``subspace_mode`` / ``subspace_size``):
    a count, a fraction of F (rounded half up, as MOA), round(sqrt(F)) + 1 (MOA's former
    default for ARF), round(log2(F)) + 1; within [1, F], and at least 2 for a tree's subspace
    (``SCOPE_TREE``)."""
    mode = P.subspace_mode
    v = P.subspace_size
    if mode == MODE_COUNT:
        k = int(v)
    elif mode == MODE_FRACTION:
        k = int(math.floor(v * F + 0.5))
    elif mode == MODE_SQRT:
        k = int(math.floor(math.sqrt(F) + 0.5)) + 1
    elif mode == MODE_LOG2:
        k = int(math.floor(math.log2(max(F, 1)) + 0.5)) + 1
    else:
        k = F
    # a tree's one subspace has at least two features (MOA's StreamingRandomPatches: "+1 when
    # that is < 2"), a leaf's at least one
    return min(max(k, 2 if P.subspace_scope == SCOPE_TREE else 1), F)


@nb.njit(cache=True)
def present_features(xn, xc):
    """The ids of the features a row has (numeric j: 2j, categorical a: 2a + 1), in that order."""
    F = 0
    for j in range(xn.shape[0]):
        if not np.isnan(xn[j]):
            F += 1
    for a in range(xc.shape[0]):
        if xc[a] >= 0:
            F += 1
    fids = np.empty(F, np.int64)
    i = 0
    for j in range(xn.shape[0]):
        if not np.isnan(xn[j]):
            fids[i] = 2 * j
            i += 1
    for a in range(xc.shape[0]):
        if xc[a] >= 0:
            fids[i] = 2 * a + 1
            i += 1
    return fids


@nb.njit(cache=True)
def subset_cut(seed, key, fids, k):
    """(the k-th lowest score of features ``fids`` under (seed, key), a hash of the subspace
    that cut admits among them: equal subspaces, equal hashes)."""
    base = score_base(seed, key)
    F = fids.shape[0]
    scores = np.empty(F, np.int64)
    for i in range(F):
        scores[i] = score_of(base, fids[i])
    cut = np.sort(scores)[k - 1]
    h = np.uint64(0)
    for i in range(F):
        if scores[i] <= cut:
            h ^= _mix(np.uint64(fids[i]) + _GOLDEN)
    return cut, h


@nb.njit(cache=True)
def n_subsets(F, k):
    """C(F, k), saturating at 2**62."""
    c = 1
    for i in range(k):
        if c > _SUBSETS_CAP // max(F - i, 1):
            return _SUBSETS_CAP
        c = c * (F - i) // (i + 1)
    return c


@nb.njit(cache=True)
def deal_key(j, attempt):
    """Member j's ``attempt``-th candidate key of a dealt root (``KEY_BITS`` bits)."""
    h = _mix(_mix(np.uint64(j) + _GOLDEN) ^ (np.uint64(attempt) * _M1 + _M2))
    return np.int64(h >> np.uint64(64 - KEY_BITS))


@nb.njit(cache=True)
def _taken(table, h):
    """Whether hash h is in the open-addressing ``table`` (0: empty); adds it if not."""
    h = h | np.uint64(1)  # (0 marks an empty entry)
    size = table.shape[0]
    i = np.int64(h & np.uint64(size - 1))
    while table[i] != 0:
        if table[i] == h:
            return True
        i = (i + 1) & (size - 1)
    table[i] = h
    return False


@nb.njit(cache=True)
def dealt_key(seed, d, fids, k):
    """The key of member d's dealt root among features ``fids`` (module doc, "Dealt roots")."""
    C = n_subsets(fids.shape[0], k)
    target = d % C if d >= C else d
    if target >= DEAL_MEMBERS:
        return deal_key(target, 0)
    size = 4
    while size < 2 * (target + 1):
        size *= 2
    table = np.zeros(size, np.uint64)
    key = deal_key(0, 0)
    for j in range(target + 1):
        for attempt in range(_DEAL_TRIES):
            key = deal_key(j, attempt)
            if not _taken(table, subset_cut(seed, key, fids, k)[1]):
                break
    return key


@nb.njit(cache=True)
def leaf_cut(T, P, m, node, xn, xc):
    """The highest score a feature may have to be learned at leaf ``node`` of member m (-1:
    none yet), fixing it from this row (module doc) when the leaf has none."""
    t = np.int64(T.thr[m, node])
    stored = t & CUT_MASK
    if stored != 0 and stored != DEAL:
        return stored - 1
    fids = present_features(xn, xc)
    F = fids.shape[0]
    if F == 0:  # nothing to draw from: fixed by the first row that has a feature
        return -1
    k = subspace_size(P, F)
    key = t >> CUT_BITS
    if k >= F:
        cut = ALL - 1
    else:
        if stored == DEAL:
            key = dealt_key(P.subspace_seed, key, fids, k)
        cut = subset_cut(P.subspace_seed, key, fids, k)[0]
    T.thr[m, node] = np.float64(key * (CUT_MASK + 1) + cut + 1)
    return cut


@nb.njit(cache=True)
def child_thr(P, parent_thr, branch):
    """A new child's ``thr`` under a split whose leaf held ``parent_thr``: the parent's key and
    cut (``SCOPE_TREE``), or a key of its own drawn from the parent's and the branch, its cut
    fixed by its first row (``SCOPE_LEAF``)."""
    if P.subspace_scope == SCOPE_TREE:
        return parent_thr
    key = np.int64(parent_thr) >> CUT_BITS
    h = _mix(_mix(np.uint64(key) + _GOLDEN) ^ (np.uint64(branch + _TAG) * _M1))
    return np.float64((np.int64(h >> np.uint64(64 - KEY_BITS)) & KEY_MASK) * (CUT_MASK + 1))


@nb.njit(cache=True)
def reset_thr(key):
    """A fresh root's ``thr`` for a tree reset with ``key`` (any integer; its low bits kept)."""
    return np.float64((np.int64(key) & KEY_MASK) * (CUT_MASK + 1))


@nb.njit(cache=True)
def dealt_thr(member):
    """A fresh root's ``thr`` whose subspace member ``member`` of a forest is dealt (module doc,
    "Dealt roots"; member < 2**KEY_BITS)."""
    return np.float64(np.int64(member) * (CUT_MASK + 1) + DEAL)


one_specialisation(globals())  # after every kernel: one compiled version per argument type
