"""The two ways an ensemble runs its members, one object each.

:class:`CompiledBackend` — native members (:class:`learners.NativeLearner`): one
:class:`learners.compiled.TreeBank` of M members, the ensemble's compiled run kernel does a whole
example (every member's predict and Poisson-weighted update) per call (ARCHITECTURE §3).

:class:`PythonBackend` — any other learner following :class:`learners.base.Learner` (e.g. a
``RiverLearner``): a Python object per member, driven by the ensemble's ``_py_predict`` /
``_py_learn`` (the same algorithm and the same Poisson draws, the slow path).

Both offer the same methods; :class:`~ensembles.base.OnlineEnsemble` holds one and never asks
which it is.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from functools import partial
from typing import Any

import numpy as np

from learners import MLP, LimitError, Limits, jit
from learners.base import check_weight, check_weights
from learners.compiled import (
    BANK_KERNELS,
    LEARNER_JOB,
    TreeBank,
    bank_params,
    io_run_of,
    make_run_io,
    register_io_run,
)
from learners.jit import compile_mode, interpreting, is_cached
from learners.jit import kernel as compiled
from learners.mlp import mlp_run
from learners.schema import CATEGORICAL, Schema, normalize_label

from . import _adaptive, _forest, _kernels
from .members import member_clone

MAX_THREADS = 256
PARALLEL_MIN_ROWS = 64  # smaller batches run in the calling thread (threads: ~0.1-0.2 ms a batch)
# the cores a pipelined stream may count on (None: the process's usable cores). A stream overlaps
# batches only with a core to spare for its calling thread beside the member threads: on 2 cores
# with 2 member threads it was slower than the batch calls (benchmarks/results/threads.md)
PIPELINE_CORES: int | None = None


def usable_cores() -> int:
    """The cores this process may run on (its CPU affinity where the OS tells it)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # (not on every OS)
        return os.cpu_count() or 1


VOTE_BYTES = 32 << 20  # the members' kept predictions of one block of rows take at most this


def check_threads(threads: Any) -> int:
    """``threads`` as an int in [1, MAX_THREADS] (``ValueError`` otherwise)."""
    if isinstance(threads, bool) or not isinstance(threads, int | np.integer):
        raise ValueError(f"threads must be an integer in [1, {MAX_THREADS}], got {threads!r}")
    if not 1 <= threads <= MAX_THREADS:
        raise ValueError(f"threads must be an integer in [1, {MAX_THREADS}], got {threads!r}")
    return int(threads)


# The ensembles' run kernels and their IO run kernels (``learners.compiled.register_io_run``):
# the backend that runs one registers the pair with the bank (``CompiledBackend``), so that the
# bank calls it through its IO run kernel; the kernel modules register nothing themselves.
IO_RUN_KERNELS: dict[Any, Any] = {
    _kernels.bagging_run: _kernels.bagging_run_io,
    _kernels.boosting_run: _kernels.boosting_run_io,
    _adaptive.adaptive_run: _adaptive.adaptive_run_io,
    _adaptive.boosting_adaptive_run: _adaptive.boosting_adaptive_run_io,
    _forest.forest_run: _forest.forest_run_io,
}


def io_kernel_of(kernel: Any) -> Any:
    """The IO run kernel of run kernel ``kernel`` (an ensemble's, ``IO_RUN_KERNELS``, or one
    ``learners`` registered itself: ``single_run``'s), or None."""
    return IO_RUN_KERNELS.get(kernel) or io_run_of(kernel)


log = logging.getLogger("chorus")
_NOTED: set = set()  # run kernels note_compile has looked at in this process
compiling_on_purpose = jit.compiling_on_purpose  # (ensembles' name for it, as before)


