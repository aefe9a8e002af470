"""Compiled ensemble kernels: a whole ensemble's predict-then-learn per example, no Python loop
over members (ARCHITECTURE §3). Each mirrors its algorithm in ``bagging.py`` / ``boosting.py``.
"""

from __future__ import annotations

import math
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
    io_rows,
    io_scratch,
    keep_alive,
    member_buffers,
    predicted_from,
    scatter,
    sparse_buffers,
    tree_best,
    tree_learn,
    tree_proba,
    unowned,
)
from learners.compiled import best_class as argmax
from learners.jit import one_specialisation, purge_stale_cache

from . import _atomic, _rng
from ._atomic import take
from ._rng import poisson

purge_stale_cache(__file__, (*KERNEL_SOURCES, *(Path(str(m.__file__)) for m in (_rng, _atomic))))

VOTE_MAJORITY, VOTE_AVERAGE, VOTE_WEIGHTED, VOTE_STACKING = 0, 1, 2, 3
VOTES = {"majority": VOTE_MAJORITY, "average": VOTE_AVERAGE, "weighted": VOTE_WEIGHTED,
         "stacking": VOTE_STACKING}  # fmt: skip


def vote_code(vote: str, allowed: tuple[str, ...] = ("average", "majority")) -> int:
    """The kernel code of a ``vote`` rule name; ``ValueError`` names the ``allowed`` ones."""
    if vote not in allowed:
        raise ValueError(f"vote must be one of {sorted(allowed)}, got {vote!r}")
    return VOTES[vote]


EPS_MIN = 1e-10  # a member never wrong so far votes as if its error were 1e-10


BAGGING, BOOSTING = 0, 1
# ipar of bagging_run [seed, vote] and boosting_run [seed, vote, lambda rule]
SEED, VOTE, RULE = 0, 1, 2


class Rows(NamedTuple):
    """A block of encoded rows (a run kernel's arguments of the same names)."""

    xn: np.ndarray  # [R, numeric features] float
    xc: np.ndarray  # [R, categorical features] category codes
    ys: np.ndarray  # [R] class codes
    ws: np.ndarray  # [R] weights (0: predict only)
    seqs: np.ndarray  # [R] example numbers (the Poisson draws' key)
    n_cls: np.ndarray  # [R] classes known before row r


class Example(NamedTuple):
    """One encoded example as a member step learns it."""

    xn: np.ndarray  # its numbers (a row of ``Rows.xn``)
    xc: np.ndarray  # its category codes
    y: int  # its class code
    w: float  # its weight
    seq: int  # its example number
    n_classes: int  # classes known once y is in (``classes_after``)


class Scratch(NamedTuple):
    """What member kernels (``tree_proba``, ``tree_learn``) take besides the row: the
    feature-code map and the caller's buffers."""

    code_attr: np.ndarray  # category code -> feature
    pk: np.ndarray  # sparse class codes
    pv: np.ndarray  # sparse probabilities
    hint: np.ndarray  # [M, 4] route hint (learners.compiled.tree_proba)


# --------------------------------------------------------------------------- online bagging
@nb.njit(cache=True, inline="always")
def bagging_predict(B, ipar, xr, cr, n, sc, out_row):
    """Majority vote of the members (``ipar[VOTE] == VOTE_AVERAGE``: mean of their
    probabilities). Members' probabilities are sparse (``tree_proba``): a member costs
    O(classes at its leaf)."""
    pk, pv = sc.pk, sc.pv
    out_row[:n] = 0.0
    voters = 0.0
    for m in range(B.kind.shape[0]):
        k = tree_proba(B, B, m, xr, cr, n, sc.code_attr, pk, pv, sc.hint)
        if k > 0:
            if ipar[VOTE] == VOTE_MAJORITY:
                out_row[argmax(pk, pv, k)] += 1.0
            else:
                for i in range(k):
                    out_row[pk[i]] += pv[i]
            voters += 1.0
    if voters > 0.0:
        for c in range(n):
            out_row[c] /= voters


