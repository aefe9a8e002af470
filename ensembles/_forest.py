"""Compiled kernels of the random forests: Adaptive Random Forest (Gomes et al. 2017) and
Streaming Random Patches (Gomes, Read & Bifet 2019), one algorithm with two kinds of trees.

The members are Hoeffding trees with random feature subspaces (``learners.tree.subspace``: a
draw per leaf for ARF, one per tree for SRP), held in one bank of ``2M`` trees: member m owns
slots m and M + m, one its foreground tree (``slots[FG, m]``), the other its background tree
(``slots[BG, m]``, -1 while it has none). ``fstate`` is a ``ForestState``. Per example:

1. prediction: each foreground tree's probabilities, weighted by the member's accuracy since
   its tree started, as MOA (``accuracy`` in percent; a member with accuracy 0 votes with weight
   1), or equally (``ipar[WEIGHTED] == 0``); the members' top classes are kept in ``mpred``;
2. each member's accuracy counts its prediction *before* learning (MOA's evaluator);
3. member m draws ``k ~ Poisson(lambda)`` keyed by (seed, example, m) (``TRAIN_ONCE``: k = 1,
   SRP's random subspaces); if ``k > 0`` its foreground tree learns the example with weight
   ``k w``, its background tree too, and its 0/1 error *after* learning goes into two ADWIN
   detectors: the warning detector (``warning_delta``) starts a fresh background tree (a new
   draw of subspaces), the drift detector (``drift_delta``) replaces the foreground tree by the
   background tree (or by a fresh tree when there is none) and starts the member's accuracy
   afresh (MOA's ``ARFBaseLearner``).

With ``vote="stacking"`` (``ipar[STACK] == 1``) the meta-learner of ``_stacking`` (the one bagging
and boosting run, over the arrays of ``st.meta``, an ``_adaptive.AdaptiveStruct``) replaces the
weighting of step 1: the vote keeps every member's foreground-tree probabilities
(``_stacking.keep_member``; background trees do not vote and are no input) and is the
meta-learner's softmax once it has learned an example (the average vote before); each learned
example is learned by the meta-learner on those probabilities, taken before any tree learns it,
before step 2 (``_stacking.meta_learn``). Input m is member m's foreground tree, whichever slot
it is in: after a drift, the tree that replaced it (the weights learned for the member stay).

Every draw is a pure function of the seed and the example number: the Poisson weights
(``_rng.poisson``) and the subspace keys of new trees (``tree_key``), so a replay of the same
stream gives the same forest, bit for bit.
"""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

import numba as nb
import numpy as np

from learners.compiled import (
    KERNEL_SOURCES,
    classes_after,
    classes_needed,
    has_room,
    io_label,
    keep_alive,
    predicted_from,
    sparse_buffers,
    tree_learn,
    tree_proba,
    tree_reset,
    tree_reset_keyed,
    unowned,
)
from learners.compiled import best_class as argmax
from learners.jit import one_specialisation

from . import _adaptive, _kernels, _rng, _stacking, adwin
from ._adaptive import CLOCK, MIN_LEN, RESET, REUSE, WINDOW, AdaptiveStruct, detect, record
from ._kernels import Example, Rows, Scratch, io_records, purge_stale_cache
from ._rng import poisson, uniform
from ._stacking import keep_member, meta_learn, meta_room, meta_vote
from .adwin import AdwinState, adwin_reset

purge_stale_cache(
    __file__,
    (
        *KERNEL_SOURCES,
        *(Path(str(m.__file__)) for m in (_rng, adwin, _kernels, _adaptive, _stacking)),
    ),
)

