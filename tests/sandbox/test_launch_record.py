"""The launch record: per visible shape, the kernels launched (constexprs, warps, grid) and the CONFIGS
leaves the launcher read; never for a hold-out shape."""
from __future__ import annotations

import json
import types

import pytest

from elementwise_operator import elementwise_operator

from benchmarks.hardware import load_hardware
from benchmarks.spec import Shape
from sandbox.launch_record import ShapeLaunches, record_launches, traced_configs
from sandbox.verdict import EvalResult

LAUNCHER = '''
CONFIGS = {"top": 7, "by_size": {64: {"A": 1, "B": 2}, 1024: {"A": 3, "B": 4}},
           "buckets": [(16, dict(X=1, Y=2)), (1 << 62, dict(X=3, Y=4))], "unused": {"Z": 5}}

def pick(n):
    table = CONFIGS["by_size"]
    key = [k for k in sorted(table) if k >= n][0]
    cfg = dict(table[key])
    for bound, bucket in CONFIGS["buckets"]:
        if n <= bound:
            other = {**bucket}
            break
    last = CONFIGS["buckets"][-1][1].get("Y")
    return cfg, other, last, sum(v for _, v in CONFIGS["by_size"][key].items()) + CONFIGS["top"]
'''


def _module(code: str = LAUNCHER) -> types.ModuleType:
    mod = types.ModuleType("cand")
    exec(code, mod.__dict__)
    return mod


def test_traced_configs_records_the_leaves_each_call_reads_and_restores_the_literal():
    mod = _module()
    original = mod.CONFIGS
    with traced_configs(mod) as reads:
        assert mod.pick(10) == ({"A": 1, "B": 2}, {"X": 1, "Y": 2}, 4, 10)
    assert mod.CONFIGS is original and type(mod.CONFIGS["by_size"]) is dict
    assert reads == {("top",), ("by_size", 64, "A"), ("by_size", 64, "B"), ("buckets", 0, 1, "X"),
                     ("buckets", 0, 1, "Y"), ("buckets", 1, 1, "Y")}   # unpacked bounds are not leaves we move
    with traced_configs(mod) as reads:
        mod.pick(500)
    assert ("by_size", 1024, "A") in reads and ("by_size", 64, "A") not in reads
    assert not any(p[0] == "unused" for p in reads)


def test_a_call_that_fails_only_under_tracing_is_repeated_untraced():
    mod = _module(LAUNCHER + "\ndef strict(n):\n    assert type(CONFIGS) is dict, 'traced'\n    return pick(n)\n")
    rec = record_launches(lambda: mod.strict(10), mod, lambda e: False)
    assert rec.configs_read is None and "recorded untraced" in rec.note and "traced" in rec.note
    with pytest.raises(MemoryError):     # a fatal failure is the candidate's, not the tracer's
        record_launches(lambda: (_ for _ in ()).throw(MemoryError("oom")), mod, lambda e: True)
    assert record_launches(lambda: None, types.ModuleType("bare"), lambda e: False).configs_read is None


OPERATOR = elementwise_operator("scale_add", holdout_n="3001 + 2 * rng.randrange(0, 400)")

CANDIDATE = '''
import torch
import triton
import triton.language as tl

CONFIGS = {"by_block": {64: {"num_warps": 1, "MASKED": True}, 1024: {"num_warps": 4, "MASKED": True},
                        8192: {"num_warps": 8, "MASKED": True}}}


@triton.jit
def _scale_add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr, MASKED: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, 2.0 * x + y, mask=mask)


def scale_add(x, y):
    out = torch.empty_like(x)
    n = x.numel()
    block = min(triton.next_power_of_2(n), 8192)
    key = [k for k in sorted(CONFIGS["by_block"]) if k >= block][0]
    cfg = CONFIGS["by_block"][key]
    _scale_add_kernel[(triton.cdiv(n, key),)](x, y, out, n, BLOCK=key, MASKED=cfg["MASKED"],
                                              num_warps=cfg["num_warps"])
    return out
'''


@pytest.mark.interpreter
def test_the_worker_records_each_visible_shape_and_no_holdout(tmp_path):
    from agent.holdout import redact_holdout
    from sandbox.evaluation import EvalRequest, evaluate
    from sandbox.settings import SandboxSettings
    (tmp_path / "scale_add").mkdir()
    (tmp_path / "scale_add" / "operator.py").write_text(OPERATOR)
    shapes = (Shape.make("n1000", {"N": 1000}), Shape.make("n37", {"N": 37}))
    res = evaluate(EvalRequest(op="scale_add", source=CANDIDATE, shapes=shapes, hardware=load_hardware("h200"),
                               settings=SandboxSettings(trials=1, timeout_s=120.0), interpreter=True),
                   operator_dir=str(tmp_path))
    assert res.accepted, res.reasons
    by_id = {s.id: s for s in res.shapes}
    big, small = by_id["n1000"].launches, by_id["n37"].launches
    assert set(big.configs_read) == {("by_block", 1024, "num_warps"), ("by_block", 1024, "MASKED")}
    assert set(small.configs_read) == {("by_block", 64, "num_warps"), ("by_block", 64, "MASKED")}
    (k,) = big.kernels
    assert (k.kernel, dict(k.constexprs)["BLOCK"], dict(k.constexprs)["MASKED"], k.num_warps, k.grid) == \
        ("_scale_add_kernel", 1024, True, 4, (1,))
    hidden = [s for s in res.shapes if s.holdout]
    assert hidden and all(s.launches is None for s in hidden)
    # JSON and back, frozen; the proposer's view holds no hold-out row and no 8192 bucket read
    back = EvalResult.from_json(json.loads(json.dumps(res.to_json())))
    assert back.shapes[0].launches == res.shapes[0].launches and isinstance(back.shapes[0].launches, ShapeLaunches)
    with pytest.raises(AttributeError):
        big.note = "x"
    shown_rec = redact_holdout(res).to_json()
    shown_rec.pop("stage_times", None)          # stage names ("holdouts": seconds) are not hold-out data
    shown = json.dumps(shown_rec)
    assert "8192, \"num_warps\"" not in shown and "holdout" not in shown.replace('"holdout": false', "")
