"""The layout of a bank of M incremental trees held in arrays: its constants, the arrays
(``TreeState``) and the parameters (``TreeParams``) the kernels of :mod:`learners.tree` read.

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
kernel reports that it needs room, see ``has_room``, except the two class-entry pools, which the
kernels grow themselves). Statistics are *sparse* on every axis: a leaf holds rows only for the
features and values that reached it, and a row holds entries only for the classes that reached
it — never a block over the global vocabulary or over all classes.

* nodes ``[M, N]``: kind (0 leaf, 1 numeric split, 2 categorical split), attr, thr (a numeric
  split's threshold; in a tree with random feature subspaces a leaf's or categorical split's
  subspace key and cut, :mod:`learners.tree.subspace`, else 0), slot (leaf
  statistics slot or -1), child (first child), sibling (next sibling), branch (0/1 for numeric
  splits, the category code for categorical ones), depth; class weights in ``d_at``/``d_len``;
  a split's ``merit`` (the split criterion's gain the Hoeffding test chose it with, see
  ``learn.attempt_split``; 0.0 at a leaf, ``UNKNOWN_MERIT`` for a split of a state saved before
  merits were kept) and ``split_seen`` (the model's example count when it split: the example
  number ``seq`` of the example whose learning split it, + 1; ``NO_SPLIT_SEEN`` at a leaf and
  for a split of unknown time). Learning writes these two and never reads them (feature
  importance does, ``learners.tree.explain``).
* leaf slots ``[M, L]``: ``last`` weight at the last split attempt, ``mc_ok``/``nb_ok`` correct
  weight of the two leaf predictors, and the heads of two lists: the leaf's categorical features
  (``f_head``) and its numeric observers (``o_head``).
* categorical feature rows ``[M, F]`` (one per (leaf, feature) seen): observed weight per class
  in ``fw_at``/``fw_len``, ``nvals`` distinct values seen, ``f_attr`` the feature, ``v_head`` its
  list of value rows.
* value rows ``[M, E]`` (one per (leaf, category code) seen): weight per class in
  ``vw_at``/``vw_len``, ``v_code`` the code.
* numeric observers ``[M, O]`` (one per (leaf, numeric feature) seen): one Gaussian estimator per
  class in ``g_at``/``g_len`` (weight, mean, M2, min, max, and the naive-Bayes variance, cached:
  ``o_fresh`` says which of them are stale, see ``gaussian_cache``; a seventh float, LOGVAR, held
  the variance's log until ``nb_proba`` took one log per class; it is no longer written or read,
  and stays so that saved states keep their layout), ``o_attr`` the feature.

Class entries. A row's per-class statistics are one *block* of a per-member pool: ``wc``/``wv``
(class code, weight) for the weight rows of nodes, feature rows and value rows, ``gc``/``gv``
(class code, ``NUM_STATS`` floats) for the Gaussian observers. ``*_at`` is the block's first
entry (-1: none) and ``*_len`` its number of entries, sorted by class code; the block holds
``block_cap(len)`` entries (0, 1, 2, 4, 8, ...). A class new to a row is sorted in; a full block
moves to a new one of twice the size at the pool's end and its old entries become garbage
(``w_dead``/``g_dead``). A member's blocks are compacted when at least half of what it used is
garbage (decided on those counts only, so the layout never depends on capacities); a pool out of
room doubles (for every member; ``pgen`` counts the
reallocations so that Python picks the new arrays up). So a row costs O(classes it saw) bytes and
a leaf's prediction O(classes seen at the leaf), and every sum over classes runs in class-code
order over the entries present: the same floating-point sums as over the dense ``[.., C]``
blocks this replaced (absent classes added 0.0, which changes no sum), hence the same results.
Every entry present has weight > 0 (entries are created by learning with w > 0, or copied from a
positive estimate when a leaf splits), so "the node has weight" is "it has an entry". A leaf's
total weight is kept approximately in ``wsum`` (derived, never saved) so that the grace-period
test sums the leaf's entries in class order only when the total may have reached the threshold.

Outputs. ``tree_proba`` writes a member's probabilities sparsely: class codes ``pk`` and values
``pv`` (the classes of the leaf, in code order) and returns their number (0: no prediction).

Lists are singly linked through ``*_next`` and kept sorted by key (feature, code) so that every
sum runs in the order of the dense layout it replaced: an item whose key is above the list's tail
is appended (the usual case: codes are handed out in order of first appearance), others wait in a
``*_pend`` list merged in by ``list_sort`` before the list is read in order. Freed rows go on
per-pool free lists (``*_freed``, threaded through ``*_next``). An index, rebuilt on load and
never saved, finds a leaf's rows: ``f_of [M, L, a]`` / ``o_of [M, L, j]`` for the first
``DIRECT`` features (one load in the hot loops), and for the rest and for values a per-member
open-addressing hash table (``hkey``/``hval``, linear probing, backward-shift deletion) keyed by
(slot, kind, id).

Saved state. ``canonical`` gives what ``to_state`` saves: each member's live rows renumbered in
the order of a walk of its tree and its class blocks laid out as a compaction would, without
freed rows, dead entries or capacity (so a state depends only on what the model holds); every
list keeps its items, order and pending part, so a loaded copy goes on exactly.

Codes: ``xn`` numeric values (NaN = missing), ``xc`` category codes (-1 missing, -2 unseen).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

LEAF, NUMERIC_SPLIT, CATEGORICAL_SPLIT = 0, 1, 2
PRED_MC, PRED_NB, PRED_NBA, PRED_STUMP = 0, 1, 2, 3
# naive Bayes' rule for a class whose Gaussian has no variance (one value, however heavily
# weighted; ``predict.nb_proba``): a point mass (MOA) or no term for that feature (river)
NB_ZERO_POINT, NB_ZERO_SKIP = 0, 1
CRIT_INFO_GAIN, CRIT_GINI = 0, 1
W, MEAN, M2, MIN, MAX, VAR, LOGVAR = 0, 1, 2, 3, 4, 5, 6
NO_NB = -2  # hint[m, HINT_NB] / [m, HINT_BEST]: not computed (argmax gives -1 for "none")
SETTLED = 2  # o_fresh: the variances are fresh and the pooled variance is positive for good
NUM_STATS = 7
WPOOL, GPOOL = 0, 1  # the class-entry pools: weights, Gaussian estimators
KEY_VALUE, KEY_FEATURE, KEY_OBSERVER, KEY_CHILD = 0, 1, 2, 3  # kinds of index keys
OTHER_BRANCH = -3  # branch of a categorical split shared by the values it has no branch for
ID_BITS = 36  # a key is (slot << 38) | (id << 2) | kind: ids < 2**36, slots < 2**25
MAX_ID = 1 << ID_BITS
MAX_SLOTS = 1 << 25
DIRECT = 32  # features (of each kind) whose rows a leaf finds through f_of / o_of
PRODUCT_FOLD = 1e-250  # nb_proba takes the log of a product of quotients before it gets smaller
VAR_FOLD = 1e-150  # and the log of a product of variances before it leaves [1e-150, 1e150]
WSUM_SLACK = 1e-6  # relative error bound of the running leaf totals ``wsum`` (see tree_learn)
UNKNOWN_MERIT = -1.0  # ``merit`` of a split made before merits were kept (a migrated state)
NO_SPLIT_SEEN = -1  # ``split_seen`` of a leaf, or of a split whose time is not known
NODE_FIELDS = ("kind", "attr", "thr", "slot", "child", "sibling", "branch", "depth", "d_at",
               "d_len", "merit", "split_seen", "n_nodes")  # fmt: skip
SPLIT_RECORD = ("merit", "split_seen")  # node arrays a state saved before them does not have
SLOT_FIELDS = ("last", "mc_ok", "nb_ok", "f_head", "f_tail", "f_pend", "o_head", "o_tail",
               "o_pend", "free", "n_free", "n_slots")  # fmt: skip
FEATURE_FIELDS = ("fw_at", "fw_len", "nvals", "f_attr", "f_next", "v_head", "v_tail", "v_pend",
                  "n_f", "f_freed")  # fmt: skip
VALUE_FIELDS = ("vw_at", "vw_len", "v_code", "v_next", "n_v", "v_freed")
OBSERVER_FIELDS = ("g_at", "g_len", "o_fresh", "o_attr", "o_next", "n_o", "o_freed")
POOL_FIELDS = ("wc", "wv", "w_used", "w_dead", "gc", "gv", "g_used", "g_dead")
STATE_FIELDS = (NODE_FIELDS + SLOT_FIELDS + FEATURE_FIELDS + VALUE_FIELDS + OBSERVER_FIELDS
                + POOL_FIELDS)  # fmt: skip
INDEX_FIELDS = ("hkey", "hval", "n_keys", "f_of", "o_of", "width", "wsum", "pgen")  # never saved
PARAM_FIELDS = (
    "grace_period", "delta", "tau", "criterion", "leaf_prediction", "nb_threshold",
    "max_depth", "max_nodes", "n_split_points", "min_branch_frac", "subspace_mode",
    "subspace_size", "subspace_scope", "subspace_seed", "nb_zero_variance",
)  # fmt: skip
# the columns of a route hint, ``hint[m, :]`` (see ``predict.tree_proba``): the leaf the example
# reaches, that leaf's naive-Bayes argmax, for how many classes, the prediction's argmax
HINT_LEAF, HINT_NB, HINT_CLASSES, HINT_BEST = 0, 1, 2, 3
HINT_WIDTH = 4
WIDTH_CAT, WIDTH_NUM = 0, 1  # the entries of ``width``: features per row of each kind (has_room)


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
    d_at: np.ndarray
    d_len: np.ndarray
    merit: np.ndarray
    split_seen: np.ndarray
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
    fw_at: np.ndarray
    fw_len: np.ndarray
    nvals: np.ndarray
    f_attr: np.ndarray
    f_next: np.ndarray
    v_head: np.ndarray
    v_tail: np.ndarray
    v_pend: np.ndarray
    n_f: np.ndarray
    f_freed: np.ndarray
    vw_at: np.ndarray
    vw_len: np.ndarray
    v_code: np.ndarray
    v_next: np.ndarray
    n_v: np.ndarray
    v_freed: np.ndarray
    g_at: np.ndarray
    g_len: np.ndarray
    o_fresh: np.ndarray
    o_attr: np.ndarray
    o_next: np.ndarray
    n_o: np.ndarray
    o_freed: np.ndarray
    wc: np.ndarray
    wv: np.ndarray
    w_used: np.ndarray
    w_dead: np.ndarray
    gc: np.ndarray
    gv: np.ndarray
    g_used: np.ndarray
    g_dead: np.ndarray
    hkey: np.ndarray
    hval: np.ndarray
    n_keys: np.ndarray
    f_of: np.ndarray
    o_of: np.ndarray
    width: np.ndarray
    wsum: np.ndarray
    pgen: np.ndarray


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
    # random feature subspaces (``learners.tree.subspace``): none by default
    subspace_mode: int = 0  # subspace.MODE_ALL: every feature
    subspace_size: float = 0.0  # the count or fraction of MODE_COUNT / MODE_FRACTION
    subspace_scope: int = 0  # subspace.SCOPE_LEAF (a draw per leaf) or SCOPE_TREE
    subspace_seed: int = 0  # the key of the draws (an ensemble's seed)
    nb_zero_variance: int = 0  # NB_ZERO_POINT (MOA's point mass) or NB_ZERO_SKIP (river's)


assert TreeState._fields == STATE_FIELDS + INDEX_FIELDS and TreeParams._fields == PARAM_FIELDS

LOG2PI_HALF = 0.5 * math.log(2.0 * math.pi)
INV_LN2 = 1.0 / math.log(2.0)
