"""The ``chorus`` CLI: help everywhere, one-line errors naming file and row, models/learn/predict
against a live server, replay reports (table, JSON, plot) and export/import."""

from __future__ import annotations

import json

import pytest
import typer.main
from _live_server import live_server
from typer.testing import CliRunner

from app.cli import app

runner = CliRunner()


def run(*args, ok=True):
    result = runner.invoke(app, [str(a) for a in args])
    if ok:
        assert result.exit_code == 0, result.output
    return result


def all_commands():
    def walk(cmd, path):
        yield path
        for name, sub in getattr(cmd, "commands", {}).items():
            yield from walk(sub, [*path, name])

    return list(walk(typer.main.get_command(app), []))


@pytest.mark.parametrize("path", all_commands(), ids=lambda p: " ".join(p) or "chorus")
def test_help_on_every_command(path):
    result = run(*path, "--help")
    assert "Usage:" in result.output and "--help" in result.output


def test_expected_commands_exist():
    names = {" ".join(p) for p in all_commands()}
    for expected in (
        "serve", "replay", "predict", "learn", "export", "import", "warmup",
        "models create", "models list", "models show", "models delete", "doctor",
    ):  # fmt: skip
        assert expected in names


# ---------------------------------------------------------------- bad files: one clear line


def bad_files(tmp_path):
    (tmp_path / "missing.csv").write_text("a,b\n1,2\n")
    (tmp_path / "ragged.csv").write_text("a,b,y\n1,2,p\n3,4,q\n5,6\n")
    (tmp_path / "latin.csv").write_bytes("a,y\n1,p\n2,caf\xe9\n".encode("latin-1"))
    (tmp_path / "empty.csv").write_text("")
    return {
        "missing.csv": "missing.csv: line 1: target column 'y' not found",
        "ragged.csv": "ragged.csv: row 3 (line 4): expected 3 fields",
        "latin.csv": "latin.csv: row 2 (line 3): invalid UTF-8 byte 0xe9",
        "empty.csv": "empty.csv: file is empty",
    }


@pytest.mark.parametrize("name", ["missing.csv", "ragged.csv", "latin.csv", "empty.csv"])
def test_bad_file_is_one_error_line_with_file_and_row(tmp_path, name):
    expected = bad_files(tmp_path)[name]
    result = run("replay", tmp_path / name, "--target", "y", "--local", ok=False)
    assert result.exit_code == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: ") and expected in lines[0]
    assert str(tmp_path / name) in lines[0]
    assert result.stdout == ""


def test_usage_errors_exit_2(tmp_path):
    assert run("replay", tmp_path / "x.csv", "--create", "bagging", ok=False).exit_code == 2
    assert run("replay", tmp_path / "x.csv", "--batch", "0", ok=False).exit_code == 2
    result = run("predict", "m1", "oops", "--server", "http://127.0.0.1:9", ok=False)
    assert result.exit_code == 2 and "NAME=VALUE" in result.stderr


def test_unreachable_server_is_one_line(tmp_path):
    result = run("models", "list", "--server", "http://127.0.0.1:9", ok=False)
    assert result.exit_code == 1
    assert result.stderr.count("\n") == 1
    assert "cannot reach the Chorus server at http://127.0.0.1:9" in result.stderr
    assert "chorus serve" in result.stderr


def test_version():
    from importlib.metadata import version

    assert run("--version").stdout.strip() == f"chorus {version('chorus')}"


