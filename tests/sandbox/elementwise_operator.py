"""Test helper: the text of a tiny operator folder's operator.py, out = 2 * x + y over N fp32 elements, for tests
that need an operator of their own (operator_dir=...) to drive the real sandbox in a second or two."""


def elementwise_operator(name: str, holdout_n: str) -> str:
    """operator.py for `name`; `holdout_n` is the expression (of `rng`) for the one hidden shape's N."""
    return f'''
import torch
from benchmarks.spec import Tolerance

NAME = "{name}"
SIGNATURE = "{name}(x[N], y[N]) -> [N]"
ARGS = ("x", "y")
DESCRIPTION = "out = 2 * x + y, elementwise"
TOLERANCES = {{"fp32": Tolerance(1e-5, 1e-5, 1e-5), "bf16": Tolerance(2e-2, 2e-2, 1e-2)}}


def make_inputs(dims, dtype, seed, device="cpu"):
    g = torch.Generator(device=device)
    g.manual_seed(int(seed))
    n = int(dims["N"])
    return {{"x": torch.randn(n, generator=g, device=device), "y": torch.randn(n, generator=g, device=device)}}


def reference(x, y):
    return 2 * x + y


def output_spec(dims, dtype):
    return (int(dims["N"]),), "fp32"     # make_inputs draws fp32 whatever the shape's dtype


def work(dims, dtype):
    n = int(dims["N"])
    return {{"fp32": 2.0 * n}}, 12.0 * n


def interpreter_dims(dims):
    return dict(dims)


def holdout_dims(rng, hot_dims):
    return [{{"N": {holdout_n}}}]


def occurrences(model_cfg, tp, tokens):
    return []
'''