# ipar: [seed, weighted vote, training, window length, ADWIN clock, ADWIN min_len, reuse, stacked
# vote]; WINDOW, CLOCK, MIN_LEN and REUSE at the adaptive kernels' places (``_adaptive.record``
# and ``detect`` read them, ``adaptive.PredictionReusingRunner`` sets REUSE)
SEED, WEIGHTED, TRAIN = 0, 1, 2
assert (WINDOW, CLOCK, MIN_LEN, REUSE) == (3, 4, 5, 6)
STACK = 7
N_IPAR = 8
TRAIN_POISSON, TRAIN_ONCE = 0, 1
# fpar: [Poisson lambda, warning detectors' delta, drift detectors' delta]
LAMBDA, WARN_DELTA, DRIFT_DELTA = 0, 1, 2
FG, BG = 0, 1  # rows of ``slots``
CORRECT, SEEN = 0, 1  # rows of ``acc``
WARNINGS, DRIFTS, PROMOTED = 0, 1, 2  # rows of ``events``
KEY_TAG = 1 << 45  # the uniforms of tree keys: (seed, example, member, KEY_TAG + which)
KEY_SCALE = float(1 << 25)  # (learners.tree.subspace.KEY_BITS)
NEW_FOREST = 1 << 62  # the example number of the first trees' keys (beyond any real one)


class ForestState(NamedTuple):
    """What the forest kernels read and write besides the trees."""

    fpar: np.ndarray  # [3] LAMBDA, WARN_DELTA, DRIFT_DELTA
    adwin: AdwinState  # [2M] detectors: warning of member m at m, drift at M + m
    slots: np.ndarray  # [2, M] int64: foreground, background tree (-1: none) of member m
    acc: np.ndarray  # [2, M] float: weight predicted right and seen since the tree started
    events: np.ndarray  # [3, M] int64: warnings, drifts, background trees promoted
    mpred: np.ndarray  # [M] scratch: the members' top classes for the current row
    # the window of the members' predictions behind describe()'s diversity (the fields of
    # ``_adaptive.AdaptiveState`` of the same names, written by ``_adaptive.record``)
    win_pred: np.ndarray  # [W, M] int32: class predicted by member m (-1: none, RESET)
    win_y: np.ndarray  # [W] the true class
    win_ok: np.ndarray  # [M] correct predictions of member m in the window
    win_n: np.ndarray  # [M] counted predictions of member m in the window
    counters: np.ndarray  # [3] ring position, rows in the window, (unused)
    # the stacked vote's meta-learner (``_stacking``: its fields meta_w, meta_x, meta_n and
    # fpar; its other arrays are empty), which its kernels may grow
    meta: AdaptiveStruct


@nb.njit(cache=True)
def tree_key(seed, seq, m, which):
    """The subspace key of a tree that member m starts at example ``seq`` (``which``: 0 a
    background tree, 1 a replacement)."""
    return np.int64(uniform(seed, seq, m, KEY_TAG + which) * KEY_SCALE)


@nb.njit(cache=True, inline="always")
def member_weight(ipar, st, m):
    """Member m's vote weight: its accuracy in percent since its tree started (1 when that is
    0, as MOA), or 1 (``ipar[WEIGHTED] == 0``)."""
    if ipar[WEIGHTED] == 0 or st.acc[SEEN, m] <= 0.0:
        return 1.0
    a = 100.0 * st.acc[CORRECT, m] / st.acc[SEEN, m]
    return a if a > 0.0 else 1.0


@nb.njit(cache=True)
def forest_predict(B, ipar, st, xr, cr, n, sc, out_row):
    """The members' foreground trees' probabilities, each normalised and weighted
    (``member_weight``), summed and normalised; their top classes into ``st.mpred``. With the
    stacked vote every member's probabilities are kept (``st.meta``) and the meta-learner's
    vote replaces this one once it has learned an example."""
    stacking = ipar[STACK] == 1
    if stacking:
        meta_room(st.meta, n)
    out_row[:n] = 0.0
    total = 0.0
    pk, pv = sc.pk, sc.pv
    for m in range(st.mpred.shape[0]):
        k = tree_proba(B, B, st.slots[FG, m], xr, cr, n, sc.code_attr, pk, pv, sc.hint)
        if stacking:
            keep_member(st.meta, m, pk, pv, k)
        if k <= 0:
            st.mpred[m] = -1
            continue
        st.mpred[m] = argmax(pk, pv, k)
        mass = 0.0
        for i in range(k):
            mass += pv[i]
        if mass <= 0.0:
            continue
        wt = member_weight(ipar, st, m) / mass
        for i in range(k):
            out_row[pk[i]] += wt * pv[i]
        total += wt * mass
    if total > 0.0:
        for c in range(n):
            out_row[c] /= total
    if stacking:
        meta_vote(st.meta, n, out_row)


