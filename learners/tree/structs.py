"""The numba extension types of a bank: the ``Bank`` struct kernels take (every state array and
parameter of a ``TreeState`` / ``TreeParams`` in one object), the ``RunIO`` struct of a call's
buffers, and ``unowned`` / ``keep_alive``, which let kernels read arrays without reference counts
(docs/architecture.md, *Reference counts*).
"""

from __future__ import annotations

from types import SimpleNamespace

import numba as nb
from numba.core import cgutils, types
from numba.experimental import structref
from numba.extending import intrinsic, overload
from numba.np.arrayobj import make_array, populate_array

from learners.jit import compiled_cold, one_specialisation

from .layout import INDEX_FIELDS, PARAM_FIELDS, STATE_FIELDS, TreeParams, TreeState


@structref.register
class BankType(types.StructRef):
    """Numba type of a bank: all state arrays and parameters in one struct, so a kernel call
    unboxes one object (~1 µs) instead of fifty."""

    def preprocess_fields(self, fields):
        return tuple((name, types.unliteral(typ)) for name, typ in fields)


class Bank(structref.StructRefProxy):
    """Python handle of a ``BankType``; Python reads the arrays through ``TreeState`` (and the
    pools, which kernels may replace, through ``pools``)."""


structref.define_proxy(Bank, BankType, list(STATE_FIELDS + INDEX_FIELDS + PARAM_FIELDS))


@intrinsic
def _unowned(typingctx, arr):
    def codegen(context, builder, sig, args):
        ary = make_array(arr)(context, builder, value=args[0])
        out = make_array(arr)(context, builder)
        populate_array(out, data=ary.data, shape=ary.shape, strides=ary.strides,
                       itemsize=ary.itemsize, meminfo=cgutils.get_null_value(ary.meminfo.type),
                       parent=ary.parent)  # fmt: skip
        return out._getvalue()

    return arr(arr), codegen


def unowned(arr):
    """The array ``arr`` without its reference count, in a kernel: a null meminfo, the same
    data, shape and parent object. Passing or reading it then costs no atomic increment and
    decrement, which took most of a kernel's time (a pair per bank field read, per array
    argument). Only for arrays something else keeps alive for as long as the view is used: the
    bank's arrays are owned by the ``TreeState`` it is made from (see ``make_bank``); a kernel's
    own buffers by a variable used after the view's last use (``keep_alive``). In Python (the
    interpreted twins) the array itself; anything not an array is given as it is."""
    return arr


@overload(unowned)
def _unowned_kernel(arr):
    if isinstance(arr, types.Array):
        return lambda arr: _unowned(arr)
    return lambda arr: arr  # (anything else as it is: a struct argument of make_run_io)


def keep_alive(*arrays):
    """A use of ``arrays``: numba frees an array after its variable's last use, and ``unowned``
    views of it do not count; call this after the views' last use."""
    return None


@overload(keep_alive)
def _keep_alive_kernel(*arrays):
    return lambda *arrays: None


@nb.njit(cache=True)
def _make_bank(T, P):
    """The ``Bank`` of the arrays of ``T`` (a ``TreeState``, as ``unowned`` views) and the
    parameters ``P`` (a ``TreeParams`` of plain ints and floats): every field, by name."""
    return Bank(unowned(T.kind), unowned(T.attr), unowned(T.thr), unowned(T.slot),
                unowned(T.child), unowned(T.sibling), unowned(T.branch), unowned(T.depth),
                unowned(T.d_at), unowned(T.d_len), unowned(T.merit), unowned(T.split_seen),
                unowned(T.n_nodes), unowned(T.last),
                unowned(T.mc_ok), unowned(T.nb_ok), unowned(T.f_head), unowned(T.f_tail),
                unowned(T.f_pend), unowned(T.o_head), unowned(T.o_tail), unowned(T.o_pend),
                unowned(T.free), unowned(T.n_free), unowned(T.n_slots), unowned(T.fw_at),
                unowned(T.fw_len), unowned(T.nvals), unowned(T.f_attr), unowned(T.f_next),
                unowned(T.v_head), unowned(T.v_tail), unowned(T.v_pend), unowned(T.n_f),
                unowned(T.f_freed), unowned(T.vw_at), unowned(T.vw_len), unowned(T.v_code),
                unowned(T.v_next), unowned(T.n_v), unowned(T.v_freed), unowned(T.g_at),
                unowned(T.g_len), unowned(T.o_fresh), unowned(T.o_attr), unowned(T.o_next),
                unowned(T.n_o), unowned(T.o_freed), unowned(T.wc), unowned(T.wv),
                unowned(T.w_used), unowned(T.w_dead), unowned(T.gc), unowned(T.gv),
                unowned(T.g_used), unowned(T.g_dead), unowned(T.hkey), unowned(T.hval),
                unowned(T.n_keys), unowned(T.f_of), unowned(T.o_of), unowned(T.width),
                unowned(T.wsum), unowned(T.pgen), P.grace_period, P.delta, P.tau, P.criterion,
                P.leaf_prediction, P.nb_threshold, P.max_depth, P.max_nodes, P.n_split_points,
                P.min_branch_frac, P.subspace_mode, P.subspace_size, P.subspace_scope,
                P.subspace_seed, P.nb_zero_variance)  # fmt: skip


