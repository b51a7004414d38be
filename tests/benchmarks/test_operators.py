"""One parametrized test over every operator folder: the contract, the shapes, the seed vs the reference.

Adding an operator folder adds its cases here without touching this file.
"""
import math
import random

import pytest
from op_helpers import call_failures, load_seed

from benchmarks.registry import list_operators, load_operator
from benchmarks.spec import PHASES
from sandbox.correctness import tolerance_for, torch_dtype
from sandbox.results import reference_outputs

OPS = list_operators()


def _is_pow2(n: int) -> bool:
    return n > 0 and n & (n - 1) == 0


@pytest.fixture(params=OPS, ids=OPS)
def spec(request):
    return load_operator(request.param)


def test_there_are_the_first_four():
    assert {"rms_norm", "silu_and_mul", "gemm", "fused_moe"} <= set(OPS)


def test_contract(spec):
    assert spec.signature.startswith(spec.name + "(")
    assert spec.arg_names and spec.description
    dims = spec.select("hot")[0].dim
    for dtype in ("bf16", "fp16", "fp32"):
        # each float output's tolerance: by its own dtype (fp8 values, fp32 scales), else the input's
        for _, _, out_dtype in spec.outputs(dims, dtype):
            if out_dtype in ("int32", "int64", "bool"):
                continue                                  # compared exactly
            tol = tolerance_for(spec, out_dtype, dtype)
            assert 0 < tol.rel_l2 < 0.1 and tol.atol >= 0 and tol.rtol >= 0


def test_shapes_are_named_weighted_and_cover_both_phases(spec):
    ids = [s.id for s in spec.shapes]
    assert ids and len(ids) == len(set(ids))
    assert all(s.weight >= 0 and s.source for s in spec.shapes)
    hot = spec.select("hot")
    # an operator that only one phase calls (causal_conv1d's prefill form) declares PHASES
    assert {s.phase for s in hot} == set(getattr(spec.module, "PHASES", PHASES))
    assert set(spec.select("decode")) | set(spec.select("prefill")) == set(spec.shapes)
    keys = {tuple(k for k, _ in s.dims) for s in spec.shapes}
    assert len(keys) == 1, f"every shape of {spec.name} must name the same dims"


def test_work_model_is_positive_and_memory_counts_every_input(spec):
    import torch
    shape = spec.select("hot")[0]
    W, Q = spec.work(shape)
    assert sum(W.values()) > 0 and Q > 0
    # Q is at least the bytes of the outputs written once.
    out_bytes = sum(math.prod(s) * torch.empty(0, dtype=torch_dtype(d)).element_size()
                    for _, s, d in spec.outputs(shape.dim, shape.dtype))
    assert Q >= out_bytes


def test_inputs_are_seeded_realistic_and_never_zero(spec):
    import torch
    dims = spec.interpreter_dims(spec.select("hot")[0].dim)
    a = spec.make_inputs(dims, "fp32", seed=1, device="cpu")
    b = spec.make_inputs(dims, "fp32", seed=1, device="cpu")
    c = spec.make_inputs(dims, "fp32", seed=2, device="cpu")
    assert list(a) == list(spec.arg_names) or set(a) <= set(spec.arg_names)
    differs = False
    for k, v in a.items():
        if isinstance(v, torch.Tensor):
            assert torch.equal(v, b[k]), f"{k} is not deterministic for a seed"
            if v.is_floating_point():
                assert v.abs().sum() > 0, f"{k} is all zeros"
                assert torch.isfinite(v).all()
            differs |= not torch.equal(v, c[k])
    assert differs, "another seed gave the same inputs"