@pytest.mark.parametrize("command", [[], ["replay"], ["models", "create"], ["learn"], ["serve"]])
def test_help_fits_80_columns_untruncated(command, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    text = run(*command, "--help").stdout
    assert "Usage:" in text
    assert all(len(line) <= 80 for line in text.splitlines()), text
    assert "\u2026" not in text  # nothing cut off with an ellipsis
    if command == ["replay"]:
        assert "bagging:hoeffding_tree:10" in text and "default: 100" in text


@pytest.mark.parametrize("columns", ["80", "200"])
@pytest.mark.parametrize("group", [[], ["models"]], ids=["chorus", "models"])
def test_help_lists_every_command_with_its_whole_first_sentence(group, columns, monkeypatch):
    """click cut every command's description at the width (80 columns at most) with "..."
    (issue 43); docs/cli.md promises nothing truncated."""
    monkeypatch.setenv("COLUMNS", columns)
    text = run(*group, "--help").stdout
    assert all(len(line) <= 80 for line in text.splitlines()), text
    listing = text.split("Commands:")[1]  # (the usage line has its own "[ARGS]...")
    assert "..." not in listing and "\u2026" not in listing, listing
    flat = " ".join(listing.split())
    command = typer.main.get_command(app)
    for name in group:
        command = command.commands[name]
    for name, sub in command.commands.items():
        first = sub.get_short_help_str(limit=1 << 20)
        assert first.endswith(".") and f"{name} {first}" in flat, (name, first)


def test_plot_y_axis_fitted_to_the_data():
    from app.replay import fitted_ylim

    lo, hi = fitted_ylim([0.991, 0.995, None, 0.999])
    assert 0.97 < lo < 0.991 and 0.999 < hi <= 1.0
    assert fitted_ylim([0.5, 0.9]) == pytest.approx((0.48, 0.92))
    assert fitted_ylim([]) == (0.0, 1.0)
    lo, hi = fitted_ylim([1.0, 1.0])
    assert hi == 1.0 and hi - lo >= 0.02


# ---------------------------------------------------------------- against a live server


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with live_server(tmp_path_factory.mktemp("store")) as url:
        yield url


@pytest.fixture(scope="module")
def csv_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("data") / "weather.csv"
    lines = ["temp,outlook,play"]
    for i in range(300):
        temp = 10 + (i * 7) % 25
        outlook = ["sunny", "rain", "overcast"][i % 3]
        play = "yes" if (temp < 28 and outlook != "rain") else "no"
        lines.append(f"{temp},{outlook},{play}")
    path.write_text("\n".join(lines) + "\n")
    return path


def test_models_create_list_show_delete(server):
    run("models", "create", "m1", "--spec", "boosting:naive_bayes:3", "--seed", "5",
        "--feature", "temp=numeric", "--classes", "yes,no", "--server", server)  # fmt: skip
    listed = json.loads(run("models", "list", "--json", "--server", server).stdout)
    (m,) = [m for m in listed["models"] if m["name"] == "m1"]
    assert m["spec"]["ensemble"] == "boosting" and m["spec"]["seed"] == 5
    assert "m1" in run("models", "list", "--server", server).stdout
    shown = run("models", "show", "m1", "--server", server).stdout
    assert "boosting:naive_bayes:3 seed 5" in shown
    dup = run("models", "create", "m1", "--server", server, ok=False)
    assert dup.exit_code == 1 and "already exists" in dup.stderr and "409" in dup.stderr
    run("models", "delete", "m1", "--yes", "--server", server)
    gone = run("models", "show", "m1", "--server", server, ok=False)
    assert gone.exit_code == 1 and "not found" in gone.stderr


def test_learn_predict_and_delayed_label(server):
    run("models", "create", "m2", "--spec", "single:naive_bayes", "--server", server)
    learn_k1 = ("learn", "m2", "yes", "temp=20", "outlook=sunny", "--id", "k1", "--json")
    first = json.loads(run(*learn_k1, "--server", server).stdout)
    assert first["prediction"] is None and first["duplicate"] is False
    again = json.loads(run(*learn_k1, "--server", server).stdout)  # a retry of the same id
    assert again["duplicate"] is True and again["seq"] == first["seq"]
    p = json.loads(
        run("predict", "m2", "temp=21", "outlook=sunny", "--json", "--server", server).stdout
    )
    assert p["prediction"] == "yes" and p["prediction_id"]
    out = run("learn", "m2", "no", "--prediction-id", p["prediction_id"], "--server", server).stdout
    assert "predicted 'yes' before learning 'no'" in out
    shown = json.loads(run("models", "show", "m2", "--json", "--server", server).stdout)
    assert shown["n_seen"] == 2 and shown["metrics"]["n_scored"] == 1


def test_replay_local_and_server_reports_agree(server, csv_file, tmp_path):
    plot = tmp_path / "curve.png"
    local = json.loads(
        run(
            "replay",
            csv_file,
            "--local",
            "--create",
            "bagging:hoeffding_tree:3",
            "--json",
            "--plot",
            plot,
            "--metric",
            "g_mean",
        ).stdout  # fmt: skip
    )
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    remote = json.loads(
        run(
            "replay",
            csv_file,
            "--server",
            server,
            "--model",
            "weather",
            "--create",
            "bagging:hoeffding_tree:3",
            "--batch",
            "20",
            "--json",
        ).stdout  # fmt: skip
    )
    assert local["examples"] == remote["examples"] == 300 == remote["n_seen"]
    for key in ("accuracy", "kappa", "window_accuracy", "scored"):
        assert local[key] == remote[key], key
    assert local["accuracy"] > 0.6


def test_replay_table_report_and_predictions_file(csv_file, tmp_path):
    preds = tmp_path / "p.jsonl"
    out = run("replay", csv_file, "--limit", "120", "--predictions", preds).stdout
    for word in ("examples", "120", "accuracy", "kappa", "window accuracy", "elapsed",
                 "examples/s"):  # fmt: skip
        assert word in out
    rows = [json.loads(line) for line in preds.read_text().splitlines()]
    assert [r["row"] for r in rows] == list(range(1, 121)) and rows[0]["prediction"] is None


def test_replay_local_threads_give_the_same_report(csv_file):
    reports = [json.loads(run("replay", csv_file, "--local", "--batch", "64", "--threads", t,
                              "--create", "bagging:naive_bayes:4:3", "--json").stdout)
               for t in ("1", "2")]  # fmt: skip
    for r in reports:
        del r["elapsed_s"], r["examples_per_s"], r["scan_s"]
    assert reports[0] == reports[1] and reports[0]["n_seen"] == 300
    assert run("replay", csv_file, "--threads", "0", ok=False).exit_code == 2


def test_export_then_import_gives_the_same_model(csv_file, tmp_path):
    store = tmp_path / "store"
    snap = tmp_path / "model.chorus"
    with live_server(store) as url:
        run("replay", csv_file, "--server", url, "--model", "w", "--limit", "150", "--json")
        before = json.loads(run("predict", "w", "temp=25", "outlook=sunny", "--json",
                                "--server", url).stdout)  # fmt: skip
        run("export", "w", snap, "--data-dir", store)
        run("import", snap, "--name", "w2", "--data-dir", store)
        after = json.loads(run("predict", "w2", "temp=25", "outlook=sunny", "--json",
                               "--server", url).stdout)  # fmt: skip
        assert after["probabilities"] == before["probabilities"]
        shown = json.loads(run("models", "show", "w2", "--json", "--server", url).stdout)
        assert shown["n_seen"] == 150
        # the copy keeps learning from the imported state (it has no idempotency keys)
        run("replay", csv_file, "--server", url, "--model", "w2", "--json")
        assert (
            json.loads(run("models", "show", "w2", "--json", "--server", url).stdout)["n_seen"]
            == 450
        )
    taken = run("import", snap, "--name", "w2", "--data-dir", store, ok=False)
    assert taken.exit_code == 1 and "already exists" in taken.stderr
    corrupt = tmp_path / "corrupt.chorus"
    blob = bytearray(snap.read_bytes())
    blob[len(blob) // 2] ^= 0xFF
    corrupt.write_bytes(bytes(blob))
    bad = run("import", corrupt, "--name", "w3", "--data-dir", store, ok=False)
    assert bad.exit_code == 1 and "not a valid Chorus snapshot" in bad.stderr


def test_local_save_then_import(csv_file, tmp_path):
    snap = tmp_path / "local.chorus"
    store = tmp_path / "store"
    run("replay", csv_file, "--local", "--save", snap, "--limit", "100", "--json")
    run("import", snap, "--name", "fromfile", "--data-dir", store)
    with live_server(store) as url:
        shown = json.loads(run("models", "show", "fromfile", "--json", "--server", url).stdout)
    assert shown["n_seen"] == 100 and shown["spec"]["features"] == {
        "temp": "numeric",
        "outlook": "categorical",
    }


def test_ctrl_c_prints_a_resume_command_that_finishes_the_replay(server, csv_file, monkeypatch):
    import shlex

    import app.replay as replay_mod

    real_apply, calls = replay_mod._apply, []

    def interrupted_apply(*args):
        calls.append(1)
        if len(calls) == 4:
            raise KeyboardInterrupt  # Ctrl-C while the 4th batch is being sent
        return real_apply(*args)

    monkeypatch.setattr(replay_mod, "_apply", interrupted_apply)
    args = ("replay", csv_file, "--server", server, "--model", "ctrlc", "--batch", "25")
    result = run(*args, ok=False)
    assert result.exit_code == 130 and "(interrupted)" in result.stdout
    hint = result.stderr.strip().splitlines()[-1]
    assert hint.startswith("interrupted; continue with: chorus replay")
    monkeypatch.setattr(replay_mod, "_apply", real_apply)
    command = shlex.split(hint.split("continue with: ", 1)[1])
    resumed = json.loads(run(*command[1:], "--json").stdout)
    assert resumed["duplicates"] == 75 and resumed["n_seen"] == 300 == resumed["examples"]


def test_export_import_with_the_redis_store(csv_file, tmp_path, clean_redis_url):
    snap = tmp_path / "r.chorus"
    with live_server(tmp_path, redis_url=clean_redis_url) as url:
        run("replay", csv_file, "--server", url, "--model", "r1", "--limit", "80", "--json")
        run("export", "r1", snap, "--redis-url", clean_redis_url)
        run("import", snap, "--name", "r2", "--redis-url", clean_redis_url)
        probas = [
            json.loads(
                run("predict", m, "temp=25", "outlook=rain", "--json", "--server", url).stdout
            )["probabilities"]
            for m in ("r1", "r2")
        ]
        assert probas[0] == probas[1] and probas[0]
        assert (
            json.loads(run("models", "show", "r2", "--json", "--server", url).stdout)["n_seen"]
            == 80
        )


def test_label_json_keeps_the_label_type(server):
    run("models", "create", "typed", "--spec", "single:naive_bayes", "--server", server)
    run("learn", "typed", "1", "a=1", "--label-json", "--server", server)
    run("learn", "typed", "2", "a=1", "--label-json", "--server", server)
    # the string "1" is not a label of a model of integers
    mixed = run("learn", "typed", "1", "a=1", "--server", server, ok=False)
    assert mixed.exit_code == 1 and "labels are integers" in mixed.stderr
    shown = json.loads(run("models", "show", "typed", "--json", "--server", server).stdout)
    assert shown["classes"] == [1, 2]
    bad = run("learn", "typed", "{oops", "--label-json", "--server", server, ok=False)
    assert bad.exit_code == 2 and "not valid JSON" in bad.stderr


def test_models_list_and_show_never_cut_a_name(server, monkeypatch):
    """At 80 columns the table cut names with "…" (``calendar.demo.day_of…``, issue 43)."""
    monkeypatch.setenv("COLUMNS", "80")
    name = "calendar.demo.day_of_week.a_name_long_enough_to_pass_80_col"  # (64 at most)
    run("models", "create", name, "--spec", "bagging:naive_bayes:2", "--server", server)
    listed = run("models", "list", "--server", server).stdout
    assert name in listed and "bagging:naive_bayes:2 seed" in listed and "\u2026" not in listed
    assert name in run("models", "show", name, "--server", server).stdout


def test_one_seed_default_everywhere(server, csv_file):
    """A model created without a seed gets the server's default seed whoever creates it: the
    Python client, a plain POST /models, ``chorus models create``, ``chorus replay`` (server or
    local). Before issue 43 the CLI's specs said seed 1 and everything else 0."""
    import httpx

    from app.client import ChorusClient

    run("models", "create", "s_cli", "--spec", "bagging:naive_bayes:2", "--server", server)
    with ChorusClient(server) as client:
        client.create_model("s_py", ensemble="bagging", learner="naive_bayes", n_models=2)
    body = {"name": "s_http", "ensemble": "bagging", "learner": "naive_bayes", "n_models": 2}
    assert httpx.post(f"{server}/models", json=body).status_code == 201
    run("replay", csv_file, "--server", server, "--model", "s_replay", "--limit", "5")
    seeds = {
        name: json.loads(run("models", "show", name, "--json", "--server", server).stdout)["spec"][
            "seed"
        ]
        for name in ("s_cli", "s_py", "s_http", "s_replay")
    }
    local = json.loads(run("replay", csv_file, "--local", "--limit", "5", "--json").stdout)
    seeds["local replay"] = local["spec"]["seed"]
    assert set(seeds.values()) == {0}, seeds


def test_replay_takes_a_forest_with_the_stacked_vote(csv_file, tmp_path):
    """``--create arf:... -p vote=stacking``: the saved model is a forest whose meta-learner
    learned every example replayed (a bad vote: exit code 2 naming it)."""
    from app.snapshot import decode
    from ensembles import load_state

    snap = tmp_path / "arf.chorus"
    run("replay", csv_file, "--local", "--create", "arf:hoeffding_tree:3:2", "-p",
        "vote=stacking", "--save", snap, "--limit", "150", "--json")  # fmt: skip
    state, _ = decode(snap.read_bytes())
    model = load_state(state)
    assert model.kind == "arf" and model.vote == "stacking"
    assert model.describe()["meta_learner"]["learned"] == 150
    bad = run("replay", csv_file, "--local", "--create", "srp:hoeffding_tree:3", "-p",
              "vote=majority", ok=False)  # fmt: skip
    assert bad.exit_code != 0 and "vote" in bad.output
