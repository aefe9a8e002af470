"""Challengers: candidate models that learn a model's stream beside its champion (issue 38).

A model with challengers holds a :class:`Board`: the champion (the engine that serves, always
``Handle.model``) and up to ``CHORUS_MAX_CHALLENGERS`` challengers. Every example the model
learns, from one log entry, is predicted-then-learned by every candidate in the same engine step
(:meth:`Board.learn`), so each one's prediction is scored prequentially on the same examples,
and every challenger is paired with the champion for McNemar's test.

What changes the set of candidates is itself a log entry (a *control record*, ``{"op": ...}``):
adding or removing challengers, setting the promotion policy, promoting. The writer appends it
like an example and applies it after the append; recovery replays it in order
(:func:`apply_control`), so a restart, a replica and a ``kill -9`` at any point all end with the
candidates the log describes. Snapshots carry every candidate's state and scores
(:meth:`Board.to_meta`, :func:`full_state`, :func:`load_board`).

A challenger that refuses an example (its own limits, say) skips it, row by row, so the champion
and the other candidates learn it all the same, and replay does exactly the same.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from app import validate
from app.errors import InvalidInput
from app.metrics import Prequential, mcnemar
from app.names import NAME_RE, NAME_RULE
from app.registry.common import engine, engine_spec, is_river_spec
from app.registry.handles import model_bytes
from app.river_check import check_river_params

INITIAL = "initial"  # the candidate name of a model's own engine unless it names it
ARRAY_SEP = ":"  # a challenger's arrays are stored as "c<i>:<name>" in the snapshot
POLICY_DEFAULTS = {"auto": True, "window": 1000, "min_examples": 1000, "alpha": 0.01,
                   "margin": 0.01}  # fmt: skip
_ENGINE_KEYS = ("ensemble", "learner", "n_models", "seed", "params", "limits")


# ---------------------------------------------------------------------------- building
def build_engine(spec: dict[str, Any], *, where: str, signs: bool, threads: int,
                 stored: bool = False) -> Any:  # fmt: skip
    """The engine a declared spec describes (declared features and classes applied), or
    :class:`InvalidInput` naming ``where``'s field (``spec`` of a model, ``challengers.<i>`` of
    a challenger). ``stored``: a spec the service saved (``model.spec()``), built with the
    defaults it was written under (``ensembles.stored_spec``)."""
    ensembles, learners = engine()
    for fld, value in spec.items():
        validate.check(value, f"{where}.{fld}" if where != "spec" else fld)
    if is_river_spec(spec):
        check_river_params(spec["learner"], dict(spec.get("params") or {}))
    try:
        declared = engine_spec(spec)
        model = ensembles.build_model(ensembles.stored_spec(declared) if stored else declared)
        model.declare(features=spec.get("features"), classes=spec.get("classes"))
    except learners.ParamError as exc:
        pre = "" if where == "spec" else f"{where}."
        raise InvalidInput(f"{pre}params.{exc.param}: {exc}") from exc
    except (ValueError, TypeError, KeyError, ImportError, OverflowError) as exc:
        raise InvalidInput(f"{where}: {exc}") from exc
    if is_river_spec(spec) and not signs:
        raise InvalidInput(
            f"{'learner' if where == 'spec' else where + '.learner'}: river-backed models are "
            "snapshotted with pickle, so they need CHORUS_SNAPSHOT_KEY (an HMAC key kept outside "
            "the store) to be set on the server"
        )
    model.threads = threads
    return model


def check_policy(policy: Any, where: str = "promotion") -> dict[str, Any] | None:
    """A promotion policy with its defaults filled in (``None``: none), or
    :class:`InvalidInput` naming the field."""
    if policy is None:
        return None
    if not isinstance(policy, dict):
        raise InvalidInput(f"{where}: an object expected")
    unknown = set(policy) - set(POLICY_DEFAULTS)
    if unknown:
        raise InvalidInput(f"{where}.{sorted(unknown)[0]}: unknown field")
    out = {**POLICY_DEFAULTS, **{k: v for k, v in policy.items() if v is not None}}
    if not isinstance(out["auto"], bool):
        raise InvalidInput(f"{where}.auto: a boolean expected")
    for k, lo, hi in (("window", 10, 1_000_000), ("min_examples", 1, 100_000_000)):
        v = out[k]
        if type(v) is not int or not lo <= v <= hi:
            raise InvalidInput(f"{where}.{k}: an integer in [{lo}, {hi}] expected")
    for k, lo, hi in (("alpha", 1e-12, 0.5), ("margin", 0.0, 1.0)):
        v = out[k]
        if type(v) not in (int, float) or not lo <= v <= hi:
            raise InvalidInput(f"{where}.{k}: a number in [{lo}, {hi}] expected")
        out[k] = float(v)
    return out


# ---------------------------------------------------------------------------- the board
@dataclass(slots=True)
class Candidate:
    """One candidate: its engine, its prequential scores, its pairing with the champion.

    ``b`` / ``c``: examples since the current champion took over that only the champion / only
    this candidate predicted right (McNemar's discordant pairs); ``recent``: the last
    ``window`` pairs as codes ``2 * champion_right + this_right`` (``wb`` / ``wc`` count its
    discordant ones).
    """

    name: str
    spec: dict[str, Any]
    model: Any
    score: Prequential
    window: int = 1000
    b: int = 0
    c: int = 0
    recent: deque = field(default_factory=deque)
    wb: int = 0
    wc: int = 0
    pending: list = field(default_factory=list)  # (true, predicted) pairs not yet in ``score``
    learned: int = 0  # examples learned since it joined
    skipped: int = 0  # examples it refused (its own limits): not learned, not scored
    seconds: float = 0.0  # engine time in this process since load (not stored)

    def pair(self, champ_right: bool, right: bool) -> None:
        """Record one example predicted by both (same example, same time)."""
        if champ_right != right:
            if champ_right:
                self.b += 1
            else:
                self.c += 1
        code = 2 * champ_right + right
        if len(self.recent) >= self.window:
            old = self.recent.popleft()
            self.wb -= old == 2
            self.wc -= old == 1
        self.recent.append(code)
        self.wb += code == 2
        self.wc += code == 1

    def scores(self) -> Prequential:
        """``score`` with the pending pairs counted (they are counted a batch at a time: the
        same state as one by one, at a fraction of the cost)."""
        if self.pending:
            pairs, self.pending = self.pending, []
            self.score.update_many([t for t, _ in pairs], [p for _, p in pairs])
        return self.score

    def reset_pairs(self, window: int) -> None:
        """A new champion: the pairs were with the old one."""
        self.window = window
        self.b = self.c = self.wb = self.wc = 0
        self.recent = deque()

    def to_meta(self) -> dict[str, Any]:
        return {"name": self.name, "spec": self.spec, "score": self.scores().to_json(),
                "b": self.b, "c": self.c, "recent": "".join(map(str, self.recent)),
                "learned": self.learned, "skipped": self.skipped}  # fmt: skip


class Board:
    """The champion and the challengers of one model (module doc).

    Parameters
    ----------
    champion
        The candidate that serves (its ``model`` is the handle's).
    challengers
        The others, in the order they were added.
    policy
        The auto-promotion policy (:func:`check_policy`), or ``None``.
    metrics_window
        Window of each candidate's windowed scores.
    """

    def __init__(self, champion: Candidate, challengers: list[Candidate],
                 policy: dict[str, Any] | None, metrics_window: int) -> None:  # fmt: skip
        self.champion = champion
        self.challengers = challengers
        self.policy = policy
        self.metrics_window = metrics_window
        self.promotions = 0
        self.since_promotion = 0  # examples learned since the last promotion (or the start)
        self.controls = 0  # control records applied (they take log sequence numbers too)

    @property
    def size(self) -> int:
        """Candidates, the champion included."""
        return 1 + len(self.challengers)

    @property
    def pair_window(self) -> int:
        """How many recent pairs each challenger keeps (the policy's window)."""
        return self.policy["window"] if self.policy else POLICY_DEFAULTS["window"]  # type: ignore[return-value]

    def find(self, name: str) -> Candidate | None:
        """The challenger named ``name``."""
        return next((c for c in self.challengers if c.name == name), None)

    def new_candidate(self, name: str, spec: dict[str, Any], model: Any) -> Candidate:
        return Candidate(name, spec, model, Prequential(self.metrics_window), self.pair_window)

    # ------------------------------------------------------------------ learning
    def learn(self, X: list[dict], ys: list, ws: list, champ_probas: list[dict],
              champ_seconds: float) -> None:  # fmt: skip
        """Every challenger predicts-then-learns the rows the champion just did (in a worker
        thread, under the model's engine lock); scores and pairs are updated. Never raises."""
        _, learners = engine()
        argmax = learners.argmax_label
        champ = self.champion
        champ.seconds += champ_seconds
        champ.learned += len(X)
        self.since_promotion += len(X)
        if len(X) == 1:
            self._learn_one(X[0], ys[0], ws[0], champ_probas[0], argmax)
            return
        champ_preds = [argmax(p) if p else None for p in champ_probas]
        _score(champ, ys, champ_preds)
        for ch in self.challengers:
            t0 = time.perf_counter()
            probas = _predict_learn_rows(ch.model, X, ys, ws)
            ch.seconds += time.perf_counter() - t0
            preds = []
            for y, cp, proba in zip(ys, champ_preds, probas, strict=True):
                if proba is None:  # refused by this challenger
                    ch.skipped += 1
                    preds.append(None)
                    continue
                ch.learned += 1
                pred = argmax(proba) if proba else None
                preds.append(pred)
                ch.pair(cp is not None and cp == y, pred is not None and pred == y)
            _score(ch, ys, preds)

    def _learn_one(self, x: dict, y: Any, w: float, champ_proba: dict, argmax: Any) -> None:
        """:meth:`learn` of one row (the common single ``/learn``), with the least Python."""
        perf = time.perf_counter
        cp = argmax(champ_proba) if champ_proba else None
        champ_right = cp is not None and cp == y
        if cp is not None:
            _queue(self.champion, y, cp)
        for ch in self.challengers:
            t0 = perf()
            try:
                proba = ch.model.predict_learn_one(x, y, w=w)
            except Exception:  # noqa: BLE001 - refused by this challenger: skipped
                ch.seconds += perf() - t0
                ch.skipped += 1
                continue
            ch.seconds += perf() - t0
            ch.learned += 1
            pred = argmax(proba) if proba else None
            if pred is not None:
                _queue(ch, y, pred)
            ch.pair(champ_right, pred is not None and pred == y)

    # ------------------------------------------------------------------ promotion
    def due(self) -> str | None:
        """The challenger the policy promotes now, if any: over its last ``window`` pairs with
        the champion (at least ``min_examples`` of them, and ``min_examples`` examples since
        the last promotion: the hysteresis), significantly better (McNemar, ``alpha``) by at
        least ``margin`` accuracy. The best such (largest gap) wins."""
        p = self.policy
        if not p or not p["auto"] or self.since_promotion < p["min_examples"]:
            return None
        best, best_gap = None, 0.0
        for ch in self.challengers:
            n = len(ch.recent)
            if n < min(p["min_examples"], p["window"]) or ch.wc <= ch.wb:
                continue
            gap = (ch.wc - ch.wb) / n
            if gap < p["margin"] or mcnemar(ch.wb, ch.wc)["p_value"] >= p["alpha"]:
                continue
            if gap > best_gap:
                best, best_gap = ch.name, gap
        return best

    def promote(self, name: str) -> Any:
        """Make challenger ``name`` the champion (the old one becomes a challenger in its
        place); returns the new champion's engine."""
        ch = self.find(name)
        if ch is None:
            raise InvalidInput(f"challenger: no challenger named {name!r}")
        i = self.challengers.index(ch)
        self.challengers[i] = self.champion
        self.champion = ch
        for c in self.challengers:
            c.reset_pairs(self.pair_window)
        ch.reset_pairs(self.pair_window)
        self.promotions += 1
        self.since_promotion = 0
        return ch.model

    # ------------------------------------------------------------------ state
    def nbytes(self) -> int:
        """Estimated bytes of the challengers' engines and every candidate's scores (the
        champion's engine is the model's own)."""
        scores = (64 * self.metrics_window + 8 * self.pair_window) * self.size
        return sum(model_bytes(c.model) for c in self.challengers) + scores

    def to_meta(self) -> dict[str, Any]:
        """What a snapshot's metadata carries (the engines' states go with the arrays)."""
        return {"champion": self.champion.to_meta(),
                "challengers": [c.to_meta() for c in self.challengers],
                "policy": self.policy, "promotions": self.promotions,
                "since_promotion": self.since_promotion, "controls": self.controls}  # fmt: skip


_PENDING = 512  # pairs a candidate holds before counting them (bounded)


def _queue(c: Candidate, y: Any, pred: Any) -> None:
    c.pending.append((y, pred))
    if len(c.pending) >= _PENDING:
        c.scores()


def _score(c: Candidate, ys: list, preds: list) -> None:
    """Queue the candidate's scored pairs (``None`` predictions are not scored)."""
    c.pending.extend((t, p) for t, p in zip(ys, preds, strict=True) if p is not None)
    if len(c.pending) >= _PENDING:
        c.scores()


def _scored(ys: list, preds: list) -> tuple[list, list]:
    kept = [(t, p) for t, p in zip(ys, preds, strict=True) if p is not None]
    return [t for t, _ in kept], [p for _, p in kept]


def _predict_learn_rows(model: Any, X: list[dict], ys: list, ws: list) -> list[dict | None]:
    """The model's predict-then-learn of the rows (``None`` for a row it refuses): the batch
    call, or row by row when it refuses the batch (which it does before learning any), so the
    rows learned do not depend on how the stream was cut into batches."""
    try:
        if len(X) == 1:
            return [model.predict_learn_one(X[0], ys[0], w=ws[0])]
        return list(model.predict_learn_many(X, ys, ws))
    except Exception:  # noqa: BLE001 - a refusal: find the rows, one at a time
        if len(X) == 1:
            return [None]
    out: list[dict | None] = []
    for x, y, w in zip(X, ys, ws, strict=True):
        try:
            out.append(model.predict_learn_one(x, y, w=w))
        except Exception:  # noqa: BLE001 - this row only
            out.append(None)
    return out


# ---------------------------------------------------------------------------- from the spec
def initial_board(spec: dict[str, Any], model: Any, *, signs: bool, threads: int,
                  metrics_window: int) -> Board | None:  # fmt: skip
    """The board a declared spec starts with (``None`` without challengers or a policy)."""
    chs, policy = spec.get("challengers") or [], spec.get("promotion")
    if not chs and policy is None:
        return None
    own = {k: spec[k] for k in _ENGINE_KEYS if spec.get(k) is not None}
    board = Board(Candidate(spec.get("champion") or INITIAL, own, model,
                            Prequential(metrics_window)), [], policy, metrics_window)  # fmt: skip
    for c in chs:
        decl = {**c, "features": spec.get("features"), "classes": spec.get("classes")}
        decl.pop("name")
        m = build_engine(decl, where="challengers", signs=signs, threads=threads, stored=True)
        board.challengers.append(board.new_candidate(c["name"], _engine_only(c), m))
    return board


def _engine_only(spec: dict[str, Any]) -> dict[str, Any]:
    return {k: spec[k] for k in _ENGINE_KEYS if spec.get(k) is not None}


def declared_challengers(
    specs: Any, *, taken: set[str], limit: int, signs: bool, threads: int,
    features: Any, classes: Any, where: str = "challengers",
) -> list[tuple[dict[str, Any], Any]]:  # fmt: skip
    """Check challenger specs (each ``{"name", ...engine spec}``) and build their engines:
    ``[(the spec to store, the engine)]``; :class:`InvalidInput` naming the field (a bad spec,
    a duplicate name, more than ``limit`` challengers counting the ``taken`` names but one,
    the champion)."""
    if not isinstance(specs, list):
        raise InvalidInput(f"{where}: a list expected")
    if len(taken) - 1 + len(specs) > limit:
        raise InvalidInput(
            f"{where}: {len(taken) - 1 + len(specs)} challengers, over the limit of {limit} "
            "per model (CHORUS_MAX_CHALLENGERS)"
        )
    out = []
    names = set(taken)
    for i, s in enumerate(specs):
        at = f"{where}.{i}"
        if not isinstance(s, dict):
            raise InvalidInput(f"{at}: an object expected")
        name = s.get("name")
        if not isinstance(name, str) or not NAME_RE.match(name):
            raise InvalidInput(f"{at}.name: {name!r} is not a candidate name ({NAME_RULE})")
        if name in names:
            raise InvalidInput(f"{at}.name: {name!r} is taken (names are unique per model)")
        names.add(name)
        unknown = set(s) - {"name", *_ENGINE_KEYS}
        if unknown:
            raise InvalidInput(f"{at}.{sorted(unknown)[0]}: unknown field")
        decl = {**_engine_only(s), "features": features, "classes": classes}
        model = build_engine(decl, where=at, signs=signs, threads=threads)
        stored = {"name": name, **{k: v for k, v in model.spec().items() if k in _ENGINE_KEYS}}
        out.append((stored, model))
    return out


# ---------------------------------------------------------------------------- control records
def is_control(rec: dict[str, Any]) -> bool:
    """Whether a log record changes the candidates rather than being an example."""
    return "op" in rec


def apply_control(h: Any, rec: dict[str, Any], *, signs: bool, threads: int,
                  metrics_window: int) -> None:  # fmt: skip
    """Apply a control record to the handle ``h`` (live after its append, or in a replay).

    ``{"op": "challengers", "add": [spec...], "remove": [name...], "promotion": policy|null,
    "set_policy": bool}``; ``{"op": "promote", "name": challenger}``.
    """
    op = rec["op"]
    board: Board | None = h.board
    if op == "challengers":
        if board is None:
            own = _engine_only(h.model.spec())
            board = Board(Candidate(h.spec.get("champion") or INITIAL, own, h.model,
                                    Prequential(metrics_window)), [], None, metrics_window)  # fmt: skip
        if rec.get("set_policy"):
            board.policy = rec.get("promotion")
            for c in board.challengers:
                if c.window != board.pair_window:
                    c.reset_pairs(board.pair_window)
        for name in rec.get("remove") or []:
            ch = board.find(name)
            if ch is not None:
                board.challengers.remove(ch)
        for s in rec.get("add") or []:
            decl = {**_engine_only(s), "features": h.spec.get("features"),
                    "classes": h.spec.get("classes")}  # fmt: skip
            m = build_engine(decl, where="challengers", signs=signs, threads=threads,
                             stored=True)  # (a record's specs are stored ones)  # fmt: skip
            board.challengers.append(board.new_candidate(s["name"], _engine_only(s), m))
        h.board = board  # (kept when emptied: it knows the champion's name and scores)
    elif op == "promote":
        if board is None:
            raise InvalidInput("challenger: the model has no challengers")
        h.model = board.promote(rec["name"])
        board.champion.model = h.model
    else:
        raise ValueError(f"unknown control record {op!r}")
    h.board.controls += 1


# ---------------------------------------------------------------------------- snapshots
def full_state(h: Any) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """``(state, board metadata)``: the champion's state with every challenger's arrays beside
    it (``c<i>:<name>``) and the board's metadata with each challenger's state header
    (``(h.model.to_state(), None)`` without a board). Engine work: under the engine lock."""
    state = h.model.to_state()
    board: Board | None = h.board
    if board is None:
        return state, None
    arrays = dict(state["arrays"])
    meta = board.to_meta()
    for i, (ch, m) in enumerate(zip(board.challengers, meta["challengers"], strict=True)):
        s = ch.model.to_state()
        for k, v in s["arrays"].items():
            arrays[f"c{i}{ARRAY_SEP}{k}"] = v
        m["state"] = {"header": s["header"], "arrays": list(s["arrays"])}
    return {"header": state["header"], "arrays": arrays}, meta


def load_board(state: dict[str, Any], meta: dict[str, Any] | None, *, threads: int,
               metrics_window: int) -> tuple[dict[str, Any], Board | None]:  # fmt: skip
    """Split a snapshot state into the champion's state and the board (``(state, None)``
    without one), the challengers' engines loaded; the caller sets the champion's engine."""
    if not meta:
        return state, None
    ensembles, _ = engine()
    arrays = dict(state["arrays"])
    chs = []
    for i, m in enumerate(meta["challengers"]):
        head = m["state"]
        own = {k: arrays.pop(f"c{i}{ARRAY_SEP}{k}") for k in head["arrays"]}
        model = ensembles.load_state({"header": head["header"], "arrays": own})
        model.threads = threads
        chs.append(_candidate(m, model, metrics_window, meta.get("policy")))
    champ = _candidate(meta["champion"], None, metrics_window, None)
    board = Board(champ, chs, meta.get("policy"), metrics_window)
    board.promotions = int(meta.get("promotions", 0))
    board.since_promotion = int(meta.get("since_promotion", 0))
    board.controls = int(meta.get("controls", 0))  # (snapshots before it was kept: 0)
    return {"header": state["header"], "arrays": arrays}, board


def _candidate(m: dict[str, Any], model: Any, metrics_window: int, policy: Any) -> Candidate:
    window = policy["window"] if policy else POLICY_DEFAULTS["window"]
    c = Candidate(m["name"], m["spec"], model, Prequential.from_json(m["score"], metrics_window),
                  window, int(m["b"]), int(m["c"]))  # fmt: skip
    for ch in m.get("recent", ""):
        code = int(ch)
        c.recent.append(code)
        c.wb += code == 2
        c.wc += code == 1
    c.learned, c.skipped = int(m.get("learned", 0)), int(m.get("skipped", 0))
    return c


# ---------------------------------------------------------------------------- the leaderboard
def leaderboard(h: Any) -> dict[str, Any]:
    """``GET /models/{name}/leaderboard`` (run under the model's engine lock)."""
    board: Board | None = h.board
    out: dict[str, Any] = {"model": h.name, "seq": h.seq}
    if board is None:
        return {**out, "champion": None, "policy": None, "promotions": 0, "candidates": []}
    cands = []
    for role, c in [("champion", board.champion)] + [("challenger", c) for c in board.challengers]:
        score = c.scores()
        rep = {**score.values(), "n_scored": score.n_scored, "per_class": score.per_class()}
        entry: dict[str, Any] = {
            "name": c.name, "role": role, "spec": c.spec, "metrics": rep,
            "learned": c.learned, "skipped": c.skipped,
            "engine_seconds": c.seconds,
            "examples_per_s": c.learned / c.seconds if c.seconds > 0 else None,
            "memory_bytes": int(model_bytes(c.model)),
            "mcnemar": None, "window_mcnemar": None,
        }  # fmt: skip
        if role == "challenger":
            entry["mcnemar"] = {**mcnemar(c.b, c.c), "n": c.b + c.c}
            entry["window_mcnemar"] = {**mcnemar(c.wb, c.wc), "n": len(c.recent)}
        cands.append(entry)
    return {**out, "champion": board.champion.name, "policy": board.policy,
            "promotions": board.promotions, "since_promotion": board.since_promotion,
            "candidates": cands}  # fmt: skip


# ---------------------------------------------------------------------------- in this process
class LocalCandidates:
    """A model with challengers held in this process, without a store: ``chorus replay
    --compare`` and the benchmarks. The same :class:`Board` as the service (the same scores,
    pairs, policy and leaderboard); a promotion the policy calls for is applied at once, as the
    service's writer does after a group.

    Parameters
    ----------
    spec
        The champion's spec (``features`` / ``classes`` declared for every candidate).
    challengers
        Challenger specs, each with a ``name``.
    policy
        The auto-promotion policy (:func:`check_policy`'s input), or ``None``.
    champion
        The champion's candidate name.
    threads, metrics_window
        As the service's settings.

    Examples
    --------
    >>> lc = LocalCandidates({"ensemble": "single", "learner": "naive_bayes"},
    ...                      [{"name": "nb3", "learner": "naive_bayes", "n_models": 3}])
    >>> _ = lc.predict_learn([{"x": 1.0}, {"x": 2.0}], ["a", "b"])
    >>> [c["learned"] for c in lc.leaderboard()["candidates"]]
    [2, 2]
    """

    def __init__(self, spec: dict[str, Any], challengers: list[dict[str, Any]],
                 policy: dict[str, Any] | None = None, *, champion: str = INITIAL,
                 threads: int = 1, metrics_window: int = 1000) -> None:  # fmt: skip
        from app.registry.handles import Handle

        model = build_engine(spec, where="spec", signs=False, threads=threads)
        built = declared_challengers(
            challengers, taken={champion}, limit=64, signs=False, threads=threads,
            features=spec.get("features"), classes=spec.get("classes"),
        )  # fmt: skip
        declared = {**model.spec(), "features": spec.get("features"),
                    "classes": spec.get("classes"), "challengers": [c for c, _ in built],
                    "champion": champion, "promotion": check_policy(policy)}  # fmt: skip
        board = initial_board(declared, model, signs=False, threads=threads,
                              metrics_window=metrics_window)  # fmt: skip
        self.h = Handle("local", declared, model, board=board)
        self.served = Prequential(metrics_window)  # the champion of the moment's predictions
        self.settings = {"signs": False, "threads": threads, "metrics_window": metrics_window}

    def predict_learn(self, X: list[dict], ys: list, ws: list | None = None) -> list[dict]:
        """Every candidate predicts-then-learns the rows; returns the champion's
        probabilities (what the service would serve), then applies a promotion that is due."""
        _, learners = engine()
        ws = ws if ws is not None else [1.0] * len(X)
        h = self.h
        t0 = time.perf_counter()
        probas = list(h.model.predict_learn_many(X, ys, ws))
        h.board.learn(X, ys, ws, probas, time.perf_counter() - t0)
        preds = [learners.argmax_label(p) if p else None for p in probas]
        self.served.update_many(*_scored(ys, preds))
        h.seq += len(X)
        winner = h.board.due()
        if winner is not None:
            apply_control(h, {"op": "promote", "name": winner, "auto": True}, **self.settings)
            h.seq += 1
        return probas

    def leaderboard(self) -> dict[str, Any]:
        """The service's leaderboard of this model."""
        return leaderboard(self.h)
