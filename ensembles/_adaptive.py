"""Compiled kernels of adaptive online bagging: ADWIN bagging, leveraging bagging, the
accuracy-weighted vote and the window of member predictions behind live diversity.

One run kernel (signature of ``learners.compiled.single_run``) with ``fstate`` an
``AdaptiveStruct`` (one numba struct over the arrays of an ``AdaptiveState``) instead of a float
matrix. Per learned example:

1. each member's prediction *before* learning (test-then-train) — reused from the prediction
   of the same row when there was one;
2. each member learns with weight ``k ~ Poisson(lambda)`` (``lambda = 1``: Oza's bagging;
   ``lambda = 6``: leveraging bagging, Bifet, Holmes & Pfahringer 2010; with ``imbalance``
   that rate times the example's class-imbalance rate, ``imbalance_rate``: OOB / UOB, Wang,
   Minku & Yao 2015);
3. the predictions of step 1 go into a ring window (``window`` examples: windowed accuracy per
   member, the weighted vote, diversity);
4. with ``drift = ADWIN`` (with ``drift = DDM`` the same input goes to a DDM detector, Gama et
   al. 2004, and the member whose detector signals a drift is reset), each member's ADWIN gets its 0/1 error on the example *after*
   learning it, as MOA's OzaBagAdwin and LeveragingBag do (measured on the streams of
   benchmarks/drift.py, 20,000 examples x 3 seeds: the error predicted before learning gave
   0.3-2.1 points less accuracy on 4 of 6 stream/model pairs, e.g. leveraging bagging on the
   gradual Agrawal drift 0.866 vs 0.888); if some detector shrank its window and its error
   estimate went up, the member with the highest estimated error is reset to a fresh tree and
   its detector emptied (ADWIN bagging, Bifet et al. 2009).

With ``lambda = 1``, no detector and the ``average`` or ``majority`` vote this learns exactly what
``_kernels.bagging_run`` learns (the same draws, the same updates): only the window is extra.

With output codes (leveraging bagging's option, MOA's ``LeveragingBag -o``) member m learns the
binary problem ``output_code(seed, m, y)`` instead of ``y`` (its detector and the window count
it right or wrong on that bit), and the vote decodes: class c gets each member's vote for c's
bit (``codes_predict``).

With ``vote="stacking"`` (``_kernels.VOTE_STACKING``, bagging or boosting) the vote keeps every
member's class probabilities (``_stacking.keep_member``) and is the meta-learner's once it has
learned an example (``_stacking.meta_vote``; the average vote before), and each learned example
is learned by the meta-learner on those probabilities before any member learns it
(``_stacking.meta_learn``).

``boosting_adaptive_run`` is online boosting (``_kernels.boosting_learn``, Oza 2001 Fig. 4.3) with
the same window and one ADWIN detector per member on its 0/1 error after learning; on a change
the member with the highest estimated error is reset and its ``lambda_sc``, ``lambda_sw`` zeroed
(ADWIN boosting, MOA's ``OzaBoostAdwin``). Without a detector it learns exactly what
``_kernels.boosting_run`` learns, with either lambda rule (``_kernels.boost_step``).
"""

from __future__ import annotations

from functools import cached_property
from pathlib import Path
from typing import Any, NamedTuple

import numba as nb
import numpy as np
from numba.core import types
from numba.experimental import structref

from learners.compiled import (
    KERNEL_SOURCES,
    classes_after,
    classes_needed,
    has_room,
    io_label,
    keep_alive,
    predicted_from,
    sparse_buffers,
    tree_proba,
    tree_reset,
    unowned,
)
from learners.compiled import best_class as argmax
from learners.jit import one_specialisation

from . import _kernels, _rng, _stacking, adwin, ddm
from ._kernels import (
    BAGGING,
    BOOSTING,
    SC,
    SW,
    VOTE_MAJORITY,
    VOTE_STACKING,
    VOTE_WEIGHTED,
    Example,
    Rows,
    Scratch,
    add_vote,
    bagging_step,
    boosting_start,
    boosting_step,
    end_vote,
    io_records,
    purge_stale_cache,
    vote_weights,
)
from ._rng import uniform
from ._stacking import keep_member, meta_learn, meta_room, meta_vote
from .adwin import AdwinState, adwin_estimate, adwin_reset, adwin_update
from .ddm import DRIFT as DDM_DRIFT
from .ddm import ddm_reset, ddm_update

