"""How a ``TreeBank`` calls a run kernel: over a batch of encoded rows (``BatchCalls``), or over
one example (``ExampleCalls.run_one``: encode the dict into the bank's two-row buffers, call the
kernel through its compiled entry point and a ``RunIO``, decode the answer), with a learn kept
for the next call (``defer``) and the route hint kept across calls (docs/architecture.md,
*Deferred learns*, *The route hint across a deferred learn*)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

from learners.base import argmax_label, check_weights
from learners.jit import MODE, entry_point, interpreting, twin_of
from learners.schema import FeatureTypeError

from .alloc import BankArrays
from .encode import KEPT, NO_CATEGORIES, NOW, ExampleEncoding, KeptEncoding
from .run import single_run, single_run_io
from .structs import make_run_io

# a batch RunIO's scratch and label: none (see start_encoded)
_NO_PK = np.empty(0, np.int64)
_NO_PV = np.empty(0)
_NO_LABEL = np.empty(0, np.int64)
# the buffers of ``ExampleCalls._one`` (memoryviews of the two-row arrays): label codes,
# weights, sequence numbers, classes known
ONE_Y, ONE_W, ONE_SEQ, ONE_NCLS = 0, 1, 2, 3
# run kernel -> its IO run kernel (``run.single_run_io``'s signature: the kernel over a
# ``RunIO`` of the call's buffers), for run_one, flush and start_encoded (see register_io_run)
IO_RUNS: dict[Any, Any] = {single_run: single_run_io}


def register_io_run(kernel: Any, io_kernel: Any) -> None:
    """Let ``TreeBank`` call run kernel ``kernel`` through ``io_kernel``, its IO run kernel
    (``learners.tree.run.single_run_io``'s signature, the same results): per example
    (``run_one``, ``flush``) and in batches (``start_encoded``). Interpreted twins (a kernel
    module executed again in Python) register nothing."""
    if hasattr(kernel, "py_func") and hasattr(io_kernel, "py_func"):
        IO_RUNS[kernel] = io_kernel


def io_run_of(kernel: Any) -> Any:
    """The IO run kernel registered for run kernel ``kernel`` (``register_io_run``), or None."""
    return IO_RUNS.get(kernel)


class DeferredLearn(NamedTuple):
    """A learn ``run_one(..., defer=True)`` kept for the next call (its row is row ``KEPT`` of
    the two-row buffers): the kernel call's arguments, and whether the bank's hint holds its
    example's route (``hinted``: the last call on the bank predicted it)."""

    kernel: Any
    ipar: Any
    fstate: Any
    need: int
    xn: np.ndarray
    xc: np.ndarray
    hinted: bool


class Entry(NamedTuple):
    """A run kernel's compiled entry point for one bank (``jit.entry_point``): valid while it
    is called with these ``ipar``/``fstate`` objects; ``io`` the ``RunIO`` it takes (an IO run
    kernel's) or None."""

    ipar: Any
    fstate: Any
    run: Any
    io: Any


class BatchCalls(BankArrays):
    """A run kernel over a batch of encoded rows (``run``, ``run_encoded``, ``start_encoded``)."""

    def run(self, kernel, ipar, fstate, X, ys=None, ws=None, *, predict: bool = True,
            learn: bool = False) -> list[dict]:  # fmt: skip
        """Run ``kernel`` (signature of ``run.single_run``) over rows; returns the predictions
        (made before each row is learned) when ``predict``."""
        do_predict, do_learn = predict, learn  # (run_encoded runs a deferred learn first)
        schema = self.schema
        R = len(X)
        if do_learn:
            self.check_bytes()
        if ws is None:
            w = np.ones(R)
        else:  # checked before encoding: a rejected call leaves no trace in the schema
            w = check_weights(ws, R)
        xn, xc, yc, n_cls = schema.encode_rows(X, grow=do_learn, ys=ys if do_learn else None)
        out = self.run_encoded(kernel, ipar, fstate, xn, xc, yc, w, n_cls, predict=do_predict,
                               learn=do_learn)  # fmt: skip
        if not do_predict:
            return []
        return schema.proba_dicts(out, n_cls)

    def run_encoded(self, kernel, ipar, fstate, xn, xc, yc, w, n_cls, *, predict: bool = True,
                    learn: bool = False) -> np.ndarray:  # fmt: skip
        """``run`` on rows already encoded under ``self.schema`` (as ``Schema.encode_rows``
        returns them; ``w`` checked). Returns the probabilities ``[R, C]`` (over the ``n_cls[r]``
        classes known at row r; a row of zeros when there is no prediction; ``[R, 1]`` of zeros
        when not predicting)."""
        return self.start_encoded(kernel, ipar, fstate, xn, xc, yc, w, n_cls, predict=predict,
                                  learn=learn)()  # fmt: skip

    def start_encoded(self, kernel, ipar, fstate, xn, xc, yc, w, n_cls, *, predict: bool = True,
                      learn: bool = False) -> Callable[[], np.ndarray]:  # fmt: skip
        """``run_encoded`` in two halves: this one, in the calling thread, fits the bank to the
        schema's width and numbers the rows; it returns the other, the kernel loop (growing the
        arrays, counting ``n_seen``), which returns ``run_encoded``'s result. Call the loop once,
        in any thread, before anything else uses the bank; while it runs the schema may grow
        (a pipelined stream encodes the next batch): the loop reads nothing of the schema but
        the ``code_attr`` array taken here (later codes do not change its entries)."""
        do_predict, do_learn = predict, learn
        self.flush()
        self._hint_for = None
        R = xn.shape[0]
        if do_learn:
            self.fit_schema()
            self._set_width(
                max(xc.shape[1], self.schema.n_cat), max(xn.shape[1], self.schema.n_num)
            )
            self._fitted = None  # the width may exceed the schema's: the next fit_schema resets it
        out = np.zeros((R, max(int(n_cls.max()), 1) if do_predict and R else 1))
        learned = w > 0.0
        seqs = self.n_seen + np.cumsum(learned) - 1  # sequence number of each learned row
        n_learned = int(learned.sum())
        need = self.need() if do_learn else 0
        code_attr = self.schema.code_attr_array
        interp = MODE.interpreted and interpreting()  # one mode for the whole call
        run = twin_of(kernel) if interp else kernel
        hint = np.full((self.M, 4), -1, np.int64)  # the batch's own (not the per-example one)
        io_run = None if interp else IO_RUNS.get(kernel)
        if io_run is not None:  # through the IO run kernel, as run_one: one compiled kernel per
            # kind serves both (its run kernel is then never compiled). out serves as out_now
            # (every row predicted), no scratch (each call makes its own), no label. Its views'
            # arrays live as long as loop, whose closure holds them (the branch below names them)
            io = make_run_io(ipar, fstate, xn, xc, xc, yc, w, seqs, out, out, n_cls, hint,
                             _NO_PK, _NO_PV, _NO_LABEL)  # fmt: skip

        def loop() -> np.ndarray:
            start = 0
            while True:
                if io_run is not None:
                    start = io_run(self.view(interp), io, code_attr, start, do_predict, do_learn,
                                   need, False, True)  # fmt: skip
                else:
                    start = run(self.view(interp), ipar, fstate, xn, xc, yc, w, seqs, start,
                                do_predict, do_learn, out, n_cls, code_attr, need, hint, False)  # fmt: skip
                if start >= R:
                    break
                self.grow_nodes(need)
            self.sync()
            if do_learn:
                self.n_seen += n_learned
            return out

        return loop


class ExampleCalls(ExampleEncoding):
    """A run kernel over one example (``run_one``), and the learn it may keep (``flush``)."""

    # (set by bank.TreeBank.__init__)
    _pending: DeferredLearn | None
    _hint1: np.ndarray
    _hint_for: KeptEncoding | None
    _hint_kernel: Any
    _learns_only: bool
    _entries: dict[Any, Entry]
    _y1: np.ndarray
    _w1: np.ndarray
    _seq1: np.ndarray
    _ncls1: np.ndarray
    _one: Any
    _out1: np.ndarray
    _out_now: np.ndarray
    _out_vals: Any
    _pk1: np.ndarray
    _pv1: np.ndarray
    _label1: np.ndarray
    _label: Any

    def run_one(self, kernel, ipar, fstate, x, y=None, w: float = 0.0, *, predict: bool = True,
                learn: bool = False, label_only: bool = False, defer: bool = False):  # fmt: skip
        """The per-example fast path of ``run`` (same results, less overhead); with
        ``label_only`` the prediction is returned as the most probable label.

        ``defer`` (with ``learn`` and not ``predict``): the example is checked, encoded and
        counted (``n_seen``) as by an eager learn, every error raised here, but the kernel call
        that learns it is kept for the next call: a prediction then learns it and predicts its
        own example in one kernel call (rows ``KEPT`` and ``NOW``), as an eager learn then
        the prediction would (river's loop: ``predict_one`` then ``learn_one``, one compiled
        call per example instead of two). Anything else that runs or reads the bank first
        runs it (``flush``); the owner of the bank must flush before its own reads (the
        models do it in the properties through which they reach the bank)."""
        do_predict, do_learn = predict, learn
        s = self.schema
        if type(x) is not dict and not isinstance(x, dict):
            raise FeatureTypeError("features", f"expected a dict, got {type(x).__name__}")
        kept = self._pending
        if kept is not None and (do_learn or kept.kernel is not kernel or kept.ipar is not ipar
                                 or kept.fstate is not fstate):  # fmt: skip
            self.flush()  # learned before this call's checks see the model
            kept = None
        hint_for = self._hint_for  # (what _hint1 holds the route of, if anything: see below)
        self._hint_for = None
        hinted = False
        if do_learn:
            xn, xc, n_cls, yc = self._encode_learned(x, y, w)
            need = s._max_values if s._max_values > 2 else 2  # self.need(), without min/max
            if need > self._max_nodes:  # (builtin calls: ~0.2 us of a ~8 us example)
                need = self._max_nodes
            need += 2
            # kept for the next call (row KEPT), unless the last call learned too: a loop of
            # learns alone gains nothing (each would run the one kept before) and learns at once
            if defer and not do_predict and w > 0.0 and not self._learns_only:
                self._defer(kernel, ipar, fstate, need, xn, xc, yc, w, n_cls, hint_for)
                return None
            self._learns_only = not do_predict
            start = NOW
        else:
            xn, xc = self._encode_one(x, False)
            n_cls = len(s.classes)
            yc = 0
            self._learns_only = False
            if kept is not None and kept.xn is xn and kept.xc is xc:
                # learn the kept example (row KEPT), then predict this one (row NOW, w = 0)
                need, start, do_learn, hinted = kept.need, KEPT, True, kept.hinted
                self._pending = None
            else:
                self.flush()  # (kept in other buffers: not after a flush in _encode_one)
                need, start = 0, NOW
        one = self._one  # memoryviews of the buffers (cheaper to set than numpy's items)
        one[ONE_Y][NOW] = yc
        one[ONE_W][NOW] = w
        one[ONE_SEQ][NOW] = self.n_seen
        one[ONE_NCLS][NOW] = n_cls
        if self._out1.shape[1] < n_cls:
            self._set_out(max(n_cls, 2 * self._out1.shape[1]))
        io = self._call(kernel, ipar, fstate, xn, xc, start, do_predict, do_learn, need, hinted,
                        keep_entry=True)  # fmt: skip
        if do_learn and self._pgen_now[0] != self._pgen:  # (only learning grows the pools)
            self.sync()
        if not learn:  # row NOW predicted, not learned: _hint1 holds its route in this state
            self._hint_for = self._last
            self._hint_kernel = kernel
        if do_learn and w > 0.0:
            self.n_seen += 1
        if do_predict:
            if label_only:
                return self._label_of(io is not None, n_cls)
            return s.proba_dict(self._out1[NOW], n_cls)
        return None

    def _set_out(self, n_cls: int) -> None:
        """The per-example output rows (grown with the classes), and a view of the last one: a
        call that learns a deferred example (row KEPT) predicts only row NOW into it
        (``run.predicted_from``)."""
        self._out1 = np.zeros((2, n_cls))
        self._out_now = self._out1[NOW:]
        # a call's pk/pv scratch (run.sparse_buffers; a call may need one class more than
        # it predicts: a new label's)
        self._pk1 = np.empty(n_cls + 1, np.int64)
        self._pv1 = np.empty(2 * (n_cls + 1))
        self._label1 = np.zeros(1, np.int64)  # an IO call's run.label_code of row NOW
        self._label = memoryview(self._label1)  # type: ignore[arg-type]
        self._entries.clear()  # (their RunIOs view the old buffers)
        # row NOW's numbers, read as a list by predict_one (cheaper than numpy's row and tolist)
        self._out_vals = memoryview(self._out1).cast("B").cast("d")[n_cls:]  # type: ignore[arg-type]

    def _defer(self, kernel: Any, ipar: Any, fstate: Any, need: int, xn: np.ndarray,
               xc: np.ndarray, yc: int, w: float, n_cls: int, hint_for: Any) -> None:  # fmt: skip
        """Keep the learn of the example encoded in row ``NOW`` for the next call: its row
        copied to row ``KEPT``, counted (``n_seen``)."""
        self._learns_only = True
        row = self._xn_bytes  # xn[KEPT] = xn[NOW]
        half = len(row) >> 1
        row[:half] = row[half:]
        if xc is not NO_CATEGORIES:
            row = self._xc_bytes
            half = len(row) >> 1
            row[:half] = row[half:]
        one = self._one
        one[ONE_Y][KEPT] = yc
        one[ONE_W][KEPT] = w
        one[ONE_SEQ][KEPT] = self.n_seen
        one[ONE_NCLS][KEPT] = n_cls
        # the last call predicted this row (the encoding it kept is this one's) and
        # nothing ran since: its route in _hint1 holds for learning it
        hinted = hint_for is not None and hint_for is self._last and self._hint_kernel is kernel
        self._pending = DeferredLearn(kernel, ipar, fstate, need, xn, xc, hinted)
        self.n_seen += 1

    def _call(self, kernel: Any, ipar: Any, fstate: Any, xn: np.ndarray, xc: np.ndarray,
              start: int, do_predict: bool, do_learn: bool, need: int, hinted: bool, *,
              keep_entry: bool) -> Any:  # fmt: skip
        """Call run kernel ``kernel`` on the two-row buffers from row ``start``, growing the
        arrays whenever it stops for room; returns the ``RunIO`` it was called through (None:
        the kernel itself, or its twin). Through its entry point when the bank has one for it
        (``_entries``), else its dispatcher, whose entry point is kept then (``keep_entry``)."""
        interp = MODE.interpreted and interpreting()  # one mode for the whole call
        fill = False
        io = None
        if interp:
            run = twin_of(kernel)
        else:  # the kernel's entry point for this bank's argument types, after its first call
            entry = self._entries.get(kernel)
            if entry is not None and entry.ipar is ipar and entry.fstate is fstate:
                run = entry.run
                io = entry.io
            else:
                (run, io), fill = self._first_run(kernel, ipar, fstate), keep_entry
        B = self.B
        if interp or B is None:
            B = self.view(interp)
        code_attr = self.schema.code_attr_array
        if io is not None:  # (one struct of the buffers: see structs.RunIOType)
            cats = xc is not NO_CATEGORIES
            while (start := run(B, io, code_attr, start, do_predict, do_learn, need, hinted,
                                cats)) < 2:  # fmt: skip
                self.grow_nodes(need)
                B = self.view(interp)  # grown arrays: a new struct
                hinted = False  # (routed again: simpler than proving the route survives growth)
            if fill:  # every argument's type is fixed for this bank from now on
                self._entries[kernel] = Entry(ipar, fstate, entry_point(run, (
                    B, io, code_attr, 0, do_predict, do_learn, need, hinted, cats)), io)  # fmt: skip
            return io
        out = self._out_now if start == KEPT and do_predict else self._out1  # (flush: _out1)
        hint = self._hint1
        while (start := run(B, ipar, fstate, xn, xc, self._y1, self._w1, self._seq1, start,
                            do_predict, do_learn, out, self._ncls1, code_attr, need, hint,
                            hinted)) < 2:  # fmt: skip
            self.grow_nodes(need)
            B = self.view(interp)
            hinted = False
        if fill:
            self._entries[kernel] = Entry(ipar, fstate, entry_point(kernel, (
                B, ipar, fstate, xn, xc, self._y1, self._w1, self._seq1, 0, do_predict,
                do_learn, out, self._ncls1, code_attr, need, hint, hinted)), None)  # fmt: skip
        return None

    def _label_of(self, through_io: bool, n_cls: int) -> Any:
        """``predict_one``'s answer from the predicted row ``NOW`` (the first of its largest
        probabilities, as ``argmax_label``) without building its dict: the kernel's
        ``label_code`` when it was called through a ``RunIO``, else read from the row."""
        s = self.schema
        if through_io:  # the kernel's label_code of the row
            k = self._label[0]
            if k >= 0:
                return s.classes[k]
            if k == -1:
                return None  # (-2, a value not finite: as below)
        if n_cls == 2:  # (two classes, one larger: the max and its first index, read)
            two = self._out_vals
            if two[0] > two[1]:
                return s.classes[0]
            if two[1] > two[0]:
                return s.classes[1]
        vals = self._out_vals[:n_cls].tolist()  # (list functions: numpy's cost more)
        t = sum(vals)
        if t != t:  # a NaN: as the answer's dict (proba_dict) would be read
            return argmax_label(dict(zip(s.classes[:n_cls], vals, strict=True)))
        return s.classes[vals.index(max(vals))] if any(vals) else None

    def _first_run(self, kernel: Any, ipar: Any, fstate: Any) -> tuple[Any, Any]:
        """What a per-example call of run kernel ``kernel`` calls before it has an entry point
        (``run_one``, ``flush``): ``(dispatcher, io)``, the dispatcher of its IO run kernel
        (see IO_RUNS) with a new ``RunIO`` of this bank's per-example buffers (``run_one``
        keeps it in ``_entries``, cleared whenever a buffer is replaced), or ``(kernel,
        None)`` for a kernel without one."""
        io_run = IO_RUNS.get(kernel)
        if io_run is None:
            return kernel, None
        return io_run, make_run_io(ipar, fstate, self._xn1, self._xc1, NO_CATEGORIES, self._y1,
                                   self._w1, self._seq1, self._out1, self._out_now, self._ncls1,
                                   self._hint1, self._pk1, self._pv1, self._label1)  # fmt: skip

    def flush(self) -> None:
        """Run the learn that ``run_one(..., defer=True)`` kept, if any (its own kernel call)."""
        kept = self._pending
        if kept is None:
            return
        self._pending = None
        self._hint_for = None
        self._one[ONE_W][NOW] = 0.0  # row NOW: nothing to do
        self._call(kept.kernel, kept.ipar, kept.fstate, kept.xn, kept.xc, KEPT, False, True,
                   kept.need, kept.hinted, keep_entry=False)  # fmt: skip
        if self._pgen_now[0] != self._pgen:
            self.sync()