@nb.njit(cache=True, inline="always")
def bagging_step(B, m, lam, seed, ex, sc):
    """Online bagging's update of member m (Oza 2001, Fig. 3.3; ``OnlineBagging._py_learn`` is
    its reference): k ~ Poisson(lambda), keyed by (seed, example, member), and h_m learns the
    example ``ex`` with weight k (MOA: one update with a weight, not k repeated updates).
    Returns k. Every loop of bagging calls it: the serial one (``bagging_learn``), the
    member-parallel one (``bagging_member_rows``) and the adaptive one (``_adaptive``, with
    lambda 6 for leveraging bagging)."""
    k = poisson(lam, seed, ex.seq, m)
    if k > 0:
        tree_learn(B, B, m, ex.xn, ex.xc, ex.y, k * ex.w, ex.seq, ex.n_classes, sc.code_attr,
                   sc.pk, sc.pv, sc.hint)  # fmt: skip
    return k


@nb.njit(cache=True, inline="always")
def bagging_learn(B, ipar, ex, sc):
    """Oza (2001), Fig. 3.3: every member learns the example with weight k ~ Poisson(1)."""
    for m in range(B.kind.shape[0]):
        bagging_step(B, m, 1.0, ipar[SEED], ex, sc)


# --------------------------------------------------------------------------- online boosting
@nb.njit(cache=True)
def vote_weights(lam_sc, lam_sw, out):
    """log((1 - e_m) / e_m) per member; 0 for members with e_m >= 1/2 or no data yet."""
    for m in range(lam_sc.shape[0]):
        tot = lam_sc[m] + lam_sw[m]
        if tot <= 0.0:
            out[m] = 0.0
            continue
        eps = lam_sw[m] / tot
        if eps >= 0.5:
            out[m] = 0.0
        else:
            eps = max(eps, EPS_MIN)
            out[m] = math.log((1.0 - eps) / eps)


@nb.njit(cache=True, inline="always")
def boosting_predict(B, ipar, lams, xr, cr, n, sc, out_row):
    """argmax_y sum_m log((1 - e_m) / e_m) [h_m(x) = y] (``ipar[VOTE] == VOTE_AVERAGE``: each
    member's class probabilities, weighted alike); member 1 alone if nobody votes."""
    M = B.kind.shape[0]
    wts = np.empty(M)
    vote_weights(lams[SC], lams[SW], wts)
    out_row[:n] = 0.0
    total = 0.0
    pk, pv = sc.pk, sc.pv
    for m in range(M):
        if wts[m] <= 0.0:
            continue
        k = tree_proba(B, B, m, xr, cr, n, sc.code_attr, pk, pv, sc.hint)
        if k > 0:
            add_vote(out_row, wts[m], pk, pv, k, ipar[VOTE] == VOTE_MAJORITY)
            total += wts[m]
    end_vote(B, xr, cr, n, sc, out_row, total)


@nb.njit(cache=True)
def add_vote(out_row, wt, pk, pv, k, majority):
    """Add a member's vote of weight ``wt``: its top class (``majority``) or its k sparse class
    probabilities, scaled."""
    if majority:
        out_row[argmax(pk, pv, k)] += wt
    else:
        for i in range(k):
            out_row[pk[i]] += wt * pv[i]


@nb.njit(cache=True)
def end_vote(B, xr, cr, n, sc, out_row, total):
    """Normalise the weighted votes (``total`` their weight); member 1 alone if nobody voted."""
    if total > 0.0:
        for c in range(n):
            out_row[c] /= total
    else:
        pk, pv = sc.pk, sc.pv
        scatter(pk, pv, tree_proba(B, B, 0, xr, cr, n, sc.code_attr, pk, pv, sc.hint), out_row)


LAMBDA_THESIS, LAMBDA_MOA = 0, 1
LAMBDA_RULES = {"thesis": LAMBDA_THESIS, "moa": LAMBDA_MOA}
SC, SW, SEEN = 0, 1, 2  # rows of boosting's lambda matrix [3, M]; SEEN: [total weight, 0, ...]


@nb.njit(cache=True)
def boost_seen(lams, w, rule):
    """Count an example of weight ``w`` in the ensemble's total (read by MOA's rule only)."""
    if rule == LAMBDA_MOA:
        lams[SEEN, 0] += w


LAMBDA_MAX = float(2**31 - 1)  # boosting's lambda is kept <= this (capped_lambda)


@nb.njit(cache=True)
def capped_lambda(lam):
    """``lam``, or LAMBDA_MAX above it (NaN included). Oza's updates divide lambda by e_m or
    1 - e_m, and a lambda of 1e27 is reachable (members right on nearly everything, all wrong on
    one example); an example weight of 1e300 starts there. Uncapped, a Poisson draw overflowed
    its int64 and e_m rounded to 0 or 1, dividing by zero in every later example: one request
    broke the model for good. MOA's draw saturates at Java's int maximum (2^31 - 1): so does
    lambda here, which no draw of an ordinary stream reaches."""
    if lam <= LAMBDA_MAX:
        return lam
    return LAMBDA_MAX