purge_stale_cache(
    __file__,
    (*KERNEL_SOURCES, *(Path(str(m.__file__)) for m in (_rng, adwin, ddm, _kernels, _stacking))),
)

# ipar: [seed, vote, drift detector, window length, ADWIN clock, ADWIN min_len, reuse, output
# codes, lambda rule]; reuse = 1: ``st.mpred`` already holds the members' predictions of the
# first row (a predict_one of the same example just before, with no learning in between); output
# codes = 1: each bagging member learns a binary problem (``output_code``); lambda rule: boosting's
# (``_kernels.LAMBDA_THESIS`` or ``LAMBDA_MOA``); imbalance: bagging's class-imbalance rate
# (``imbalance_rate``: none, OOB or UOB)
SEED, VOTE, DRIFT, WINDOW, CLOCK, MIN_LEN, REUSE, CODES, RULE, IMBALANCE = range(10)
NO_DRIFT, DRIFT_ADWIN, DRIFT_DDM = 0, 1, 2
NO_IMBALANCE, OOB, UOB = 0, 1, 2
# fpar: [Poisson lambda, ADWIN delta, the meta-learner's learning rate, L2 penalty and initial
# weight (``_stacking.META_RATE``, ``META_L2``, ``META_INIT``), the class sizes' time decay]
LAMBDA, DELTA = 0, 1
DECAY = 5
# counters: [ring position, rows in the window, members reset]
POS, FILLED, RESETS = 0, 1, 2
RESET = -2  # a window entry of a member that has been reset since (not counted)
WRONG = -3  # a window entry of an output-code member wrong on its binary problem
CODE_TAG = 1 << 59  # output codes are keyed by (seed, CODE_TAG + class pair, member)


class AdaptiveState(NamedTuple):
    """What the adaptive kernels read and write besides the trees (the arrays; the kernels get
    them in an ``AdaptiveStruct``, with these fields)."""

    fpar: np.ndarray  # [5] float parameters (LAMBDA, DELTA, _stacking.META_RATE, ...)
    adwin: AdwinState  # one detector per member
    ddm: np.ndarray  # [M, 6] one DDM detector per member (ensembles.ddm)
    win_pred: np.ndarray  # [W, M] int32: class predicted by member m (-1: none, RESET)
    win_y: np.ndarray  # [W] int64: the true class
    win_ok: np.ndarray  # [M] correct predictions of member m in the window
    win_n: np.ndarray  # [M] counted predictions of member m in the window
    resets: np.ndarray  # [M] times member m was reset
    counters: np.ndarray  # [3] POS, FILLED, RESETS
    mpred: np.ndarray  # [M] scratch: the members' predictions of the current row
    lam: np.ndarray  # [3, M] boosting's lambda_sc, lambda_sw per member, total weight seen
    # at [2, 0] (``_kernels.boost_step``; unused by bagging)
    # the meta-learner of vote="stacking" (``_stacking``; [0, 1], [M + 1, 0] without it)
    meta_w: np.ndarray  # [K, M K + 1] its weights (grown: GROWN)
    meta_x: np.ndarray  # [M + 1, K] the members' class probabilities of the current row (grown)
    meta_n: np.ndarray  # [1] examples it learned
    # imbalance (OOB / UOB): the classes' time-decayed sizes (``imbalance_rate``) [K] (grown)
    cls_w: np.ndarray


# fields a kernel may replace by larger arrays (_stacking.meta_room, class_room)
GROWN = ("meta_w", "meta_x", "cls_w")


@structref.register
class AdaptiveStructType(types.StructRef):
    """numba type of ``AdaptiveStruct``: the fields of ``AdaptiveState`` in one struct."""

    def preprocess_fields(self, fields):
        return tuple((name, types.unliteral(typ)) for name, typ in fields)


def _floats(ndim: int) -> types.Array:
    return types.Array(types.float64, ndim, "C")


def _ints(ndim: int) -> types.Array:
    return types.Array(types.int64, ndim, "C")


