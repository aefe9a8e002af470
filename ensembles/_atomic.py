"""An atomic counter for the member-parallel kernel (``_kernels.bagging_members``), where the
threads of a batch claim members: a numba intrinsic in a kernel, plain Python in the interpreted
twins (which run in one thread).
"""

from __future__ import annotations

from numba import types
from numba.core import cgutils
from numba.extending import intrinsic, overload


def take(counts, i):
    """``counts[i] += 1``, returning the count before; atomic in a kernel: of the threads that
    take the same entry, exactly one gets 0."""
    n = counts[i]
    counts[i] = n + 1
    return int(n)


@intrinsic
def _take(typingctx, counts, i):
    def codegen(context, builder, sig, args):
        arr = context.make_array(sig.args[0])(context, builder, args[0])
        index = context.cast(builder, args[1], sig.args[1], types.intp)
        entry = cgutils.get_item_pointer(context, builder, sig.args[0], arr, [index])
        one = context.get_constant(types.int64, 1)
        return builder.atomic_rmw("add", entry, one, "monotonic")

    return types.int64(counts, i), codegen


@overload(take)
def _take_kernel(counts, i):
    if isinstance(counts, types.Array) and counts.dtype == types.int64 and counts.ndim == 1:
        return lambda counts, i: _take(counts, i)
    return None