@nb.njit(cache=True)
def boost_step(lams, m, lam, correct, rule):
    """Fig. 4.3 after member m saw the example with weight lambda: its lambda_sc (``correct``)
    or lambda_sw grows by lambda; returns the next member's lambda, lambda / (2 (1 - e_m)) or
    lambda / (2 e_m) (``rule`` LAMBDA_THESIS), or MOA's lambda N / (2 lambda_sc_m) or
    lambda N / (2 lambda_sw_m) with N the ensemble's total weight seen (LAMBDA_MOA, MOA's
    OzaBoost and OzaBoostAdwin)."""
    lam_sc = lams[SC]
    lam_sw = lams[SW]
    if correct:  # h_m(x) = y
        lam_sc[m] += lam
        part = lam_sc[m]
    else:
        lam_sw[m] += lam
        part = lam_sw[m]
    if rule == LAMBDA_MOA:
        return lambda_ratio(lam * lams[SEEN, 0], 2.0 * part)
    tot = lam_sc[m] + lam_sw[m]
    if not tot > 0.0:  # lambda 0 (an underflow) on a member with nothing yet: 0 stays 0
        return 0.0
    eps = lam_sw[m] / tot
    d = 2.0 * (1.0 - eps) if correct else 2.0 * eps
    if d > 0.0:
        return capped_lambda(lam / d)
    return lambda_ratio(lam * tot, 2.0 * part)  # e_m rounded to 1 or 0: the same, unrounded


@nb.njit(cache=True)
def lambda_ratio(a, b):
    """``a / b`` capped (``capped_lambda``); 0 when ``b`` is 0 (then lambda, in ``a``, was 0)."""
    if b > 0.0:
        return capped_lambda(a / b)
    return 0.0


@nb.njit(cache=True)
def boosting_start(lams, w, rule):
    """Fig. 4.3 before the members: lambda <- 1 (times the example's weight ``w``, capped), and
    ``w`` counted in the ensemble's total (``boost_seen``). Returns lambda."""
    boost_seen(lams, w, rule)
    return capped_lambda(w)


@nb.njit(cache=True, inline="always")
def boosting_step(B, m, lams, lam, rule, seed, ex, sc):
    """Online boosting's update of member m (Oza 2001, Fig. 4.3; ``OnlineBoosting._py_learn``
    is its reference): k ~ Poisson(lambda), h_m learns ``ex`` with weight k, then lambda_sc_m or
    lambda_sw_m grows by lambda as h_m(x) = y after the update (the prediction's, if h_m did
    not learn: from the hint) and lambda becomes the next member's (``boost_step``). Returns
    (the next lambda, whether h_m(x) = y). The serial loop (``boosting_learn``) and ADWIN
    boosting's (``_adaptive``) call it."""
    k = poisson(lam, seed, ex.seq, m)
    if k > 0:
        tree_learn(B, B, m, ex.xn, ex.xc, ex.y, float(k), ex.seq, ex.n_classes, sc.code_attr,
                   sc.pk, sc.pv, sc.hint)  # fmt: skip
    correct = tree_best(B, B, m, ex.xn, ex.xc, ex.n_classes, sc.code_attr, sc.pk, sc.pv,
                        sc.hint) == ex.y  # fmt: skip
    return boost_step(lams, m, lam, correct, rule), correct


@nb.njit(cache=True, inline="always")
def boosting_learn(B, ipar, lams, ex, sc):
    """Oza (2001), Fig. 4.3, with lams = [lambda_sc, lambda_sw, seen] (``boost_step``) and
    ``ipar[RULE]`` the lambda rule."""
    lam = boosting_start(lams, ex.w, ipar[RULE])
    for m in range(B.kind.shape[0]):
        lam, _ = boosting_step(B, m, lams, lam, ipar[RULE], ipar[SEED], ex, sc)