# the struct's one type: every ``AdaptiveState`` has these dtypes and dimensions (any shapes)
STRUCT_TYPE = AdaptiveStructType([
    ("fpar", _floats(1)),
    ("adwin", types.NamedTuple((_floats(3), _floats(3), _ints(2), _floats(2), _ints(2)),
                               AdwinState)),
    ("ddm", _floats(2)),
    ("win_pred", types.Array(types.int32, 2, "C")),
    *((name, _ints(1)) for name in ("win_y", "win_ok", "win_n", "resets", "counters", "mpred")),
    ("lam", _floats(2)),
    ("meta_w", _floats(2)),
    ("meta_x", _floats(2)),
    ("meta_n", _ints(1)),
    ("cls_w", _floats(1)),
])  # fmt: skip
assert tuple(STRUCT_TYPE.field_dict) == AdaptiveState._fields


class AdaptiveStruct(structref.StructRefProxy):
    """What an adaptive ensemble keeps as its float state and its run kernel gets as ``fstate``:
    the arrays of an ``AdaptiveState`` (``arrays``), as this object's attributes for Python and
    the interpreted twins (``st.win_ok``), and, made at the first compiled call, one numba
    struct of ``unowned`` views of the same arrays, which the kernels pass down. A kernel call
    unboxes one object instead of the fifteen arrays of the named tuple, and a call between
    kernels passes one pointer instead of copying them (profile.md, session 10). The struct
    does not keep the arrays alive: this object does.

    The ``GROWN`` arrays (the meta-learner's, the class sizes) may be replaced by a kernel with larger ones: a
    compiled kernel replaces them in the struct (which then owns them), an interpreted one sets
    this object's attribute. So they are properties: the struct's arrays once it is made (read
    and set through compiled calls), else ``arrays``'; a set (a twin's growth, a load) puts the
    array in both, so that the struct and ``arrays`` never hold an older one."""

    arrays: AdaptiveState
    _type: AdaptiveStructType
    fpar: np.ndarray
    adwin: AdwinState
    ddm: np.ndarray
    win_pred: np.ndarray
    win_y: np.ndarray
    win_ok: np.ndarray
    win_n: np.ndarray
    resets: np.ndarray
    counters: np.ndarray
    mpred: np.ndarray
    lam: np.ndarray
    meta_n: np.ndarray

    def __new__(cls, arrays: AdaptiveState) -> AdaptiveStruct:
        self = object.__new__(cls)  # (StructRefProxy.__new__ would compile a constructor now)
        self._type = STRUCT_TYPE
        self.arrays = arrays
        self.__dict__.update((k, v) for k, v in arrays._asdict().items() if k not in GROWN)
        return self

    def _grown(self, name: str) -> np.ndarray:
        if "_meminfo" in self.__dict__:  # the struct's: a compiled kernel may have replaced it
            return _grown_arrays(self)[GROWN.index(name)]
        return getattr(self.arrays, name)

    def _set_grown(self, name: str, value: np.ndarray) -> None:
        """Make ``value`` the current ``GROWN`` array ``name``, in ``arrays`` and in the struct
        if it is made (with the others as the struct holds them)."""
        made = "_meminfo" in self.__dict__
        now = _grown_arrays(self) if made else tuple(getattr(self.arrays, n) for n in GROWN)
        new = dict(zip(GROWN, now, strict=True))
        new[name] = value
        self.arrays = self.arrays._replace(**new)
        if made:
            _set_grown_arrays(self, *(new[n] for n in GROWN))

    meta_w = property(lambda self: self._grown("meta_w"),
                      lambda self, value: self._set_grown("meta_w", value))  # fmt: skip
    meta_x = property(lambda self: self._grown("meta_x"),
                      lambda self, value: self._set_grown("meta_x", value))  # fmt: skip
    cls_w = property(lambda self: self._grown("cls_w"),
                     lambda self, value: self._set_grown("cls_w", value))  # fmt: skip

    @cached_property
    def _meminfo(self) -> Any:  # what numba unboxes: the struct's, made on first use
        made = _make_struct(self.arrays)
        if made._type != STRUCT_TYPE:  # (the arrays' dtypes or dimensions are not the struct's)
            raise TypeError(f"adaptive state of type {made._type}, want {STRUCT_TYPE}")
        return made._meminfo


structref.define_constructor(AdaptiveStruct, AdaptiveStructType, list(AdaptiveState._fields))
structref.define_boxing(AdaptiveStructType, AdaptiveStruct)


