"""One compiled specialisation per kernel and argument *type* (compile-time control).

numba compiles a jitted function once per distinct argument-type tuple, and a constant passed by
a caller (``tree_proba(B, B, 0, ...)``, ``sort_to_leaf(..., True)``) is typed as a *literal*
(``Literal[int](0)``), which makes a separate specialisation of the callee and of its whole call
tree. Measured on the cold start of one bagged Hoeffding tree (benchmarks/coldstart.py) this
duplicated ~20 kernels and a third of the compile time, for no measurable speed: LLVM still
propagates constants after inlining. ``one_specialisation`` makes the kernels of a module type
their calls on the arguments' plain types.
"""

from __future__ import annotations

from typing import Any

from numba.core import types
from numba.core.registry import CPUDispatcher


def one_specialisation(namespace: dict[str, Any], *, keep_literal: tuple[str, ...] = ()) -> None:
    """Make every numba kernel defined in ``namespace`` (a module's ``globals()``) compile
    calls from other kernels with non-literal argument types.

    Parameters
    ----------
    namespace
        The module's globals; kernels imported from elsewhere are left to their own module.
    keep_literal
        Kernels left as numba makes them: one specialisation per literal argument is wanted
        when a constant argument selects a branch, which numba then prunes (so a caller
        compiles only its own branch).
    """
    name = namespace.get("__name__")
    for key, obj in list(namespace.items()):
        if isinstance(obj, CPUDispatcher) and obj.py_func.__module__ == name:
            if key not in keep_literal:
                _unliteral(obj)


def _unliteral(dispatcher: CPUDispatcher) -> None:
    template = dispatcher.get_call_template  # bound method of this dispatcher

    def get_call_template(args: tuple, kws: dict) -> Any:
        return template(
            tuple(types.unliteral(a) for a in args),
            {k: types.unliteral(v) for k, v in kws.items()},
        )

    dispatcher.get_call_template = get_call_template  # type: ignore[method-assign,assignment]