# --------------------------------------------------------------------------- the row driver
@nb.njit(cache=True)
def ensemble_run(B, ipar, fstate, xn, xc, ys, ws, seqs, start, do_predict, do_learn, out, n_cls,
                 code_attr, need, hint, hinted, method):  # fmt: skip
    """Predict-then-learn rows ``start..`` with ``method`` (BAGGING or BOOSTING).

    Row i is predicted after rows < i were learned. ``hint`` is cleared before each row but
    row ``start`` when ``hinted`` (``learners.compiled.single_run``). Returns the first row not
    processed (``len(ys)`` when done, earlier when the arrays must grow by ``need`` nodes/slots
    first).
    """
    C = classes_needed(n_cls, ys, start, do_learn)
    pk, pv = sparse_buffers(C)
    # The rows loop gets reference-count-free views (learners.compiled.unowned): the arguments
    # are held by the caller, the buffers by this frame until keep_alive.
    rows = Rows(unowned(xn), unowned(xc), unowned(ys), unowned(ws), unowned(seqs), unowned(n_cls))
    sc = Scratch(unowned(code_attr), unowned(pk), unowned(pv), unowned(hint))
    done = ensemble_rows(B, unowned(ipar), unowned(fstate), rows, unowned(out), sc, start,
                         do_predict, do_learn, need, hinted, method)  # fmt: skip
    keep_alive(pk, pv)
    return done


@nb.njit(cache=True, inline="always")
def ensemble_rows(B, ipar, fstate, rows, out, sc, start, do_predict, do_learn, need, hinted,
                  method):  # fmt: skip
    """The rows loop of ``ensemble_run`` over a block of ``Rows`` (on unowned views)."""
    R = rows.xn.shape[0]
    first = predicted_from(rows.xn, out)  # (rows before it: a deferred learn, not predicted)
    hint = sc.hint
    for r in range(start, R):
        if do_learn and not has_room(B, B, need):
            return r
        if r != start or not hinted:  # (hinted: the hint holds row start's prediction)
            hint[:, 0] = -1
        xr = rows.xn[r]  # one view per row, not per member
        cr = rows.xc[r]
        if do_predict and r >= first:
            o = out[r - first]
            if method == BAGGING:
                bagging_predict(B, ipar, xr, cr, rows.n_cls[r], sc, o)
            else:
                boosting_predict(B, ipar, fstate, xr, cr, rows.n_cls[r], sc, o)
        if do_learn and rows.ws[r] > 0.0:
            ex = Example(xr, cr, rows.ys[r], rows.ws[r], rows.seqs[r],
                         classes_after(rows.n_cls, rows.ys, r))  # fmt: skip
            if method == BAGGING:
                bagging_learn(B, ipar, ex, sc)
            else:
                boosting_learn(B, ipar, fstate, ex, sc)
    return R


@nb.njit(cache=True, nogil=True)
def bagging_run(B, ipar, fstate, xn, xc, ys, ws, seqs, start, do_predict, do_learn, out, n_cls,
                code_attr, need, hint, hinted):  # fmt: skip
    """Online bagging over rows; ``ipar = [seed, vote]`` (``SEED``, ``VOTE``). Signature of
    ``learners.compiled.single_run``."""
    return ensemble_run(B, ipar, fstate, xn, xc, ys, ws, seqs, start, do_predict, do_learn, out,
                        n_cls, code_attr, need, hint, hinted, BAGGING)  # fmt: skip


@nb.njit(cache=True, nogil=True)
def boosting_run(B, ipar, fstate, xn, xc, ys, ws, seqs, start, do_predict, do_learn, out, n_cls,
                 code_attr, need, hint, hinted):  # fmt: skip
    """Online boosting over rows; ``ipar = [seed, vote, lambda rule]`` (``SEED``, ``VOTE``,
    ``RULE``), ``fstate = [lambda_sc, lambda_sw, seen]`` (rows ``SC``, ``SW``, ``SEEN``, one
    column per member; ``seen[0]`` the total weight learned, kept for MOA's rule). Signature of
    ``learners.compiled.single_run``."""
    return ensemble_run(B, ipar, fstate, xn, xc, ys, ws, seqs, start, do_predict, do_learn, out,
                        n_cls, code_attr, need, hint, hinted, BOOSTING)  # fmt: skip