@nb.njit(cache=True)
def _make_struct(st):
    """The struct of ``AdaptiveStruct`` over the arrays of ``st`` (an ``AdaptiveState``)."""
    a = st.adwin
    return AdaptiveStruct(
        unowned(st.fpar),
        AdwinState(unowned(a.tot), unowned(a.var), unowned(a.cnt), unowned(a.fs), unowned(a.iv)),
        unowned(st.ddm), unowned(st.win_pred), unowned(st.win_y), unowned(st.win_ok),
        unowned(st.win_n), unowned(st.resets), unowned(st.counters), unowned(st.mpred),
        unowned(st.lam), unowned(st.meta_w), unowned(st.meta_x), unowned(st.meta_n),
        unowned(st.cls_w),
    )  # fmt: skip


@nb.njit(cache=True)
def _grown_arrays(st):
    """The ``GROWN`` arrays the struct ``st`` holds now (a kernel may have replaced them)."""
    return st.meta_w, st.meta_x, st.cls_w


@nb.njit(cache=True)
def _set_grown_arrays(st, meta_w, meta_x, cls_w):
    """Make the struct ``st`` hold (and own a reference to) these ``GROWN`` arrays."""
    st.meta_w = meta_w
    st.meta_x = meta_x
    st.cls_w = cls_w


@nb.njit(cache=True, inline="always")
def member_weight(ipar, st, m):
    """A member's vote weight: 1, or (``vote="weighted"``) its windowed accuracy, smoothed as
    (correct + 1) / (counted + 2) so that a fresh member starts at 1/2."""
    if ipar[VOTE] == VOTE_WEIGHTED:
        return (st.win_ok[m] + 1.0) / (st.win_n[m] + 2.0)
    return 1.0


@nb.njit(cache=True)
def output_code(seed, m, c):
    """Member m's bit (0 or 1) for class c (leveraging bagging's output codes, Bifet, Holmes &
    Pfahringer 2010): a random bit per pair of classes (2j, 2j + 1), the pair's two classes on
    opposite sides, so that every member splits the classes seen so far in two halves (one
    off for an odd count) and a binary problem is the problem itself or its negation. A pure
    function of ``(seed, m, c)``: classes arriving mid-stream get their bits when they come."""
    bit = 1 if uniform(seed, CODE_TAG + (c >> 1), m, 0) < 0.5 else 0
    return bit ^ (c & 1)


@nb.njit(cache=True)
def member_classes(ipar, n):
    """Classes member trees see when the ensemble knows ``n``: 2 with output codes."""
    return 2 if ipar[CODES] == 1 else n


@nb.njit(cache=True, inline="always")
def adaptive_predict(B, ipar, st, xr, cr, n, sc, out_row):
    """The vote (majority, average, accuracy-weighted average, or stacked); members' top
    classes are kept in ``st.mpred`` for the learning step (and with the stacked vote their
    probabilities in ``st.meta_x``). Members' probabilities are sparse."""
    if ipar[CODES] == 1:
        codes_predict(B, ipar, st, xr, cr, n, sc, out_row)
        return
    stacking = ipar[VOTE] == VOTE_STACKING
    if stacking:
        meta_room(st, n)
    out_row[:n] = 0.0
    total = 0.0
    pk, pv = sc.pk, sc.pv
    for m in range(B.kind.shape[0]):
        k = tree_proba(B, B, m, xr, cr, n, sc.code_attr, pk, pv, sc.hint)
        if stacking:
            keep_member(st, m, pk, pv, k)
        if k > 0:
            top = argmax(pk, pv, k)
            st.mpred[m] = top
            wt = member_weight(ipar, st, m)
            if ipar[VOTE] == VOTE_MAJORITY:
                out_row[top] += wt
            else:
                for i in range(k):
                    out_row[pk[i]] += wt * pv[i]
            total += wt
        else:
            st.mpred[m] = -1
    if total > 0.0:
        for c in range(n):
            out_row[c] /= total
    if stacking:
        meta_vote(st, n, out_row)


