"""The calendar assistant: a week-view page plus a small JSON backend that talks to Chorus.

Every profile (user) has its own four Chorus models, ``<prefix>.<user>.<target>``; the simulated
user writes only to the ``demo`` profile's.

Routes
------
``GET /``                                 the page (static HTML/JS/CSS, no CDN)
``GET /api/config``                       fields, limits and pick lists the page builds itself from
``GET /api/users``, ``POST /api/users``   list / add profiles (adding one creates its four models)
``POST /api/users/{user}/suggest``        one prediction per target: value, honest confidence, the
                                          number of meetings it rests on, ``prediction_id``;
                                          and the ``slot``: never past, never double-booked
``POST /api/users/{user}/meetings``       save: the chosen values go back as delayed labels
``GET /api/users/{user}/meetings``        the meetings of a week (``?start=YYYY-MM-DD&days=7``)
``GET /api/users/{user}/stats``           each model's accuracy (from Chorus), the learning curve,
                                          and per field which candidate is winning (``race``)
``POST /api/users/{user}/reset``          forget this profile: its models start again, empty
``POST /api/simulate``                    the simulated user (``synth``), into ``demo`` only
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import os
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

from fastapi import FastAPI, HTTPException, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, JSONResponse
from fastapi.staticfiles import StaticFiles
from pydantic import BaseModel, Field, field_validator

from .chorus_api import ChorusAdapter, ChorusError, ChorusUnavailable, Prediction
from .meetings import DAYS, HHMM, LIMITS, TARGETS, Choice, Details, page_config
from .profiles import DEMO, WINDOW, Calendar, Profiles
from .simulate import simulated_meetings
from .slots import place

log = logging.getLogger("calendar_assistant")
STATIC = Path(__file__).with_name("static")
LEARNERS = ("hoeffding_tree", "naive_bayes")
FIRST_PROFILE = "me"

#: Pseudo-meetings of doubt in the shown confidence: ``p * n / (n + PRIOR_MEETINGS)``.
PRIOR_MEETINGS = 2


def honest_confidence(probability: float, n_meetings: int) -> float:
    """The confidence shown for a suggestion: the model's probability, shrunk by how little it saw.

    A model that learned from one meeting is 100% sure of what it saw; a person should not be.
    The shown value is ``p * n / (n + 2)``: at most 33% after one meeting, 80% after 8, 95% after
    38 -- never 100%.

    >>> honest_confidence(1.0, 1), honest_confidence(1.0, 8), honest_confidence(0.5, 0)
    (0.3333, 0.8, 0.0)
    """
    if n_meetings <= 0:
        return 0.0
    return round(probability * n_meetings / (n_meetings + PRIOR_MEETINGS), 4)


DIVERSITY = ("n", "disagreement", "q_statistic", "kappa")  # of GET /models/{name}'s "diversity"

#: The leaderboard's name of each field model's own bagging (docs/http-api.md, Challengers).
CHAMPION = "bagging"
#: Auto-promotion: a challenger takes over when, over the last 100 meetings paired with the
#: champion (at least 40), it is better by McNemar's test at 5% and by 5 points of accuracy, and
#: 40 meetings have been learned since the last promotion. A person schedules tens of meetings,
#: so Chorus's defaults (1,000 examples, alpha 1%) would never promote.
PROMOTION = {"auto": True, "window": 100, "min_examples": 40, "alpha": 0.05, "margin": 0.05}


def race(board: dict[str, Any]) -> dict[str, Any]:
    """Which candidate is winning one field, from Chorus's leaderboard: the champion, and the
    challenger with the best accuracy, its accuracy against the champion's and McNemar's test.

    >>> board = {"champion": "bagging", "promotions": 0, "policy": {"alpha": 0.05},
    ...   "candidates": [
    ...     {"name": "bagging", "role": "champion", "learned": 9, "metrics": {"accuracy": 0.5}},
    ...     {"name": "arf", "role": "challenger", "learned": 9, "metrics": {"accuracy": 0.75},
    ...      "mcnemar": {"b": 1, "c": 3, "n": 4, "p_value": 0.625}}]}
    >>> r = race(board); r["leader"]["name"], r["leader"]["verdict"]
    ('arf', 'no significant difference yet')
    """
    candidates = board.get("candidates") or []
    alpha = float((board.get("policy") or {}).get("alpha") or PROMOTION["alpha"])

    def row(c: dict[str, Any]) -> dict[str, Any]:
        test = c.get("mcnemar") or {}
        return {
            "name": c["name"],
            "role": c["role"],
            "accuracy": (c.get("metrics") or {}).get("accuracy"),
            "learned": c.get("learned"),
            "p_value": test.get("p_value"),
            "b": test.get("b"),
            "c": test.get("c"),
        }

    rows = [row(c) for c in candidates]
    champion = next((r for r in rows if r["role"] == "champion"), None)
    challengers = [r for r in rows if r["role"] == "challenger"]
    leader = max(challengers, key=lambda r: r["accuracy"] or 0.0, default=None)
    if leader is not None and champion is not None:
        p, mine, theirs = leader["p_value"], leader["accuracy"], champion["accuracy"]
        if p is None or mine is None or theirs is None or p >= alpha:
            verdict = "no significant difference yet"
        else:
            verdict = "significantly " + ("better" if mine > theirs else "worse")
        leader = {**leader, "champion_accuracy": theirs, "verdict": verdict}
    return {
        "champion": board.get("champion"),
        "promotions": board.get("promotions", 0),
        "alpha": alpha,
        "leader": leader,
        "candidates": rows,
    }


@dataclass(kw_only=True)
class AssistantSettings:
    """How the assistant is configured (environment variables ``CALENDAR_*``).

    Parameters
    ----------
    chorus_url
        Base URL of the Chorus server.
    data_dir
        Where the assistant keeps each profile's meetings (``users/<id>/meetings.jsonl``).
    model_prefix
        Chorus model names are ``<prefix>.<user>.<target>``.
    learner
        Base learner of every model's online bagging: ``hoeffding_tree`` (default) or ``naive_bayes``.
    n_models, seed
        Ensemble size (5: small and quick) and seed.
    grace_period, delta
        The trees' grace period and Hoeffding-bound confidence. A user schedules tens of meetings,
        not thousands: with the library defaults (200, 1e-7) a tree would not split before several
        hundred, and only its leaf's naive Bayes would learn. With 5 and 0.05 the trees look for a
        split every 5 meetings and take one on little evidence (measured on the browser test's
        scripted user, 12 seeds: suggestions kept over meetings 21-30, 0.75 with 10 and 0.01, 0.80
        with 5 and 0.05; see the example's README).
    diversity_window
        Meetings over which Chorus keeps each member's accuracy and the members' diversity
        (the ``window`` of the bagging spec; the side panel shows them); 0 keeps none. It does
        not change what the models learn.
    challengers
        Whether each field's model has challengers learning beside it (``CALENDAR_CHALLENGERS=0``
        for none): a small adaptive random forest (``arf``, 3 trees) and a single naive Bayes
        (``naive-bayes``), with auto-promotion (:data:`PROMOTION`). The side panel shows, per
        field, which candidate is winning.

    Examples
    --------
    >>> AssistantSettings(model_prefix="cal").model_name("ann", "duration")
    'cal.ann.duration'
    """

    chorus_url: str = "http://127.0.0.1:8000"
    data_dir: Path = Path("./calendar-data")
    model_prefix: str = "calendar"
    learner: str = "hoeffding_tree"
    n_models: int = 5
    seed: int = 1
    grace_period: int = 5
    delta: float = 0.05
    diversity_window: int = 50
    challengers: bool = True
    api_key: str | None = None

    def __post_init__(self) -> None:
        if self.learner not in LEARNERS:
            raise ValueError(f"learner must be one of {', '.join(LEARNERS)}; got {self.learner!r}")
        if not 1 <= len(self.model_prefix) <= 24:
            raise ValueError(f"model_prefix must be 1-24 characters; got {self.model_prefix!r}")
        self.data_dir = Path(self.data_dir)

    @classmethod
    def from_env(cls) -> AssistantSettings:
        env = os.environ
        return cls(
            chorus_url=env.get("CALENDAR_CHORUS_URL", cls.chorus_url),
            data_dir=Path(env.get("CALENDAR_DATA_DIR", str(cls.data_dir))),
            model_prefix=env.get("CALENDAR_MODEL_PREFIX", cls.model_prefix),
            learner=env.get("CALENDAR_LEARNER", cls.learner),
            n_models=int(env.get("CALENDAR_N_MODELS", cls.n_models)),
            seed=int(env.get("CALENDAR_SEED", cls.seed)),
            grace_period=int(env.get("CALENDAR_GRACE_PERIOD", cls.grace_period)),
            delta=float(env.get("CALENDAR_DELTA", cls.delta)),
            diversity_window=int(env.get("CALENDAR_DIVERSITY_WINDOW", cls.diversity_window)),
            challengers=env.get("CALENDAR_CHALLENGERS", "1") not in ("0", "false", "no"),
            api_key=env.get("CHORUS_API_KEY") or None,
        )

    def model_name(self, user: str, target: str) -> str:
        return f"{self.model_prefix}.{user}.{target}"

    def model_spec(self) -> dict[str, Any]:
        """The Chorus model declared for each target (see docs/http-api.md, ``POST /models``)."""
        params: dict[str, Any] = {}
        if self.learner == "hoeffding_tree":
            params = {"grace_period": self.grace_period, "delta": self.delta}
        if self.diversity_window:
            params["window"] = self.diversity_window
        spec: dict[str, Any] = {
            "ensemble": "bagging",
            "learner": self.learner,
            "n_models": self.n_models,
            "seed": self.seed,
            "params": params,
        }
        if self.challengers:
            spec.update(champion=CHAMPION, challengers=self.challenger_specs(), promotion=PROMOTION)
        return spec

    def challenger_specs(self) -> list[dict[str, Any]]:
        """The candidates that learn each field's meetings beside the champion (none when
        ``challengers`` is off): cheap ones, a user's model must stay small and quick."""
        if not self.challengers:
            return []
        trees = {"grace_period": self.grace_period, "delta": self.delta}
        return [
            {"name": "arf", "ensemble": "arf", "n_models": 3, "seed": self.seed, "params": trees},
            {"name": "naive-bayes", "ensemble": "single", "learner": "naive_bayes"},
        ]


