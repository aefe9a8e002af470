"""Prequential replay of a file: predict each row, then learn it, in file order.

The same loop drives two targets: a model held in this process (``--local``, built with
``ensembles.build_model``) and a model on a Chorus server (through :class:`app.client.ChorusClient`).
Given the same spec (seed included) and the same file they make the same predictions row by row,
because the engine is deterministic (ARCHITECTURE §4).

Every row sent to a server carries the idempotency key ``"<sha1 of the file, 12 hex>:<row>"``. A
replay that was interrupted is continued with ``resume=True``: rows the server already learned come
back as duplicates carrying their original prediction (so the final report still covers the whole
file) and are never learned twice. Without ``resume`` a duplicate stops the replay with an error,
so replaying the same file into the same model twice is never silent.

Metrics follow river's prequential convention: a row is *scored* when the model made a prediction
(an untrained model predicts ``None`` and is not scored). Accuracy, Cohen's kappa and windowed
accuracy are river metrics.
"""

from __future__ import annotations

import json
import math
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol

from app.client import ChorusError
from app.metrics import Prequential
from app.names import name_from
from app.readers import Example, FileInfo, read_examples, scan

__all__ = [
    "ReplayError",
    "ReplayReport",
    "RowOutcome",
    "Scoreboard",
    "compare_specs",
    "parse_spec",
    "row_id",
    "run_replay",
]

DEFAULT_SPEC = "bagging:hoeffding_tree:10"
ENSEMBLES = ("bagging", "boosting", "single", "arf", "srp")


class ReplayError(Exception):
    """A replay that cannot start or continue; the message says why and what to do."""


def parse_spec(text: str, *, seed: int | None = None) -> dict[str, Any]:
    """Parse ``ensemble:learner[:n_models[:seed]]`` into an engine/HTTP spec.

    Parameters
    ----------
    text
        E.g. ``"bagging:hoeffding_tree:10"``, ``"boosting:naive_bayes:5:7"``,
        ``"single:hoeffding_tree"``.
    seed
        Overrides the seed given in ``text``. With neither, the spec has no ``"seed"``: the
        server's default applies, which is the engine's (0), as for the Python client and a
        ``POST /models`` without one.

    Returns
    -------
    dict
        ``{"ensemble", "learner", "n_models", "params"}`` and ``"seed"`` when one is given.

    Examples
    --------
    >>> parse_spec("boosting:naive_bayes:5:7")
    {'ensemble': 'boosting', 'learner': 'naive_bayes', 'n_models': 5, 'params': {}, 'seed': 7}
    >>> parse_spec("bagging:hoeffding_tree")
    {'ensemble': 'bagging', 'learner': 'hoeffding_tree', 'n_models': 10, 'params': {}}
    """
    parts = text.split(":")
    if parts and parts[0] == "single" and len(parts) >= 2 and parts[1] == "river":
        parts = [parts[0], ":".join(parts[1:3]), *parts[3:]]  # single:river:mod.Class
    elif len(parts) >= 3 and parts[1] == "river":
        parts = [parts[0], f"river:{parts[2]}", *parts[3:]]
    if len(parts) < 2 or len(parts) > 4 or not all(parts):
        raise ReplayError(
            f"bad model spec {text!r}: expected ensemble:learner[:n_models[:seed]], "
            f"e.g. {DEFAULT_SPEC}"
        )
    ensemble, learner = parts[0], parts[1]
    if ensemble not in ENSEMBLES:
        raise ReplayError(
            f"bad model spec {text!r}: ensemble must be one of {', '.join(ENSEMBLES)}"
        )
    try:
        n_models = int(parts[2]) if len(parts) > 2 else (1 if ensemble == "single" else 10)
        spec_seed = int(parts[3]) if len(parts) > 3 else None
    except ValueError:
        raise ReplayError(f"bad model spec {text!r}: n_models and seed must be integers") from None
    if n_models < 1:
        raise ReplayError(f"bad model spec {text!r}: n_models must be >= 1")
    spec: dict[str, Any] = {"ensemble": ensemble, "learner": learner, "n_models": n_models,
                            "params": {}}  # fmt: skip
    if seed is not None or spec_seed is not None:
        spec["seed"] = spec_seed if seed is None else seed
    return spec


