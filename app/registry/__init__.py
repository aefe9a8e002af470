"""The model manager: one writer per model, log before acknowledgement, snapshots, recovery.

Read in this order (each part is one file):

- :mod:`app.registry.api` — :class:`Registry`, the narrow API routes, the lifespan and the CLI use;
- :mod:`app.registry.writer` — :class:`ModelWriter`: group commit of predict-then-learn, the log
  append before the answer, writer leases when processes share a store;
- :mod:`app.registry.loaded` — :class:`LoadedModels`: which models are in memory (load on demand,
  unload after a snapshot), broken models, periodic snapshots;
- :mod:`app.registry.recovery` — :class:`Recovery`: snapshot + log replay in, snapshot + trim out;
- :mod:`app.registry.outcomes` — appends whose answer was lost (a Redis timeout): settled as
  applied or fenced before the model is used again;
- :mod:`app.registry.keeper` — :class:`PredictionKeeper`: features kept for delayed labels;
- :mod:`app.registry.ids` — :class:`~app.registry.ids.SeenIds`: the small in-memory filter of
  the idempotency ids a model may have seen (the ids and their answers are in the store);
- :mod:`app.registry.handles` — :class:`Handle` (one live model), :class:`Example`,
  :class:`ModelMetrics`; :mod:`app.registry.views` — the HTTP shapes of a model.

The served model is always exactly the model its log describes: a model that may have learned
something the log lacks is marked dirty and rebuilt (snapshot + log replay) before it is used
again; the engine's randomness is a pure function of (seed, example number, member), so replay
reproduces it bit for bit (ARCHITECTURE §4-5).
"""

from app import snapshot as codec
from app.registry.api import LIST_LIMIT, LIST_MAX, Registry
from app.registry.common import dumps
from app.registry.handles import Example, Handle, ModelMetrics
from app.registry.keeper import PredictionKeeper
from app.registry.loaded import LoadedModels
from app.registry.recovery import Recovery
from app.registry.writer import ModelWriter

__all__ = [
    "LIST_LIMIT",
    "LIST_MAX",
    "Example",
    "Handle",
    "LoadedModels",
    "ModelMetrics",
    "ModelWriter",
    "PredictionKeeper",
    "Recovery",
    "Registry",
    "codec",
    "dumps",
]
