"""The keyed checksum behind a CUDA tensor's digest (sandbox/correctness.py tensor_digest), in one pass.

Three 64-bit sums over the tensor's 32-bit words (its bytes when the size is not a multiple of 4):

    m_i = (i + mix) * 0x5851F42D4C957F2D;  m_i ^= m_i >> 29          (int64, wrapping; >> is arithmetic)
    sums = (sum w_i,  sum w_i * m_i,  sum w_i * ((m_i >> 17) | 1))    (mod 2^64)

with mix = (key * 0x2545F4914F6CDD1D + 0x632BE59BD9B4E019) mod 2^62 and key the trial's secret seed, so an edit
that keeps the sums cannot be planned without it. Integer sums mod 2^64 do not depend on the order of the
additions, so the result is exact and the same on every run, whatever the block size or the number of programs.

The same formula written as a dozen torch operations over int64 copies read each weight byte about 40 times:
fused_moe's inputs (2.8 GB for DeepSeek-V3's experts) took 0.2-0.3 s a digest on the H200, 4.8 s of a 24 s
evaluation between the parent and the worker. This kernel reads each byte once. Launch parameters are never
specialized (no divisibility or alignment variants), so one compile per word type serves every tensor: the
worker compiles both while it pre-starts (`warm`), before any candidate's cache directory is set.
"""
from __future__ import annotations

import triton
import triton.language as tl

_MULT = 0x5851F42D4C957F2D
_KEY_MULT, _KEY_ADD = 0x2545F4914F6CDD1D, 0x632BE59BD9B4E019
_BLOCK = 4096


def key_mix(key: int) -> int:
    return (int(key) * _KEY_MULT + _KEY_ADD) & ((1 << 62) - 1)


@triton.jit(do_not_specialize=["n", "mix"], do_not_specialize_on_alignment=["words", "partial"])
def _keyed_sums_kernel(words, partial, n, mix, BLOCK: tl.constexpr):
    start = tl.program_id(0).to(tl.int64) * BLOCK
    pos = start + tl.arange(0, BLOCK).to(tl.int64)
    inside = pos < n
    w = tl.load(words + pos, mask=inside, other=0).to(tl.int64)
    m = (pos + mix) * 0x5851F42D4C957F2D
    m = m ^ (m >> 29)
    tl.store(partial + tl.program_id(0) * 3 + 0, tl.sum(w, axis=0))
    tl.store(partial + tl.program_id(0) * 3 + 1, tl.sum(w * m, axis=0))
    tl.store(partial + tl.program_id(0) * 3 + 2, tl.sum(w * ((m >> 17) | 1), axis=0))


def keyed_sums(raw, key: int):
    """The three sums of `raw` (a contiguous uint8 tensor) as a numpy int64 array of 3."""
    import torch
    words = raw.view(torch.int32) if raw.numel() % 4 == 0 else raw
    n = words.numel()
    programs = max(1, triton.cdiv(n, _BLOCK))
    partial = torch.empty(programs, 3, dtype=torch.int64, device=raw.device)
    _keyed_sums_kernel[(programs,)](words, partial, n, key_mix(key), BLOCK=_BLOCK)
    return partial.sum(0).cpu().numpy()


def warm(device="cuda") -> None:
    """Compile both word types now (a pre-started worker, before any candidate is loaded)."""
    import torch
    for numel in (16, 15):
        keyed_sums(torch.zeros(numel, dtype=torch.uint8, device=device), 0)