def row_id(sha1: str, row: int) -> str:
    """The idempotency key of a file's row.

    Examples
    --------
    >>> row_id("0123456789abcdef", 7)
    '0123456789ab:7'
    """
    return f"{sha1[:12]}:{row}"


def default_model_name(path: str | Path) -> str:
    """A model name derived from a file name (``data/elec.arff.gz`` -> ``elec``).

    Examples
    --------
    >>> default_model_name("data/elec.arff.gz")
    'elec'
    """
    name = Path(path).name
    for suffix in (".gz",):
        name = name.removesuffix(suffix)
    name = name.rsplit(".", 1)[0] if "." in name else name
    return name_from(name)


# ------------------------------------------------------------------------------- scoring


@dataclass(frozen=True)
class RowOutcome:
    """What happened to one row: the prediction made before learning it."""

    row: int
    y: Any
    prediction: Any
    probabilities: dict[Any, float]
    duplicate: bool = False


# what ``--metric`` may plot: the scores of app.metrics.Prequential with a windowed twin
CURVE_METRICS = ("accuracy", "balanced_accuracy", "g_mean", "macro_f1")
METRIC_LABELS = {"accuracy": "accuracy", "balanced_accuracy": "balanced accuracy",
                 "g_mean": "G-mean", "macro_f1": "macro-F1"}  # fmt: skip


def check_metric(metric: str) -> None:
    """Raise ``ReplayError`` unless ``metric`` is one of :data:`CURVE_METRICS`."""
    if metric not in CURVE_METRICS:
        raise ReplayError(f"--metric: {metric!r} is not one of {', '.join(CURVE_METRICS)}")


class Scoreboard:
    """Prequential metrics of a replay (:class:`app.metrics.Prequential`) and its learning curve.

    Parameters
    ----------
    window
        Size of the windowed accuracy.
    curve_every
        Record a learning-curve point every this many examples.
    metric
        What the curve follows: one of :data:`CURVE_METRICS` (cumulative and over the window).
    """

    def __init__(self, window: int = 1000, curve_every: int = 1, metric: str = "accuracy") -> None:
        check_metric(metric)
        self.window = window
        self.metric = metric
        self.curve_every = max(1, curve_every)
        self.scores = Prequential(window)
        self.n_examples = 0
        self.n_duplicates = 0
        self.last_row = 0
        self.curve: list[tuple[int, float, float]] = []

    @property
    def n_scored(self) -> int:
        return self.scores.n_scored

    def update(self, outcome: RowOutcome) -> None:
        """Score one row (rows predicted ``None`` count as examples, not as scored)."""
        self.n_examples += 1
        self.last_row = outcome.row
        self.n_duplicates += outcome.duplicate
        if outcome.prediction is not None:
            self.scores.update(outcome.y, outcome.prediction)
        if self.n_examples % self.curve_every == 0 and self.n_scored:
            self.curve.append(self.point())

    def point(self) -> tuple[int, float, float]:
        """The learning-curve point now: (examples, the metric, the metric over the window)."""
        v = self.scores.values()
        return self.n_examples, v[self.metric] or 0.0, v[f"window_{self.metric}"] or 0.0

    def values(self) -> dict[str, float | None]:
        """``accuracy``, ``kappa`` and ``window_accuracy`` (``None`` before anything was scored)."""
        return self.scores.values()


# ------------------------------------------------------------------------------- targets


class Target(Protocol):
    """Where rows are predicted-then-learned."""

    description: str

    def prepare(self, info: FileInfo) -> None:
        """Make the model ready (create/declare)."""

    def step(self, batch: list[Example], ids: list[str]) -> list[RowOutcome]:
        """Predict-then-learn ``batch`` in order."""

    def n_seen(self) -> int:
        """Examples the model has learned."""

    def server_metrics(self) -> dict[str, Any] | None:
        """The model's own metrics (server only)."""


