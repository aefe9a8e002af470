"""The ``chorus`` command line: run the server, manage models, replay files, predict and learn.

Every command has ``--help``. Commands that talk to a server take ``--server URL`` (environment
``CHORUS_URL``, default ``http://127.0.0.1:8000``) and ``--api-key`` (environment
``CHORUS_API_KEY``). Errors are one line on stderr starting with ``error:`` and a non-zero exit
code (1 for a failed operation, 2 for bad usage, 130 when interrupted).
"""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path
from typing import Annotated, Any, NoReturn

import click
import typer
import typer.core
from rich.console import Console
from rich.markup import escape
from rich.measure import Measurement
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.table import Table

from app.client import DEFAULT_URL, ChorusClient, ChorusError
from app.names import NAME_RE, NAME_RULE
from app.readers import FileInfo, ReaderError, is_number
from app.replay import (
    DEFAULT_SPEC,
    ReplayError,
    ReplayReport,
    Scoreboard,
    compare_specs,
    parse_spec,
    plot_curve,
    run_replay,
    write_outcomes,
)


class _WholeHelpGroup(typer.core.TyperGroup):
    """Lists each command with the whole first sentence of its help, wrapped (click cuts it at
    the terminal's width, or 80 columns, with "...")."""

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = [(name, cmd.get_short_help_str(limit=1 << 20)) for name in self.list_commands(ctx)
                if (cmd := self.get_command(ctx, name)) is not None and not cmd.hidden]  # fmt: skip
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


app = typer.Typer(
    name="chorus",
    cls=_WholeHelpGroup,
    help="Chorus: streaming online bagging and boosting as a predict-then-learn service.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,  # plain help: wraps at any width instead of truncating defaults
)
models_app = typer.Typer(
    cls=_WholeHelpGroup,
    help="Create, list, show and delete models; challengers, leaderboard, promotion.",
    no_args_is_help=True,
    rich_markup_mode=None,
)
app.add_typer(models_app, name="models")


def _version(value: bool) -> None:
    if value:
        from importlib.metadata import PackageNotFoundError, version

        try:
            v = version("chorus")
        except PackageNotFoundError:  # running from a source tree that is not installed
            v = "unknown (not installed)"
        typer.echo(f"chorus {v}")
        raise typer.Exit()


@app.callback()
def _root(
    show_version: Annotated[
        bool,
        typer.Option("--version", callback=_version, is_eager=True, help="Print the version."),
    ] = False,
) -> None:
    """Chorus: streaming online bagging and boosting as a predict-then-learn service."""


# markup is off by default (labels, names and paths are user data); enabled where it is ours
out = Console(highlight=False, soft_wrap=True, markup=False)
err = Console(stderr=True, highlight=False, soft_wrap=True, markup=False)

