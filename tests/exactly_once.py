"""What the ``kill -9`` tests of ``chorus consume`` share (issue 39): the messages, the kill cycles
and the exactly-once check at the end.

Used by ``test_consume_faults.py`` (Redis Streams: ``chorus consume``, and the consumer inside
``chorus serve``) and ``test_consume_nats_faults.py`` (NATS JetStream). Not a test module.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import ensembles
from app.settings import Settings
from app.testing import with_registry
from tests.streams import assert_same_state
from tests.test_crash import example

MODEL = "m"
SPEC = {"ensemble": "bagging", "learner": "hoeffding_tree", "n_models": 3, "seed": 5,
        "params": {"grace_period": 20}}  # fmt: skip


def settings(data: Path) -> Settings:
    """The settings of the SQLite store in ``data`` (as the test process reads it)."""
    return Settings(data_dir=data, redis_url=None, snapshot_interval=3600)


def process_env(data: Path) -> dict[str, str]:
    """The consuming process's settings: the SQLite store in ``data``, snapshots (and log trims)
    every 97 examples and every 0.3 s, so that kills land around them too."""
    return {"CHORUS_DATA_DIR": str(data), "CHORUS_REDIS_URL": "", "CHORUS_SNAPSHOT_EVERY": "97",
            "CHORUS_SNAPSHOT_INTERVAL": "0.3"}  # fmt: skip


def create_model(data: Path) -> None:
    """The model every cycle learns into, in the store in ``data``."""
    with_registry(settings(data), create={MODEL: SPEC})


class Messages:
    """The messages a producer sends: new examples, some with the producer's own ``id``, and
    now and then one of those again (a producer's retry: the same id and example)."""

    def __init__(self, rnd: random.Random) -> None:
        self.rnd = rnd
        self.n = 0  # distinct examples so far
        self.producer_ids: list[tuple[str, int]] = []

    def next(self) -> tuple[str | None, int, bytes]:
        """The next message: its producer id (or ``None``), its example's number, its payload."""
        roll = self.rnd.random()
        if roll < 0.05 and self.producer_ids:
            key, i = self.rnd.choice(self.producer_ids[-50:])
        else:
            i, key = self.n, (f"p{self.n}" if roll < 0.15 else None)
            self.n += 1
            if key is not None:
                self.producer_ids.append((key, i))
        x, y = example(i)
        body = {"model": MODEL, "features": x, "label": y} | ({"id": key} if key else {})
        return key, i, json.dumps(body).encode()


def _sigkill(proc: subprocess.Popen) -> None:
    proc.send_signal(signal.SIGKILL)
    proc.wait(10)


def kill_cycles(
    cycles: int,
    rnd: random.Random,
    *,
    start: Callable[[], subprocess.Popen],
    produce: Callable[[int], None],
    progress: Callable[[], int],
    log: Path,
    kill: Callable[[subprocess.Popen], None] = _sigkill,
    kill_bus: Callable[[], None] | None = None,
    per_cycle: int = 150,
) -> tuple[int, int]:
    """``cycles`` times: ``start()`` the consuming process and SIGKILL it (``kill``) at a random
    moment: in a fifth of the cycles 0.2-2 s after it started (start-up, recovery), else within
    0.25 s of its first progress (``progress()``: a count that grows as it learns; then the kill
    lands mid-batch, between a log append and its acknowledgement, ...). ``produce(k)`` adds
    ``k`` messages: 10-30 as it starts, then, once its kill is set, more while it consumes,
    ``per_cycle`` in all. ``CHORUS_CONSUME_TRACE=1`` prints each cycle's seconds. In
    about a third of the cycles ``kill_bus()`` (SIGKILL and restart of the bus) happens too,
    then the consumer gets 0.3-1 s more to reconnect before its kill. Returns the kills of the
    consumer and of the bus."""
    kills = bus_kills = 0
    for cycle in range(cycles):
        proc = start()
        done = progress()
        t0 = time.monotonic()
        kill_at = t0 + rnd.uniform(0.2, 2.0) if rnd.random() < 0.2 else None
        first = rnd.randint(10, 30)  # something to learn (the last cycle may have left nothing)
        produce(first)
        budget = per_cycle - first
        bus_kill = kill_bus is not None and rnd.random() < 0.3
        while proc.poll() is None:
            now = time.monotonic()
            if bus_kill and kill_at is not None:
                kill_bus()  # type: ignore[misc]
                bus_kills += 1
                bus_kill = False
                kill_at = time.monotonic() + rnd.uniform(0.3, 1.0)
            if kill_at is None and progress() > done:
                kill_at = now + rnd.uniform(0.0, 0.25)
            if kill_at is not None and budget > 0:
                k = min(budget, rnd.randint(1, 15))
                produce(k)
                budget -= k
            if (kill_at is not None and now >= kill_at) or now - t0 > 30:
                kill(proc)
                kills += 1
                break
            time.sleep(0.002)
        assert proc.returncode == -signal.SIGKILL, (cycle, tail(log))
        if os.environ.get("CHORUS_CONSUME_TRACE"):
            print(f"cycle {cycle}: {time.monotonic() - t0:.1f} s")  # noqa: T201
    return kills, bus_kills


def tail(log: Path, n: int = 3000) -> str:
    """The end of a process's log (for an assertion's message)."""
    return log.read_text(errors="replace")[-n:] if log.exists() else ""


def stored_answers(data: Path, keys: list[str]) -> dict[str, dict[str, Any]]:
    """The answers the store holds for those of the learn ids ``keys`` the model learned (the
    idempotency window's: ``{"prediction", "probabilities", "seq"}``)."""

    async def read(reg: Any) -> dict[str, bytes]:
        return await reg.store.get_answers(MODEL, keys)

    return {k: json.loads(v) for k, v in with_registry(settings(data), read).items()}


def assert_learned_once(data: Path, seq_of: dict[str, int],
                        example_of: dict[str, int]) -> list[dict]:  # fmt: skip
    """Every distinct message was learned exactly once: ``seq_of`` maps each learn id to the log
    seq it was learned as (its answer's), ``example_of`` to its example's number. The learn ids
    are the same, the seqs are exactly 1..n, the model the store in ``data`` holds has seen n
    examples, and it equals, array for array, a model trained in this process on the examples
    in that log order. Returns that model's probabilities, the answers in seq order."""
    n = len(example_of)
    missing, extra = example_of.keys() - seq_of.keys(), seq_of.keys() - example_of.keys()
    assert not missing and not extra, (sorted(missing)[:10], sorted(extra)[:10])
    seqs = sorted(seq_of.values())
    assert seqs == list(range(1, n + 1)), [
        s for s, want in zip(seqs, range(1, n + 1)) if s != want
    ][:10]
    h = with_registry(settings(data), lambda reg: reg.models.get(MODEL))
    assert h.seq == n and int(h.model.n_seen) == n, (h.seq, h.model.n_seen, n)
    order = sorted(seq_of, key=seq_of.__getitem__)
    X, Y = zip(*(example(example_of[key]) for key in order), strict=True)
    model = ensembles.build_model(SPEC)
    want = model.predict_learn_many(list(X), list(Y))
    assert_same_state(h.model, model)
    return want


def same_probabilities(answer: dict[str, Any], proba: dict) -> bool:
    """Whether a published or stored answer's probabilities are the model's ``proba``."""
    return answer["probabilities"] == {k: float(v) for k, v in proba.items()}