class LocalTarget:
    """A model in this process, built by ``ensembles.build_model``."""

    def __init__(self, spec: dict[str, Any], threads: int = 1) -> None:
        from ensembles import build_model  # the engine is only needed for local replays

        try:
            self.model = build_model(spec)
            self.model.threads = threads
        except ValueError as exc:
            raise ReplayError(f"bad model spec: {exc}") from None
        self.spec = {**spec, "seed": self.model.spec()["seed"]}  # (the engine's default if none)
        self.description = "local"

    def prepare(self, info: FileInfo) -> None:
        self.model.declare(features=info.features, classes=info.classes or None)

    def step(self, batch: list[Example], ids: list[str]) -> list[RowOutcome]:
        if len(batch) == 1:
            ex = batch[0]
            probas = [self.model.predict_learn_one(ex.x, ex.y)]
        else:
            probas = self.model.predict_learn_many([e.x for e in batch], [e.y for e in batch])
        return _outcomes(batch, probas)

    def steps(
        self, batches: Iterable[list[Example]]
    ) -> Iterator[tuple[list[Example], list[RowOutcome]]]:
        """``step`` over a stream of batches, each with its outcomes: the model's
        ``predict_learn_batches`` (a batch of one row goes through ``step``, as before), so with
        ``threads`` the members of one batch learn while the next is read and encoded. The same
        predictions as ``step`` batch after batch."""
        source = iter(batches)
        taken: deque[list[Example]] = deque()
        single: list[list[Example]] = []

        def rows(first: list[Example]) -> Iterator[tuple[list, list]]:
            batch = first
            while True:
                taken.append(batch)
                yield [e.x for e in batch], [e.y for e in batch]
                batch = next(source, [])
                if len(batch) <= 1:  # the end, or a batch of one row: it ends this stream
                    single.extend([batch] if batch else [])
                    return

        for batch in source:
            if len(batch) > 1:
                stream = self.model.predict_learn_batches(rows(batch))
                try:
                    for probas in stream:
                        done = taken.popleft()
                        yield done, _outcomes(done, probas)
                finally:  # (closed early: waits for the batch its members learn)
                    stream.close()
                if not single:
                    continue
                batch = single.pop()
            yield batch, self.step(batch, [])

    def n_seen(self) -> int:
        return int(self.model.n_seen)

    def save(self, out: str | Path, info: FileInfo, name: str) -> int:
        """Write the model as a snapshot file that ``chorus import`` loads into a store."""
        from app import snapshot

        spec = {**self.model.spec(), "features": info.features, "classes": info.classes or None}
        meta = {"name": name, "seq": self.n_seen(), "spec": spec, "metrics": None}
        blob = snapshot.encode(self.model.to_state(), meta)
        Path(out).write_bytes(blob)
        return len(blob)

    def server_metrics(self) -> dict[str, Any] | None:
        return None

    def importance(self, half_life: float | None = None) -> dict[str, Any]:
        """The model's feature importance (``feature_importance``)."""
        try:
            return self.model.feature_importance(half_life=half_life)
        except ValueError as exc:
            raise ReplayError(f"--importance: {exc}") from None


def compare_specs(texts: list[str], *, seed: int | None = None) -> list[dict[str, Any]]:
    """Challenger specs from ``ensemble:learner[:n_models[:seed]]`` texts (several may be
    given in one, separated by commas or spaces), each named after its text (``:`` -> ``-``,
    a repeated name gets ``.2``, ``.3``, ...).

    Examples
    --------
    >>> [c["name"] for c in compare_specs(["arf:hoeffding_tree:10, srp:hoeffding_tree:10"])]
    ['arf-hoeffding_tree-10', 'srp-hoeffding_tree-10']
    >>> [c["name"] for c in compare_specs(["single:naive_bayes", "single:naive_bayes"])]
    ['single-naive_bayes', 'single-naive_bayes.2']
    """
    out: list[dict[str, Any]] = []
    seen: dict[str, int] = {}
    for text in texts:
        for one in text.replace(",", " ").split():
            name = name_from(one.replace(":", "-"))
            seen[name] = seen.get(name, 0) + 1
            if seen[name] > 1:
                name = f"{name}.{seen[name]}"
            out.append({"name": name, **parse_spec(one, seed=seed)})
    if not out:
        raise ReplayError("--compare: give at least one spec, e.g. arf:hoeffding_tree:10")
    return out