@nb.njit(cache=True)
def codes_predict(B, ipar, st, xr, cr, n, sc, out_row):
    """The vote decoded from binary members: class c gets member m's vote for bit
    ``output_code(seed, m, c)`` (``majority``: its weight if that is m's top bit; else its
    weight times m's probability of that bit); the row is normalised to sum 1. Members' top
    bits are kept in ``st.mpred``."""
    out_row[:n] = 0.0
    pk, pv = sc.pk, sc.pv
    for m in range(B.kind.shape[0]):
        k = tree_proba(B, B, m, xr, cr, 2, sc.code_attr, pk, pv, sc.hint)
        if k <= 0:
            st.mpred[m] = -1
            continue
        top = argmax(pk, pv, k)
        st.mpred[m] = top
        wt = member_weight(ipar, st, m)
        p1 = 0.0
        for i in range(k):
            if pk[i] == 1:
                p1 = pv[i]
        for c in range(n):
            bit = output_code(ipar[SEED], m, c)
            if ipar[VOTE] == VOTE_MAJORITY:
                out_row[c] += wt if bit == top else 0.0
            else:
                out_row[c] += wt * (p1 if bit == 1 else 1.0 - p1)
    total = 0.0
    for c in range(n):
        total += out_row[c]
    if total > 0.0:
        for c in range(n):
            out_row[c] /= total


@nb.njit(cache=True, inline="always")
def record(ipar, st, y):
    """Put the members' predictions of this example into the ring window."""
    W = ipar[WINDOW]
    if W <= 0:
        return
    ctr = st.counters
    pos = ctr[POS]
    M = st.mpred.shape[0]
    if ctr[FILLED] == W:  # evict the oldest row
        old_y = st.win_y[pos]
        for m in range(M):
            old = st.win_pred[pos, m]
            if old != RESET:
                st.win_n[m] -= 1
                if old == old_y:
                    st.win_ok[m] -= 1
    else:
        ctr[FILLED] += 1
    st.win_y[pos] = y
    for m in range(M):
        st.win_pred[pos, m] = st.mpred[m]
        st.win_n[m] += 1
        if st.mpred[m] == y:
            st.win_ok[m] += 1
    ctr[POS] = (pos + 1) % W


@nb.njit(cache=True)
def reset_member(B, ipar, st, m, hint):
    """Member m starts afresh: a new tree, an empty detector, no entries in the window."""
    tree_reset(B, m)
    hint[m, 0] = -1
    adwin_reset(st.adwin, m)
    ddm_reset(st.ddm, m)
    for t in range(st.win_pred.shape[0]):
        st.win_pred[t, m] = RESET
    st.win_ok[m] = 0
    st.win_n[m] = 0
    st.resets[m] += 1
    st.counters[RESETS] += 1


@nb.njit(cache=True)
def class_room(st, n):
    """Room for ``n`` classes in the class sizes ``st.cls_w``: doubled (from 2) until >= n,
    the new classes at 0 (none seen yet)."""
    old = st.cls_w
    K = old.shape[0]
    if K >= n:
        return
    K2 = max(K, 2)
    while K2 < n:
        K2 *= 2
    grown = np.zeros(K2)
    grown[:K] = old
    st.cls_w = grown


@nb.njit(cache=True)
def imbalance_rate(ipar, st, y, n):
    """The class-imbalance factor of an example of class ``y`` (``n`` classes known), after
    its class sizes are updated (Wang, Minku & Yao 2015; ``OnlineBagging._imbalance_rate`` is
    the reference): ``w_k <- decay w_k + (1 - decay) [y = k]`` for every class k, then
    OOB: ``w_max / w_y`` (>= 1: oversample the smaller classes), UOB: ``w_min / w_y`` (<= 1:
    undersample the larger ones), max and min over the classes seen (w_k > 0). 1 without
    ``imbalance``. The member step's Poisson rate is ``lambda`` times it."""
    mode = ipar[IMBALANCE]
    if mode == NO_IMBALANCE:
        return 1.0
    class_room(st, n)
    w = st.cls_w
    decay = st.fpar[DECAY]
    for c in range(n):
        w[c] *= decay
    w[y] += 1.0 - decay
    ref = w[y]
    for c in range(n):
        if w[c] > 0.0 and ((mode == OOB and w[c] > ref) or (mode == UOB and w[c] < ref)):
            ref = w[c]
    return ref / w[y]


