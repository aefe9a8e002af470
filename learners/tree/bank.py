"""A bank of M trees with one schema: its arrays, allocated and grown by doubling (``alloc``),
viewed by the kernels as one struct; the calls of run kernels over them are ``calls``', the saved
state ``persist``'s.

Used by the standalone native learners (M = 1) and by the ensembles (M = n_models), which run
their own compiled kernels over ``bank.view()`` (no Python loop over members).
"""

from __future__ import annotations

import struct
from typing import Any

import numpy as np

from learners.limits import Limits
from learners.schema import Schema

from . import persist
from .alloc import Capacity, alloc
from .calls import BatchCalls, DeferredLearn, Entry, ExampleCalls
from .encode import KeptEncoding
from .layout import HINT_WIDTH, TreeParams

# a new bank's capacities
FIRST_CAPACITY = Capacity(nodes=8, slots=8, features=8, values=16, observers=8, keys=64,
                          weights=64, gaussians=32)  # fmt: skip


class TreeBank(BatchCalls, ExampleCalls):
    """M trees sharing a schema, parameters and compiled kernels: their arrays (allocated,
    grown by doubling, viewed by the kernels as one struct), the calls of run kernels over them
    (``calls``: batches and single examples) and their saved state (``persist``)."""

    def __init__(self, params: TreeParams, n_members: int, schema: Schema | None = None,
                 limits: Limits | None = None):  # fmt: skip
        self.limits = limits or Limits()
        self.params = params._replace(max_nodes=min(params.max_nodes, self.limits.max_nodes))
        self._max_nodes = int(self.params.max_nodes)  # (read by every learned example)
        self.M = n_members
        self.schema = schema or Schema(self.limits)
        # the learn's bytes check: max_state_bytes less the schema's held bytes beyond its text
        # (Schema.held_bytes), for the schema's text_bytes it was taken at (-1: take it again)
        self._room, self._room_text = 0, -1
        self.n_seen = 0  # examples learned with w > 0: the sequence counter of the Poisson draws
        # the deferred learn (see run_one, flush), or None
        self._pending: DeferredLearn | None = None
        # the per-example calls' route hint (a run kernel's ``hint``), kept between them: after a
        # call that predicted row NOW without learning it, the route of that example in the
        # current state, for the learn of the same example (see run_one). _hint_for is what it
        # is valid for: that call's kept encoding (``_last``), or None; _hint_kernel its kernel.
        # Anything else that runs a kernel or replaces the arrays sets _hint_for to None.
        self._hint1 = np.full((n_members, HINT_WIDTH), -1, np.int64)
        self._hint_for: KeptEncoding | None = None
        self._hint_kernel: Any = None
        self._learns_only = False  # the last run_one learned without predicting (see run_one)
        # run_one's compiled entry points (see jit.entry_point); cleared whenever a buffer a
        # RunIO views is replaced
        self._entries: dict[Any, Entry] = {}
        self.set_arrays(alloc(n_members, FIRST_CAPACITY))
        self._set_out(2)
        self._init_roots()
        # two-row buffers for the per-example fast path: row NOW the example of the call, row
        # KEPT a learned example whose kernel call was deferred (``run_one(..., defer=True)``)
        self._y1 = np.zeros(2, np.int64)
        self._w1 = np.zeros(2)
        self._seq1 = np.zeros(2, np.int64)
        self._ncls1 = np.zeros(2, np.int64)
        bufs: tuple[Any, ...] = (self._y1, self._w1, self._seq1, self._ncls1)
        self._one: Any = tuple(memoryview(a) for a in bufs)
        self._last: KeptEncoding | None = None  # the last predict-mode encoding (_encode_one)
        self._xn1 = np.empty((2, 1))  # the encoding buffers (see _encode_one)
        self._xc1 = np.empty((2, 1), np.int64)
        # their bytes, to copy row NOW to row KEPT (a memoryview slice: cheaper than numpy's)
        self._xn_bytes = memoryview(self._xn1).cast("B")  # type: ignore[arg-type]
        self._xn_pack = struct.Struct("=1d").pack_into  # writes a row of J floats into them
        self._xc_bytes = memoryview(self._xc1).cast("B")  # type: ignore[arg-type]
        self._xc_pack = struct.Struct("=1q").pack_into  # writes a row of A codes into them

    # --------------------------------------------------------------------------- state
    def state_arrays(self, prefix: str = "tree.") -> dict[str, np.ndarray]:
        """The saved arrays (``STATE_FIELDS``): the live rows and class entries only, renumbered
        canonically (a state depends on what the model holds, not on when its arrays grew, were
        compacted or reloaded); see ``persist.state_arrays``."""
        return persist.state_arrays(self, prefix)

    def load_arrays(
        self, arrays: dict[str, np.ndarray], prefix: str = "tree.", min_classes: int = 1
    ) -> None:
        """Load saved arrays (``state_arrays``, or an older version's; set ``schema`` first),
        checked; see ``persist.load_arrays``."""
        persist.load_arrays(self, arrays, prefix, min_classes)

    @property
    def nbytes(self) -> int:
        """Bytes of the saved arrays (``state_arrays``)."""
        return sum(a.nbytes for a in self.state_arrays().values())