class CompareTarget:
    """A model with challengers in this process (``--compare``): the service's board
    (:class:`app.registry.challengers.LocalCandidates`), the champion's predictions scored as
    served ones, every candidate on the leaderboard."""

    def __init__(self, spec: dict[str, Any], compare: list[dict[str, Any]],
                 policy: dict[str, Any] | None, threads: int, window: int) -> None:  # fmt: skip
        self.spec = spec
        self.compare = compare
        self.policy = policy
        self.threads = threads
        self.window = window
        self.description = "local"
        self.lc: Any = None

    def prepare(self, info: FileInfo) -> None:
        from app.errors import InvalidInput
        from app.registry.challengers import LocalCandidates

        declared = {**self.spec, "features": info.features, "classes": info.classes or None}
        try:
            self.lc = LocalCandidates(declared, self.compare, self.policy,
                                      champion=champion_name(self.spec), threads=self.threads,
                                      metrics_window=self.window)  # fmt: skip
        except InvalidInput as exc:
            raise ReplayError(f"bad model spec: {exc.detail}") from None
        self.spec = {**self.spec, "seed": self.lc.h.model.spec()["seed"]}

    def step(self, batch: list[Example], ids: list[str]) -> list[RowOutcome]:
        return _outcomes(batch, self.lc.predict_learn([e.x for e in batch], [e.y for e in batch]))

    def n_seen(self) -> int:
        return int(self.lc.h.model.n_seen)

    def server_metrics(self) -> dict[str, Any] | None:
        return None

    def leaderboard(self) -> dict[str, Any]:
        return self.lc.leaderboard()

    def importance(self, half_life: float | None = None) -> dict[str, Any]:
        """The champion's feature importance (``feature_importance``)."""
        try:
            return self.lc.h.model.feature_importance(half_life=half_life)
        except ValueError as exc:
            raise ReplayError(f"--importance: {exc}") from None


def champion_name(spec: dict[str, Any]) -> str:
    """The champion's candidate name in a ``--compare`` replay (its spec as text).

    Examples
    --------
    >>> champion_name({"ensemble": "bagging", "learner": "hoeffding_tree", "n_models": 10})
    'bagging-hoeffding_tree-10'
    """
    return name_from(f"{spec['ensemble']}-{spec['learner']}-{spec.get('n_models', 1)}")


class ServerTarget:
    """A model on a Chorus server."""

    def __init__(
        self,
        client: Any,
        name: str,
        spec: dict[str, Any] | None,
        *,
        resume: bool,
        path: str = "the file",
        compare: list[dict[str, Any]] | None = None,
        policy: dict[str, Any] | None = None,
    ) -> None:
        self.client = client
        self.compare = compare
        self.policy = policy
        self.path = path
        self.name = name
        self.spec = spec
        self.resume = resume
        self.description = f"{client.base_url} model {name}"

    def prepare(self, info: FileInfo) -> None:
        from app.client import Conflict, NotFound

        try:
            existing = self.client.get_model(self.name)
        except NotFound:
            existing = None
        if existing is None:
            spec = self.spec or parse_spec(DEFAULT_SPEC)
            extra: dict[str, Any] = {}
            if self.compare:
                extra = {"challengers": self.compare, "champion": champion_name(spec)}
                if self.policy is not None:
                    extra["promotion"] = self.policy
            try:
                created = self.client.create_model(
                    self.name, **spec, features=info.features, classes=info.classes or None,
                    **extra,
                )  # fmt: skip
            except Conflict:  # created concurrently (or by a retried request): use it
                created = self.client.get_model(self.name)
            self.spec = created.spec
            return
        if (self.spec is not None or self.compare) and not self.resume:
            raise ReplayError(
                f"model {self.name!r} already exists on {self.client.base_url}; "
                "drop --create/--seed/--param to learn into it, pass --resume to continue an "
                "interrupted replay, or choose another --model"
            )
        self.spec = existing.spec

    def step(self, batch: list[Example], ids: list[str]) -> list[RowOutcome]:
        from app.client import PayloadTooLarge

        if len(batch) == 1:
            ex = batch[0]
            results = [self.client.learn(self.name, ex.x, ex.y, id=ids[0])]
        else:
            try:
                results = self.client.learn_many(
                    self.name, [(e.x, e.y) for e in batch], ids=ids
                ).results
            except PayloadTooLarge:  # over the server's batch/body limit; nothing was applied
                half = len(batch) // 2
                return self.step(batch[:half], ids[:half]) + self.step(batch[half:], ids[half:])
        outcomes = []
        for ex, r in zip(batch, results, strict=True):
            if r.duplicate and not self.resume:
                raise ReplayError(
                    f"row {ex.row} of {self.path} was already learned by model {self.name!r} "
                    "(an earlier replay of this file?); pass --resume to continue that replay "
                    "without learning any row twice, or choose another --model"
                )
            outcomes.append(RowOutcome(ex.row, ex.y, r.prediction, r.probabilities, r.duplicate))
        return outcomes

    def n_seen(self) -> int:
        return self.client.get_model(self.name).n_seen

    def server_metrics(self) -> dict[str, Any] | None:
        return asdict(self.client.metrics(self.name))

    def importance(self, half_life: float | None = None) -> dict[str, Any]:
        """The model's feature importance (``GET /models/{name}/importance``)."""
        return self.client.importance(self.name, half_life=half_life)

    def leaderboard(self) -> dict[str, Any] | None:
        return self.client.leaderboard(self.name) if self.compare else None


