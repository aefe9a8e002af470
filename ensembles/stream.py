"""Learning a stream of batches with the batches overlapped (``predict_learn_batches``,
``learn_batches`` of :class:`~ensembles.base.OnlineEnsemble`).

One batch call (``predict_learn_many``) encodes and checks all its rows before any member learns
one (a refused batch leaves no trace), and builds the answers after the last; that Python runs in
the calling thread while no member does (23-41% of one thread's time for OzaBag(NB or HT, 10):
``benchmarks/results/threads.md``). Over a stream of batches, the members of batch i can learn
in other threads while the calling thread encodes batch i+1 and builds the answers of batch i-1:

    calling thread:  encode i+1 | wait for i | start i+1 | answers of i, yield them | encode i+2 ...
    member threads:  ----- members learn i -----|         ---- members learn i+1 -------------

A batch is learned exactly as ``predict_learn_many`` learns it: encoded under the schema the
batches before it grew, its rows numbered (the Poisson draws' sequence) from ``n_seen`` once the
batch before is learned, its members run by ``MemberThreads``, its answers built from the same
probabilities. What the two threads share, and why it is safe:

- The schema. Encoding batch i+1 grows it (new features, categories, classes) while the members
  learn batch i; the members read no part of it but the ``code_attr`` array taken when batch i
  started (a new code makes a new array; the entries of the old one do not change), and the
  answers of a batch read the classes known at each of its rows (``n_cls``): classes are only
  appended. The bank's width (``fit_schema``) follows the schema only when batch i+1 starts.
- The bank's arrays. Only the member threads touch them, grow them and count ``n_seen`` while a
  batch learns; the calling thread starts the next batch (``fit_schema``, the rows' sequence
  numbers) only after that batch's members are done.
- A refused batch. Encoding it fails (and rolls the schema back, as always) or the cheap
  ``max_state_bytes`` check cannot vouch for it: the stream waits for the batch before, gives its
  answers, rolls the schema back to before the refused batch and calls ``predict_learn_many`` /
  ``learn_many`` on it, which raises exactly as it would have (``.row`` names the example) or, if
  the batch is fine after all, learns it.

Batches that would not run their members in parallel (fewer than 64 rows, one thread, any
ensemble but Oza's bagging over a native learner, kernels running interpreted) are run by the
batch call itself, in order, after the batch before is done: the same results, without overlap.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from learners.base import batch_parts, labels_of, rows_of
from learners.jit import compiled_here

# while a batch's members run, the threads handing them work wait for the GIL, which the calling
# thread (encoding the next batch) gives up only when asked, after this many seconds (Python's
# default 5 ms would hold up every phase of the members); restored when the stream ends
SWITCH_INTERVAL = 0.0002
_switch = threading.Lock()
_lowered = [0, 0.0]  # streams running with the interval lowered, and the interval before them


def _lower_switch_interval() -> None:
    with _switch:
        if _lowered[0] == 0:
            _lowered[1] = sys.getswitchinterval()
            sys.setswitchinterval(min(_lowered[1], SWITCH_INTERVAL))
        _lowered[0] += 1


def _restore_switch_interval() -> None:
    with _switch:
        _lowered[0] -= 1
        if _lowered[0] == 0:  # the last stream running: the interval before the first
            sys.setswitchinterval(_lowered[1])


class _Batch:
    """A batch whose members learn in the stream's thread."""

    def __init__(self, future: Future, staged: Any, index: Any) -> None:
        self.future, self.staged, self.index = future, staged, index


def run_batches(model: Any, batches: Iterable[Any], *, predict: bool) -> Iterator[Any]:
    """Each batch's answers (``predict``: ``predict_learn_many``'s; else ``None``, once the
    batch is learned), with the members of a batch running while the calling thread encodes the
    next (see the module's docstring)."""
    backend = model._settled()
    frames = model._reads_frames()
    learner: ThreadPoolExecutor | None = None
    flowing: _Batch | None = None  # the batch whose members are learning
    next_staged: tuple | None = None  # the batch encoded while they learn

    def done(batch: _Batch) -> Any:
        """Wait for a batch's members; its probabilities."""
        try:
            return batch.future.result()
        except BaseException:
            if next_staged is not None:  # (the batch after it is not learned either)
                backend.unstage(next_staged)
            raise

    def answers(batch: _Batch | None, out: Any) -> Any:
        """A learned batch's answers (``None`` when not predicting)."""
        if batch is None or not predict:
            return None
        return model._probas_out(backend.answers(out, batch.staged), batch.index)

    def sequential(X: Any, y: Any, w: Any) -> Any:
        if predict:
            return model.predict_learn_many(X, y, w)
        model.learn_many(X, y, w)
        return None

    try:
        for batch in batches:
            X, y, w = batch_parts(batch)
            rows, index = rows_of(X, frames)
            next_staged = None
            if getattr(backend, "native", False) and backend.pipelines(len(rows)):
                try:
                    next_staged = backend.stage(rows, labels_of(y, len(rows)), w)
                except Exception:  # noqa: BLE001 - refused: the batch call below raises it
                    next_staged = None
            before, flowing = flowing, None
            out = done(before) if before is not None else None
            members = None
            if next_staged is not None:
                try:
                    members = backend.start(next_staged, predict=predict)
                except Exception:  # noqa: BLE001 - as refused: the batch call below says why
                    backend.unstage(next_staged)
            if members is None:  # run by the batch call, after the batch before
                if before is not None:
                    yield answers(before, out)
                yield sequential(X, y, w)
                continue
            if learner is None:
                learner = ThreadPoolExecutor(1, thread_name_prefix="chorus-stream")
                _lower_switch_interval()
            flowing = _Batch(learner.submit(_compiled, members), next_staged, index)
            next_staged = None
            if before is not None:  # built while the members learn the next batch
                yield answers(before, out)
        if flowing is not None:
            last, flowing = flowing, None
            next_staged = None
            yield answers(last, done(last))
    finally:
        if flowing is not None:  # closed early: the batch taken is learned, its answers dropped
            try:
                flowing.future.result()
            finally:
                _shutdown(learner)
        else:
            _shutdown(learner)


def _compiled(members: Any) -> Any:
    with compiled_here():  # as the calling thread, which started the batch compiled
        return members()


def _shutdown(learner: ThreadPoolExecutor | None) -> None:
    if learner is not None:
        learner.shutdown(wait=True)
        _restore_switch_interval()