@nb.njit(cache=True, inline="always")
def adaptive_learn(B, ipar, st, ex, sc):
    """Bagging with Poisson(lambda) weights (``_kernels.bagging_step``; with ``imbalance``
    lambda times the example's ``imbalance_rate``), then the window and the detectors (module
    doc, ``drift_step``). With output codes member m learns (and is right or wrong on) its bit
    of ``y``."""
    y = ex.y
    lam = st.fpar[LAMBDA] * imbalance_rate(ipar, st, y, ex.n_classes)
    drift = ipar[DRIFT] != NO_DRIFT
    codes = ipar[CODES] == 1
    mc = member_classes(ipar, ex.n_classes)
    pk, pv, hint = sc.pk, sc.pv, sc.hint
    change = False
    for m in range(B.kind.shape[0]):
        ym = output_code(ipar[SEED], m, y) if codes else y  # the class member m learns
        correct = st.mpred[m] == ym  # (a member that does not learn it is unchanged)
        if codes and st.mpred[m] >= 0:  # the window holds right (y) or wrong, not bits
            st.mpred[m] = y if correct else WRONG
        exm = Example(ex.xn, ex.xc, ym, ex.w, ex.seq, mc)
        if bagging_step(B, m, lam, ipar[SEED], exm, sc) > 0 and drift:
            # its detector gets its error on the example *after* learning it (MOA)
            n = tree_proba(B, B, m, ex.xn, ex.xc, mc, sc.code_attr, pk, pv, hint)
            correct = argmax(pk, pv, n) == ym
            hint[m, 0] = -1  # computed after the update: not reusable
        change |= drift_step(B, ipar, st, m, correct, hint)
    record(ipar, st, y)
    if change:  # reset the member with the highest estimated error (Bifet et al. 2009)
        reset_worst(B, ipar, st, hint)


@nb.njit(cache=True)
def drift_step(B, ipar, st, m, correct, hint):
    """Member m's 0/1 error on the example (``correct``) into its detector, around a member
    step: with DDM a member whose detector signals a drift is reset here; with ADWIN returns
    whether its error went up (the caller then resets the worst member, ``reset_worst``)."""
    if ipar[DRIFT] == DRIFT_DDM:  # DDM: the member whose detector signals a drift is reset
        if ddm_update(st.ddm, m, 0.0 if correct else 1.0) == DDM_DRIFT:
            reset_member(B, ipar, st, m, hint)
        return False
    return ipar[DRIFT] == DRIFT_ADWIN and detect(ipar, st.adwin, st.fpar[DELTA], m, correct)


@nb.njit(cache=True, inline="always")
def detect(ipar, detectors, delta, m, correct):
    """Member m's 0/1 error into its ADWIN detector (of ``detectors``, ``st.adwin``): True if
    the window shrank and the error estimate went up (a change for the worse). Inlined, as the
    ADWIN kernels it calls: a call per member and example copied its arguments' array
    descriptors (~50 ns with the whole state, profile.md)."""
    before = adwin_estimate(detectors, m)
    err = 0.0 if correct else 1.0
    if adwin_update(detectors, m, err, delta, ipar[CLOCK], ipar[MIN_LEN]):
        return adwin_estimate(detectors, m) > before
    return False


@nb.njit(cache=True)
def reset_worst(B, ipar, st, hint):
    """Reset the member with the highest estimated error (Bifet et al. 2009); its index, or -1
    when every estimate is 0."""
    worst = -1
    most = 0.0
    for m in range(B.kind.shape[0]):
        e = adwin_estimate(st.adwin, m)
        if e > most:
            most = e
            worst = m
    if worst >= 0:
        reset_member(B, ipar, st, worst, hint)
    return worst


# --------------------------------------------------------------------------- ADWIN boosting
@nb.njit(cache=True, inline="always")
def boosting_adaptive_predict(B, ipar, st, xr, cr, n, sc, out_row):
    """Online boosting's vote (``_kernels.boosting_predict``: log((1 - e_m) / e_m) per member),
    and every member's top class in ``st.mpred`` (those without a vote too, for the window);
    the stacked vote replaces it once the meta-learner has learned (every member's
    probabilities kept in ``st.meta_x``)."""
    M = B.kind.shape[0]
    wts = np.empty(M)
    vote_weights(st.lam[SC], st.lam[SW], wts)
    stacking = ipar[VOTE] == VOTE_STACKING
    if stacking:
        meta_room(st, n)
    out_row[:n] = 0.0
    total = 0.0
    pk, pv = sc.pk, sc.pv
    for m in range(M):
        k = tree_proba(B, B, m, xr, cr, n, sc.code_attr, pk, pv, sc.hint)
        st.mpred[m] = argmax(pk, pv, k) if k > 0 else -1
        if stacking:
            keep_member(st, m, pk, pv, k)
        if wts[m] > 0.0 and k > 0:
            add_vote(out_row, wts[m], pk, pv, k, ipar[VOTE] == VOTE_MAJORITY)
            total += wts[m]
    if not (stacking and meta_vote(st, n, out_row)):
        end_vote(B, xr, cr, n, sc, out_row, total)