def note_compile(kernel: Any) -> None:
    """Log once per process and run kernel that its first call will compile it, when numba's
    cache does not hold it (a Python user on a fresh install otherwise waits a minute or two
    in silence at the first ``learn_one``) when it will block (``CHORUS_COMPILE=block``;
    otherwise ``cold_start`` has it compiled elsewhere and says so); nothing
    while the interpreted twins run, or within ``compiling_on_purpose``."""
    if kernel in _NOTED or jit.on_purpose() or compile_mode() != "block":
        return
    _NOTED.add(kernel)
    run = io_kernel_of(kernel) or kernel
    if interpreting() or getattr(run, "signatures", True) or is_cached(run):
        return
    log.warning("compiling the engine's kernels for %s: numba's cache does not hold them; the "
                "first call takes a minute or two (`chorus warmup` compiles every kind once, "
                "ahead)", getattr(run, "__name__", "this model"))  # fmt: skip


def kernels_of(model: Any) -> tuple:
    """The kernels ``model`` (an ``OnlineEnsemble``) runs on every call: its run kernel (as
    its IO run kernel) and its bank's, or its MLP members' kernel."""
    if model._be.native:
        return (io_kernel_of(model._kernel) or model._kernel, make_run_io, *BANK_KERNELS)
    if isinstance(model.learner, MLP):
        return (mlp_run,)
    return ()


def cold_start(model: Any) -> None:
    """On a cold numba cache, compile ``model``'s kernels (``kernels_of``) in a subprocess with
    its spec (``python -m ensembles.warm``) while it answers from the interpreted twins
    (``learners.jit.compile_elsewhere``; nothing with ``CHORUS_COMPILE=block``); and drop the
    job its prototype learner asked for (``learners.native.cold_start``: not this model's)."""
    kernels = kernels_of(model)
    if not all(jit.ready(k) for k in kernels):
        key = "ensembles.warm:" + ",".join(getattr(k, "__name__", "?") for k in kernels)
        jit.compile_elsewhere(jit.CompileJob(key=key, what=f"{model.kind} models",
                                             module="ensembles.warm",
                                             args=(json.dumps(model.spec()),), kernels=kernels))  # fmt: skip
    jit.cancel_compile(LEARNER_JOB)