@nb.njit(cache=True)
def member_predictions(B, ipar, st, xr, cr, n, sc):
    """Each member's top class for the row (-1: none) into ``st.mpred`` (and with the stacked
    vote its probabilities into ``st.meta``), for a learn whose row was not predicted in the
    same call."""
    stacking = ipar[STACK] == 1
    if stacking:
        meta_room(st.meta, n)
    pk, pv = sc.pk, sc.pv
    for m in range(st.mpred.shape[0]):
        k = tree_proba(B, B, st.slots[FG, m], xr, cr, n, sc.code_attr, pk, pv, sc.hint)
        st.mpred[m] = argmax(pk, pv, k)
        if stacking:
            keep_member(st.meta, m, pk, pv, k)


@nb.njit(cache=True)
def start_background(B, ipar, st, m, seq, hint):
    """Member m's warning: a fresh background tree (a new draw of subspaces) in its other
    slot, replacing the one it may have; its warning detector empties."""
    M = st.mpred.shape[0]
    other = m + M if st.slots[FG, m] == m else m
    tree_reset_keyed(B, other, tree_key(ipar[SEED], seq, m, 0))
    hint[other, 0] = -1
    st.slots[BG, m] = other
    adwin_reset(st.adwin, m)
    st.events[WARNINGS, m] += 1


@nb.njit(cache=True)
def replace_tree(B, ipar, st, m, seq, hint):
    """Member m's drift: its background tree becomes its foreground tree (the old one is
    emptied), or without one a fresh tree replaces it; its accuracy starts afresh."""
    M = st.mpred.shape[0]
    fg = st.slots[FG, m]
    bg = st.slots[BG, m]
    if bg >= 0:
        st.slots[FG, m] = bg
        st.slots[BG, m] = -1
        tree_reset(B, fg)  # (its arrays' rows free for the next background tree)
        hint[bg, 0] = -1
        adwin_reset(st.adwin, m)  # (the background tree's detectors, fresh, as MOA)
        st.events[PROMOTED, m] += 1
    else:
        tree_reset_keyed(B, fg, tree_key(ipar[SEED], seq, m, 1))
    hint[fg, 0] = -1
    adwin_reset(st.adwin, M + m)
    st.acc[CORRECT, m] = 0.0
    st.acc[SEEN, m] = 0.0
    st.events[DRIFTS, m] += 1
    for t in range(st.win_pred.shape[0]):  # the window counts the new tree only
        st.win_pred[t, m] = RESET
    st.win_ok[m] = 0
    st.win_n[m] = 0


@nb.njit(cache=True)
def forest_step(B, ipar, st, m, ex, sc):
    """Member m's update (module doc, 2-3): its accuracy, ``k`` and the learning of its trees,
    its detectors. Its reference is ``forest.ForestReference.learn_one``."""
    M = st.mpred.shape[0]
    w = ex.w
    st.acc[SEEN, m] += w
    if st.mpred[m] == ex.y:
        st.acc[CORRECT, m] += w
    k = 1 if ipar[TRAIN] == TRAIN_ONCE else poisson(st.fpar[LAMBDA], ipar[SEED], ex.seq, m)
    if k <= 0:
        return
    pk, pv, hint = sc.pk, sc.pv, sc.hint
    fg = st.slots[FG, m]
    tree_learn(B, B, fg, ex.xn, ex.xc, ex.y, k * w, ex.seq, ex.n_classes, sc.code_attr, pk, pv,
               hint)  # fmt: skip
    bg = st.slots[BG, m]
    if bg >= 0:
        hint[bg, 0] = -1  # (never predicted)
        tree_learn(B, B, bg, ex.xn, ex.xc, ex.y, k * w, ex.seq, ex.n_classes, sc.code_attr, pk,
                   pv, hint)  # fmt: skip
    n = tree_proba(B, B, fg, ex.xn, ex.xc, ex.n_classes, sc.code_attr, pk, pv, hint)
    correct = argmax(pk, pv, n) == ex.y
    hint[fg, 0] = -1  # (computed after learning: not the next row's)
    if detect(ipar, st.adwin, st.fpar[WARN_DELTA], m, correct):
        start_background(B, ipar, st, m, ex.seq, hint)
    if detect(ipar, st.adwin, st.fpar[DRIFT_DELTA], M + m, correct):
        replace_tree(B, ipar, st, m, ex.seq, hint)


