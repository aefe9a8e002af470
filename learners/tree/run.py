"""Run kernels: ``single_run`` predicts-then-learns a block of encoded rows with a standalone
learner; ``single_run_io`` is the same over a ``RunIO`` (the bank's per-example buffers); the
helpers every ensemble's run kernel shares (``classes_needed``, ``member_buffers``,
``io_scratch``, ``io_rows``, ``io_label``, ...).
"""

from __future__ import annotations

import numba as nb
import numpy as np

from learners.jit import one_specialisation

from .layout import HINT_LEAF, HINT_WIDTH, PRED_STUMP
from .learn import tree_learn
from .predict import scatter, stump_predict_rows, tree_proba
from .rows import has_room
from .structs import keep_alive, unowned


@nb.njit(cache=True)
def classes_after(n_cls, ys, r):
    """Number of classes known once row r's label is in (labels get codes in order)."""
    return max(n_cls[r], ys[r] + 1)


@nb.njit(cache=True)
def predicted_from(xn, out):
    """The first row a run kernel predicts: ``out`` holds the predictions of the last
    ``len(out)`` rows of ``xn`` (all of them but for a deferred learn, ``TreeBank.run_one``)."""
    return max(xn.shape[0] - out.shape[0], 0)


@nb.njit(cache=True)
def classes_needed(n_cls, ys, start, do_learn):
    """Length of the sparse probability buffers for rows ``start..`` (at least 2)."""
    C = 2
    for r in range(start, n_cls.shape[0]):
        C = max(C, n_cls[r])
        if do_learn:
            C = max(C, ys[r] + 1)
    return C


@nb.njit(cache=True)
def sparse_buffers(C):
    """``pk``/``pv`` for a member's sparse probabilities (at least ``C`` classes, see
    ``classes_needed``; ``pv`` twice that, see ``nb_proba``; also learning's scratch)."""
    return np.empty(C, np.int64), np.empty(2 * C)


@nb.njit(cache=True)
def member_buffers(B, C):
    """A run's scratch: ``pk``/``pv`` (``sparse_buffers``) and ``hint`` ([M, 4], -1: the route
    and results ``tree_proba`` and ``tree_learn`` leave for the same example)."""
    pk, pv = sparse_buffers(C)
    return pk, pv, np.full((B.kind.shape[0], HINT_WIDTH), -1, dtype=np.int64)


@nb.njit(cache=True, nogil=True)
def single_run(B, ipar, fstate, xn, xc, ys, ws, seqs, start, do_predict, do_learn, out, n_cls, code_attr,
               need, hint, hinted):  # fmt: skip
    """Predict-then-learn rows ``start..`` with member 0 (a standalone learner).

    All run kernels share this signature: ``B`` the bank, ``ipar``/``fstate`` the ensemble's integer and
    float parameters/state (unused here), rows ``xn``/``xc``/``ys``/``ws`` with sequence numbers
    ``seqs``; ``n_cls[r]`` is the number of classes known when row r is predicted, and row r of
    ``out`` receives its probabilities (``out[r, :n_cls[r]]``, dense). ``out`` may have fewer
    rows than ``xn`` (``predicted_from``): then only the last ``len(out)`` rows are predicted,
    into its rows in order (a deferred learn first, ``TreeBank.run_one``). ``hint`` ([M, 4], see
    ``tree_proba``) is the call's route hint, cleared before each row, except before row
    ``start`` when ``hinted``: then it holds that row's example in the bank's current state
    (what the prediction of a deferred learn's example left, ``TreeBank.run_one``). On return
    it holds the last row's, in the state after the call. Returns the first row not
    processed (``len(ys)`` when done; earlier when arrays must grow by ``need`` nodes/slots
    first)."""
    C = classes_needed(n_cls, ys, start, do_learn)
    pk, pv = sparse_buffers(C)
    # reference-count-free views (``unowned``): the arguments are held by the caller, the
    # buffers by this frame until keep_alive
    done = single_rows(B, unowned(xn), unowned(xc), unowned(ys), unowned(ws), unowned(seqs),
                       start, do_predict, do_learn, unowned(out), unowned(n_cls),
                       unowned(code_attr), need, unowned(pk), unowned(pv), unowned(hint),
                       hinted)  # fmt: skip
    keep_alive(pk, pv)
    return done