class CompiledBackend:
    """Native members in one bank, run by a compiled kernel.

    Parameters
    ----------
    learner
        The native base learner (its parameters make the bank).
    n_models
        Number of members.
    limits
        The model's limits.
    kernel, ipar, fstate
        The ensemble's run kernel, its integer parameters and its float state (updated in place).
    runner
        What makes the per-example runner (``runner(backend)``, whose ``run_one`` is this
        backend's: ``adaptive.PredictionReusingRunner``), or None: ``run_one`` is the bank's own.
    """

    native = True

    def __init__(self, learner: Any, n_models: int, limits: Limits, kernel: Any,
                 ipar: np.ndarray, fstate: np.ndarray, runner: Any = None) -> None:  # fmt: skip
        if kernel in IO_RUN_KERNELS:  # the bank calls it through its IO run kernel
            register_io_run(kernel, IO_RUN_KERNELS[kernel])
        note_compile(kernel)
        self.bank = TreeBank(bank_params(learner), n_models, limits=limits)
        self.n_models = n_models
        self.kernel, self.ipar, self.fstate = kernel, ipar, fstate
        # threads of a batch; they run members in parallel only when the ensemble says that its
        # members are independent (online bagging: ``MemberThreads``), else the batch is serial
        self.threads = 1
        self.independent_members = False
        # the per-example call: ``run_one(x, y=None, w=0.0, *, predict=True, learn=False,
        # label_only=False, defer=False)``, the bank's bound in C (no Python frame of its own on
        # the hot path), or the runner's
        self.runner: Any = None
        self.run_one: Any = partial(self.bank.run_one, kernel, ipar, fstate)
        if runner is not None:
            self.runner = runner(self)
            self.run_one = self.runner.run_one

    def flush(self) -> None:
        """Run the learn ``run_one(..., defer=True)`` kept (``TreeBank.flush``), if any."""
        self.bank.flush()

    @property
    def n_seen(self) -> int:
        return self.bank.n_seen

    @n_seen.setter
    def n_seen(self, n: int) -> None:
        self.bank.n_seen = n

    @property
    def classes(self) -> list:
        return list(self.bank.schema.classes)

    def feature_kind(self, name: str) -> str | None:
        return self.bank.schema.kind_of(name)

    def knows_feature(self, name: str) -> bool | None:
        return self.feature_kind(name) is not None

    def declare(self, features: dict[str, str] | None, classes: list | None) -> None:
        self.bank.schema.declare(features, classes)
        self.bank.fit_schema()

    def run(self, X, ys, ws, *, predict: bool, learn: bool) -> list[dict]:
        kernel = self.kernel
        threads = min(self.threads, self.n_models)
        if (threads > 1 and self.independent_members and len(X) >= PARALLEL_MIN_ROWS
                and not interpreting()):  # fmt: skip
            kernel = MemberThreads(threads, self.n_models, self.thread_views)
        try:
            return self.bank.run(kernel, self.ipar, self.fstate, X, ys, ws, predict=predict,
                                 learn=learn)  # fmt: skip
        finally:
            self._views = CompiledBackend._views  # (they hold arrays the bank may replace)

    # ------------------------------------------------------------ a pipelined stream (stream.py)
    def pipelines(self, rows: int) -> bool:
        """Whether a batch of ``rows`` runs its members in threads that do not hold the GIL
        (as ``run`` would run it), so that a stream can learn it while the calling thread
        works on the next batch, and a core is left for the calling thread (``PIPELINE_CORES``)."""
        threads = min(self.threads, self.n_models)
        cores = PIPELINE_CORES if PIPELINE_CORES is not None else usable_cores()
        return (threads > 1 and cores > threads and self.independent_members
                and rows >= PARALLEL_MIN_ROWS and not interpreting())  # fmt: skip

    def stage(self, X, ys, ws) -> tuple:
        """A batch to learn, checked and encoded (the schema grows): ``run``'s work before the
        members, without ``check_bytes``, which needs the members of the batch before done
        (``start`` does it). Runs while the members of the batch before may still learn: it
        touches the schema only. Raises (and leaves no trace) as ``run`` would."""
        R = len(X)
        w = np.ones(R) if ws is None else check_weights(ws, R)
        schema = self.bank.schema
        mark = schema.mark()
        xn, xc, yc, n_cls = schema.encode_rows(X, grow=True, ys=ys)
        return mark, xn, xc, yc, n_cls, w

    def unstage(self, staged: tuple) -> None:
        """Undo ``stage``'s growth of the schema (the batch will not be learned as staged)."""
        self.bank.schema.rollback(staged[0])

    def start(self, staged: tuple, *, predict: bool) -> Any:
        """The members' work on a staged batch, as a function to run in another thread (it
        returns the probabilities for ``answers``), or ``None`` when only ``run``'s checks can
        tell whether the model may learn it (``check_bytes`` past its cheap path: then the batch
        is unstaged). Call when the batch before is learned."""
        bank = self.bank
        if not bank.within_bytes():
            self.unstage(staged)
            return None
        _, xn, xc, yc, n_cls, w = staged
        kernel = MemberThreads(min(self.threads, self.n_models), self.n_models, self.thread_views)
        loop = bank.start_encoded(kernel, self.ipar, self.fstate, xn, xc, yc, w, n_cls,
                                  predict=predict, learn=True)  # fmt: skip

        def members() -> np.ndarray:
            try:
                return loop()
            finally:
                self._views = CompiledBackend._views

        return members

    def answers(self, out: np.ndarray, staged: tuple) -> list[dict]:
        """A started batch's probabilities as ``run`` returns them."""
        return self.bank.schema.proba_dicts(out, staged[4])

    _views: tuple = (None, -1, [])  # (struct, pool generation, its private twins)

    def thread_views(self, B: Any, n: int) -> list:
        """``n`` structs over the same arrays as the bank's struct ``B``, for the worker threads
        of ``MemberThreads``, that count no references.

        numba counts the references to an owned array in its ``MemInfo``, atomically, on every
        read of a struct field; threads reading the same owned arrays contend for those counters
        (measured: two threads on two cores ran OzaBag(HT, 10) at half the speed of one). The
        struct's fields are unowned views (``learners.compiled.unowned``), but the struct itself
        is counted on every kernel call, so each thread gets its own (``TreeBank.thread_view``
        over the current pools, which a kernel may have grown). Kept while ``B`` and its pools
        are the same, within one batch: a twin never outlives the arrays it views."""
        generation = compiled(_kernels.pool_generation)(B)
        held, held_gen, views = self._views
        if held is not B or held_gen != generation or len(views) < n:
            views = [self.bank.thread_view(B) for _ in range(n)]
            self._views = (B, generation, views)
        return views[:n]

    # ------------------------------------------------------------ one member (batch, priming)
    def encode_block(self, X, y) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """A block of labelled rows encoded once for every member (the schema grows)."""
        xn, xc, yc, _ = self.bank.schema.encode_rows(list(X), grow=True, ys=list(y))
        self.bank.fit_schema()
        return xn, xc, yc

    def member_fit(self, m: int, X, y, weights: np.ndarray, enc=None) -> None:
        """Member m learns the block with per-row weights; row r is example number
        ``n_seen + r`` (priming counts the block after its members learned it)."""
        from ._kernels import member_learn

        xn, xc, yc = enc if enc is not None else self.encode_block(X, y)
        bank = self.bank
        need = bank.need()
        start = 0
        w = np.asarray(weights, dtype=np.float64)
        while True:
            start = compiled(member_learn)(bank.view(), m, xn, xc, yc, w, bank.n_seen, start,
                                           bank.schema.n_classes, bank.schema.code_attr_array,
                                           need)  # fmt: skip
            if start >= len(w):
                break
            bank.grow_nodes(need)
        bank.sync()  # the kernel may have grown the class-entry pools

    def member_correct(self, m: int, X, y, enc=None) -> np.ndarray:
        """Per row: does member m classify it correctly?"""
        from ._kernels import member_predict

        xn, xc, yc = enc if enc is not None else self.encode_block(X, y)
        out = np.empty(len(yc), dtype=np.int64)
        compiled(member_predict)(self.bank.view(), m, xn, xc, self.bank.schema.n_classes,
                                 self.bank.schema.code_attr_array, out)  # fmt: skip
        return out == yc

    def describe_members(self) -> list[dict]:
        T = self.bank.T
        out = []
        for m in range(self.n_models):
            n = int(T.n_nodes[m])
            out.append({"n_nodes": n, "n_leaves": int((T.kind[m, :n] == 0).sum())})
        return out

    # ------------------------------------------------------------ state
    def save(self, header: dict, arrays: dict) -> None:
        header["schema"] = self.bank.schema.to_header()
        arrays.update(self.bank.state_arrays())

    def load(self, header: dict, arrays: dict, min_classes: int = 1) -> None:
        self.bank.schema = Schema.from_header(header["schema"], self.bank.limits)
        self.bank.load_arrays(arrays, min_classes=min_classes)
        self.bank.fit_schema()