@nb.njit(cache=True)
def pools(T):
    """The class-entry pool arrays ``(wc, wv, gc, gv)`` the bank holds now (kernels replace them
    when they grow)."""
    return T.wc, T.wv, T.gc, T.gv


def make_bank(T: TreeState, P: TreeParams) -> Bank:
    """One struct over the arrays of ``T`` (shared memory) and the parameters ``P``.

    The struct holds ``unowned`` views: it does not keep ``T``'s arrays alive, so whoever holds
    the bank holds ``T`` too (``TreeBank.set_arrays`` sets both). Arrays a kernel puts in the bank
    (grown pools) are owned by the bank until ``TreeBank.sync`` hands them to a new ``T``."""
    return _make_bank(T, _typed_params(P))


def interpreted_bank(T: TreeState, P: TreeParams) -> SimpleNamespace:
    """What ``make_bank`` gives, for the interpreted twins: the same arrays, as attributes."""
    return SimpleNamespace(**T._asdict(), **_typed_params(P)._asdict())


def _typed_params(P: TreeParams) -> TreeParams:
    p = P._replace(
        grace_period=float(P.grace_period), delta=float(P.delta), tau=float(P.tau),
        criterion=int(P.criterion), leaf_prediction=int(P.leaf_prediction),
        nb_threshold=float(P.nb_threshold), max_depth=int(P.max_depth),
        max_nodes=int(P.max_nodes), n_split_points=int(P.n_split_points),
        min_branch_frac=float(P.min_branch_frac), subspace_mode=int(P.subspace_mode),
        subspace_size=float(P.subspace_size), subspace_scope=int(P.subspace_scope),
        subspace_seed=int(P.subspace_seed), nb_zero_variance=int(P.nb_zero_variance),
    )  # fmt: skip
    return p


RUN_IO_FIELDS = ("ipar", "fstate", "xn", "xc", "no_cats", "ys", "ws", "seqs", "out", "out_now",
                 "n_cls", "hint", "pk", "pv", "label")  # fmt: skip


@structref.register
class RunIOType(types.StructRef):
    """Numba type of a ``RunIO``: the buffers of ``TreeBank.run_one``'s kernel calls in one
    struct, so that a call unboxes one object instead of eleven arrays (each array argument
    costs numba's entry a reference-counted wrapper: ~0.4 µs of a ~10 µs example with the
    scratch below, measured in profile.md)."""

    def preprocess_fields(self, fields):
        return tuple((name, types.unliteral(typ)) for name, typ in fields)


class RunIO(structref.StructRefProxy):
    """Python handle of a ``RunIOType``; made by ``make_run_io``, held by the ``TreeBank``
    whose buffers it views."""


structref.define_proxy(RunIO, RunIOType, list(RUN_IO_FIELDS))


@nb.njit(cache=True)
def make_run_io(ipar, fstate, xn, xc, no_cats, ys, ws, seqs, out, out_now, n_cls, hint, pk, pv,
                label):  # fmt: skip
    """A ``RunIO`` of ``unowned`` views of a run kernel's arguments (``single_run``'s, but
    ``out_now``: ``out``'s last row, the ``out`` of a call whose first row is a deferred learn;
    ``no_cats``: the ``xc`` of a row without categories) and of a call's scratch ``pk``/``pv``
    (``sparse_buffers``, for calls needing at most ``len(pk)`` classes); ``label[0]`` receives
    a predicting call's ``label_code`` of row 1 (``io_label``). The arrays must
    outlive it: the bank that makes it holds them, and drops it before replacing any.
    ``fstate`` may be a struct (adaptive ensembles; ``unowned`` gives it as it is): held."""
    return RunIO(unowned(ipar), unowned(fstate), unowned(xn), unowned(xc), unowned(no_cats),
                 unowned(ys), unowned(ws), unowned(seqs), unowned(out), unowned(out_now),
                 unowned(n_cls), unowned(hint), unowned(pk), unowned(pv),
                 unowned(label))  # fmt: skip


compiled_cold(_make_bank)  # run once per model or state (learners.jit)
one_specialisation(globals())  # after every kernel: one compiled version per argument type