@nb.njit(cache=True, inline="always")
def boosting_adaptive_learn(B, ipar, st, ex, sc):
    """Oza (2001), Fig. 4.3 (``_kernels.boosting_step``, as ``_kernels.boosting_learn``), each
    member's error after learning into its detector (``drift_step``), then the window."""
    lam = boosting_start(st.lam, ex.w, ipar[RULE])
    change = False
    for m in range(B.kind.shape[0]):
        lam, correct = boosting_step(B, m, st.lam, lam, ipar[RULE], ipar[SEED], ex, sc)
        change |= drift_step(B, ipar, st, m, correct, sc.hint)
    record(ipar, st, ex.y)
    if change:  # a fresh member with no error weight yet: it votes once it has some
        worst = reset_worst(B, ipar, st, sc.hint)
        if worst >= 0:  # (MOA's total weight seen is the ensemble's: it stays)
            st.lam[SC, worst] = 0.0
            st.lam[SW, worst] = 0.0


@nb.njit(cache=True)
def adaptive_rows(B, ipar, st, xn, xc, ys, ws, seqs, start, do_predict, do_learn, out, n_cls,
                  code_attr, need, hint, hinted, method):  # fmt: skip
    """Predict-then-learn rows ``start..`` with ``method`` (``_kernels.BAGGING``: adaptive
    bagging, or ``BOOSTING``: ADWIN boosting); returns the first row not processed. ``hint`` is
    cleared before each row but row ``start`` when ``hinted`` (as ``_kernels.ensemble_run``)."""
    C = classes_needed(n_cls, ys, start, do_learn)
    pk, pv = sparse_buffers(C)
    # reference-count-free views (learners.compiled.unowned): the arguments are held by the
    # caller, the buffers by this frame until keep_alive; ``st``, a struct of such views, is
    # passed as it is (one pointer a call: an ``AdaptiveState`` of views would be fifteen arrays
    # copied into every call below)
    rows = Rows(unowned(xn), unowned(xc), unowned(ys), unowned(ws), unowned(seqs), unowned(n_cls))
    sc = Scratch(unowned(code_attr), unowned(pk), unowned(pv), unowned(hint))
    done = adaptive_loop(B, unowned(ipar), st, rows, unowned(out), sc, start, do_predict,
                         do_learn, need, hinted, method)  # fmt: skip
    keep_alive(pk, pv)
    return done


@nb.njit(cache=True, inline="always")
def adaptive_loop(B, ipar, st, rows, out, sc, start, do_predict, do_learn, need, hinted, method):
    """The rows loop of ``adaptive_rows`` over a block of ``_kernels.Rows``."""
    R = rows.xn.shape[0]
    M = B.kind.shape[0]
    first = predicted_from(rows.xn, out)  # (rows before it: a deferred learn, not predicted)
    pk, pv, hint = sc.pk, sc.pv, sc.hint
    for r in range(start, R):
        if do_learn and not has_room(B, B, need):
            return r
        if r != start or not hinted:  # (hinted: the hint holds row start's prediction)
            hint[:, 0] = -1
        xr = rows.xn[r]
        cr = rows.xc[r]
        predicted = do_predict and r >= first
        if predicted:
            o = out[r - first]
            if method == BAGGING:
                adaptive_predict(B, ipar, st, xr, cr, rows.n_cls[r], sc, o)
            else:
                boosting_adaptive_predict(B, ipar, st, xr, cr, rows.n_cls[r], sc, o)
        if do_learn and rows.ws[r] > 0.0:
            # the members' predictions before learning: bagging's detectors, any window and the
            # stacked vote's meta-learner use them (ADWIN boosting's detectors use the
            # prediction after learning)
            stacking = ipar[VOTE] == VOTE_STACKING
            if (not predicted and not (r == start and ipar[REUSE] == 1)
                    and (method == BAGGING or ipar[WINDOW] > 0 or stacking)):  # fmt: skip
                mc = member_classes(ipar, rows.n_cls[r])
                if stacking:
                    meta_room(st, mc)
                for m in range(M):
                    k = tree_proba(B, B, m, xr, cr, mc, sc.code_attr, pk, pv, hint)
                    st.mpred[m] = argmax(pk, pv, k)  # -1: no prediction (a bit with codes)
                    if stacking:
                        keep_member(st, m, pk, pv, k)
            ex = Example(xr, cr, rows.ys[r], rows.ws[r], rows.seqs[r],
                         classes_after(rows.n_cls, rows.ys, r))  # fmt: skip
            if stacking:  # the meta-learner first: the members have not learned the example
                meta_learn(st, rows.n_cls[r], ex.n_classes, ex.y, ex.w)
            if method == BAGGING:
                adaptive_learn(B, ipar, st, ex, sc)
            else:
                boosting_adaptive_learn(B, ipar, st, ex, sc)
    return R