@nb.njit(cache=True, inline="always")
def io_records(io, start, do_learn, cats, code_attr):
    """The ``Rows``, ``Scratch`` and output rows of a ``RunIO`` call from row ``start``
    (``learners.compiled.single_run_io`` says what ``io`` and ``cats`` give), and the scratch
    to keep alive until the rows loop is done."""
    pk, pv = io_scratch(io, start, do_learn)
    xc, out = io_rows(io, start, cats)
    rows = Rows(io.xn, xc, io.ys, io.ws, io.seqs, io.n_cls)
    return rows, Scratch(unowned(code_attr), unowned(pk), unowned(pv), io.hint), out, pk, pv


@nb.njit(cache=True, inline="always")
def ensemble_run_io(B, io, code_attr, start, do_predict, do_learn, need, hinted, cats, method):
    """``ensemble_run`` over a ``RunIO`` (``learners.compiled.single_run_io``, which says what
    ``io`` and ``cats`` give; ``TreeBank.run_one``); one specialisation per ``method``."""
    rows, sc, out, pk, pv = io_records(io, start, do_learn, cats, code_attr)
    done = ensemble_rows(B, io.ipar, io.fstate, rows, out, sc, start, do_predict, do_learn, need,
                         hinted, method)  # fmt: skip
    keep_alive(pk, pv)
    io_label(io, do_predict, done)
    return done


@nb.njit(cache=True, nogil=True)
def bagging_run_io(B, io, code_attr, start, do_predict, do_learn, need, hinted, cats):
    """``bagging_run``'s IO run kernel (``learners.compiled.register_io_run``; registered by
    ``ensembles.backends.CompiledBackend``)."""
    return ensemble_run_io(B, io, code_attr, start, do_predict, do_learn, need, hinted, cats,
                           BAGGING)  # fmt: skip


@nb.njit(cache=True, nogil=True)
def boosting_run_io(B, io, code_attr, start, do_predict, do_learn, need, hinted, cats):
    """``boosting_run``'s IO run kernel (``learners.compiled.register_io_run``; registered by
    ``ensembles.backends.CompiledBackend``)."""
    return ensemble_run_io(B, io, code_attr, start, do_predict, do_learn, need, hinted, cats,
                           BOOSTING)  # fmt: skip


@nb.njit(cache=True)
def member_learn(B, m, xn, xc, ys, ws, seq0, start, n_classes, code_attr, need):
    """Learn weighted rows into member m only (batch fitting and priming); row r is example
    number ``seq0 + r`` (the time its splits record)."""
    C = max(n_classes, 2)
    pk, pv, hint = member_buffers(B, C)
    for r in range(start, xn.shape[0]):
        if not has_room(B, B, need):
            return r
        hint[m, 0] = -1  # a new example (tree_proba's hint)
        if ws[r] > 0.0:
            tree_learn(B, B, m, xn[r], xc[r], ys[r], ws[r], seq0 + r, n_classes, code_attr, pk,
                       pv, hint)  # fmt: skip
    return xn.shape[0]


@nb.njit(cache=True)
def member_predict(B, m, xn, xc, n_classes, code_attr, out):
    """Class index predicted by member m for every row (-1 where it has no prediction)."""
    C = max(n_classes, 2)
    pk, pv, hint = member_buffers(B, C)
    for r in range(xn.shape[0]):
        hint[m, 0] = -1  # a new example (tree_proba's hint)
        out[r] = argmax(
            pk, pv, tree_proba(B, B, m, xn[r], xc[r], n_classes, code_attr, pk, pv, hint)
        )


# --------------------------------------------------------------------------- member-parallel bagging
# A bagging member never reads another's state, and its Poisson weights are keyed by (seed,
# example, member): member m run alone over the rows makes the same predictions and updates as in
# ``bagging_run``. ``bagging_members`` runs members lo..hi that way (one call per thread, without
# the GIL), keeping each member's sparse prediction of each row; ``bagging_votes`` then adds them
# up in member order, the sums ``bagging_predict`` makes, so the results are bit-identical.
#
# The one thing members share is the class-entry pools' arrays: a member whose part is full
# doubles them for every member (``learners``' ``pool_make_room``), which must not happen while
# other members run. So a member runs a row only when its parts have room for all that learning
# one row can take (``pool_demand``), and between parallel phases ``reserve_pools`` makes that
# room serially. (``has_room`` is the same rule for nodes and rows, which Python grows.)


@nb.njit(cache=True)
def block_entries(n):
    """Entries of a class block holding n classes (1, 2, 4, ...: the pools' block sizes)."""
    c = 1
    while c < n:
        c *= 2
    return c