# ------------------------------------------------------------------------------- the loop


@dataclass
class ReplayReport:
    """The outcome of a replay (``to_json()`` is what ``--json`` prints).

    ``elapsed_s`` and ``examples_per_s`` time the predict-then-learn loop (reading the file,
    requests or engine calls, scoring); ``scan_s`` is the validation pass before it.
    """

    file: str
    format: str
    target: str
    mode: str
    model: str
    spec: dict[str, Any] | None
    rows: int = 0
    examples: int = 0
    unlabelled: int = 0
    duplicates: int = 0
    scored: int = 0
    accuracy: float | None = None
    kappa: float | None = None
    window_accuracy: float | None = None
    majority_rate: float | None = None
    balanced_accuracy: float | None = None
    g_mean: float | None = None
    macro_f1: float | None = None
    window_balanced_accuracy: float | None = None
    window_g_mean: float | None = None
    window_macro_f1: float | None = None
    per_class: dict[str, list] | None = None
    warning: str | None = None
    window: int = 1000
    elapsed_s: float = 0.0
    examples_per_s: float = 0.0
    scan_s: float = 0.0
    n_seen: int | None = None
    server_metrics: dict[str, Any] | None = None
    interrupted: bool = False
    error: str | None = None
    sha1: str = ""
    leaderboard: dict[str, Any] | None = None
    curve: list[tuple[int, float, float]] = field(default_factory=list, repr=False)
    curve_metric: str = field(default="accuracy", repr=False)
    outcomes: list[RowOutcome] | None = field(default=None, repr=False)
    importance: dict[str, Any] | None = None  # with ``importance=True`` (``--importance``)

    def to_json(self) -> dict[str, Any]:
        """A JSON-serialisable dict (without the curve and per-row outcomes)."""
        data = asdict(self)
        data.pop("curve")
        data.pop("curve_metric")
        data.pop("outcomes")
        return data


ProgressHook = Callable[[Scoreboard, float], None]


