"""A bank of M incremental trees held in arrays: the compiled kernels and the ``TreeBank`` that
runs them (the three native learners, ``HoeffdingTree``, ``NaiveBayes`` and ``DecisionStump``, are
one data structure: :mod:`learners.tree.layout` describes it).

The kernels, each module using only those above it:

- :mod:`~learners.tree.layout`: the constants, the arrays (``TreeState``), the parameters
  (``TreeParams``); no kernel.
- :mod:`~learners.tree.structs`: the numba extension types (the ``Bank`` struct kernels take, the
  ``RunIO`` struct of a call's buffers) and ``unowned`` / ``keep_alive``.
- :mod:`~learners.tree.subspace`: random feature subspaces (which features a leaf learns, for
  random forests and random patches).
- :mod:`~learners.tree.rows`: the row index and pools (class-entry blocks, the hash index, lists,
  leaf allocation, ``has_room``).
- :mod:`~learners.tree.routing`: an example's walk to its leaf.
- :mod:`~learners.tree.statistics`: observers and statistics (a leaf learning, split merits).
- :mod:`~learners.tree.predict`: a member's probabilities (``tree_proba``, ``tree_best``).
- :mod:`~learners.tree.learn`: a member learning an example and splitting (``tree_learn``).
- :mod:`~learners.tree.run`: the run kernels (``single_run``, ``single_run_io``) and their
  helpers.
- :mod:`~learners.tree.canonical`: the saved state's canonical order.
- :mod:`~learners.tree.checks`: a loaded state's structure (``check_structure``).

The bank, in Python: :mod:`~learners.tree.bank` (``TreeBank``: its arrays, their allocation and
growth, :mod:`~learners.tree.alloc`), :mod:`~learners.tree.calls` (how it calls a run kernel: per
example, deferred, in batches) and :mod:`~learners.tree.persist` (saving and loading its arrays,
with the checks of a loaded state, :mod:`~learners.tree.bounds`).

Ensembles use all this through :mod:`learners.compiled` only.

numba's on-disk cache is keyed on a kernel's own file, yet a kernel's machine code includes that
of every kernel it calls, from the other modules here: when any of their sources changes, the
cached machine code of every module here is dropped (``KERNEL_FILES``,
``learners.jit.purge_stale_cache``, at import, before any kernel loads).
"""

from __future__ import annotations

from pathlib import Path

from learners.jit import purge_stale_cache

# the modules whose code compiled callers inline (their order is the import order)
KERNEL_FILES = tuple(
    Path(__file__).with_name(f"{name}.py")
    for name in ("layout", "structs", "subspace", "rows", "routing", "statistics", "predict", "learn", "run",
                 "canonical", "checks")
)  # fmt: skip


for _path in KERNEL_FILES:  # (each inlines kernels of the others)
    purge_stale_cache(_path, KERNEL_FILES)
