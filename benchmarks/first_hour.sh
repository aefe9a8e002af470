#!/usr/bin/env bash
# Issue #14's transcript: a fresh venv, a fresh clone, the README's two set-up commands, then the issue's items.
set -u
REPO=$(cd "$(dirname "$0")/.." && pwd)
rm -rf /tmp/fresh /tmp/fresh-clone
say() { printf '\n$ %s\n' "$*"; }
say python -m venv /tmp/fresh '&&' . /tmp/fresh/bin/activate
python -m venv /tmp/fresh && . /tmp/fresh/bin/activate
say git clone "$REPO" /tmp/fresh-clone '&&' cd /tmp/fresh-clone
git clone -q "$REPO" /tmp/fresh-clone && cd /tmp/fresh-clone && git log --oneline -1
say 'pip install -e . && chorus serve   # README set-up command 1 (serve in the background here)'
t=$(date +%s.%N); pip install -q -e . >/tmp/fresh-pip.log 2>&1; echo "pip install -e . : exit $? in $(echo "$(date +%s.%N) - $t" | bc) s"
python -c "import numba, os; print('numba cache dir:', os.environ.get('NUMBA_CACHE_DIR', '(default: __pycache__ next to the sources, empty in this clone)'))"
t0=$(date +%s.%N)
chorus serve --port 8765 >/tmp/fresh-serve.log 2>&1 &
SERVER=$!
until curl -s -o /dev/null http://127.0.0.1:8765/healthz; do sleep 0.05; done
B=http://127.0.0.1:8765
curl -s -X POST $B/models -H 'content-type: application/json' -d '{"name": "meetings", "ensemble": "bagging", "learner": "hoeffding_tree"}' >/dev/null
curl -s -X POST $B/learn -H 'content-type: application/json' -d '{"model": "meetings", "features": {"attendees": 3, "kind": "standup"}, "label": "30"}' >/dev/null
curl -s "$B/predict?model=meetings&attendees=3&kind=standup" >/tmp/fresh-first.json
echo "first answer (create + learn + predict) $(echo "$(date +%s.%N) - $t0" | bc) s after chorus serve was launched: $(cat /tmp/fresh-first.json)"
echo "readyz now: $(curl -s $B/readyz)"
c() { say curl "$@"; curl -s -w "  -> HTTP %{http_code}\n" "$@"; }
J=(-H 'content-type: application/json')
echo; echo "## 2. one label policy"
c -X POST $B/models "${J[@]}" -d '{"name": "labels", "ensemble": "bagging", "learner": "naive_bayes"}'
c -X POST $B/learn "${J[@]}" -d '{"model": "labels", "features": {"a": 1}, "label": "yes"}'
c -X POST $B/learn "${J[@]}" -d '{"model": "labels", "features": {"a": 2}, "label": "1"}'
c -X POST $B/learn "${J[@]}" -d '{"model": "labels", "features": {"a": 2}, "label": 1}'
c -X POST $B/learn "${J[@]}" -d '{"model": "labels", "features": {"a": 2}, "label": true}'
c -X POST $B/learn "${J[@]}" -d '{"model": "labels", "features": {"a": 2}, "label": ""}'
c "$B/predict?model=labels&a=2"
echo; echo "## 3. model names . and .."
c -X POST $B/models "${J[@]}" -d '{"name": ".", "ensemble": "bagging", "learner": "naive_bayes"}'
c -X POST $B/models "${J[@]}" -d '{"name": "..", "ensemble": "bagging", "learner": "naive_bayes"}'
echo; echo "## 4. one value policy (GET, POST, batch); unknown features reported"
c -X POST $B/models "${J[@]}" -d '{"name": "rooms", "ensemble": "bagging", "learner": "naive_bayes", "features": {"room": "categorical"}}'
c -X POST $B/learn "${J[@]}" -d '{"model": "rooms", "features": {"room": 12, "x": 1.5}, "label": "a"}'
c "$B/predict?model=rooms&room=12&x=1.5"
c -X POST $B/learn "${J[@]}" -d '{"model": "rooms", "features": {"room": "12", "x": NaN}, "label": "a"}'
c -X POST $B/learn "${J[@]}" -d '{"model": "rooms", "features": {"room": "12", "x": Infinity}, "label": "a"}'
c -X POST $B/learn "${J[@]}" -d '{"model": "rooms", "features": {"room": "12", "x": 1e999}, "label": "a"}'
c "$B/predict?model=rooms&room=12&x=nan"
c -X POST $B/learn "${J[@]}" -d '{"model": "rooms", "examples": [{"features": {"room": "12", "x": NaN}, "label": "a"}]}'
c "$B/predict?model=rooms&room=12&romo=7"
echo; echo "## 5. /docs without internet (assets served locally; tests/test_docs_offline.py renders it in headless Chromium with the network off)"
say "curl -s $B/docs | grep -o 'src=\"[^\"]*\"\\|href=\"[^\"]*\"'"
curl -s $B/docs | grep -o 'src="[^"]*"\|href="[^"]*"'
echo; echo "## 6. Python client, exist_ok (the README's client block)"
say python -c '...ChorusClient(...).create_model("meetings", exist_ok=True)...'
python - <<'PY'
from app.client import ChorusClient
with ChorusClient("http://127.0.0.1:8765") as chorus:
    info = chorus.create_model("meetings", exist_ok=True)
    print("create_model('meetings', exist_ok=True) on an existing model ->", info.name, "n_seen", info.n_seen)
    r = chorus.learn("meetings", {"attendees": 4, "kind": "review"}, "60", id="first-hour-1")
    print("first learn: duplicate =", r.duplicate)
PY
echo; echo "## 7. CLI"
say chorus --version; chorus --version
say chorus models list --server http://127.0.0.1:9; chorus models list --server http://127.0.0.1:9; echo "  -> exit $?"
say 'COLUMNS=80 chorus replay --help | head -30'; COLUMNS=80 chorus replay --help | head -30
kill $SERVER; wait $SERVER 2>/dev/null
echo; echo "## server log (first lines)"; head -12 /tmp/fresh-serve.log
