"""Replay: local and server paths agree row by row; resume never learns a row twice.

Streams are generated here (a seeded concept with numeric and categorical features and label
noise) and written as CSV, JSONL and ARFF; the server is the real service on a free port.
"""

from __future__ import annotations

import dataclasses
import gzip
import json
import random

import pytest
from _live_server import live_server

from app.client import ChorusClient
from app.replay import ReplayError, flattery_warning, parse_spec, row_id, run_replay

N = 500
SPEC = "bagging:hoeffding_tree:3:7"
COLORS = ["red", "green", "blue"]


def stream(n=N, seed=3):
    """A stationary concept: pos iff a (+0.3 when red) > 0.6, with 10% label noise."""
    rng = random.Random(seed)
    rows = []
    for _ in range(n):
        a, b, color = round(rng.random(), 4), round(rng.random(), 4), rng.choice(COLORS)
        pos = a + (0.3 if color == "red" else 0.0) > 0.6
        if rng.random() < 0.1:
            pos = not pos
        rows.append({"a": a, "b": b, "color": color, "label": "pos" if pos else "neg"})
    return rows


def classes_in_order(rows):
    return list(dict.fromkeys(r["label"] for r in rows))


def write_csv(path, rows):
    lines = ["a,b,color,label"] + [f"{r['a']},{r['b']},{r['color']},{r['label']}" for r in rows]
    data = ("\n".join(lines) + "\n").encode()
    path.write_bytes(gzip.compress(data) if path.suffix == ".gz" else data)
    return path


def write_jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def write_arff(path, rows):
    head = [
        "@relation generated",
        "@attribute a numeric",
        "@attribute b real",
        "@attribute color {" + ",".join(COLORS) + "}",
        "@attribute label {" + ",".join(classes_in_order(rows)) + "}",
        "@data",
    ]
    body = [f"{r['a']},{r['b']},{r['color']},{r['label']}" for r in rows]
    path.write_text("\n".join(head + body) + "\n")
    return path


WRITERS = {"csv": write_csv, "jsonl": write_jsonl, "arff": write_arff}


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("streams")
    rows = stream()
    return {
        "csv": write_csv(d / "s.csv.gz", rows),
        "jsonl": write_jsonl(d / "s.jsonl", rows),
        "arff": write_arff(d / "s.arff", rows),
    }


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with live_server(tmp_path_factory.mktemp("store")) as url:
        yield url


@pytest.fixture
def client(server):
    with ChorusClient(server, retries=1, backoff=0.05) as c:
        yield c


def spec():
    return {**parse_spec(SPEC), "params": {"grace_period": 50}}


def local(path, **kw):
    return run_replay(path, target="label", spec=spec(), keep_outcomes=True, **kw)


def on_server(path, client, model, **kw):
    return run_replay(
        path,
        target="label",
        spec=spec(),
        client=client,
        model=model,
        keep_outcomes=True,
        **kw,
    )


def predictions(report):
    return [(o.row, o.y, o.prediction) for o in report.outcomes]


def probabilities(report):
    return [{str(k): v for k, v in o.probabilities.items()} for o in report.outcomes]


@pytest.fixture(scope="module")
def reference(files):
    return local(files["csv"])


def test_local_replay_learns_the_concept_and_reports(reference):
    r = reference
    assert (r.rows, r.examples, r.n_seen) == (N, N, N)
    assert r.mode == "local" and not r.interrupted and r.error is None
    assert r.scored == N - 1  # the untrained model's first prediction (None) is not scored
    assert r.accuracy > 0.7 and r.kappa > 0.4 and r.window_accuracy > 0.7
    assert r.examples_per_s > 0 and r.elapsed_s > 0
    assert r.curve[-1][0] == N and abs(r.curve[-1][1] - r.accuracy) < 1e-12
    hits = sum(o.prediction == o.y for o in r.outcomes if o.prediction is not None)
    assert r.accuracy == pytest.approx(hits / r.scored)


