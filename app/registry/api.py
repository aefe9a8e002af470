"""The registry's public API: what routes, the app's lifespan and the CLI call."""

from __future__ import annotations

import bisect
import logging
from collections.abc import Callable, Iterator
from typing import Any

from app.errors import (
    InvalidInput,
    ModelBroken,
    ModelExists,
    ModelNotFound,
    NotReady,
)
from app.names import NAME_RE, NAME_RULE
from app.registry import challengers, views
from app.registry.common import WHOLE_MODEL, off_loop
from app.registry.common import store_call as _store
from app.registry.handles import Example, Handle, ModelMetrics
from app.registry.keeper import PredictionKeeper
from app.registry.loaded import LoadedModels
from app.registry.reader import ModelReader
from app.registry.recovery import DAMAGED, Recovery
from app.registry.writer import ModelWriter
from app.settings import Settings
from app.stores.base import Store, new_incarnation

log = logging.getLogger("chorus.registry")
LIST_LIMIT = 100  # models per page of GET /models, unless the request says otherwise
LIST_MAX = 1000  # the most a page may ask for


class Registry:
    """All models of one process, on top of one :class:`~app.stores.base.Store`.

    Made of four parts: :class:`~app.registry.recovery.Recovery` (load and snapshot),
    :class:`~app.registry.loaded.LoadedModels` (what is in memory),
    :class:`~app.registry.writer.ModelWriter` (group commit) and
    :class:`~app.registry.keeper.PredictionKeeper` (delayed labels).

    Parameters
    ----------
    store
        The durable store.
    settings
        Service settings (durability, snapshot policy, TTLs, limits).
    """

    def __init__(self, store: Store, settings: Settings) -> None:
        self.store = store
        self.settings = settings
        self.recovery = Recovery(store, settings)
        self.models = LoadedModels(self.recovery)
        self.writer = ModelWriter(self.models)
        self.keeper = PredictionKeeper(store, settings)
        self.reader = ModelReader(self.models, self.keeper)
        self._ready = False
        self._loading = [0, 0]  # recovery: [models begun, models declared]
        self.damaged: str | None = None  # why recovery gave up on a damaged store

    # ----------------------------------------------------------------- lifecycle
    def recovery_status(self) -> str:
        """What recovery is doing, for ``/readyz`` before the registry is ready."""
        if self.damaged is not None:
            return self.damaged
        begun, total = self._loading
        if total == 0:
            return "recovering models from the store"
        out = f"recovering models from the store: model {begun} of {total}"
        replaying = self.recovery.replaying
        if replaying is not None:
            out += f" ({replaying[0]}: {replaying[1]:,} log entries replayed)"
        return out

    def damage(self) -> str | None:
        """What ``/readyz`` says beside *ready* when damaged store data broke some models."""
        names = sorted(n for n, why in self.models.broken.items() if why.startswith(DAMAGED))
        if not names:
            return None
        shown = ", ".join(names[:10]) + (", ..." if len(names) > 10 else "")
        return (
            f"{len(names)} model(s) broken by damaged store data ({shown}); the others serve. "
            "Check and salvage the store with `chorus doctor`"
        )

    @property
    def ready(self) -> bool:
        """Whether every declared model was recovered (requests are refused before)."""
        return self._ready

    async def recover(self, before_load: Callable[[dict[str, dict]], object] | None = None) -> None:
        """Load every declared model (snapshot + log replay); then the registry is ready.
        ``before_load`` is called with the declared specs (name -> spec) before any loads."""
        await self.models.check_data()  # the store's data id, to notice it lost its data later
        specs = await _store(self.store.list_models())
        if before_load is not None:
            before_load(specs)
        self._loading = [0, len(specs)]
        for name, spec in specs.items():
            self._loading[0] += 1
            if not self.models.has_room():  # CHORUS_MEMORY_MB: the rest load on first use
                log.info("memory budget reached: further models load on first use")
                break
            if self.models.peek(name) is None:
                try:
                    self.models.add(await self.models.load(name, spec))
                except ModelBroken as exc:
                    log.error("%s", exc.detail)
        self._ready = True
        log.info("recovered %d model(s) from the %s store", len(self.models), self.store.name)

    async def snapshot_all(self, *, force: bool = False) -> int:
        """Snapshot every model that changed (all with ``force``); returns how many were written."""
        return await self.models.snapshot_all(force=force)

    async def periodic(self) -> None:
        """Background task: snapshot models whose last snapshot is older than the interval."""
        await self.models.periodic()

    async def ping(self) -> bool:
        """Whether the store answers."""
        return await self.store.ping()

    async def check_store(self) -> str | None:
        """``None`` while the store holds the data this process started on; else what was
        lost since the last call (noticed here or by a read: logged at ERROR once, the models
        held in memory dropped, to load again on demand, so the ones the store no longer
        declares answer 404)."""
        await self.models.check_data()
        lost, self.models.lost = self.models.lost, None
        return lost

    def loaded_specs(self) -> list[dict[str, Any]]:
        """Specs of the models in memory."""
        return [h.spec for h in self.models]

    def memory(self) -> dict[str, int]:
        """Models in memory, their estimated bytes, the budget (0 = none) and evictions so far."""
        m = self.models
        return {"loaded": len(m), "bytes": m.resident_bytes, "budget": m.budget,
                "evicted": m.evicted}  # fmt: skip

    def gauges(self) -> Iterator[tuple[str, int, dict[str, Any], int, Any]]:
        """``(name, examples learned, metrics report, entries since snapshot, model)`` of each
        model in memory (the model for its own gauges, e.g. an adaptive ensemble's drifts and
        diversity). Examples learned: the log's sequence number less the challengers' control
        records (which take numbers too)."""
        for h in self.models:  # a model a worker thread runs on is not read (None) this time
            model = None if h.engine.locked() else h.model
            learned = h.seq - (h.board.controls if h.board is not None else 0)
            yield h.name, learned, h.metrics.report(), h.since_snapshot, model

    async def export(self, name: str) -> tuple[bytes, int]:
        """A snapshot blob of one model and its example count (``chorus export``); loads only
        that model, so it works without :meth:`recover`."""
        h = await self.models.get(name)
        return await off_loop(h, WHOLE_MODEL, self._export, h)

    def _export(self, h: Handle) -> tuple[bytes, int]:
        return self.recovery.encode(h, spec=h.spec, exported="chorus export"), int(h.model.n_seen)

    # ----------------------------------------------------------------- models
    async def create(self, name: str, spec: dict[str, Any]) -> dict[str, Any]:
        """Declare a model (``build_model`` validates the spec; 409 if the name is taken);
        returns its description."""
        self._check_ready()
        if not NAME_RE.match(name):
            raise InvalidInput(f"name: {name!r} is not a model name ({NAME_RULE})")
        spec = dict(spec)
        features, classes = spec.get("features"), spec.get("classes")
        chs, policy = spec.pop("challengers", None), spec.pop("promotion", None)
        named = spec.pop("champion", None)
        champion = named or challengers.INITIAL
        model = challengers.build_engine(
            spec, where="spec", signs=self.recovery.signs, threads=self.settings.threads
        )
        extra: dict[str, Any] = {"champion": named} if named else {}
        if chs or policy is not None:
            if not NAME_RE.match(champion):
                raise InvalidInput(f"champion: {champion!r} is not a candidate name ({NAME_RULE})")
            built = self._challengers(chs or [], {champion}, features, classes)
            extra = {"challengers": [c for c, _ in built], "champion": champion,
                     "promotion": challengers.check_policy(policy)}  # fmt: skip
        model.threads = self.settings.threads
        stored = {**model.spec(), "features": features, "classes": classes,
                  "incarnation": new_incarnation(), **extra}  # fmt: skip
        board = challengers.initial_board(
            stored, model, signs=self.recovery.signs, threads=self.settings.threads,
            metrics_window=self.settings.metrics_window,
        )  # fmt: skip
        if not await _store(self.store.create_model(name, stored)):
            raise ModelExists(f"model {name!r} already exists")
        h = Handle(name, stored, model, metrics=ModelMetrics(self.settings.metrics_window),
                   board=board)  # fmt: skip
        self.models.add(h)
        return views.describe(h)

    async def delete(self, name: str) -> None:
        """Drop a model with everything stored about it."""
        self._check_ready()
        h = self.models.peek(name)
        if h is not None:
            async with h.lock:
                gone = await _store(self.store.delete_model(name))
                self.models.drop(name)
        else:
            gone = await _store(self.store.delete_model(name))
        self.models.broken.pop(name, None)
        if not gone:
            raise ModelNotFound(f"model {name!r} not found")

    async def names(self) -> list[str]:
        """Every declared model (also those declared by other processes on the same store)."""
        self._check_ready()
        return list(await _store(self.store.list_models()))

    async def list_models(self, limit: int = LIST_LIMIT,
                          after: str | None = None) -> tuple[list[dict[str, Any]], str | None]:  # fmt: skip
        """One page of model descriptions in name order: at most ``limit`` models named after
        ``after`` (a broken one with its reason), and the ``after`` of the next page (``None``:
        none left). A page loads only its own models, so listing is bounded work per request
        however many models there are."""
        names = sorted(await self.names())
        start = bisect.bisect_right(names, after) if after is not None else 0
        page = names[start : start + limit]
        out = []
        for name in page:
            try:
                out.append(await self._describe(await self._get(name)))
            except ModelBroken:
                reason = self.models.broken.get(name)
                if reason is not None:
                    spec = await _store(self.store.get_model(name))
                    out.append(views.describe_broken(name, spec, reason))
            except ModelNotFound:  # deleted meanwhile: just skipped
                pass
        more = start + limit < len(names)
        return out, (page[-1] if more and page else None)

    async def describe(self, name: str, min_seq: int | None = None) -> dict[str, Any]:
        """Spec, examples seen, state bytes, metrics and members of a caught-up model."""
        self._check_ready()
        return await self._describe(await self.reader.fresh(name, min_seq, always=True))

    async def metrics(self, name: str) -> dict[str, Any]:
        """The caught-up model's prequential metrics (``Metrics`` of the HTTP API)."""
        self._check_ready()
        return (await self.reader.fresh(name, always=True)).metrics.report()

    def accuracy(self, name: str) -> float | None:
        """The running accuracy of a model in memory (``None`` if it is not, or unscored)."""
        h = self.models.peek(name)
        return h.metrics.report()["accuracy"] if h is not None else None

    # ----------------------------------------------------------------- learning
    async def learn(
        self, name: str, examples: list[Example], *, batch: bool = False
    ) -> list[dict[str, Any]]:
        """Predict-then-learn ``examples`` in order; the answer comes after the log append
        (:mod:`app.registry.writer`). One ``{"prediction", "probabilities", "seq",
        "duplicate"}`` per example. ``batch``: they are a request's ``examples`` (a refusal
        names ``examples.<i>.<field>``, even for one).

        A request that found an incarnation of ``name`` that is gone by the time its group is
        written (deleted, maybe created again) is not written there (the store refuses it);
        it is tried once on the model now held under ``name`` (404 if there is none).
        """
        h = await self._get(name)
        try:
            return await self.writer.learn(h, examples, batch=batch)
        except ModelNotFound:
            again = await self._get(name)
            if again is h:
                raise
            return await self.writer.learn(again, examples, batch=batch)

    async def learn_delayed(
        self, name: str, prediction_id: str, label: Any, key: str | None = None
    ) -> dict[str, Any]:
        """Learn the features kept by ``/predict`` under ``prediction_id`` with their label.

        Each prediction id is learned at most once (it doubles as the idempotency key); the
        prediction that was actually served is the one scored.
        """
        # 404 / 409 before the kept prediction is looked up; the store's incarnation (a label
        # is learned by the incarnation that served its prediction only)
        self._check_ready()
        h = await self.reader.fresh(name, always=True)
        x, served = await self.keeper.take(name, h.incarnation, prediction_id)
        ex = Example(x, label, 1.0, key or f"pid:{prediction_id}", served)
        (result,) = await self.writer.learn(h, [ex])  # not tried on another incarnation
        return result

    # ----------------------------------------------------------------- challengers
    def _challengers(self, specs: Any, taken: set[str], features: Any,
                     classes: Any) -> list[tuple[dict[str, Any], Any]]:  # fmt: skip
        return challengers.declared_challengers(
            specs, taken=taken, limit=self.settings.max_challengers, signs=self.recovery.signs,
            threads=self.settings.threads, features=features, classes=classes,
        )  # fmt: skip

    async def add_challengers(self, name: str, specs: list[dict[str, Any]],
                              policy: dict[str, Any] | None = None,
                              set_policy: bool = False) -> dict[str, Any]:  # fmt: skip
        """Add challengers to a model (and set or clear its promotion policy with
        ``set_policy``): one control record in its log. Returns the leaderboard."""
        h = await self._get(name)
        checked = challengers.check_policy(policy)

        def make(h: Handle) -> dict[str, Any]:
            board = h.board
            taken = {board.champion.name, *(c.name for c in board.challengers)} if board else {
                h.spec.get("champion") or challengers.INITIAL}  # fmt: skip
            built = self._challengers(specs, taken, h.spec.get("features"), h.spec.get("classes"))
            rec: dict[str, Any] = {"op": "challengers", "add": [c for c, _ in built]}
            if set_policy:
                rec |= {"set_policy": True, "promotion": checked}
            return rec

        await self.writer.control(h, make)
        return await self.leaderboard(name)

    async def remove_challenger(self, name: str, challenger: str) -> None:
        """Remove one challenger (a control record in the model's log)."""
        h = await self._get(name)

        def make(h: Handle) -> dict[str, Any]:
            if h.board is None or h.board.find(challenger) is None:
                raise ModelNotFound(f"model {name!r} has no challenger {challenger!r}")
            return {"op": "challengers", "remove": [challenger]}

        await self.writer.control(h, make)

    async def promote(self, name: str, challenger: str) -> dict[str, Any]:
        """Make ``challenger`` the model's champion (one control record in its log; the old
        champion becomes a challenger). Promoting the champion again changes nothing (a retry
        after a lost answer). Returns the leaderboard."""
        h = await self._get(name)

        def make(h: Handle) -> dict[str, Any] | None:
            board = h.board
            if board is not None and board.champion.name == challenger:
                return None
            if board is None or board.find(challenger) is None:
                raise ModelNotFound(f"model {name!r} has no challenger {challenger!r}")
            return {"op": "promote", "name": challenger}

        await self.writer.control(h, make)
        return await self.leaderboard(name)

    async def leaderboard(self, name: str) -> dict[str, Any]:
        """Every candidate's scores, McNemar against the champion, speed and memory."""
        self._check_ready()
        h = await self.reader.fresh(name, always=True)
        return await off_loop(h, WHOLE_MODEL, challengers.leaderboard, h)

    def boards(self) -> Iterator[tuple[str, Any]]:
        """``(name, leaderboard)`` of each model in memory with challengers, not busy (for
        Prometheus)."""
        for h in self.models:
            if h.board is not None and not h.engine.locked():
                yield h.name, challengers.leaderboard(h)

    # ----------------------------------------------------------------- predicting
    async def predict(
        self,
        name: str,
        X: list[dict[str, Any]],
        *,
        min_seq: int | None = None,
        many: bool = False,
        explain: bool = False,
    ) -> list[dict[str, Any]]:
        """Predict without learning; keeps the features for a delayed label when configured.
        The model is caught up with the log first (``min_seq``: see :meth:`ModelReader.fresh`).
        ``many``: ``X`` is a request's ``examples`` (an error names ``examples.<i>.<field>``);
        ``explain``: each result has its ``explanation``."""
        self._check_ready()
        return await self.reader.predict(name, X, None, min_seq, many=many, explain=explain)

    async def predict_query(
        self, name: str, params: dict[str, str], *, explain: bool = False
    ) -> dict[str, Any]:
        """Predict one row given as query-string values (``GET /predict``): typed by the
        model's declared or learned feature kinds (:func:`app.registry.views.typed_query`)."""
        x = views.typed_query(await self._get(name), params)
        (result,) = await self.reader.predict(name, [x], params, None, explain=explain)
        return result

    async def importance(self, name: str, decay: float | None = None,
                         half_life: float | None = None) -> dict[str, Any]:  # fmt: skip
        """The caught-up model's feature importance (``feature_importance``): 422 naming
        ``model`` when its members are not native trees, ``decay`` / ``half_life`` for a bad
        value of either."""
        self._check_ready()
        h = await self.reader.fresh(name)

        def run() -> dict[str, Any]:
            try:
                return h.model.feature_importance(decay=decay, half_life=half_life)
            except ValueError as exc:
                text = str(exc)
                field = next((f for f in ("half_life", "decay") if text.startswith(f)), "model")
                raise InvalidInput(f"{field}: {exc}") from exc

        return await off_loop(h, WHOLE_MODEL, run)

    # ----------------------------------------------------------------- internals
    @staticmethod
    async def _describe(h: Handle) -> dict[str, Any]:
        """``views.describe(h)``, off the event loop (it reads the whole state)."""
        return await off_loop(h, WHOLE_MODEL, views.describe, h)

    def _check_ready(self) -> None:
        if not self._ready:
            raise NotReady(self.damaged or "recovering models from the store; not ready yet")

    async def _get(self, name: str) -> Handle:
        self._check_ready()
        return await self.models.get(name)