class MemberThreads:
    """One batch of online bagging with its members in ``threads`` threads (a run kernel for
    ``TreeBank.run``: same signature, same results as ``_kernels.bagging_run``, bit for bit).

    The members are split in ``threads`` contiguous groups, one per thread
    (``_kernels.bagging_members``, without the GIL): a thread runs the members of its group, each
    over all rows of a block, then takes members that the others have not started, from the ends
    of their groups (so the threads finish together, give or take a member, and a member mostly
    stays with one thread and its core's cache). Their kept predictions are then combined in
    member order (``_kernels.bagging_votes``). A member stops at a row whose learning could grow
    arrays shared by all members; between parallel phases the class-entry pools grow here and the
    nodes in ``TreeBank.run`` (this returns the first row some member has not done, and is called
    again to go on).
    """

    def __init__(self, threads: int, n_models: int, views: Any) -> None:
        if not 2 <= threads <= n_models:
            raise ValueError(f"MemberThreads needs 2..{n_models} threads, got {threads}")
        self.threads = threads
        self.views = views  # CompiledBackend.thread_views: a struct for each worker thread
        self.n_models = n_models
        self.progress = np.zeros(n_models, np.int64)  # next row of each member
        self.halt = np.zeros(1, np.int64)  # set by a member that stopped: the others stop too
        self.claimed = np.zeros(n_models, np.int64)  # per member: > 0 once a thread runs it
        self.orders = member_orders(n_models, threads)  # each thread's members, its own first
        self.base = 0  # first row of the current block
        self.stop = 0  # end of the current block
        # each member's kept prediction of each row of the block: its number of classes, their
        # codes, their probabilities (allocated by the first block that predicts)
        self.votes = (np.zeros((1, 1), np.int64), np.zeros((1, 1, 1), np.int64),
                      np.zeros((1, 1, 1)))  # fmt: skip

    def __call__(self, B, ipar, fstate, xn, xc, ys, ws, seqs, start, do_predict, do_learn, out,
                 n_cls, code_attr, need, hint, hinted) -> int:  # fmt: skip
        # (hint, hinted: unused; each thread's members have their own, bagging_members')
        R = xn.shape[0]
        args = (xn, xc, ys, ws, seqs, n_cls, code_attr, need, do_predict, do_learn)
        while self.base < R:
            if self.stop <= self.base:  # a new block of rows
                self._new_block(R, n_cls, ys, do_predict, do_learn)
            generation = compiled(_kernels.pool_generation)
            while int(self.progress.min()) < self.stop:
                if do_learn and not compiled(_kernels.make_room)(B, xn, xc, ys, n_cls, need,
                                                                 self.stop, self.progress):  # fmt: skip
                    return int(self.progress.min())  # TreeBank.run grows the nodes, calls again
                pgen = generation(B)
                self.halt[0] = 0
                self._phase(B, ipar, args)
                if generation(B) != pgen:  # pool_demand is out of date with learners' tree_learn
                    raise RuntimeError("a class-entry pool grew while members ran in parallel")
            if do_predict:
                vote_n, vote_k, vote_p = self.votes
                compiled(_kernels.bagging_votes)(ipar, vote_n, vote_k, vote_p, self.base,
                                                 self.stop, n_cls, out)  # fmt: skip
            self.base = self.stop
        return R

    def _new_block(self, R: int, n_cls, ys, do_predict: bool, do_learn: bool) -> None:
        C = max(2, int(n_cls.max()) if R else 0, int(ys.max()) + 1 if do_learn and R else 0)
        rows = max(1, min(R - self.base, VOTE_BYTES // (16 * self.n_models * C)))
        self.stop = self.base + rows
        self.progress[:] = self.base
        if do_predict and self.votes[1].shape != (self.n_models, rows, C):
            M = self.n_models
            self.votes = (np.zeros((M, rows), np.int64), np.zeros((M, rows, C), np.int64),
                          np.zeros((M, rows, C)))  # fmt: skip

    def _phase(self, B, ipar, args) -> None:
        """Every thread runs members not done over their rows of the block (the calling thread
        too, with the first group)."""
        T = self.threads
        run: Any = _kernels.bagging_members  # (without the GIL: nogil=True)
        vote_n, vote_k, vote_p = self.votes
        self.claimed[:] = 0

        def group(bank: Any, order: np.ndarray) -> None:
            run(bank, ipar, *args, order, self.claimed, self.base, self.stop, self.progress,
                self.halt, vote_n, vote_k, vote_p)  # fmt: skip

        pool = _executor(T - 1)
        futures: list[Future] = [pool.submit(group, view, order) for view, order
                                 in zip(self.views(B, T - 1), self.orders[1:], strict=True)]  # fmt: skip
        try:
            group(B, self.orders[0])
        finally:
            errors = [f.exception() for f in futures]  # waits for every group
        for e in errors:
            if e is not None:
                raise e


def member_orders(n_models: int, threads: int) -> list[np.ndarray]:
    """For each of ``threads`` threads, the order in which it tries the members: its own
    contiguous group, then the other groups' members from their ends, the last first (the
    first group of 10 members in 2 threads: 0, 1, 2, 3, 4, then 9, 8, 7, 6, 5)."""
    bounds = [(g * n_models // threads, (g + 1) * n_models // threads) for g in range(threads)]
    orders = []
    for g, (lo, hi) in enumerate(bounds):
        others = [bounds[(g + j) % threads] for j in range(1, threads)]
        tails = [m for d in range(n_models) for olo, ohi in others if (m := ohi - 1 - d) >= olo]
        orders.append(np.array([*range(lo, hi), *tails], np.int64))
    return orders


_pool: ThreadPoolExecutor | None = None
_pool_size = 0
_pool_lock = threading.Lock()


def _executor(workers: int) -> ThreadPoolExecutor:
    """The process's worker threads for member groups (at least ``workers`` of them)."""
    global _pool, _pool_size
    with _pool_lock:
        if _pool is None or _pool_size < workers:
            old = _pool
            _pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="chorus-members")
            _pool_size = workers
            if old is not None:
                old.shutdown(wait=False)  # its running tasks finish; new ones go to the new pool
        return _pool


class PythonBackend:
    """A Python object per member, driven by the ensemble's ``_py_predict`` / ``_py_learn``.

    Parameters
    ----------
    ensemble
        The ensemble whose algorithm runs the members.
    learner
        The base learner (``members.member_clone`` makes each member).
    n_models
        Number of members.
    limits
        The model's limits (input is checked by a schema as on the native path).
    """

    native = False

    def __init__(self, ensemble: Any, learner: Any, n_models: int, limits: Limits) -> None:
        self.ensemble = ensemble
        self.members = [member_clone(learner, m) for m in range(n_models)]
        self.class_list: list = []
        self.schema = Schema(limits)  # validates input as the native path does
        self.n_seen = 0
        self.threads = 1  # (the members are Python objects: a batch runs in one thread)

    @property
    def classes(self) -> list:
        return list(self.class_list)

    def feature_kind(self, name: str) -> str | None:
        return None  # a Python learner cannot tell

    def knows_feature(self, name: str) -> bool | None:
        return None

    def add_class(self, y: Any) -> None:
        if y not in self.class_list:
            self.class_list.append(y)

    def declare(self, features: dict[str, str] | None, classes: list | None) -> None:
        self.schema.declare(features, classes)
        for y in classes or []:
            self.add_class(normalize_label(y))

    def run(self, X, ys, ws, *, predict: bool, learn: bool) -> list[dict]:
        if ws is not None:
            ws = check_weights(ws, len(X)).tolist()
        # the whole batch is checked (and rolled back on error) before any member sees it
        mark = self.schema.mark()
        self.schema.encode_rows(X, grow=learn, ys=ys if learn else None)
        if learn and self.schema.mark() != mark:
            self.check_bytes(mark)
            self.declare_new(mark)
        ens = self.ensemble
        results = []
        for r, x in enumerate(X):
            if predict:
                results.append(ens._py_predict(x))
            if learn:
                y = normalize_label(ys[r])
                self.add_class(y)
                w = 1.0 if ws is None else ws[r]
                if w > 0.0:
                    ens._py_learn(x, y, w, self.n_seen)
                    self.n_seen += 1
        return results

    def declare_new(self, mark: tuple) -> None:
        """Declare the categorical features the schema learned since ``mark`` to every member
        that takes declarations (``MLP``), before any member learns the rows that brought them.
        A member sees only the examples its Poisson draws give it, so without this it would take
        a feature's kind from the first value *it* saw (a number, where the ensemble had seen a
        category first) and refuse, for good, rows the ensemble accepted. (Numeric features need
        no declaration: the schema refuses text for them, unless declared numeric, and a member
        that made one categorical from a numeric text takes numbers as categories too.) On an
        error the schema goes back to ``mark``."""
        new = {name: CATEGORICAL for name in self.schema.cat_names[mark[1] :]}
        if not new:
            return
        try:
            for member in self.members:
                if hasattr(member, "declare"):
                    member.declare(new)
        except Exception:
            self.schema.rollback(mark)
            raise

    def check_bytes(self, mark: tuple) -> None:
        """``LimitError`` (the schema rolled back to ``mark``) if members that can tell what they
        would hold (``memory_bytes_for``: ``MLP``) would exceed ``max_state_bytes`` with what the
        schema holds now: every member is counted as if it had seen all of it (an upper bound:
        a member grows only with the examples it learns). Other members are not counted."""
        s = self.schema
        sizes = [m.memory_bytes_for(s.n_num, s.n_codes, s.n_classes)
                 for m in self.members if hasattr(m, "memory_bytes_for")]  # fmt: skip
        limit = s.limits.max_state_bytes
        if sizes and sum(sizes) + s.held_bytes() > limit:
            s.rollback(mark)
            raise LimitError("max_state_bytes", limit, "model",
                             f"learning this would make the model's state "
                             f"{sum(sizes) + s.held_bytes():,} bytes")  # fmt: skip

    def flush(self) -> None:
        pass  # (Python members learn at once)

    def run_one(self, x, y=None, w: float = 0.0, *, predict: bool = True, learn: bool = False,
                label_only: bool = False, defer: bool = False):  # fmt: skip
        if learn:
            check_weight(w)  # (a scalar's message: check_weights would say [w]'s shape)
        out = self.run([x], None if y is None else [y], [w], predict=predict, learn=learn)
        if not predict:
            return None
        if label_only:
            from learners import argmax_label

            return argmax_label(out[0])
        return out[0]

    # ------------------------------------------------------------ one member (batch, priming)
    def encode_block(self, X, y) -> None:
        return None  # members read the dicts

    def member_fit(self, m: int, X, y, weights: np.ndarray, enc=None) -> None:
        mark = self.schema.mark()
        self.schema.encode_rows(list(X), grow=True, ys=list(y))
        self.declare_new(mark)
        member = self.members[m]
        for x, yy, w in zip(X, y, weights, strict=True):
            yy = normalize_label(yy)
            self.add_class(yy)
            if w > 0:
                member.learn_one(x, yy, w=float(w))

    def member_correct(self, m: int, X, y, enc=None) -> np.ndarray:
        member, top = self.members[m], self.ensemble._top_class
        return np.array([top(member.predict_proba_one(x)) == normalize_label(yy)
                         for x, yy in zip(X, y, strict=True)])  # fmt: skip

    def describe_members(self) -> list[dict]:
        return [{} for _ in self.members]

    # ------------------------------------------------------------ state
    def save(self, header: dict, arrays: dict) -> None:
        header["classes"] = list(self.class_list)
        header["schema"] = self.schema.to_header()
        header["members"] = []
        for m, member in enumerate(self.members):
            st = member.to_state()
            header["members"].append(st["header"])
            arrays.update({f"m{m}.{k}": v for k, v in st["arrays"].items()})

    def load(self, header: dict, arrays: dict, min_classes: int = 1) -> None:
        from .members import learner_from_state

        self.class_list = list(header["classes"])
        self.schema = Schema.from_header(header["schema"], self.schema.limits)
        for m, mh in enumerate(header["members"]):
            prefix = f"m{m}."
            sub = {k[len(prefix) :]: v for k, v in arrays.items() if k.startswith(prefix)}
            self.members[m] = learner_from_state({"header": mh, "arrays": sub})