@nb.njit(cache=True)
def forest_loop(B, ipar, st, rows, out, sc, start, do_predict, do_learn, need, hinted):
    """Predict-then-learn rows ``start..`` of a block of ``_kernels.Rows``; returns the first
    row not processed (as ``_kernels.ensemble_rows``)."""
    R = rows.xn.shape[0]
    first = predicted_from(rows.xn, out)  # (rows before it: a deferred learn, not predicted)
    hint = sc.hint
    for r in range(start, R):
        if do_learn and not has_room(B, B, need):
            return r
        if r != start or not hinted:  # (hinted: the hint holds row start's prediction)
            hint[:, 0] = -1
        xr = rows.xn[r]
        cr = rows.xc[r]
        predicted = do_predict and r >= first
        if predicted:
            forest_predict(B, ipar, st, xr, cr, rows.n_cls[r], sc, out[r - first])
        if do_learn and rows.ws[r] > 0.0:
            if not predicted and not (r == start and ipar[REUSE] == 1):
                member_predictions(B, ipar, st, xr, cr, rows.n_cls[r], sc)
            ex = Example(xr, cr, rows.ys[r], rows.ws[r], rows.seqs[r],
                         classes_after(rows.n_cls, rows.ys, r))  # fmt: skip
            if ipar[STACK] == 1:  # the meta-learner first: no tree has learned the example
                meta_learn(st.meta, rows.n_cls[r], ex.n_classes, ex.y, ex.w)
            for m in range(st.mpred.shape[0]):
                forest_step(B, ipar, st, m, ex, sc)
            record(ipar, st, ex.y)  # (the predictions before learning: replace_tree keeps them)
    return R


@nb.njit(cache=True, nogil=True)
def forest_run(B, ipar, st, xn, xc, ys, ws, seqs, start, do_predict, do_learn, out, n_cls,
               code_attr, need, hint, hinted):  # fmt: skip
    """The forest over rows (signature of ``learners.compiled.single_run``; ``st`` a
    ``ForestState``). Returns the first row not processed."""
    C = classes_needed(n_cls, ys, start, do_learn)
    pk, pv = sparse_buffers(C)
    rows = Rows(unowned(xn), unowned(xc), unowned(ys), unowned(ws), unowned(seqs), unowned(n_cls))
    sc = Scratch(unowned(code_attr), unowned(pk), unowned(pv), unowned(hint))
    done = forest_loop(B, unowned(ipar), st, rows, unowned(out), sc, start, do_predict, do_learn,
                       need, hinted)  # fmt: skip
    keep_alive(pk, pv)
    return done


@nb.njit(cache=True, nogil=True)
def forest_run_io(B, io, code_attr, start, do_predict, do_learn, need, hinted, cats):
    """``forest_run``'s IO run kernel (``learners.compiled.register_io_run``; registered by
    ``ensembles.backends.CompiledBackend``)."""
    rows, sc, out, pk, pv = io_records(io, start, do_learn, cats, code_attr)
    done = forest_loop(B, io.ipar, io.fstate, rows, out, sc, start, do_predict, do_learn, need,
                       hinted)  # fmt: skip
    keep_alive(pk, pv)
    io_label(io, do_predict, done)
    return done


one_specialisation(globals())  # after every kernel: one compiled version per argument type