ServerOpt = Annotated[
    str, typer.Option("--server", "-s", envvar="CHORUS_URL", help="Chorus server URL.")
]
ApiKeyOpt = Annotated[
    str | None,
    typer.Option("--api-key", envvar="CHORUS_API_KEY", help="Bearer token.", show_default=False),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")]


def fail(message: str, code: int = 1) -> NoReturn:
    """Print ``error: message`` on one line of stderr and exit with ``code``."""
    err.print(f"[bold red]error:[/] {escape(message)}", markup=True, highlight=False)
    raise typer.Exit(code)


def _print_table(table: Table) -> None:
    """Print ``table`` at its natural width, past the terminal's if need be (a terminal wraps
    the long line): rich would cut model names and specs with "…" to fit."""
    width = Measurement.get(out, out.options.update_width(1 << 20), table).maximum
    Console(width=max(out.width, width), highlight=False, soft_wrap=True, markup=False).print(table)


def _client(server: str, api_key: str | None) -> ChorusClient:
    return ChorusClient(server, api_key=api_key)


def _parse_value(text: str) -> float | str:
    return float(text) if is_number(text) else text


def _parse_features(pairs: list[str], features_json: str | None) -> dict[str, Any]:
    features: dict[str, Any] = {}
    if features_json:
        try:
            loaded = json.loads(features_json)
        except json.JSONDecodeError as exc:
            fail(f"--features-json is not valid JSON ({exc.msg})", 2)
        if not isinstance(loaded, dict):
            fail("--features-json must be a JSON object", 2)
        features.update(loaded)
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name:
            fail(f"feature {pair!r} is not NAME=VALUE", 2)
        if value not in ("", "?"):
            features[name] = _parse_value(value)
    return features


def _print_json(data: Any) -> None:
    out.print_json(json.dumps(data, default=str))


def _guard(fn: Any, *args: Any, **kwargs: Any) -> Any:
    try:
        return fn(*args, **kwargs)
    except ChorusError as exc:
        fail(exc.detail if exc.status is None else f"{exc.detail} (HTTP {exc.status})")


# ---------------------------------------------------------------------------- serve


@app.command()
def serve(
    host: Annotated[str, typer.Option(help="Interface to bind.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="TCP port.")] = 8000,
    workers: Annotated[int, typer.Option(help="Worker processes.")] = 1,
    log_level: Annotated[str, typer.Option(help="debug, info, warning or error.")] = "info",
) -> None:
    """Run the HTTP server (embedded SQLite store, or Redis when CHORUS_REDIS_URL is set).

    Configuration comes from CHORUS_* environment variables (see `app/settings.py`).
    """
    from app.server import serve as run_server

    run_server(host, port, workers, log_level=log_level)


# ---------------------------------------------------------------------------- models


def _spec_from(spec: str, seed: int | None) -> dict[str, Any]:
    try:
        return parse_spec(spec, seed=seed)
    except ReplayError as exc:
        fail(str(exc), 2)


@models_app.command("create")
def models_create(
    name: Annotated[str, typer.Argument(help=f"Model name ({NAME_RULE}).")],
    spec: Annotated[str, typer.Option(help="ensemble:learner[:n_models[:seed]]")] = DEFAULT_SPEC,
    seed: Annotated[int | None, typer.Option(help="Random seed (overrides the spec's).")] = None,
    param: Annotated[
        list[str] | None, typer.Option("--param", "-p", help="Learner/ensemble param KEY=VALUE.")
    ] = None,
    feature: Annotated[
        list[str] | None,
        typer.Option("--feature", "-f", help="Declare a feature NAME=numeric|categorical."),
    ] = None,
    classes: Annotated[
        str | None, typer.Option(help="Declare class labels, comma-separated.")
    ] = None,
    server: ServerOpt = DEFAULT_URL,
    api_key: ApiKeyOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Create a model on the server."""
    body = _spec_from(spec, seed)
    body["params"].update(_params(param))
    features = {}
    for item in feature or []:
        key, sep, kind = item.partition("=")
        if not sep or kind not in ("numeric", "categorical"):
            fail(f"--feature {item!r} is not NAME=numeric or NAME=categorical", 2)
        features[key] = kind
    labels = [c for c in classes.split(",")] if classes else None
    with _client(server, api_key) as client:
        info = _guard(client.create_model, name, **body, features=features or None, classes=labels)
    if as_json:
        _print_json(info.raw)
    else:
        out.print(f"created model {info.name}: {_spec_text(info.spec)}")


def _params(items: list[str] | None) -> dict[str, Any]:
    params: dict[str, Any] = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep or not key:
            fail(f"--param {item!r} is not KEY=VALUE", 2)
        try:
            params[key] = json.loads(value)  # numbers, true/false, null
        except json.JSONDecodeError:
            params[key] = value
    return params


def _spec_text(spec: dict[str, Any]) -> str:
    return (
        f"{spec.get('ensemble', '?')}:{spec.get('learner', '?')}:{spec.get('n_models', '?')}"
        f" seed {spec.get('seed', '?')}"
    )


def _fmt(v: Any, digits: int = 4) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.{digits}f}"
    if isinstance(v, int):
        return f"{v:,}"
    return str(v)


@models_app.command("list")
def models_list(
    server: ServerOpt = DEFAULT_URL, api_key: ApiKeyOpt = None, as_json: JsonOpt = False
) -> None:
    """List the server's models."""
    with _client(server, api_key) as client:
        models = _guard(client.list_models)
    if as_json:
        _print_json({"models": [m.raw for m in models]})
        return
    table = Table("name", "spec", "n_seen", "classes", "accuracy", "kappa", box=None)
    for m in models:
        table.add_row(
            m.name,
            _spec_text(m.spec),
            _fmt(m.n_seen),
            str(len(m.classes)),
            _fmt(m.metrics.accuracy),
            _fmt(m.metrics.kappa),
        )
    _print_table(table) if models else out.print("no models")


@models_app.command("show")
def models_show(
    name: str, server: ServerOpt = DEFAULT_URL, api_key: ApiKeyOpt = None, as_json: JsonOpt = False
) -> None:
    """Show one model: spec, examples seen, classes, state size, metrics, members."""
    with _client(server, api_key) as client:
        m = _guard(client.get_model, name)
    if as_json:
        _print_json(m.raw)
        return
    table = Table(show_header=False, box=None)
    table.add_row("name", m.name)
    table.add_row("spec", _spec_text(m.spec))
    if m.spec.get("params"):
        table.add_row("params", json.dumps(m.spec["params"]))
    table.add_row("n_seen", _fmt(m.n_seen))
    table.add_row("classes", ", ".join(map(str, m.classes)) or "-")
    table.add_row("state", f"{m.state_bytes:,} bytes")
    table.add_row("accuracy", _fmt(m.metrics.accuracy))
    table.add_row("kappa", _fmt(m.metrics.kappa))
    table.add_row("window accuracy", _fmt(m.metrics.window_accuracy))
    table.add_row("scored", _fmt(m.metrics.n_scored))
    _print_table(table)
    if m.members:
        members = Table(*m.members[0].keys(), title="members", box=None)
        for row in m.members:
            members.add_row(*(_fmt(v) for v in row.values()))
        _print_table(members)


@models_app.command("delete")
def models_delete(
    name: str,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
    server: ServerOpt = DEFAULT_URL,
    api_key: ApiKeyOpt = None,
) -> None:
    """Delete a model with its log and snapshots."""
    if not yes and not typer.confirm(f"delete model {name!r} and everything stored about it?"):
        fail("not deleted")
    with _client(server, api_key) as client:
        _guard(client.delete_model, name)
    out.print(f"deleted model {name}")


@models_app.command("challenge")
def models_challenge(
    name: Annotated[str, typer.Argument(help="The model.")],
    challenger: Annotated[str, typer.Argument(help=f"The challenger's name ({NAME_RULE}).")],
    spec: Annotated[str, typer.Option(help="ensemble:learner[:n_models[:seed]]")] = DEFAULT_SPEC,
    param: Annotated[
        list[str] | None, typer.Option("--param", "-p", help="Learner/ensemble param KEY=VALUE.")
    ] = None,
    server: ServerOpt = DEFAULT_URL,
    api_key: ApiKeyOpt = None,
) -> None:
    """Add a challenger: it learns every example the model learns from now on."""
    body = _spec_from(spec, None)
    body["params"].update(_params(param))
    with _client(server, api_key) as client:
        _guard(client.add_challengers, name, [{"name": challenger, **body}])
    out.print(f"model {name}: challenger {challenger} added ({_spec_text(body)})")


@models_app.command("leaderboard")
def models_leaderboard(
    name: str, server: ServerOpt = DEFAULT_URL, api_key: ApiKeyOpt = None, as_json: JsonOpt = False
) -> None:
    """The model's champion and challengers on the same examples: accuracy (cumulative and
    over the window), kappa, balanced accuracy, McNemar against the champion, speed, memory."""
    with _client(server, api_key) as client:
        lb = _guard(client.leaderboard, name)
    if as_json:
        _print_json(lb)
        return
    if not lb["candidates"]:
        out.print(f"model {name} has no challengers")
        return
    print_leaderboard(lb)


def print_leaderboard(lb: dict[str, Any], console: Console = out) -> None:
    """Print a leaderboard (``GET /models/{name}/leaderboard``) as a table and its policy."""
    table = Table("candidate", "role", "spec", "learned", "accuracy", "window", "kappa",
                  "balanced", "b", "c", "p", "ex/s", "memory", box=None)  # fmt: skip
    for c in lb["candidates"]:
        m, t = c["metrics"], c["mcnemar"] or {}
        table.add_row(c["name"], c["role"], _spec_text(c["spec"]), _fmt(c["learned"]),
                      _fmt(m["accuracy"]), _fmt(m["window_accuracy"]), _fmt(m["kappa"]),
                      _fmt(m["balanced_accuracy"]), _fmt(t.get("b")), _fmt(t.get("c")),
                      _fmt(t.get("p_value")), _fmt(c["examples_per_s"], 0),
                      f"{c['memory_bytes']:,}")  # fmt: skip
    _print_table(table)
    policy = lb["policy"]
    rule = "manual" if not policy or not policy.get("auto") else (
        f"auto: window {policy['window']}, min {policy['min_examples']}, "
        f"alpha {policy['alpha']}, margin {policy['margin']}")  # fmt: skip
    console.print(f"champion {lb['champion']}; {lb['promotions']} promotion(s); promotion {rule}")


@models_app.command("promote")
def models_promote(
    name: Annotated[str, typer.Argument(help="The model.")],
    challenger: Annotated[str, typer.Argument(help="The challenger to make the champion.")],
    server: ServerOpt = DEFAULT_URL,
    api_key: ApiKeyOpt = None,
) -> None:
    """Make a challenger the champion (the old champion becomes a challenger)."""
    with _client(server, api_key) as client:
        lb = _guard(client.promote, name, challenger)
    out.print(f"model {name}: champion {lb['champion']}")


# ---------------------------------------------------------------------------- predict / learn

FeatureArgs = Annotated[
    list[str] | None,
    typer.Argument(
        help="Features NAME=VALUE (numeric-looking values are numbers).", show_default=False
    ),
]
FeaturesJsonOpt = Annotated[
    str | None, typer.Option("--features-json", help="Features as a JSON object.")
]


@app.command()
def predict(
    model: str,
    features: FeatureArgs = None,
    features_json: FeaturesJsonOpt = None,
    server: ServerOpt = DEFAULT_URL,
    api_key: ApiKeyOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Predict one example (nothing is learned); prints the prediction and its prediction_id."""
    x = _parse_features(features or [], features_json)
    with _client(server, api_key) as client:
        p = _guard(client.predict, model, x)
    if as_json:
        _print_json(
            {
                "prediction": p.prediction,
                "probabilities": p.probabilities,
                "prediction_id": p.prediction_id,
            }
        )
        return
    probs = ", ".join(f"{k}: {v:.3f}" for k, v in p.probabilities.items())
    out.print(f"prediction {p.prediction!r}  ({probs or 'untrained'})")
    if p.prediction_id:
        out.print(f"prediction_id {p.prediction_id}")


@app.command()
def learn(
    model: str,
    label: Annotated[str, typer.Argument(help="The true label (a string; see --label-json).")],
    features: FeatureArgs = None,
    features_json: FeaturesJsonOpt = None,
    label_json: Annotated[
        bool, typer.Option("--label-json", help='Read LABEL as JSON (1, true, "a").')
    ] = False,
    prediction_id: Annotated[
        str | None,
        typer.Option(help="Give the delayed label of an earlier `chorus predict` instead."),
    ] = None,
    id: Annotated[str | None, typer.Option("--id", help="Idempotency key.")] = None,
    server: ServerOpt = DEFAULT_URL,
    api_key: ApiKeyOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Predict-then-learn one example (or label an earlier prediction with --prediction-id)."""
    y: Any = label
    if label_json:
        try:
            y = json.loads(label)
        except json.JSONDecodeError as exc:
            fail(f"--label-json: LABEL is not valid JSON ({exc.msg})", 2)
    with _client(server, api_key) as client:
        if prediction_id:
            if features or features_json:
                fail("give either features or --prediction-id, not both", 2)
            r = _guard(client.label, model, prediction_id, y)
        else:
            x = _parse_features(features or [], features_json)
            r = _guard(client.learn, model, x, y, id=id)
    if as_json:
        _print_json(
            {
                "prediction": r.prediction,
                "probabilities": r.probabilities,
                "seq": r.seq,
                "accuracy": r.accuracy,
                "duplicate": r.duplicate,
                "id": r.id,
            }
        )
        return
    note = " (duplicate: already learned, not learned again)" if r.duplicate else ""
    out.print(f"predicted {r.prediction!r} before learning {y!r}; seq {r.seq}{note}")


# ---------------------------------------------------------------------------- replay


class _LiveProgress:
    """A rich progress bar with live accuracy and examples/s (on stderr)."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self.progress: Progress | None = None
        self.task: Any = None
        self._last = -1.0

    def start(self, info: FileInfo, total: int) -> None:
        if not self.enabled:
            return
        self.progress = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("acc {task.fields[acc]}"),
            TextColumn("{task.fields[rate]} ex/s"),
            TimeElapsedColumn(),
            TimeRemainingColumn(),
            console=err,
            transient=True,
        )
        self.progress.start()
        self.task = self.progress.add_task(escape(info.path.name), total=total, acc="-", rate="-")

    def update(self, board: Scoreboard, elapsed: float) -> None:
        if self.progress is None or elapsed - self._last < 0.1:
            return
        self._last = elapsed
        acc = board.values()["accuracy"]
        self.progress.update(
            self.task,
            completed=board.n_examples,
            acc="-" if acc is None else f"{acc:.4f}",
            rate=f"{board.n_examples / elapsed:,.0f}" if elapsed > 0 else "-",
        )

    def stop(self) -> None:
        if self.progress is not None:
            self.progress.stop()


MAX_CLASS_ROWS = 10  # a replay's summary lists the recall and precision of this many classes


def print_report(report: ReplayReport, console: Console = out) -> None:
    """Print a replay report as a small table."""
    spec = report.spec or {}
    where = "local" if report.mode == "local" else f"server model {report.model}"
    console.print(
        f"[bold]{escape(Path(report.file).name)}[/] ({report.format}, "
        f"target {escape(repr(report.target))}) -> {escape(where)}, {_spec_text(spec)}"
        + ("  [yellow](interrupted)[/]" if report.interrupted else ""),
        markup=True,
    )
    table = Table(show_header=False, box=None, padding=(0, 2), pad_edge=False)
    table.add_column()
    table.add_column(justify="right")
    table.add_row("examples", f"{report.examples:,}")
    if report.unlabelled:
        table.add_row("skipped (no label)", f"{report.unlabelled:,}")
    if report.duplicates:
        table.add_row("already learned (resume)", f"{report.duplicates:,}")
    table.add_row("accuracy", _fmt(report.accuracy))
    table.add_row("kappa", _fmt(report.kappa))
    table.add_row(f"window accuracy ({report.window})", _fmt(report.window_accuracy))
    table.add_row("majority-class rate", _fmt(report.majority_rate))
    table.add_row("balanced accuracy", _fmt(report.balanced_accuracy))
    table.add_row("G-mean", _fmt(report.g_mean))
    table.add_row("macro-F1", _fmt(report.macro_f1))
    for c in (report.per_class or {}).get("classes", [])[:MAX_CLASS_ROWS]:
        table.add_row(f"  class {escape(repr(c['label']))} ({c['support']:,})",
                      f"recall {_fmt(c['recall'])}  precision {_fmt(c['precision'])}")  # fmt: skip
    table.add_row("elapsed", f"{report.elapsed_s:.2f} s")
    table.add_row("examples/s", f"{report.examples_per_s:,.0f}")
    if report.n_seen is not None:
        table.add_row("model n_seen", f"{report.n_seen:,}")
    console.print(table)
    if report.warning:
        console.print(f"[yellow]warning:[/] {escape(report.warning)}", markup=True)
    if report.leaderboard:
        print_leaderboard(report.leaderboard, console)


TOP_FEATURES = 10  # features --importance prints


def print_importance(imp: dict) -> None:
    """The top features of ``feature_importance`` as a small table: by weight, with their merit
    (``criterion``'s gain when the splits were made) and, with a half-life, its recent share."""
    unknown = imp.get("merit_unknown", 0)
    title = f"top features ({imp['splits']:,} splits in {imp['members']} trees"
    title += f"; merit: {imp.get('criterion', 'info_gain')}"
    title += f", unknown for {unknown:,} splits" if unknown else ""
    recent = imp.get("half_life") is not None
    if recent:
        title += f"; recent: half-life {imp['half_life']:,g} examples"
    title += ")"
    cols = ["feature", "splits", "weight", "share", "merit", "merit share", "depth-weighted"]
    if recent:
        cols.append("recent share")
    table = Table(title=title)
    for col in cols:
        table.add_column(col, justify="left" if col == "feature" else "right")
    for name, d in list(imp["features"].items())[:TOP_FEATURES]:
        row = [escape(name), f"{d['splits']:,}", f"{d['weight']:,.0f}", f"{d['share']:.1%}",
               _number(d.get("merit"), ".4g"), _number(d.get("merit_share"), ".1%"),
               f"{d['depth_weighted']:.2f}"]  # fmt: skip
        if recent:
            row.append(_number(d.get("recent_share"), ".1%"))
        table.add_row(*row)
    out.print(table)


def _number(v: float | None, fmt: str) -> str:
    """``v`` formatted, or ``-`` when absent (a server of before merits)."""
    return "-" if v is None else format(v, fmt)


@app.command()
def replay(
    file: Annotated[Path, typer.Argument(help="CSV (with header), JSONL or ARFF; .gz is fine.")],
    target: Annotated[
        str | None, typer.Option(help="Label column (default: the last column).")
    ] = None,
    model: Annotated[
        str | None, typer.Option(help="Model name on the server (default: the file's stem).")
    ] = None,
    create: Annotated[
        str | None,
        typer.Option(
            help=f"Model spec ensemble:learner[:n_models[:seed]] (default {DEFAULT_SPEC}). "
            "Which ensemble: a stream that drifts: arf:hoeffding_tree (then srp); a stationary "
            "or small stream: bagging or boosting; speed first: single or bagging:naive_bayes "
            "(docs/forests.md)."
        ),
    ] = None,
    seed: Annotated[int | None, typer.Option(help="Seed (overrides the spec's).")] = None,
    server: Annotated[
        str | None,
        typer.Option(
            "--server",
            "-s",
            envvar="CHORUS_URL",
            help="Replay against this server.",
            show_default=False,
        ),
    ] = None,
    local: Annotated[
        bool, typer.Option("--local", help="Run the model in this process (the default).")
    ] = False,
    api_key: ApiKeyOpt = None,
    batch: Annotated[
        int,
        typer.Option(
            min=1,
            help="Rows per request / per engine call (any size gives the same predictions).",
        ),
    ] = 100,
    limit: Annotated[int | None, typer.Option(min=1, help="Only the first N rows.")] = None,
    resume: Annotated[
        bool, typer.Option(help="Continue an interrupted replay; no row is learned twice.")
    ] = False,
    categorical: Annotated[
        str | None, typer.Option(help="Columns to treat as categorical, comma-separated.")
    ] = None,
    fmt: Annotated[
        str | None, typer.Option("--format", help="csv, jsonl or arff (default: from the name).")
    ] = None,
    columns: Annotated[
        str | None,
        typer.Option(
            help="Column names of a CSV without a header row (UCI .data), comma-separated."
        ),
    ] = None,
    param: Annotated[
        list[str] | None,
        typer.Option("--param", "-p", help="Learner/ensemble param KEY=VALUE (with --create)."),
    ] = None,
    window: Annotated[int, typer.Option(min=1, help="Window of the windowed accuracy.")] = 1000,
    plot: Annotated[Path | None, typer.Option(help="Write the learning curve to this PNG.")] = None,
    metric: Annotated[
        str,
        typer.Option(
            help="What --plot's curve follows: accuracy, balanced_accuracy, g_mean or macro_f1 "
            "(cumulative and over --window)."
        ),
    ] = "accuracy",
    predictions: Annotated[
        Path | None, typer.Option(help="Write every row's prediction to this JSONL file.")
    ] = None,
    save: Annotated[
        Path | None,
        typer.Option(help="--local: save the trained model as a snapshot (`chorus import` it)."),
    ] = None,
    compare: Annotated[
        list[str] | None,
        typer.Option(
            help="Challenger specs ensemble:learner[:n_models[:seed]] (repeat the option, or "
            "separate them with commas): they learn the file beside the model, and the report "
            "ends with the leaderboard (McNemar against the model, the champion).",
            show_default=False,
        ),
    ] = None,
    auto_promote: Annotated[
        int | None,
        typer.Option(
            min=10,
            help="With --compare: promote a challenger significantly better over the last N "
            "examples (alpha 0.01, margin 0.01, at least N examples between promotions).",
            show_default=False,
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
    progress: Annotated[
        bool, typer.Option(help="Show a progress bar (only on a terminal).")
    ] = True,
    threads: Annotated[
        int,
        typer.Option(
            min=1,
            max=256,
            envvar="CHORUS_THREADS",
            help="--local: threads of the model's batches (bagging: the members of one batch "
            "learn while the next is encoded; the same predictions for any value).",
        ),
    ] = 1,
    importance: Annotated[
        bool,
        typer.Option(
            "--importance", help="After the replay, print the model's top features (tree splits)."
        ),
    ] = False,
    half_life: Annotated[
        float | None,
        typer.Option(
            "--half-life",
            help="With --importance: also weigh each split by its recency, 0.5**(h / HALF_LIFE) "
            "for a split made h examples ago (the recent share).",
        ),
    ] = None,
) -> None:
    """Replay a file prequentially: predict each row, then learn it, in file order.

    Prints examples, accuracy, Cohen's kappa, windowed accuracy, elapsed time and examples/s.
    """
    spec = None
    if create or seed is not None or param:
        spec = _spec_from(create or DEFAULT_SPEC, seed)
        spec["params"].update(_params(param))
    use_server = server is not None and not local
    challengers = None
    if compare:
        try:
            challengers = compare_specs(compare, seed=seed)
        except ReplayError as exc:
            fail(str(exc), 2)
    policy = {"window": auto_promote, "min_examples": auto_promote} if auto_promote else None
    cats = [c.strip() for c in categorical.split(",") if c.strip()] if categorical else []
    live = _LiveProgress(progress and not as_json and err.is_terminal)
    client = ChorusClient(server, api_key=api_key) if use_server else None  # type: ignore[arg-type]
    try:
        report = run_replay(
            file,
            target=target,
            categorical=cats,
            fmt=fmt,
            columns=[c.strip() for c in columns.split(",")] if columns else None,
            spec=spec,
            client=client,
            model=model,
            batch=batch,
            limit=limit,
            resume=resume,
            window=window,
            keep_outcomes=predictions is not None,
            on_start=live.start,
            on_progress=live.update,
            save=save,
            threads=threads,
            metric=metric,
            importance=importance,
            compare=challengers,
            promotion=policy,
            half_life=half_life,
        )
    except ReaderError as exc:
        fail(str(exc))
    except (ReplayError, ChorusError) as exc:
        fail(str(exc.detail) if isinstance(exc, ChorusError) else str(exc))
    finally:
        live.stop()
        if client is not None:
            client.close()
    if predictions is not None:
        write_outcomes(report, predictions)
    if plot is not None:
        plot_curve(report, plot)
    if as_json:
        out.print_json(json.dumps(report.to_json()))
    else:
        print_report(report)
        if report.importance is not None:
            print_importance(report.importance)
        if plot is not None:
            out.print(f"learning curve written to {plot}")
    if report.error:
        fail(report.error)
    if report.interrupted:
        if use_server:
            words = ["chorus", "replay", str(file), "--server", str(server)]
            words += ["--model", report.model, "--target", report.target]
            for flag, value in (
                ("--format", fmt),
                ("--columns", columns),
                ("--categorical", categorical),
                ("--limit", limit),
                ("--batch", batch if batch != 100 else None),
            ):
                if value is not None:
                    words += [flag, str(value)]
            hint = f"continue with: {shlex.join(words)} --resume"
        else:
            hint = "a local replay keeps no state; run it again"
        err.print(f"interrupted; {hint}", markup=False)
        raise typer.Exit(130)


# ---------------------------------------------------------------------------- warmup


def warm_engine(kinds: str = "all") -> int:
    """Compile (and cache on disk) the engine's kernels by training tiny models of every kind
    named (``CHORUS_WARMUP`` syntax) with every learner, in parallel processes
    (``app.warmup.warm_jobs``).

    Returns
    -------
    int
        How many model kinds (ensemble x learner) were trained.
    """
    from app.warmup import LEARNERS, jobs, parse_kinds, warm_jobs

    todo = jobs(parse_kinds(kinds), LEARNERS)
    warm_jobs(todo)
    return len({(kind, learner) for kind, learner, _ in todo})


@app.command()
def warmup(
    kinds: Annotated[
        str,
        typer.Option(help="Ensemble kinds to compile (bagging,boosting,single,arf,srp, all)."),
    ] = "all",
) -> None:
    """Compile and cache the engine's kernels (the Docker image runs this at build time), in
    CHORUS_WARMUP_JOBS processes (default: the cores, at most 2)."""
    import time

    t0 = time.perf_counter()
    try:
        n = warm_engine(kinds)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--kinds") from exc
    out.print(f"warmed {n} model kinds in {time.perf_counter() - t0:.1f} s")


# ---------------------------------------------------------------------------- export / import


# Export/import work on the store itself (the one ``chorus serve`` uses, chosen by the same
# ``CHORUS_*`` settings): the HTTP API has no state endpoints. Exported files are snapshots in the
# service's own format (app/snapshot.py: JSON header + raw arrays + SHA-256 or HMAC), never pickle.

DataDirOpt = Annotated[
    Path | None,
    typer.Option(
        "--data-dir", help="SQLite store directory (default CHORUS_DATA_DIR).", show_default=False
    ),
]
RedisOpt = Annotated[
    str | None,
    typer.Option(
        "--redis-url", help="Use this Redis store (default CHORUS_REDIS_URL).", show_default=False
    ),
]


def _settings(data_dir: Path | None, redis_url: str | None) -> Any:
    from app.settings import Settings

    overrides: dict[str, Any] = {}
    if data_dir is not None:
        overrides["data_dir"] = data_dir
        overrides["redis_url"] = None
    if redis_url:
        overrides["redis_url"] = redis_url
    return Settings(**overrides)


async def _export_blob(name: str, settings: Any) -> tuple[bytes, int]:
    from app.registry import Registry
    from app.stores import make_store

    store = make_store(settings)
    await store.open(min(settings.startup_timeout, 10.0))
    try:
        return await Registry(store, settings).export(name)  # loads only this model
    finally:
        await store.close()


async def _import_blob(blob: bytes, name: str, settings: Any) -> int:
    from app import snapshot
    from app.errors import CorruptSnapshot
    from ensembles import load_state

    key = settings.snapshot_key.encode() if settings.snapshot_key else None
    from app.registry.challengers import load_board

    try:
        state, meta = snapshot.decode(blob, key)
        own, _ = load_board(
            state, meta.get("board"), threads=1, metrics_window=settings.metrics_window
        )
        model = load_state(
            own
        )  # the engine accepts it (and its challengers) before anything is stored
    except CorruptSnapshot as exc:
        raise ReplayError(f"not a valid Chorus snapshot: {exc}") from None
    except (ValueError, KeyError, TypeError) as exc:
        raise ReplayError(f"snapshot rejected by the engine: {exc}") from None
    from app.stores import make_store

    if not NAME_RE.match(name):
        raise ReplayError(f"--name: {name!r} is not a model name ({NAME_RULE})")
    from app.stores.base import new_incarnation

    # a new life of the model (an exported spec names the incarnation it came from)
    spec = {**(meta.get("spec") or model.spec()), "incarnation": new_incarnation()}
    # the snapshot's sequence number is at least 1 so that a server which loaded the empty model
    # between the two writes below sees the log move and reloads from this snapshot
    seq = max(1, int(meta.get("seq") or 0))
    out_meta = {"name": name, "incarnation": spec["incarnation"], "seq": seq,
                "metrics": meta.get("metrics"), "board": meta.get("board")}  # fmt: skip
    store = make_store(settings)
    await store.open(min(settings.startup_timeout, 10.0))
    try:
        if not await store.create_model(name, spec):
            raise ReplayError(f"model {name!r} already exists; choose another --name")
        blob = snapshot.encode(state, out_meta, key)
        await store.put_snapshot(name, seq, blob, spec["incarnation"])
    finally:
        await store.close()
    return int(model.n_seen)


@app.command("export")
def export_model(
    name: str,
    file: Annotated[Path, typer.Argument(help="Where to write the snapshot.")],
    data_dir: DataDirOpt = None,
    redis_url: RedisOpt = None,
) -> None:
    """Save a model's state to a file (checksummed snapshot format, never pickle).

    Reads the store directly (snapshot + log tail), so it works with or without a running server.
    """
    import asyncio

    from app.errors import ChorusError as ServiceError

    try:
        blob, n_seen = asyncio.run(_export_blob(name, _settings(data_dir, redis_url)))
    except ServiceError as exc:
        fail(exc.detail)
    except OSError as exc:
        fail(f"cannot open the store: {exc}")
    file.write_bytes(blob)
    out.print(f"exported model {name} ({n_seen:,} examples seen) to {file} ({len(blob):,} bytes)")


@app.command("import")
def import_model(
    file: Annotated[Path, typer.Argument(help="A snapshot written by `chorus export`.")],
    name: Annotated[str, typer.Option(help="Name of the model to create.")],
    data_dir: DataDirOpt = None,
    redis_url: RedisOpt = None,
) -> None:
    """Create a model from an exported snapshot (its checksum is verified first)."""
    import asyncio

    from app.errors import ChorusError as ServiceError

    try:
        blob = file.read_bytes()
    except OSError as exc:
        fail(f"{file}: {exc.strerror}")
    try:
        n_seen = asyncio.run(_import_blob(blob, name, _settings(data_dir, redis_url)))
    except (ReplayError, ServiceError) as exc:
        fail(f"{file}: {exc}")
    out.print(f"imported model {name} ({n_seen:,} examples seen) from {file}")


# ---------------------------------------------------------------------------- consume


@app.command()
def consume(
    url: Annotated[
        str | None,
        typer.Argument(
            envvar="CHORUS_CONSUME",
            show_default=False,
            help="The bus: redis://host:6379/0 (Redis Streams) or nats://host:4222 (NATS "
            "JetStream); options may also be query parameters (?stream=S&group=G).",
        ),
    ] = None,
    stream: Annotated[
        list[str] | None,
        typer.Option(
            "--stream",
            help="Stream to read (Redis: repeatable; default "
            "chorus:examples. NATS: the JetStream stream, default CHORUS).",
        ),
    ] = None,
    subject: Annotated[
        str | None, typer.Option(help="NATS: subject to consume (default chorus.examples).")
    ] = None,
    group: Annotated[
        str | None, typer.Option(help="Consumer group (NATS: durable consumer), default chorus.")
    ] = None,
    consumer: Annotated[
        str | None,
        typer.Option(
            help="Redis: this consumer's name in the group (default: the "
            "host name; a restart under it takes back its messages)."
        ),
    ] = None,
    batch: Annotated[int | None, typer.Option(help="Messages per read (default 1000).")] = None,
    output: Annotated[
        str | None, typer.Option(help="Publish each message's prediction to this stream/subject.")
    ] = None,
    dead_letter: Annotated[
        str | None,
        typer.Option(help="Dead-letter stream/subject (default chorus:dead, NATS chorus.dead)."),
    ] = None,
    claim_idle: Annotated[
        float | None,
        typer.Option(help="Seconds before a dead consumer's messages are claimed (default 60)."),
    ] = None,
    max_pending: Annotated[
        int | None, typer.Option(help="Messages held unacknowledged at most (default 10000).")
    ] = None,
    create: Annotated[
        bool, typer.Option(help="Create a missing stream and group (else an error).")
    ] = True,
    once: Annotated[
        bool, typer.Option("--once", help="Stop when no message is left (a drain).")
    ] = False,
    metrics_port: Annotated[
        int | None, typer.Option(help="Serve Prometheus /metrics on 127.0.0.1:PORT.")
    ] = None,
    data_dir: DataDirOpt = None,
    redis_url: RedisOpt = None,
    log_level: Annotated[str, typer.Option(help="debug, info, warning or error.")] = "info",
) -> None:
    """Learn examples from Redis Streams or NATS JetStream (exactly once, docs/service.md).

    Messages are {"model", "features", "label", "id"?} (an example), {"model",
    "prediction_id", "label"} (a late label) or {"model", "features"} (a prediction). The store
    and every other setting are those of `chorus serve` (CHORUS_* variables).
    """
    import asyncio
    import logging

    from app.consume.config import ConsumeConfig, ConsumeConfigError
    from app.consume.run import consume as run_consumer
    from app.errors import ChorusError as ServiceError
    from app.server import LOG_FORMAT
    from app.stores import StoreConfigError, StoreDown

    if not url:
        fail("give the bus URL (redis://... or nats://...) or set CHORUS_CONSUME", 2)
    logging.basicConfig(level=log_level.upper(), format=LOG_FORMAT)
    try:
        config = ConsumeConfig.from_url(
            url, streams=stream, subject=subject, group=group, consumer=consumer, batch=batch,
            output=output, dead_letter=dead_letter, claim_idle=claim_idle,
            max_pending=max_pending, create=None if create else False,
        )  # fmt: skip
    except ConsumeConfigError as exc:
        fail(str(exc), 2)
    try:
        counts = asyncio.run(run_consumer(_settings(data_dir, redis_url), config,
                                          metrics_port=metrics_port, once=once))  # fmt: skip
    except ConsumeConfigError as exc:
        fail(str(exc))
    except (StoreConfigError, StoreDown, ServiceError, OSError) as exc:
        fail(f"store: {getattr(exc, 'detail', None) or exc}")
    out.print(", ".join(f"{k} {v:,}" for k, v in counts.items()))


# ---------------------------------------------------------------------------- doctor


@app.command()
def doctor(
    data_dir: DataDirOpt = None,
    salvage_to: Annotated[
        Path | None,
        typer.Option(
            "--salvage",
            help="Copy every readable model into a new store in this directory (its chorus.db "
            "must not exist); serve it with CHORUS_DATA_DIR=DIR.",
            show_default=False,
        ),
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Check a SQLite store (SQLite's integrity check; per model: spec, snapshots decoded and
    verified, log readable) and print a verdict per model; optionally salvage it.

    Exit code 0 when the store is healthy, 1 when anything is damaged (also after a salvage).
    Only reads the store; run it with the server stopped (or on a copy) so that what it reads
    does not move.
    """
    import sqlite3

    from app import doctor as doc

    settings = _settings(data_dir, None)
    path = settings.data_dir / "chorus.db"
    key = settings.snapshot_key.encode() if settings.snapshot_key else None
    try:
        report = doc.check(path, key)
    except (OSError, sqlite3.Error) as exc:
        fail(f"cannot read the store: {exc}")
    outcome = None
    if salvage_to is not None:
        try:
            outcome = doc.salvage(report, salvage_to, settings)
        except OSError as exc:
            fail(f"--salvage: {exc}")
    if as_json:
        data = report.to_json()
        if outcome is not None:
            data["salvage"] = {"path": str(salvage_to / "chorus.db"), "models": outcome}
        _print_json(data)
    else:
        _print_doctor(report, outcome, salvage_to)
    raise typer.Exit(0 if report.healthy else 1)


def _print_doctor(report: Any, outcome: dict[str, str] | None, salvage_to: Path | None) -> None:
    out.print(f"store {report.path}: {'healthy' if report.healthy else 'DAMAGED'}")
    problems = [line for line in report.integrity if line != "ok"]
    out.print(
        "integrity_check: ok"
        if not problems
        else f"integrity_check: {len(problems)} problem(s):"
        + "".join(f"\n    {line}" for line in problems)
    )
    out.print(f"models table: {report.models_table}")
    if not report.models:
        out.print("no models found")
    for m in report.models.values():
        out.print(m.summary())
    if outcome is not None and salvage_to is not None:
        out.print(f"salvage into {salvage_to / 'chorus.db'}:")
        for name, what in outcome.items():
            out.print(f"  {name}: {what}")


def main() -> None:
    """Console-script entry point."""
    try:
        app()
    except KeyboardInterrupt:
        err.print("interrupted")
        sys.exit(130)


if __name__ == "__main__":
    main()