@dataclass
class Simulation:
    running: bool = False
    total: int = 0
    done: int = 0
    drift_at: int | None = None
    error: str | None = None
    task: asyncio.Task[None] | None = field(default=None, repr=False)

    def public(self) -> dict[str, Any]:
        return {
            "user": DEMO,
            "running": self.running,
            "total": self.total,
            "done": self.done,
            "drift_at": self.drift_at,
            "error": self.error,
        }


class NewProfile(BaseModel):
    id: str = Field(examples=["ann"], description="1-24 characters from a-z 0-9 -")


class SuggestRequest(BaseModel):
    details: Details
    week: dt.date | None = Field(
        None, description="a day of the week the person looks at (default: this week)"
    )
    now: dt.datetime | None = Field(
        None, description="the person's local time, YYYY-MM-DDTHH:MM (default: the server's)"
    )
    duration: int | None = Field(
        None,
        ge=LIMITS["duration_min"],
        le=LIMITS["duration_max"],
        description="minutes the person set; default: the duration model's suggestion",
    )


class SuggestedField(BaseModel):
    """What the page was suggested for one field (echoed back on save)."""

    value: str | int | None = Field(None, union_mode="left_to_right")
    prediction_id: str | None = Field(None, max_length=200)

    @field_validator("value")
    @classmethod
    def _short(cls, value: str | int | None) -> str | int | None:
        if isinstance(value, str) and len(value) > 200:
            raise ValueError("at most 200 characters")
        return value


