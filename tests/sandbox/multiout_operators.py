"""Test helper: tiny operators of the multi-output contract (OUTPUTS, MUTATES, integer outputs, `check`), written
into a folder for operator_dir=..., so the gate paths run through the real sandbox in seconds under the interpreter.

- sum_diff_sign(x[N], y[N]) -> (sum = x + y, diff = x - y, positive = (x + y > 0) as int32)
- scatter_rows(x[T,D], cache[S,D], slots[T] int64): cache[slots[t]] = x[t] in place, slot -1 skipped; returns None
- stable_rank(keys[N] int32) -> order[N] int64: any permutation that sorts the keys (ties in any order), by `check`
"""
from pathlib import Path

_COMMON = '''
import torch
from benchmarks.spec import Tolerance

TOLERANCES = {"fp32": Tolerance(1e-5, 1e-5, 1e-5), "bf16": Tolerance(2e-2, 2e-2, 1e-2)}


def work(dims, dtype):
    return {"fp32": 1.0}, 64.0


def interpreter_dims(dims):
    return dict(dims)


def occurrences(model_cfg, tp, tokens):
    return []


def _gen(seed, device):
    g = torch.Generator(device=device)
    g.manual_seed(int(seed))
    return g
'''

SUM_DIFF_SIGN = _COMMON + '''
NAME = "sum_diff_sign"
SIGNATURE = "sum_diff_sign(x[N], y[N]) -> (sum[N], diff[N], positive[N] int32)"
ARGS = ("x", "y")
OUTPUTS = ("sum", "diff", "positive")
DESCRIPTION = "sum = x + y, diff = x - y, positive = 1 where x + y > 0 else 0 (int32)"


def make_inputs(dims, dtype, seed, device="cpu"):
    g = _gen(seed, device)
    n = int(dims["N"])
    return {"x": torch.randn(n, generator=g, device=device), "y": torch.randn(n, generator=g, device=device)}


def reference(x, y):
    s = x + y
    return s, x - y, (s > 0).to(torch.int32)


def output_spec(dims, dtype):
    n = (int(dims["N"]),)
    return (n, "fp32"), (n, "fp32"), (n, "int32")


def holdout_dims(rng, hot_dims):
    return [{"N": 33}]
'''

SCATTER_ROWS = _COMMON + '''
NAME = "scatter_rows"
SIGNATURE = "scatter_rows(x[T,D], cache[S,D], slots[T] int64) -> None (writes cache)"
ARGS = ("x", "cache", "slots")
OUTPUTS = ()
MUTATES = ("cache",)
DESCRIPTION = "cache[slots[t], :] = x[t, :] for every t with slots[t] >= 0; every other cache row unchanged"


def make_inputs(dims, dtype, seed, device="cpu"):
    g = _gen(seed, device)
    t, d, s = int(dims["T"]), int(dims["D"]), int(dims["S"])
    slots = torch.randperm(s, generator=g, device=device)[:t].to(torch.int64)
    slots[1] = -1                                   # a padding token: skipped
    return {"x": torch.randn(t, d, generator=g, device=device),
            "cache": torch.randn(s, d, generator=g, device=device), "slots": slots}


def reference(x, cache, slots):
    keep = slots >= 0
    cache[slots[keep]] = x[keep]


def output_spec(dims, dtype):
    return ()


def holdout_dims(rng, hot_dims):
    return [{"T": 5, "D": 16, "S": 24}]
'''

STABLE_RANK = _COMMON + '''
NAME = "stable_rank"
SIGNATURE = "stable_rank(keys[N] int32) -> order[N] int64"
ARGS = ("keys",)
OUTPUTS = ("order",)
DESCRIPTION = "order: a permutation of 0..N-1 with keys[order] ascending; ties in any order"


def make_inputs(dims, dtype, seed, device="cpu"):
    g = _gen(seed, device)
    return {"keys": torch.randint(0, 4, (int(dims["N"]),), generator=g, device=device, dtype=torch.int32)}


def reference(keys):
    return (torch.sort(keys, stable=True).indices.to(torch.int64),)


def output_spec(dims, dtype):
    return (((int(dims["N"]),), "int64"),)


def check(inputs, outputs, reference_outputs):
    keys, order = inputs["keys"], outputs[0]
    seen = torch.zeros(keys.numel(), dtype=torch.int64)
    if bool(((order < 0) | (order >= keys.numel())).any()):
        return "order holds an index outside 0..N-1"
    seen.index_add_(0, order.cpu(), torch.ones_like(seen))
    if not bool((seen == 1).all()):
        i = int(torch.nonzero(seen != 1)[0])
        return f"order is not a permutation: index {i} appears {int(seen[i])} times, expected once"
    ranked = keys[order]
    if not bool((ranked[1:] >= ranked[:-1]).all()):
        return "keys[order] is not ascending"
    return None


def holdout_dims(rng, hot_dims):
    return [{"N": 21}]
'''

OPERATORS = {"sum_diff_sign": SUM_DIFF_SIGN, "scatter_rows": SCATTER_ROWS, "stable_rank": STABLE_RANK}


def write_operators(root: Path) -> str:
    for name, text in OPERATORS.items():
        (root / name).mkdir(parents=True, exist_ok=True)
        (root / name / "operator.py").write_text(text)
    return str(root)
