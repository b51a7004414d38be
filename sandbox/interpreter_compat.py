"""Triton 3.6's interpreter with a recent NumPy: a runtime loop bound fails.

Under the interpreter a scalar of a kernel (a program id, a value loaded from memory, anything computed from
them) is a one-element NumPy array, and Triton 3.6 turns it into a Python int (the bounds of `range` and
`tl.range`, an index) with `int(array)`, which a recent NumPy refuses for an array of one dimension (2.4.6 here,
2.5.2 on the GPU machines): "only 0-dimensional arrays can be converted to Python scalars". Triton 3.7 converts
the squeezed array instead. On the GPU machines (torch 2.11, Triton 3.6) the seeds of fused_moe, gemm,
moe_align_block_size, moe_sum_reduce, softmax and top_k_top_p_filter failed every interpreter run there, which is
where the search proposer's compile check before the GPU runs its tiny shape (agent/proposers/search_prefetch.py).

`apply()` makes Triton 3.6's interpreter convert as 3.7's does: the same value, for the one-element arrays it
refused; anything else still fails as before. The sandbox's interpreter workers call it after importing triton.
"""
from __future__ import annotations


def _index(self) -> int:
    return int(self.handle.data.squeeze())


def apply() -> bool:
    """Patch the interpreter's tensor conversion (idempotent); False where this triton has no such hook."""
    try:
        from triton.runtime import interpreter
    except ImportError:
        return False
    patch = getattr(interpreter, "_patch_lang_tensor", None)
    if patch is None:
        return False
    if getattr(patch, "squeezes_index", False):
        return True

    def patched(tensor, scope):
        patch(tensor, scope)
        scope.set_attr(tensor, "__index__", _index)

    patched.squeezes_index = True
    interpreter._patch_lang_tensor = patched
    return True