def test_a_replay_reports_the_class_scores_and_warns_when_accuracy_flatters(reference, tmp_path):
    """The summary has balanced accuracy, G-mean, macro-F1, per-class recall and precision and
    the majority-class rate; on a stream with 3 % positives and no signal the model's accuracy
    is within 1 point of that rate and the report warns, on the balanced stream it does not."""
    r = reference
    assert r.warning is None and r.accuracy - r.majority_rate >= 0.01
    assert 0.5 < r.balanced_accuracy < 1.0 and 0.0 < r.g_mean <= r.balanced_accuracy
    classes = {c["label"]: c for c in r.per_class["classes"]}
    assert set(classes) == {"pos", "neg"}
    assert sum(c["support"] for c in classes.values()) == r.scored
    hits = sum(o.prediction == o.y == "pos" for o in r.outcomes)
    assert classes["pos"]["recall"] == pytest.approx(hits / classes["pos"]["support"])
    rng = random.Random(5)
    rows = [{"a": round(rng.random(), 4), "b": round(rng.random(), 4), "color": "red",
             "label": "pos" if i % 33 == 0 else "neg"} for i in range(N)]  # fmt: skip
    skewed = local(write_csv(tmp_path / "skewed.csv", rows))
    assert skewed.majority_rate == pytest.approx(1 - 15 / (N - 1), abs=0.002)
    assert skewed.accuracy - skewed.majority_rate < 0.01
    assert skewed.warning and "majority-class rate" in skewed.warning
    for diff, words in ((0.005, "within 1 point of"), (-0.005, "within 1 point of"),
                        (-0.05, "below")):  # fmt: skip
        near = dataclasses.replace(skewed, accuracy=skewed.majority_rate + diff)
        assert f"{words} the majority-class rate" in flattery_warning(near)
    assert (
        flattery_warning(dataclasses.replace(skewed, accuracy=skewed.majority_rate + 0.02)) is None
    )
    assert skewed.balanced_accuracy < 0.6
    assert "balanced_accuracy" in skewed.to_json() and "per_class" in skewed.to_json()


