"""The compiled learner protocol: what an ensemble may use of a native learner.

Every learner has the Python protocol of :mod:`learners.base` (``learn_one``, ``predict_proba_one``,
...). Native learners (:class:`~learners.native.NativeLearner`) have a second one, this module, so
that an ensemble runs all its members inside *one* compiled kernel (ARCHITECTURE §3):

- :class:`TreeBank` holds M members' state as arrays (``bank.view()`` is the struct kernels read,
  ``bank.run`` / ``bank.run_one`` call a *run kernel* over encoded rows, growing arrays as needed);
  :func:`bank_params` and :func:`learner_limits` give what a bank is built from.
- Member kernels, callable from numba code: :func:`tree_proba` (member m's class probabilities for
  one encoded row, *sparse*: class codes into ``pk``, probabilities into ``pv``, returns how
  many), :func:`scatter` (those into a dense row), :func:`tree_learn` (member m learns one row
  with a weight), :func:`best_class` (the class of the largest of ``n`` sparse probabilities,
  -1 for none), :func:`tree_best` (``best_class`` of ``tree_proba``'s answer, reusing a
  prediction of the same example), :func:`classes_needed` (length of the ``pk``/``pv`` buffers for a block of
  rows), :func:`classes_after` (classes known once
  row r's label is in), :func:`has_room` (whether ``need`` more nodes fit before learning a row),
  :func:`tree_reset` (member m becomes a fresh, untrained tree: a drift detector's reset),
  :func:`tree_reset_keyed` (the same with a fresh draw of random feature subspaces).
- :func:`single_run` is the run kernel of one standalone learner; an ensemble's run kernel has the
  same signature (``B, ipar, fstate, xn, xc, ys, ws, seqs, start, do_predict, do_learn, out, n_cls,
  code_attr, need, hint, hinted``) and returns the first row it did not process. ``hint`` is the
  caller's route hint (``[M, 4]``; ``TreeBank`` keeps one across its per-example calls, so that a
  deferred learn reuses its example's prediction: ``hinted``); :func:`member_buffers` and
  :func:`sparse_buffers` make a kernel's own scratch.
- An *IO run kernel* is a run kernel over a ``RunIO`` (:func:`make_run_io`: one struct of the
  bank's per-example buffers, so a call unboxes one object instead of eleven arrays):
  :func:`single_run_io` is ``single_run``'s and documents the signature (``B, io, code_attr,
  start, do_predict, do_learn, need, hinted, cats``); :func:`io_scratch` gives a call's
  ``pk``/``pv``, :func:`io_rows` its ``xc`` and ``out``, :func:`io_label` leaves the predicted label's code for ``predict_one``.
  :func:`register_io_run` tells ``TreeBank`` to call a run kernel through its IO run kernel
  (:func:`io_run_of`), per example and in batches; unregistered kernels are called as before.
- :func:`member_path` (an example's walk from the root of tree m to its leaf, read in Python:
  each split's test and branch, the leaf's class weights and predictor) and
  :func:`member_splits` (tree m's split nodes: feature, depth, weight at the split, and the
  merit and the model's example count recorded when it split; :func:`merit_criterion` says
  what the merits measure), for explanations and feature importance; no kernel.
- ``STATE_FORMAT`` / ``STATE_VERSION`` / ``READABLE_VERSIONS`` version the ``to_state`` header;
  ``KERNEL_SOURCES`` are the files whose code compiled callers inline (their numba caches depend
  on them).

The names here are stable; the modules behind them (the package :mod:`learners.tree`) may change
shape.

Examples
--------
>>> from learners import HoeffdingTree
>>> from learners.compiled import TreeBank, bank_params, learner_limits
>>> tree = HoeffdingTree(grace_period=10)
>>> bank = TreeBank(bank_params(tree), 1, limits=learner_limits(tree))
>>> bank.run_one(single_run, NO_INT_PARAMS, NO_FLOAT_STATE, {"x": 1.0}, "a", 1.0, learn=True)
{}
>>> bank.run_one(single_run, NO_INT_PARAMS, NO_FLOAT_STATE, {"x": 2.0}), bank.n_seen
({'a': 1.0}, 1)
"""

from __future__ import annotations

from .limits import Limits
from .native import _NO_FLOAT_STATE as NO_FLOAT_STATE  # fstate of a kernel keeping none
from .native import _NO_INT_PARAMS as NO_INT_PARAMS  # ipar of a kernel taking none
from .native import (
    BANK_KERNELS,
    LEARNER_JOB,
    READABLE_VERSIONS,
    STATE_FORMAT,
    STATE_VERSION,
    NativeLearner,
)
from .tree import KERNEL_FILES
from .tree.bank import TreeBank
from .tree.calls import io_run_of, register_io_run
from .tree.explain import Split, member_path, member_splits, merit_criterion
from .tree.layout import TreeParams
from .tree.learn import tree_learn
from .tree.predict import argmax as best_class
from .tree.predict import scatter, tree_best, tree_proba
from .tree.rows import has_room, tree_reset, tree_reset_keyed
from .tree.run import (
    classes_after,
    classes_needed,
    io_label,
    io_rows,
    io_scratch,
    member_buffers,
    predicted_from,
    single_run,
    single_run_io,
    sparse_buffers,
)
from .tree.structs import keep_alive, make_run_io, unowned

KERNEL_SOURCES = KERNEL_FILES  # (every module of learners.tree with kernels)


def bank_params(learner: NativeLearner) -> TreeParams:
    """The kernel parameters of a native learner (what its members are: tree, stump, NB)."""
    return learner._tree_params()


def learner_limits(learner: NativeLearner) -> Limits:
    """The limits a native learner was given (``Limits`` defaults when none)."""
    return learner._limits()


__all__ = [
    "BANK_KERNELS",
    "LEARNER_JOB",
    "KERNEL_SOURCES",
    "NO_FLOAT_STATE",
    "NO_INT_PARAMS",
    "READABLE_VERSIONS",
    "STATE_FORMAT",
    "STATE_VERSION",
    "TreeBank",
    "TreeParams",
    "best_class",
    "bank_params",
    "classes_after",
    "classes_needed",
    "has_room",
    "learner_limits",
    "scatter",
    "single_run",
    "single_run_io",
    "io_scratch",
    "io_label",
    "io_rows",
    "make_run_io",
    "member_path",
    "member_splits",
    "merit_criterion",
    "Split",
    "io_run_of",
    "register_io_run",
    "sparse_buffers",
    "tree_best",
    "tree_learn",
    "tree_proba",
    "tree_reset",
    "tree_reset_keyed",
    "keep_alive",
    "member_buffers",
    "predicted_from",
    "unowned",
]
