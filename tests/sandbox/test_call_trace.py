"""The call trace of sandbox/call_trace.py: equal for the same work, different for any change to what runs."""
from __future__ import annotations

import importlib.util
import itertools

import pytest
import torch

from sandbox.launch_record import record_launches

CANDIDATE = '''
import torch
import triton
import triton.language as tl

CONFIGS = {"by_block": {64: {"num_warps": 1, "MASKED": True}, 1024: {"num_warps": 4, "MASKED": True},
                        8192: {"num_warps": 8, "MASKED": True}},
           "EXTRA_PROGRAMS": 0, "SCALE": 2.0, "ZERO_FIRST": 0}


@triton.jit
def _scale_add_kernel(x_ptr, y_ptr, out_ptr, n, scale, BLOCK: tl.constexpr, MASKED: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, scale * x + y, mask=mask)


def scale_add(x, y):
    out = torch.empty_like(x)
    if CONFIGS["ZERO_FIRST"]:
        out.zero_()
    n = x.numel()
    block = min(triton.next_power_of_2(n), 8192)
    key = [k for k in sorted(CONFIGS["by_block"]) if k >= block][0]
    cfg = CONFIGS["by_block"][key]
    grid = (triton.cdiv(n, key) + CONFIGS["EXTRA_PROGRAMS"],)
    _scale_add_kernel[grid](x, y, out, n, CONFIGS["SCALE"], BLOCK=key, MASKED=cfg["MASKED"],
                            num_warps=cfg["num_warps"])
    return out
'''

# each a change of one thing that runs at n = 1000 (the 1024 bucket), and one that does not
CHANGES = {
    "constexpr": ('1024: {"num_warps": 4, "MASKED": True}', '1024: {"num_warps": 4, "MASKED": False}'),
    "num_warps": ('1024: {"num_warps": 4,', '1024: {"num_warps": 8,'),
    "grid": ('"EXTRA_PROGRAMS": 0', '"EXTRA_PROGRAMS": 1'),
    "runtime_argument": ('"SCALE": 2.0', '"SCALE": 3.0'),
    "torch_op": ('"ZERO_FIRST": 0', '"ZERO_FIRST": 1'),
    "kernel_code": ("tl.store(out_ptr + offs, scale * x + y", "tl.store(out_ptr + offs, y + scale * x"),
}
UNREAD = ('8192: {"num_warps": 8,', '8192: {"num_warps": 4,')     # a bucket no call below reaches


def _load(tmp_path, source: str, name: str):
    path = tmp_path / f"{name}.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _trace(mod, x=None, y=None) -> str:
    x = torch.arange(1000, dtype=torch.float32) if x is None else x
    y = torch.ones(1000) if y is None else y
    record = record_launches(lambda: mod.scale_add(x, y), mod, lambda e: False)
    assert record.trace_events >= 2, record      # the launch and the output's allocation at least
    return record.trace_digest


@pytest.mark.interpreter
def test_the_same_work_gives_one_digest_and_any_change_to_what_runs_another(tmp_path):
    base = _trace(_load(tmp_path, CANDIDATE, "base"))
    assert base and base == _trace(_load(tmp_path, CANDIDATE, "base_again"))   # the same source loaded again
    unread = CANDIDATE.replace(*UNREAD)
    assert unread != CANDIDATE and _trace(_load(tmp_path, unread, "unread")) == base
    digests = {"base": base}
    for what, (old, new) in CHANGES.items():
        assert CANDIDATE.count(old) == 1, what
        digests[what] = _trace(_load(tmp_path, CANDIDATE.replace(old, new), what))
    for (a, da), (b, db) in itertools.combinations(digests.items(), 2):
        assert da != db, f"{a} and {b} gave one digest"


@pytest.mark.interpreter
def test_a_tensor_counts_by_its_sizes_and_offset_not_its_address(tmp_path):
    mod = _load(tmp_path, CANDIDATE, "views")
    x = torch.arange(2000, dtype=torch.float32)
    y = torch.ones(2000)
    first = _trace(mod, x[:1000], y[:1000])
    assert first == _trace(mod, x.clone()[:1000], y.clone()[:1000])     # other buffers, same work
    assert first != _trace(mod, x[1000:], y[1000:])                     # the same sizes at another offset