def run_replay(
    path: str | Path,
    *,
    target: str | None = None,
    categorical: tuple[str, ...] | list[str] = (),
    fmt: str | None = None,
    columns: list[str] | None = None,
    spec: dict[str, Any] | None = None,
    client: Any = None,
    model: str | None = None,
    batch: int = 1,
    limit: int | None = None,
    resume: bool = False,
    window: int = 1000,
    keep_outcomes: bool = False,
    on_start: Callable[[FileInfo, int], None] | None = None,
    on_progress: ProgressHook | None = None,
    stop_after: int | None = None,
    save: str | Path | None = None,
    threads: int = 1,
    metric: str = "accuracy",
    importance: bool = False,
    compare: list[dict[str, Any]] | None = None,
    promotion: dict[str, Any] | None = None,
    half_life: float | None = None,
) -> ReplayReport:
    """Replay a file prequentially into a local model (``client=None``) or a server model.

    Parameters
    ----------
    path
        The stream (CSV, JSONL or ARFF, optionally ``.gz``).
    target
        Label column (default: the last column).
    categorical
        Columns forced categorical.
    fmt
        Force the file format.
    columns
        Column names of a CSV file without a header row.
    spec
        Model spec (see :func:`parse_spec`); default ``bagging:hoeffding_tree:10``, seed 0. With a
        server, ``None`` means "use the existing model, or create the default one".
    client
        A :class:`app.client.ChorusClient`; ``None`` replays locally.
    model
        Model name on the server (default: derived from the file name).
    batch
        Rows per request / per ``predict_learn_many`` call.
    limit
        Replay only the first ``limit`` data rows.
    resume
        Continue an interrupted server replay (rows already learned are not learned again).
    window
        Size of the windowed accuracy.
    keep_outcomes
        Keep every row's prediction in ``report.outcomes``.
    on_start, on_progress
        Hooks for a progress display: ``on_start(info, n_examples)`` once,
        ``on_progress(scoreboard, elapsed)`` after every batch.
    stop_after
        Stop (as if interrupted) after this many examples; for tests of ``resume``.
    save
        Local replays only: write the trained model to this snapshot file (``chorus import``).
    threads
        Local replays only: the model's ``threads`` (online bagging learns a batch's members in
        that many threads while the next batch is read and encoded: ``predict_learn_batches``;
        the same predictions for any value).
    metric
        What the learning curve (``report.curve``, ``--plot``) follows: ``accuracy`` (default),
        ``balanced_accuracy``, ``g_mean`` or ``macro_f1`` (on an imbalanced stream accuracy
        flatters: see ``report.warning``).
    compare
        Challenger specs (:func:`compare_specs`): the model (the champion) learns the file with
        them as its challengers, and ``report.leaderboard`` is the service's leaderboard
        (locally: the same code, in this process; on a server: ``GET .../leaderboard``). The
        report's scores are the served predictions' (the champion of the moment's).
    promotion
        With ``compare``: the auto-promotion policy (docs/http-api.md, *Challengers*).
    half_life
        With ``importance``: the half-life in examples of the importance's recency sums
        (``feature_importance``; ``None``: none).

    Returns
    -------
    ReplayReport

    Raises
    ------
    app.readers.ReaderError
        The file is malformed (nothing was learned: the whole file is validated first).
    ReplayError
        The replay cannot start or continue.
    """
    if batch < 1:
        raise ReplayError("--batch must be >= 1")
    if half_life is not None and not (0.0 < half_life < math.inf):
        raise ReplayError("--half-life must be a finite number of examples > 0")
    check_metric(metric)  # (before the file is scanned)
    if limit is not None and limit < 1:
        raise ReplayError("--limit must be >= 1")
    scan_started = time.perf_counter()
    info = scan(path, target=target, categorical=categorical, fmt=fmt, limit=limit, columns=columns)
    scan_s = time.perf_counter() - scan_started
    name = model or default_model_name(path)
    if save is not None and client is not None:
        raise ReplayError("--save works with --local; for a server model use `chorus export`")
    if promotion is not None and not compare:
        raise ReplayError("--auto-promote needs --compare")
    if client is None:
        if resume:
            raise ReplayError("--resume needs --server: a local replay keeps no state between runs")
        if compare:
            if save is not None:
                raise ReplayError("--save does not take --compare (export the champion instead)")
            runner: Target = CompareTarget(spec or parse_spec(DEFAULT_SPEC), compare, promotion,
                                           threads, window)  # fmt: skip
        else:
            runner = LocalTarget(spec or parse_spec(DEFAULT_SPEC), threads)
        mode = "local"
    else:
        runner = ServerTarget(client, name, spec, resume=resume, path=str(path), compare=compare,
                              policy=promotion)  # fmt: skip
        mode = "server"
    runner.prepare(info)

    total = info.n_examples
    board = Scoreboard(window=window, curve_every=max(1, total // 500), metric=metric)
    report = ReplayReport(
        file=str(path),
        format=info.format,
        target=info.target,
        mode=mode,
        model=name,
        spec=getattr(runner, "spec", None),
        rows=info.n_rows,
        unlabelled=info.n_unlabelled,
        window=window,
        scan_s=scan_s,
        sha1=info.sha1,
        outcomes=[] if keep_outcomes else None,
    )
    if on_start is not None:
        on_start(info, total)

    started = time.perf_counter()
    cut: list[list[Example]] = []  # the batch cut short by stop_after (no progress after it)

    def chunks() -> Iterator[list[Example]]:
        taken = 0
        for chunk in _batches(read_examples(info, limit=limit), batch):
            if stop_after is not None and taken + len(chunk) > stop_after:
                chunk = chunk[: stop_after - taken]
                if chunk:
                    cut.append(chunk)
                    yield chunk
                report.interrupted = True
                return
            taken += len(chunk)
            yield chunk

    # a local model learns the chunks as a stream (``predict_learn_batches``), a server one by
    # one request per chunk (in _apply)
    steps: Iterable[tuple[list[Example], list[RowOutcome] | None]]
    if isinstance(runner, LocalTarget):
        steps = runner.steps(chunks())
    else:
        steps = ((chunk, None) for chunk in chunks())
    try:
        for chunk, outcomes in steps:
            _apply(runner, chunk, info, board, report, outcomes)
            if on_progress is not None and not (cut and chunk is cut[0]):
                on_progress(board, time.perf_counter() - started)
    except KeyboardInterrupt:
        report.interrupted = True
    except (ReplayError, ChorusError) as exc:
        done = f" (rows before row {board.last_row + 1} were replayed)" if board.last_row else ""
        report.error = f"{exc}{done}"
    finally:
        close = getattr(steps, "close", None)
        if close is not None:  # (a local stream waits for the batch its members learn)
            close()
        report.elapsed_s = time.perf_counter() - started
    _finish(report, board, runner)
    if importance and not report.error:
        try:
            report.importance = runner.importance(half_life)
        except (ReplayError, ChorusError) as exc:
            report.error = str(exc)
    if save is not None and isinstance(runner, LocalTarget):
        runner.save(save, info, name)
    return report


def _outcomes(batch: list[Example], probas: list[dict]) -> list[RowOutcome]:
    """A local model's predictions of ``batch`` as outcomes."""
    from learners import argmax_label  # loaded with the engine (local replays only)

    return [
        RowOutcome(e.row, e.y, argmax_label(p), dict(p)) for e, p in zip(batch, probas, strict=True)
    ]


def _apply(
    runner: Target,
    chunk: list[Example],
    info: FileInfo,
    board: Scoreboard,
    report: ReplayReport,
    outcomes: list[RowOutcome] | None = None,
) -> None:
    """Score ``chunk``'s outcomes (predict-then-learn it first when not given)."""
    if outcomes is None:
        outcomes = runner.step(chunk, [row_id(info.sha1, e.row) for e in chunk])
    for outcome in outcomes:
        board.update(outcome)
    if report.outcomes is not None:
        report.outcomes.extend(outcomes)


def _finish(report: ReplayReport, board: Scoreboard, runner: Target) -> None:
    report.examples = board.n_examples
    report.duplicates = board.n_duplicates
    report.scored = board.n_scored
    report.__dict__.update(board.values())
    report.per_class = board.scores.per_class()
    report.warning = flattery_warning(report)
    report.examples_per_s = board.n_examples / report.elapsed_s if report.elapsed_s > 0 else 0.0
    report.curve = list(board.curve)
    report.curve_metric = board.metric
    if board.n_scored and (not report.curve or report.curve[-1][0] != board.n_examples):
        report.curve.append(board.point())
    try:
        report.n_seen = runner.n_seen()
        report.server_metrics = runner.server_metrics()
        ranking = getattr(runner, "leaderboard", None)
        report.leaderboard = ranking() if ranking is not None else None
    except Exception as exc:  # the report is still worth printing
        report.error = report.error or f"could not read the model's state: {exc}"


FLATTERY_MARGIN = 0.01  # accuracy within 1 point of the majority-class rate: warn


def flattery_warning(report: ReplayReport) -> str | None:
    """A warning when the accuracy is within ``FLATTERY_MARGIN`` of the majority-class rate
    (always predicting the most frequent class would score about as well, so accuracy says
    little) or below it by more (that constant guess would score higher); either way the
    class scores say more. ``None`` otherwise."""
    acc, base = report.accuracy, report.majority_rate
    if acc is None or base is None or acc - base >= FLATTERY_MARGIN:
        return None
    top = max(report.per_class["classes"] if report.per_class else [],
              key=lambda c: c["support"], default=None)  # fmt: skip
    label = f" ({top['label']!r})" if top else ""
    if acc > base - FLATTERY_MARGIN:
        what = (f"accuracy {acc:.4f} is within 1 point of the majority-class rate {base:.4f}: "
                f"always predicting the most frequent class{label} scores about as well")  # fmt: skip
    else:
        what = (f"accuracy {acc:.4f} is below the majority-class rate {base:.4f}: always "
                f"predicting the most frequent class{label} scores higher")  # fmt: skip
    return (f"{what}. Balanced accuracy {report.balanced_accuracy:.4f}, G-mean "
            f"{report.g_mean:.4f}, macro-F1 {report.macro_f1:.4f} say how every class "
            f"fares.")  # fmt: skip


def _batches(examples: Iterator[Example], size: int) -> Iterator[list[Example]]:
    chunk: list[Example] = []
    for ex in examples:
        chunk.append(ex)
        if len(chunk) == size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def fitted_ylim(values: list[float]) -> tuple[float, float]:
    """A y range around ``values`` (accuracies in [0, 1]) with 5 % margins, clipped to [0, 1],
    at least 0.02 wide: a curve near 0.99 is not a flat line at the top of a 0..1 axis."""
    vals = [v for v in values if v is not None and v == v]
    if not vals:
        return 0.0, 1.0
    lo, hi = min(vals), max(vals)
    pad = max((hi - lo) * 0.05, 0.01)
    lo, hi = max(0.0, lo - pad), min(1.0, hi + pad)
    if hi - lo < 0.02:
        lo, hi = (max(0.0, hi - 0.02), hi) if hi >= 1.0 else (lo, min(1.0, lo + 0.02))
    return lo, hi


def plot_curve(report: ReplayReport, out: str | Path) -> Path:
    """Write the learning curve (the replay's ``metric``, cumulative and over the window, against
    examples) as a PNG.

    Parameters
    ----------
    report
        A finished replay.
    out
        The PNG path.

    Returns
    -------
    Path
        ``out``.
    """
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    label = METRIC_LABELS[report.curve_metric]
    fig, ax = plt.subplots(figsize=(7, 4), dpi=100)
    try:
        if report.curve:
            xs = [p[0] for p in report.curve]
            ax.plot(xs, [p[1] for p in report.curve], label=f"{label} (cumulative)")
            ax.plot(xs, [p[2] for p in report.curve], label=f"{label} (last {report.window})")
        ax.set_xlabel("examples")
        ax.set_ylabel(label)
        ax.set_ylim(*fitted_ylim([v for p in report.curve for v in p[1:3]]))
        ax.grid(alpha=0.3)
        ax.legend(loc="lower right")
        spec = report.spec or {}
        ax.set_title(
            f"{Path(report.file).name} — {spec.get('ensemble', '?')}:{spec.get('learner', '?')}"
            f":{spec.get('n_models', '?')} ({report.mode})"
        )
        fig.tight_layout()
        out = Path(out)
        fig.savefig(out)
    finally:
        plt.close(fig)
    return out


def write_outcomes(report: ReplayReport, out: str | Path) -> None:
    """Write per-row outcomes as JSON Lines (``row``, ``label``, ``prediction``, ``duplicate``)."""
    with Path(out).open("w", encoding="utf-8") as fh:
        for o in report.outcomes or []:
            fh.write(
                json.dumps(
                    {
                        "row": o.row,
                        "label": o.y,
                        "prediction": o.prediction,
                        "probabilities": o.probabilities,
                        "duplicate": o.duplicate,
                    }
                )
                + "\n"
            )
