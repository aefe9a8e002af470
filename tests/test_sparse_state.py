"""Sparse leaf statistics (issue 11): state grows with what each leaf saw, version-1 states load."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from streams import mixed_stream

from ensembles import load_state

V1 = Path(__file__).parent / "data" / "state_v1.npz"


def _v1_states() -> dict[str, tuple[dict, list]]:
    """The models of ``state_v1.npz``: version-1 states written by the dense-layout code after
    300 examples of ``mixed_stream(500, 3, new_class_at=250)``, with that code's prequential
    predictions on the 200 examples after."""
    raw = np.load(V1)
    out = {}
    for name in {k.split(".")[0] for k in raw.files}:
        header = json.loads(str(raw[f"{name}.header"]))
        arrays = {k[len(name) + 1 :]: raw[k] for k in raw.files
                  if k.startswith(name + ".") and k.count(".") >= 2}  # fmt: skip
        after = json.loads(str(raw[f"{name}.after"]))
        out[name] = ({"header": header, "arrays": arrays}, after)
    return out


@pytest.mark.parametrize("name", sorted(_v1_states()))
def test_version_1_state_loads_and_goes_on_exactly(name):
    state, after = _v1_states()[name]
    assert state["header"]["version"] == 1 and state["arrays"]["tree.cat"].ndim == 4
    model = load_state(state)
    data = list(mixed_stream(500, 3, new_class_at=250))[300:]
    preds = model.predict_learn_many([x for x, _ in data], [y for _, y in data])
    assert [[list(kv) for kv in sorted(p.items(), key=str)] for p in preds] == after
    again = load_state(model.to_state())  # and it saves in the current format
    assert again.to_state()["header"]["version"] == 2