class SaveRequest(BaseModel):
    details: Details
    choice: Choice
    suggestions: dict[str, SuggestedField] = Field(default_factory=dict)
    meeting_id: str | None = Field(
        None,
        pattern=r"^[A-Za-z0-9_-]{8,64}$",
        description="idempotency key: a retried save with the same id is not learned twice",
    )

    @field_validator("suggestions")
    @classmethod
    def _targets_only(cls, value: dict[str, SuggestedField]) -> dict[str, SuggestedField]:
        unknown = sorted(set(value) - set(TARGETS))
        if unknown:
            raise ValueError(f"unknown field {unknown[0][:40]!r}; fields are {', '.join(TARGETS)}")
        return value


class SimulateRequest(BaseModel):
    n: int = Field(100, ge=1, le=5000)
    seed: int = Field(0, ge=0, le=2**31)
    drift: bool = False


def _field_errors(exc: RequestValidationError) -> list[dict[str, str]]:
    """Pydantic's errors as ``{"field": "choice.duration", "message": ...}``, one per bad field."""
    out = []
    for err in exc.errors():
        path = [str(p) for p in err.get("loc", ()) if p not in ("body", "query", "path")]
        message = str(err.get("msg", "invalid")).removeprefix("Value error, ")
        head, sep, rest = message.partition(": ")
        if sep and head in {*TARGETS, "date"} and (not path or path[-1] != head):
            path, message = [*path, head], rest  # a check across fields names the field it blames
        out.append({"field": ".".join(path) or "body", "message": message})
    return out