def test_reference_matches_output_spec(spec):
    import torch
    dims = spec.interpreter_dims(spec.select("hot")[-1].dim)
    inputs = spec.make_inputs(dims, "fp32", seed=3, device="cpu")
    clones = {m: inputs[m].clone() for m in spec.mutates}      # MUTATES: the reference writes them in place
    ret = spec.reference(**{**inputs, **clones})
    outs = reference_outputs(spec, ret)
    if spec.output_names is not None:
        assert type(ret) is (tuple if spec.output_names else type(None)), type(ret)
    declared = spec.outputs(dims, "fp32")
    assert len(outs) == len(declared)
    for out, (name, shape, dtype) in zip(outs, declared):
        assert tuple(out.shape) == shape and out.dtype == torch_dtype(dtype), name
    for m, t in clones.items():
        assert not torch.equal(t, inputs[m]), f"reference did not write {m}, which the operator MUTATES"


def test_holdout_shapes_are_odd_and_larger(spec):
    hot = [s.dim for s in spec.shapes]
    hold = spec.holdout_dims(random.Random(7))
    assert len(hold) >= 2
    assert all(set(h) == set(hot[0]) for h in hold)
    # some dimension of some hold-out shape exceeds every shape we publish
    assert any(h[k] > max(d[k] for d in hot) for h in hold for k in h)
    # and some dimension is not a power of two
    assert any(not _is_pow2(v) for h in hold for v in h.values())
    assert hold != spec.holdout_dims(random.Random(8)), "hold-out shapes must be drawn fresh"


def _load_seed(spec):
    return getattr(load_seed(spec.seed_path, f"seed_{spec.name}"), spec.name)


@pytest.mark.interpreter
def test_seed_matches_reference_under_the_interpreter(spec):
    import torch
    fn = _load_seed(spec)
    hot = spec.select("hot")
    for shape in [next(s for s in hot if s.phase == p) for p in sorted({s.phase for s in hot})]:
        dims = spec.interpreter_dims(shape.dim)
        inputs = spec.make_inputs(dims, "fp32", seed=11, device="cpu")
        assert call_failures(spec, fn, inputs, dims) == [], f"{spec.name} {dims}"


def test_baseline_computes_the_same_function(spec):
    """`--baseline` times what a user would run instead; it must compute the operator's function."""
    import torch
    baseline = getattr(spec.module, "baseline", None)
    if baseline is None:
        pytest.skip(f"{spec.name} has no baseline(); --baseline times its reference")
    dims = spec.interpreter_dims(spec.select("hot")[0].dim)
    inputs = spec.make_inputs(dims, "fp32", seed=5, device="cpu")
    dtypes = [torch_dtype(d) for _, _, d in spec.outputs(dims, "fp32")]

    def in_declared_dtypes(**kw):      # a baseline may compute in bf16 (gemm): its values are what counts
        ret = baseline(**kw)
        if spec.output_names is None:
            return ret.to(dtypes[0])
        return None if ret is None else tuple(t.to(d) for t, d in zip(ret, dtypes))
    assert call_failures(spec, in_declared_dtypes, inputs, dims) == []


def test_holdout_shapes_are_always_valid(spec):
    """Drawn per evaluation, so every draw must be a valid shape (found: a router's N=8 once gave N=-3)."""
    for seed in range(300):
        for h in spec.holdout_dims(random.Random(seed)):
            assert all(v >= 1 for v in h.values()), (seed, h)
            spec.interpreter_dims(h)          # raises on invalid dims
            spec.outputs(h, "bf16")


def test_inputs_do_not_depend_on_the_default_dtype(spec):
    """The parent and the worker draw a trial's inputs from the same seed and compare digests: a default dtype
    left changed in either process (a model loader, a test, a candidate) must not change one byte."""
    import torch
    shape = spec.select("hot")[0]
    dims = spec.module.interpreter_dims(shape.dim) if hasattr(spec.module, "interpreter_dims") else shape.dim
    plain = spec.make_inputs(dims, shape.dtype, 11)
    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        moved = spec.make_inputs(dims, shape.dtype, 11)
        assert torch.get_default_dtype() == torch.float64          # the caller's setting is given back
    finally:
        torch.set_default_dtype(old)
    for name, v in plain.items():
        if isinstance(v, torch.Tensor):
            assert v.dtype == moved[name].dtype and torch.equal(v, moved[name]), name
        else:
            assert v == moved[name], name