@pytest.mark.parametrize("metric", ["balanced_accuracy", "g_mean", "macro_f1"])
def test_the_curve_follows_the_chosen_metric(files, reference, metric, tmp_path):
    """``metric=`` (``--metric``) makes the learning curve that score, cumulative and over the
    window: its last point is the report's figure; the predictions are those of the default."""
    r = local(files["csv"], metric=metric, window=50)
    assert predictions(r) == predictions(reference)
    assert r.curve[-1][0] == N
    assert r.curve[-1][1] == pytest.approx(getattr(r, metric), abs=1e-12)
    assert r.curve[-1][2] == pytest.approx(getattr(r, f"window_{metric}"), abs=1e-12)
    assert [p[1] for p in r.curve] != [p[1] for p in reference.curve]  # not accuracy's curve
    png = tmp_path / "curve.png"
    from app.replay import plot_curve

    assert plot_curve(r, png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    with pytest.raises(ReplayError, match="--metric: 'kappa' is not one of accuracy"):
        local(files["csv"], metric="kappa")


def test_the_same_stream_in_every_format_replays_identically(files, reference):
    for fmt in ("jsonl", "arff"):
        other = local(files[fmt])
        assert predictions(other) == predictions(reference), fmt
        assert other.accuracy == reference.accuracy and other.kappa == reference.kappa


def test_local_batches_equal_row_by_row(files, reference):
    batched = local(files["csv"], batch=64)
    assert predictions(batched) == predictions(reference)
    assert probabilities(batched) == probabilities(reference)


@pytest.mark.parametrize(("fmt", "batch"), [("csv", 1), ("jsonl", 50), ("arff", 7)])
def test_server_replay_matches_local_row_by_row(files, client, fmt, batch):
    ref = local(files[fmt])
    remote = on_server(files[fmt], client, f"same-{fmt}", batch=batch)
    assert remote.mode == "server" and remote.error is None
    assert predictions(remote) == predictions(ref)
    assert probabilities(remote) == probabilities(ref)
    for key in ("examples", "scored", "accuracy", "kappa", "window_accuracy", "n_seen"):
        assert getattr(remote, key) == getattr(ref, key), key
    # the server scored the same predictions with the same river metrics
    sm = remote.server_metrics
    assert sm["n_scored"] == ref.scored
    assert sm["accuracy"] == pytest.approx(ref.accuracy, abs=1e-12)
    assert sm["kappa"] == pytest.approx(ref.kappa, abs=1e-12)


def test_interrupted_then_resumed_replay_learns_each_row_once(files, client, reference):
    path = files["csv"]
    first = on_server(path, client, "resumed", batch=16, stop_after=203)
    assert first.interrupted and first.examples == 203
    assert client.get_model("resumed").n_seen == 203

    # without --resume a replay of the same file into the same model stops at the first row
    again = run_replay(path, target="label", client=client, model="resumed", batch=16)
    assert again.error and "already learned" in again.error and "--resume" in again.error
    assert client.get_model("resumed").n_seen == 203

    resumed = on_server(path, client, "resumed", batch=16, resume=True)
    assert resumed.error is None and not resumed.interrupted
    assert resumed.duplicates == 203 and resumed.examples == N
    assert resumed.n_seen == N == client.get_model("resumed").n_seen
    # duplicates answer with the prediction originally made: the report covers the whole file
    assert predictions(resumed) == predictions(reference)
    assert resumed.accuracy == reference.accuracy and resumed.kappa == reference.kappa
    assert client.metrics("resumed").n_scored == reference.scored

    # resuming a finished replay learns nothing
    done = on_server(path, client, "resumed", batch=100, resume=True)
    assert done.duplicates == N and client.get_model("resumed").n_seen == N


def test_existing_model_with_explicit_spec_needs_resume(files, client):
    on_server(files["jsonl"], client, "exists", limit=10)
    with pytest.raises(ReplayError, match="already exists"):
        on_server(files["jsonl"], client, "exists", limit=10)


def test_batches_over_the_server_limit_are_split(files, tmp_path):
    with live_server(tmp_path, max_batch=40) as url, ChorusClient(url) as c:
        r = on_server(files["jsonl"], c, "split", batch=150, limit=300)
        assert r.error is None and (r.examples, r.n_seen) == (300, 300)


def test_limit_and_row_ids(files, client):
    r = on_server(files["csv"], client, "limited", limit=25, batch=10)
    assert (r.examples, r.n_seen) == (25, 25)
    assert row_id(r.sha1, 25) == f"{r.sha1[:12]}:25"


def test_bad_file_learns_nothing(tmp_path, client):
    rows = stream(50)
    path = write_csv(tmp_path / "bad.csv", rows)
    text = path.read_text().splitlines()
    text[30] = text[30] + ",extra"  # row 30 is ragged
    path.write_text("\n".join(text) + "\n")
    from app.readers import ReaderError

    with pytest.raises(ReaderError, match=r"bad\.csv: row 30 \(line 31\)"):
        on_server(path, client, "bad")
    assert "bad" not in [m.name for m in client.list_models()]


def test_resume_needs_a_server(files):
    with pytest.raises(ReplayError, match="--resume needs --server"):
        run_replay(files["csv"], target="label", resume=True)


def test_resume_against_the_redis_store(files, reference, clean_redis_url, tmp_path):
    """Same guarantees with the production store (a real redis-server from conftest)."""
    with live_server(tmp_path, redis_url=clean_redis_url) as url, ChorusClient(url) as c:
        first = on_server(files["arff"], c, "redis-resume", batch=32, stop_after=100)
        assert first.interrupted and c.get_model("redis-resume").n_seen == 100
        resumed = on_server(files["arff"], c, "redis-resume", batch=32, resume=True)
        assert resumed.duplicates == 100 and resumed.n_seen == N
        assert predictions(resumed) == predictions(reference)
        assert c.metrics("redis-resume").n_scored == reference.scored


@pytest.mark.parametrize("batch", [1, 7, 64, 100])
def test_local_replay_with_threads_streams_its_batches_with_the_same_report(
    files, reference, monkeypatch, batch
):
    """``threads``: the local model learns the file as a stream of batches
    (``predict_learn_batches``: the members of one batch learn while the next is encoded);
    the predictions, the progress reports and the saved model are those of one thread."""
    from ensembles import OnlineBagging, backends

    monkeypatch.setattr(backends, "PIPELINE_CORES", 64)  # overlapped even on 2 cores
    streamed = []
    real = OnlineBagging.predict_learn_batches

    def counting(self, batches):
        streamed.append(self.threads)
        return real(self, batches)

    monkeypatch.setattr(OnlineBagging, "predict_learn_batches", counting)

    def replay(threads, stop_after=None):
        progress = []
        report = local(files["csv"], batch=batch, threads=threads, stop_after=stop_after,
                       on_progress=lambda board, _: progress.append(board.point()))  # fmt: skip
        return report, progress

    one, one_progress = replay(1)
    two, two_progress = replay(2)
    assert predictions(two) == predictions(one) == predictions(reference)
    assert probabilities(two) == probabilities(one)
    assert two_progress == one_progress and len(two_progress) == -(-N // batch)
    assert (two.accuracy, two.kappa, two.n_seen, two.curve) == (
        one.accuracy, one.kappa, one.n_seen, one.curve)  # fmt: skip
    assert (streamed == [1, 2]) if batch > 1 else not streamed
    cut, cut_progress = replay(2, stop_after=203)
    assert cut.interrupted and cut.examples == 203 == len(cut.outcomes)
    assert predictions(cut) == predictions(one)[:203]
    assert cut_progress == one_progress[: 203 // batch]