@nb.njit(cache=True)
def pool_demand(n_cat, n_num, n_classes, need):
    """Most class entries (weights, Gaussians) learning one row can take from a member's pools.

    A class new to a row moves it to a block of at most ``block_entries(classes)`` entries:
    update_leaf touches the leaf's weight row, a feature and a value row per categorical feature
    and an observer per numeric one; a split fills at most ``need`` new leaves, each by blocks
    1, 2, 4, ... (under twice the last)."""
    cap = block_entries(max(n_classes, 1))
    return (1 + 2 * n_cat + 2 * need) * cap, n_num * cap


@nb.njit(cache=True)
def pool_generation(B):
    """How many times the pools' arrays were replaced (grown) so far."""
    return B.pgen[0]


@nb.njit(cache=True)
def pools_have_room(B, m, w_need, g_need):
    """Whether member m's parts of the pools have ``w_need`` / ``g_need`` free entries."""
    return B.w_used[m] + w_need <= B.wc.shape[1] and B.g_used[m] + g_need <= B.gc.shape[1]


@nb.njit(cache=True)
def reserve_pools(B, m, w_need, g_need):
    """Grow the pools (every member's part, by doubling, as the kernels grow them) until member
    m's parts have ``w_need`` / ``g_need`` free entries. Serial: between parallel phases.
    (Capacities never change results: the layout depends on entries used only.)"""
    have = B.wc.shape[1]
    if B.w_used[m] + w_need > have:
        grown = max(2 * have, B.w_used[m] + w_need)
        wc = np.full((B.wc.shape[0], grown), -1, np.int64)
        wv = np.zeros((B.wc.shape[0], grown))
        wc[:, :have] = B.wc
        wv[:, :have] = B.wv
        B.wc = wc
        B.wv = wv
        B.pgen[0] += 1
    have = B.gc.shape[1]
    if B.g_used[m] + g_need > have:
        width = B.gv.shape[1] // max(have, 1)
        grown = max(2 * have, B.g_used[m] + g_need)
        gc = np.full((B.gc.shape[0], grown), -1, np.int64)
        gv = np.zeros((B.gc.shape[0], grown * width))
        gc[:, :have] = B.gc
        gv[:, : have * width] = B.gv
        B.gc = gc
        B.gv = gv
        B.pgen[0] += 1


class Schedule(NamedTuple):
    """Which members a thread of ``bagging_members`` runs over which rows (module comment above)."""

    order: np.ndarray  # the members this thread tries, in order
    claimed: np.ndarray  # [M] > 0 once a thread runs member m (shared by the phase's threads)
    base: int  # first row of the block
    stop: int  # end of the block
    progress: np.ndarray  # [M] next row of member m
    halt: np.ndarray  # [1] set by a member that stopped: the others stop too


class Votes(NamedTuple):
    """Each member's kept prediction of each row of a block (``bagging_votes`` adds them up)."""

    n: np.ndarray  # [M, rows] number of classes
    k: np.ndarray  # [M, rows, C] their codes
    p: np.ndarray  # [M, rows, C] their probabilities


@nb.njit(cache=True, nogil=True)
def bagging_members(B, ipar, xn, xc, ys, ws, seqs, n_cls, code_attr, need, do_predict, do_learn,
                    order, claimed, base, stop, progress, halt, vote_n, vote_k, vote_p):  # fmt: skip
    """Online bagging (Oza 2001, Fig. 3.3) of the members in ``order`` that this thread claims,
    each alone over its rows ``progress[m]..stop``: predict row r (its sparse probabilities into
    ``vote_n[m, r - base]``, ``vote_k[m, r - base]``, ``vote_p[m, r - base]``), then learn it with
    weight k ~ Poisson(1) (``bagging_step``).

    The threads of a phase share ``claimed`` (zeros): a thread runs member m when it is the first
    to count it there (atomically), so each member runs in one thread. A thread's ``order`` lists
    its own group of members, then the others' from their ends: it runs its own (whose trees its
    core's cache holds from the last phase), then takes what the others have not reached yet.

    A member stops at a row it may learn (weight > 0) without room to do so unless shared arrays
    grow (``has_room``, ``pools_have_room``) and sets ``halt[0]``, which stops the other members
    at their next row (so that all go on together once the arrays have grown); ``progress[m]``
    is where a member stopped (``stop`` when done)."""
    C = classes_needed(n_cls, ys, base, do_learn)
    pk, pv, hint = member_buffers(B, C)
    # reference-count-free views (learners.compiled.unowned), as ensemble_run's: the threads
    # share the arguments (held by the caller), the buffers are this frame's until keep_alive
    rows = Rows(unowned(xn), unowned(xc), unowned(ys), unowned(ws), unowned(seqs), unowned(n_cls))
    sched = Schedule(unowned(order), unowned(claimed), base, stop, unowned(progress),
                     unowned(halt))  # fmt: skip
    votes = Votes(unowned(vote_n), unowned(vote_k), unowned(vote_p))
    sc = Scratch(unowned(code_attr), unowned(pk), unowned(pv), unowned(hint))
    bagging_member_rows(B, unowned(ipar), rows, sched, votes, sc, need, do_predict, do_learn)
    keep_alive(pk, pv, hint)