def _saved(record: dict[str, Any]) -> dict[str, Any]:
    """The answer to a save, from its calendar record."""
    keys = ("meeting_id", "correct", "final", "sent")
    return {"meeting": record["i"], **{k: record[k] for k in keys}}


def _week_date(day: str, today: dt.date, weeks_back: int) -> dt.date:
    monday = today - dt.timedelta(days=today.weekday()) - dt.timedelta(weeks=weeks_back)
    return monday + dt.timedelta(days=DAYS.index(day) if day in DAYS else 0)


def _slot(
    calendar: Calendar, body: SuggestRequest, suggestions: dict[str, dict[str, Any]]
) -> dict[str, Any] | None:
    """Where the suggested day and start put the meeting: never past, never double-booked
    (``slots.place``); None while the day or start model has no suggestion."""
    day, start = suggestions["day_of_week"]["value"], suggestions["start_time"]["value"]
    time = HHMM.match(start) if isinstance(start, str) else None
    if day not in DAYS or time is None:
        return None
    duration = body.duration
    if duration is None:
        value = str(suggestions["duration"]["value"])
        duration = int(value) if value.isdigit() else 30
    now = (body.now or dt.datetime.now()).replace(second=0, microsecond=0, tzinfo=None)
    week = body.week or now.date()
    monday = week - dt.timedelta(days=week.weekday())
    date = monday + dt.timedelta(days=DAYS.index(day))
    start = f"{int(time.group(1)):02d}:{time.group(2)}"
    return place(date, start, duration, busy=calendar.busy, now=now).public()