@nb.njit(cache=True)
def single_rows(B, xn, xc, ys, ws, seqs, start, do_predict, do_learn, out, n_cls, code_attr,
                need, pk, pv, hint, hinted):  # fmt: skip
    """The rows loop of ``single_run``."""
    if do_predict and not do_learn and B.leaf_prediction == PRED_STUMP and B.n_nodes[0] == 1:
        hint[0, HINT_LEAF] = -1  # (not routed: nothing known of the example)
        return stump_predict_rows(B, xn, xc, start, out, n_cls, code_attr, pk, pv)
    R = xn.shape[0]
    first = predicted_from(xn, out)
    for r in range(start, R):
        if do_learn and not has_room(B, B, need):
            return r
        if r != start or not hinted:
            hint[0, HINT_LEAF] = -1
        if do_predict and r >= first:
            o = out[r - first]
            o[: n_cls[r]] = 0.0
            n = tree_proba(B, B, 0, xn[r], xc[r], n_cls[r], code_attr, pk, pv, hint)
            scatter(pk, pv, n, o)
        if do_learn and ws[r] > 0.0:
            nc = classes_after(n_cls, ys, r)
            tree_learn(B, B, 0, xn[r], xc[r], ys[r], ws[r], seqs[r], nc, code_attr, pk, pv,
                       hint)  # fmt: skip
    return R


# --------------------------------------------------------------------------- a RunIO's calls
@nb.njit(cache=True)
def io_scratch(io, start, do_learn):
    """The ``pk``/``pv`` of a ``RunIO`` call from row ``start`` (``sparse_buffers``): the
    struct's own when they are long enough (``classes_needed``), else new ones."""
    C = classes_needed(io.n_cls, io.ys, start, do_learn)
    if C <= io.pk.shape[0]:
        return io.pk, io.pv
    return sparse_buffers(C)


@nb.njit(cache=True)
def io_rows(io, start, cats):
    """The ``xc`` and ``out`` of a ``RunIO`` call from row ``start`` (what every IO run kernel
    passes on): ``io.xc`` when ``cats``, else ``io.no_cats``; ``io.out_now`` when ``start`` is 0
    (row 0, a deferred learn, is learned and not predicted), else ``io.out``."""
    return (io.xc if cats else io.no_cats), (io.out_now if start == 0 else io.out)


@nb.njit(cache=True)
def label_code(row, n):
    """The class ``predict_one`` answers from a predicted row's first ``n`` probabilities: the
    first of the largest, as ``max`` then ``index`` of a list; -1 when all are 0 (no answer);
    -2 when one is not finite (NaN, an infinity: the caller decides, from the answer's dict)."""
    k = 0
    some = False
    for i in range(n):
        v = row[i]
        if not np.isfinite(v):
            return -2
        if v != 0.0:
            some = True
        if v > row[k]:
            k = i
    return k if some else -1


@nb.njit(cache=True)
def io_label(io, do_predict, done):
    """After an IO run kernel's rows (``done`` the first row not processed): ``io.label[0] =
    label_code`` of the predicted example (row 1 of ``io.out``) when the call predicted it and
    ``io.label`` has room (a batch's ``RunIO`` has none)."""
    if do_predict and done == io.xn.shape[0] and io.label.shape[0] != 0:
        io.label[0] = label_code(io.out[1], io.n_cls[1])


@nb.njit(cache=True, nogil=True)
def single_run_io(B, io, code_attr, start, do_predict, do_learn, need, hinted, cats):
    """``single_run`` over the buffers of ``io`` (a ``RunIO``): the IO run kernel of a
    standalone learner. Every IO run kernel has this signature: ``xc`` is ``io.xc`` when
    ``cats``, else ``io.no_cats``; ``out`` is ``io.out_now`` when ``start`` is 0 (the deferred
    learn's row, not predicted), else ``io.out``; the rest as ``single_run``. A call that
    predicts row 1 also leaves its ``label_code`` in ``io.label[0]`` (``io_label``)."""
    pk, pv = io_scratch(io, start, do_learn)
    xc, out = io_rows(io, start, cats)
    done = single_rows(B, io.xn, xc, io.ys, io.ws, io.seqs, start, do_predict, do_learn, out,
                       io.n_cls, unowned(code_attr), need, unowned(pk), unowned(pv), io.hint,
                       hinted)  # fmt: skip
    keep_alive(pk, pv)
    io_label(io, do_predict, done)
    return done


one_specialisation(globals())  # after every kernel: one compiled version per argument type