@nb.njit(cache=True, inline="always")
def bagging_member_rows(B, ipar, rows, sched, votes, sc, need, do_predict, do_learn):
    """The loop of ``bagging_members`` (on unowned views)."""
    n_cat = rows.xc.shape[1]
    n_num = rows.xn.shape[1]
    halt, progress, base, stop = sched.halt, sched.progress, sched.base, sched.stop
    pk, pv, hint = sc.pk, sc.pv, sc.hint
    for m in sched.order:
        if halt[0] != 0:
            break
        if progress[m] >= stop or take(sched.claimed, m) != 0:  # done, or another thread's
            continue
        r = progress[m]
        while r < stop and halt[0] == 0:
            learn = do_learn and rows.ws[r] > 0.0
            if learn:  # room for all that learning the row can take, before predicting it
                nc = classes_after(rows.n_cls, rows.ys, r)
                w_need, g_need = pool_demand(n_cat, n_num, nc, need)
                if not (has_room(B, B, need) and pools_have_room(B, m, w_need, g_need)):
                    halt[0] = 1
                    break
            hint[m, 0] = -1
            xr = rows.xn[r]
            cr = rows.xc[r]
            if do_predict:
                n = tree_proba(B, B, m, xr, cr, rows.n_cls[r], sc.code_attr, pk, pv, hint)
                votes.n[m, r - base] = n
                for i in range(n):
                    votes.k[m, r - base, i] = pk[i]
                    votes.p[m, r - base, i] = pv[i]
            if learn:
                ex = Example(xr, cr, rows.ys[r], rows.ws[r], rows.seqs[r], nc)
                bagging_step(B, m, 1.0, ipar[SEED], ex, sc)
            r += 1
        progress[m] = r


@nb.njit(cache=True)
def make_room(B, xn, xc, ys, n_cls, need, stop, progress):
    """Serially, before each parallel phase: pool room for each member not done (for learning
    its next row); returns whether the nodes and rows have room too (else Python grows them)."""
    for m in range(progress.shape[0]):
        r = progress[m]
        if r < stop:
            nc = classes_after(n_cls, ys, r)
            w_need, g_need = pool_demand(xc.shape[1], xn.shape[1], nc, need)
            reserve_pools(B, m, w_need, g_need)
    return has_room(B, B, need)


@nb.njit(cache=True)
def bagging_votes(ipar, vote_n, vote_k, vote_p, base, stop, n_cls, out):
    """Rows ``base..stop`` of ``out``: the members' kept predictions combined as
    ``bagging_predict`` combines them (same order, same sums)."""
    for r in range(base, stop):
        n = n_cls[r]
        out[r, :n] = 0.0
        voters = 0.0
        for m in range(vote_n.shape[0]):  # (bagging_predict's loop, on the kept predictions)
            k = vote_n[m, r - base]
            if k <= 0:
                continue
            if ipar[VOTE] == VOTE_MAJORITY:
                out[r, argmax(vote_k[m, r - base], vote_p[m, r - base], k)] += 1.0
            else:
                for i in range(k):
                    out[r, vote_k[m, r - base, i]] += vote_p[m, r - base, i]
            voters += 1.0
        if voters > 0.0:
            for c in range(n):
                out[r, c] /= voters


# after every kernel: one compiled version per argument type, except ensemble_run's and
# ensemble_run_io's per method (BAGGING/BOOSTING constants): bagging_run then compiles no boosting
# code (-2 s of a cold start)
one_specialisation(globals(), keep_literal=("ensemble_run", "ensemble_run_io"))