def create_app(settings: AssistantSettings | None = None) -> FastAPI:
    """Build the assistant's FastAPI app (each profile's models are created in Chorus if missing)."""
    settings = settings or AssistantSettings.from_env()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        chorus = ChorusAdapter(settings.chorus_url, api_key=settings.api_key)
        profiles = Profiles(settings.data_dir)
        if (settings.data_dir / "history.jsonl").exists():
            log.warning(
                "%s is the single-user version's history: not read (profiles live in %s/users)",
                settings.data_dir / "history.jsonl",
                settings.data_dir,
            )
        if profiles.ids() == [DEMO]:
            profiles.create(FIRST_PROFILE)
        app.state.chorus, app.state.profiles, app.state.sim = chorus, profiles, Simulation()
        await chorus.wait_ready(timeout=60)
        for user in profiles.ids():
            await ensure_models(chorus, user)
        log.info("calendar assistant ready; Chorus at %s", settings.chorus_url)
        try:
            yield
        finally:
            sim: Simulation = app.state.sim
            if sim.task is not None:
                sim.task.cancel()
            await chorus.aclose()

    async def ensure_model(chorus: ChorusAdapter, name: str) -> None:
        await chorus.ensure_model(name, settings.model_spec())
        await chorus.ensure_challengers(
            name, settings.challenger_specs(), PROMOTION if settings.challengers else None
        )

    async def ensure_models(chorus: ChorusAdapter, user: str) -> None:
        await asyncio.gather(*(ensure_model(chorus, settings.model_name(user, t)) for t in TARGETS))

    app = FastAPI(title="Chorus calendar assistant", lifespan=lifespan)
    app.mount("/static", StaticFiles(directory=STATIC), name="static")

    @app.exception_handler(ChorusError)
    async def chorus_error(request: Request, exc: ChorusError) -> JSONResponse:
        status = 503 if isinstance(exc, ChorusUnavailable) else 502
        return JSONResponse({"detail": str(exc)}, status_code=status)

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        errors = _field_errors(exc)
        detail = "; ".join(f"{e['field']}: {e['message']}" for e in errors)
        return JSONResponse({"detail": detail, "errors": errors}, status_code=422)

    def calendar_of(request: Request, user: str) -> Calendar:
        profiles: Profiles = request.app.state.profiles
        if not profiles.exists(user):
            raise HTTPException(404, f"user: no profile {user[:40]!r}")
        return profiles.calendar(user)

    @app.get("/", include_in_schema=False)
    async def page() -> FileResponse:
        return FileResponse(STATIC / "index.html")

    @app.get("/api/config")
    async def config() -> dict[str, Any]:
        return {
            **page_config(),
            "window": WINDOW,
            "diversity_window": settings.diversity_window,
            "demo": DEMO,
            "prior_meetings": PRIOR_MEETINGS,
            "spec": settings.model_spec(),
            "model_pattern": settings.model_name("<user>", "<target>"),
        }

    @app.get("/api/users")
    async def users(request: Request) -> dict[str, Any]:
        profiles: Profiles = request.app.state.profiles
        return {
            "demo": DEMO,
            "users": [
                {"id": u, "demo": u == DEMO, "meetings": len(profiles.calendar(u).records)}
                for u in profiles.ids()
            ],
        }

    @app.post("/api/users", status_code=201)
    async def add_user(body: NewProfile, request: Request) -> dict[str, Any]:
        profiles: Profiles = request.app.state.profiles
        user = body.id.strip().lower()
        try:
            Profiles.check_id(user)
        except ValueError as exc:
            raise HTTPException(422, f"id: {exc}") from exc
        if profiles.exists(user):
            raise HTTPException(409, f"id: a profile {user!r} exists already")
        await ensure_models(request.app.state.chorus, user)
        profiles.create(user)
        return {"id": user, "models": [settings.model_name(user, t) for t in TARGETS]}

    @app.post("/api/users/{user}/reset")
    async def reset(user: str, request: Request) -> dict[str, Any]:
        calendar = calendar_of(request, user)
        sim: Simulation = request.app.state.sim
        if user == DEMO and sim.running:
            raise HTTPException(409, "the simulated user is still writing to demo")
        chorus: ChorusAdapter = request.app.state.chorus
        await asyncio.gather(*(chorus.delete(settings.model_name(user, t)) for t in TARGETS))
        calendar.clear()
        await ensure_models(chorus, user)
        return {"id": user, "meetings": 0}

    @app.post("/api/users/{user}/suggest")
    async def suggest(user: str, body: SuggestRequest, request: Request) -> dict[str, Any]:
        calendar = calendar_of(request, user)
        chorus: ChorusAdapter = request.app.state.chorus
        features = body.details.features()
        names = [settings.model_name(user, t) for t in TARGETS]
        asked = await asyncio.gather(
            *(chorus.predict(n, features) for n in names), *(chorus.describe(n) for n in names)
        )
        answers: list[Prediction] = asked[: len(names)]
        seen: list[dict[str, Any]] = asked[len(names) :]
        suggestions = {}
        for target, answer, desc in zip(TARGETS, answers, seen, strict=True):
            n = int(desc.get("n_seen") or 0)
            top = sorted(answer.probabilities.items(), key=lambda kv: -kv[1])[:3]
            value = answer.prediction
            suggestions[target] = {
                "value": value,
                "confidence": honest_confidence(answer.confidence, n),
                "model_probability": round(answer.confidence, 4),
                "learned_from": n,
                "with_value": calendar.value_count(target, str(value)) if value is not None else 0,
                "prediction_id": answer.prediction_id,
                "top": [[label, honest_confidence(p, n)] for label, p in top],
                "because": answer.because,
            }
        slot = _slot(calendar, body, suggestions)
        return {"user": user, "features": features, "suggestions": suggestions, "slot": slot}

    @app.post("/api/users/{user}/meetings")
    async def save(user: str, body: SaveRequest, request: Request) -> dict[str, Any]:
        calendar = calendar_of(request, user)
        chorus: ChorusAdapter = request.app.state.chorus
        features = body.details.features()
        labels = body.choice.labels()
        meeting_id = body.meeting_id or uuid.uuid4().hex
        if (done := calendar.find(meeting_id)) is not None:  # a retry of a save that went through
            return {**_saved(done), "duplicate": True}

        async def give_label(target: str) -> str:
            name = settings.model_name(user, target)
            suggested = body.suggestions.get(target)
            if suggested is not None and suggested.prediction_id:
                try:
                    await chorus.label(name, suggested.prediction_id, labels[target])
                    return "delayed label"
                except ChorusError as exc:
                    if exc.status not in (404, 410):
                        raise
                    log.warning(
                        "prediction id for %s no longer valid (%s); learning anew", name, exc
                    )
            await chorus.learn(name, features, labels[target], example_id=f"{meeting_id}-{target}")
            return "learned"

        how = await asyncio.gather(*(give_label(t) for t in TARGETS))
        suggested = {
            t: (str(s.value) if (s := body.suggestions.get(t)) and s.value is not None else None)
            for t in TARGETS
        }
        correct = {t: suggested[t] == labels[t] for t in TARGETS}
        record = calendar.add(
            {
                "meeting_id": meeting_id,
                "sent": dict(zip(TARGETS, how, strict=True)),
                "source": "user",
                "title": body.details.title or body.details.event_type,
                "details": body.details.model_dump(),
                "date": body.choice.date.isoformat(),
                "suggested": suggested,
                "final": labels,
                "correct": correct,
            }
        )
        return {**_saved(record), "duplicate": False}

    @app.get("/api/users/{user}/meetings")
    async def week(
        user: str,
        request: Request,
        start: Annotated[dt.date, Query(description="first day shown, YYYY-MM-DD")],
        days: Annotated[int, Query(ge=1, le=42)] = 7,
    ) -> dict[str, Any]:
        calendar = calendar_of(request, user)
        keep = ("i", "source", "title", "date", "final", "correct")
        return {
            "user": user,
            "start": start.isoformat(),
            "meetings": [{k: r.get(k) for k in keep} for r in calendar.between(start, days)],
        }

    @app.get("/api/users/{user}/stats")
    async def stats(user: str, request: Request) -> dict[str, Any]:
        calendar = calendar_of(request, user)
        chorus: ChorusAdapter = request.app.state.chorus
        names = [settings.model_name(user, t) for t in TARGETS]
        asked = await asyncio.gather(
            *(chorus.describe(n) for n in names), *(chorus.leaderboard(n) for n in names)
        )
        descriptions, boards = asked[: len(names)], asked[len(names) :]
        models = {}
        for target, desc in zip(TARGETS, descriptions, strict=True):
            metrics = desc.get("metrics") or {}
            diversity = desc.get("diversity") or {}  # null without a window (engine-api.md)
            models[target] = {
                "name": settings.model_name(user, target),
                "n_seen": desc.get("n_seen"),
                "n_scored": metrics.get("n_scored"),
                "accuracy": metrics.get("accuracy"),
                "last": calendar.accuracy(target, last=WINDOW),
                "classes": len(desc.get("classes") or []),
                "diversity": {k: diversity.get(k) for k in DIVERSITY} if diversity else None,
                "member_accuracy": [m.get("window_accuracy") for m in desc.get("members") or []],
            }
        recent = [
            {k: r.get(k) for k in ("i", "source", "title", "final", "correct")}
            for r in calendar.records[-6:][::-1]
        ]
        return {
            "user": user,
            "meetings": len(calendar.records),
            "window": WINDOW,
            "models": models,
            "curve": calendar.curve(),
            "race": {t: race(b) for t, b in zip(TARGETS, boards, strict=True)},
            "recent": recent,
            "simulation": request.app.state.sim.public(),
        }

    @app.post("/api/simulate", status_code=202)
    async def simulate(body: SimulateRequest, request: Request) -> dict[str, Any]:
        sim: Simulation = request.app.state.sim
        if sim.running:
            raise HTTPException(409, "a simulation is already running")
        meetings = simulated_meetings(body.n, seed=body.seed, drift=body.drift)
        sim.running, sim.total, sim.done, sim.error = True, body.n, 0, None
        sim.drift_at = body.n // 2 if body.drift else None
        calendar = request.app.state.profiles.calendar(DEMO)
        sim.task = asyncio.create_task(
            _run_simulation(request.app.state.chorus, calendar, sim, meetings)
        )
        return sim.public()

    @app.get("/api/simulate")
    async def simulation_state(request: Request) -> dict[str, Any]:
        return request.app.state.sim.public()

    async def _run_simulation(
        chorus: ChorusAdapter,
        calendar: Calendar,
        sim: Simulation,
        meetings: list[tuple[dict[str, str], dict[str, str]]],
        chunk: int = 25,
    ) -> None:
        """Feed the generated meetings to the demo profile's models, dated in past weeks."""
        today = dt.date.today()
        try:
            for start in range(0, len(meetings), chunk):
                part = meetings[start : start + chunk]
                results = await asyncio.gather(
                    *(
                        chorus.learn_many(
                            settings.model_name(DEMO, t),
                            [{"features": x, "label": y[t]} for x, y in part],
                        )
                        for t in TARGETS
                    )
                )
                records = []
                for row, (x, y) in enumerate(part):
                    i = start + row
                    suggested = {t: results[k][row].prediction for k, t in enumerate(TARGETS)}
                    when = _week_date(y["day_of_week"], today, (len(meetings) - 1 - i) // 10)
                    records.append(
                        {
                            "source": "simulated",
                            "title": x.get("event_type", "meeting"),
                            "features": x,
                            "date": when.isoformat(),
                            "suggested": suggested,
                            "final": y,
                            "correct": {
                                t: suggested[t] is not None and str(suggested[t]) == y[t]
                                for t in TARGETS
                            },
                        }
                    )
                calendar.add_many(records)
                sim.done += len(part)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # the page shows it; the server stays up
            log.exception("simulation failed")
            sim.error = str(exc)[:500]
        finally:
            sim.running = False

    return app