@nb.njit(cache=True, nogil=True)
def adaptive_run(B, ipar, st, xn, xc, ys, ws, seqs, start, do_predict, do_learn, out, n_cls,
                 code_attr, need, hint, hinted):  # fmt: skip
    """Adaptive bagging over rows (signature of ``learners.compiled.single_run``; ``st`` an
    ``AdaptiveStruct``). Returns the first row not processed."""
    return adaptive_rows(B, ipar, st, xn, xc, ys, ws, seqs, start, do_predict, do_learn, out,
                         n_cls, code_attr, need, hint, hinted, BAGGING)  # fmt: skip


@nb.njit(cache=True, nogil=True)
def boosting_adaptive_run(B, ipar, st, xn, xc, ys, ws, seqs, start, do_predict, do_learn, out,
                          n_cls, code_attr, need, hint, hinted):  # fmt: skip
    """ADWIN boosting over rows (signature of ``learners.compiled.single_run``; ``st`` an
    ``AdaptiveStruct``). Returns the first row not processed."""
    return adaptive_rows(B, ipar, st, xn, xc, ys, ws, seqs, start, do_predict, do_learn, out,
                         n_cls, code_attr, need, hint, hinted, BOOSTING)  # fmt: skip


@nb.njit(cache=True, inline="always")
def adaptive_rows_io(B, io, code_attr, start, do_predict, do_learn, need, hinted, cats, method):
    """``adaptive_rows`` over a ``RunIO`` (``io.fstate`` the ``AdaptiveStruct``'s struct;
    ``learners.compiled.single_run_io`` says what ``io`` and ``cats`` give)."""
    rows, sc, out, pk, pv = io_records(io, start, do_learn, cats, code_attr)
    done = adaptive_loop(B, io.ipar, io.fstate, rows, out, sc, start, do_predict, do_learn, need,
                         hinted, method)  # fmt: skip
    keep_alive(pk, pv)
    io_label(io, do_predict, done)
    return done


@nb.njit(cache=True, nogil=True)
def adaptive_run_io(B, io, code_attr, start, do_predict, do_learn, need, hinted, cats):
    """``adaptive_run``'s IO run kernel (``learners.compiled.register_io_run``; registered by
    ``ensembles.backends.CompiledBackend``)."""
    return adaptive_rows_io(B, io, code_attr, start, do_predict, do_learn, need, hinted, cats,
                            BAGGING)  # fmt: skip


@nb.njit(cache=True, nogil=True)
def boosting_adaptive_run_io(B, io, code_attr, start, do_predict, do_learn, need, hinted, cats):
    """``boosting_adaptive_run``'s IO run kernel (``learners.compiled.register_io_run``;
    registered by ``ensembles.backends.CompiledBackend``)."""
    return adaptive_rows_io(B, io, code_attr, start, do_predict, do_learn, need, hinted, cats,
                            BOOSTING)  # fmt: skip


# after every kernel: one compiled version per argument type, except adaptive_rows',
# adaptive_rows_io's and adaptive_loop's per method (BAGGING/BOOSTING constants): each run kernel compiles only its
# own branch
one_specialisation(globals(), keep_literal=("adaptive_rows", "adaptive_loop", "adaptive_rows_io"))
