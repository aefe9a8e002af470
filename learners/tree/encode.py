"""Encoding one example for a kernel call: a dict into row ``NOW`` of the bank's two-row
buffers, read by name when it has exactly the model's features (``Schema.row_readers``), else
through the schema's loop (docs/architecture.md, *A known row, read by name*)."""

from __future__ import annotations

import math
import struct
from typing import Any, NamedTuple

import numpy as np

from learners.base import MAX_WEIGHT, check_weight

from .alloc import BankArrays

NO_CATEGORIES = np.full((2, 1), -1, dtype=np.int64)  # _encode_one's xc without categories
_FLOAT_INT = frozenset({float, int})  # a row's numbers that _encode_one packs as they are
_NAN1 = (math.nan,)  # the row of a schema without numeric features
# the rows of run_one's two-row buffers: a deferred learn (``defer``) and the current example
KEPT, NOW = 0, 1


class KeptEncoding(NamedTuple):
    """The last predict-mode encoding of a row whose features and categories were all known
    (``_encode_one``): the dict, a copy to tell that it is unchanged, the schema's widths then,
    and the buffers holding it."""

    x: dict
    copy: dict
    n_num: int
    n_cat: int
    xn: np.ndarray
    xc: np.ndarray


class ExampleEncoding(BankArrays):
    """The bank's encoding of one example into its two-row buffers (``_encode_one``), kept for
    the learn of the same unchanged dict (``_last``)."""

    # (set by bank.TreeBank.__init__)
    _last: KeptEncoding | None
    _xn1: np.ndarray
    _xc1: np.ndarray
    _xn_bytes: Any
    _xn_pack: Any
    _xc_bytes: Any
    _xc_pack: Any
    _entries: dict[Any, Any]

    def _encode_learned(self, x: dict, y: Any, w: float) -> tuple[np.ndarray, np.ndarray, int, int]:
        """A learned example checked and encoded (row ``NOW``; the schema grows, and is rolled
        back if the example is refused): ``(xn, xc, classes known before it, its label's
        code)``."""
        s = self.schema
        if type(w) is not float or not (0.0 <= w <= MAX_WEIGHT):  # (base.check_weight, inline:
            check_weight(w)  # a str or None is a WeightError there, not a TypeError here)
        text = s.text_bytes  # grows with each name, value and label the schema adds
        if text != self._room_text:
            self._room_text = text
            self._room = self.limits.max_state_bytes - (s.held_bytes() - text)
        if self._alloc_bytes + text > self._room:
            self.check_bytes()  # (its own first test, inline)
        mark = s.mark()
        try:
            xn, xc = self._encode_one(x, True)
            n_cls = len(s.classes)
            yc = s.class_index.get(y)
            if yc is None or type(y) is not type(s.classes[yc]):  # 1 is not True
                yc = s.class_code(y, grow=True)
        except Exception:
            s.rollback(mark)
            raise
        if (len(s.cat_names), len(s.num_names)) != self._fitted:
            self.fit_schema()  # (its own first test, inline)
        return xn, xc, n_cls, yc

    def _encode_one(self, x: dict, grow: bool) -> tuple[np.ndarray, np.ndarray]:
        """One row into row ``NOW`` of the ``[2, J]`` / ``[2, A]`` buffers; returns the buffers.

        A predict-mode encoding of a row whose features and categories were all known is kept:
        the usual ``predict_one(x)`` then ``learn_one(x, y)`` encodes ``x`` once (the dict must
        be the same object, unchanged, and the schema no wider)."""
        s = self.schema
        J = len(s.num_names) or 1
        A = len(s.cat_names) or 1
        last = self._last
        if (
            last is not None
            and last.x is x
            and last.n_num == J
            and last.n_cat == A
            and x == last.copy
        ):
            return last.xn, last.xc
        # a row of exactly the schema's features, of the usual types, all known: read by name
        # and packed without _encode_row (Schema.row_readers says when; same doubles and codes)
        readers = s._readers or s.row_readers()
        if type(x) is dict and len(x) == readers[0]:
            try:
                nums = readers[1](x)
                ok = _FLOAT_INT.issuperset(map(type, nums)) and (t := sum(nums)) - t == 0.0
                codes = None
                if ok and readers[2] is not None:
                    cats = readers[2](x)
                    # every category a str (join: TypeError otherwise, 4x cheaper than a type
                    # check; a str subclass is looked up as the loop looks it up) and known
                    # (__getitem__: KeyError otherwise)
                    "".join(cats)
                    codes = map(dict.__getitem__, readers[3], cats)  # (read by the pack below)
                    ok = len(self._xc_bytes) == 16 * A
                if ok and len(self._xn_bytes) == 16 * J:
                    self._last = None
                    if codes is None:
                        xc = NO_CATEGORIES
                    else:  # (the codes are all looked up before the pack writes any of them)
                        xc = self._xc1
                        self._xc_pack(self._xc_bytes, 8 * A, *codes)
                    self._xn_pack(self._xn_bytes, 8 * J, *(nums or _NAN1))  # ([nan]: none)
                    if not grow:
                        self._last = KeptEncoding(x, dict(x), J, A, self._xn1, xc)
                    return self._xn1, xc
            except (KeyError, TypeError, OverflowError, struct.error):  # a name or category
                pass  # missing, a category not a str, an int beyond a float (a row the pack
                # refused half-written: the loop writes it whole, or raises)
        num, cat, known = s._encode_row(x, grow)
        if len(num) < J:
            num.extend([math.nan] * (J - len(num)))
        # the row goes into this bank's buffers (kernels only read them), which the kept
        # encoding is of: it is dropped or replaced whenever they are written
        self._last = None
        xn = self._xn1
        if xn.shape[1] != len(num):  # (a learned row may have widened the schema)
            self.flush()  # (a deferred learn is in the old buffers)
            xn = self._xn1 = np.empty((2, len(num)))
            self._entries.clear()  # (their RunIOs view the old buffers)
            self._xn_bytes = memoryview(xn).cast("B")  # type: ignore[arg-type]
            self._xn_pack = struct.Struct(f"={len(num)}d").pack_into
        # xn[NOW] = num (floats and ints: the same doubles as numpy makes of them, cheaper)
        self._xn_pack(self._xn_bytes, len(self._xn_bytes) >> 1, *num)
        if s.cat_names:
            if len(cat) < A:
                cat.extend([-1] * (A - len(cat)))
            xc = self._xc1
            if xc.shape[1] != len(cat):
                self.flush()
                xc = self._xc1 = np.empty((2, len(cat)), np.int64)
                self._entries.clear()
                self._xc_bytes = memoryview(xc).cast("B")  # type: ignore[arg-type]
                self._xc_pack = struct.Struct(f"={len(cat)}q").pack_into
            # xc[NOW] = cat (codes are ints within int64: the same bits, cheaper than numpy's)
            self._xc_pack(self._xc_bytes, len(self._xc_bytes) >> 1, *cat)
        else:  # no categorical feature (a numeric stream): shared rows of "missing"
            xc = NO_CATEGORIES
        if known and not grow:
            self._last = KeptEncoding(x, dict(x), J, A, xn, xc)
        return xn, xc
