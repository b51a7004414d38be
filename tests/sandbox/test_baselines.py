"""The baselines `aka bench --baseline NAME` scores (sandbox/baselines.py): static-shape torch.compile,
library baselines that say clearly where they do not apply, and their input conversion."""
import types

import pytest
import torch

from benchmarks.registry import load_operator
from sandbox import baselines
from sandbox.baselines import build, offered_by, unavailable


class GraphRecorder:
    """A torch.compile backend that keeps each captured graph's example inputs and runs it as is."""

    def __init__(self):
        self.graphs: list[list] = []

    def __call__(self, gm, example_inputs):
        self.graphs.append(list(example_inputs))
        return gm.forward

    def symbolic(self) -> list[str]:
        """The graph inputs that are not concrete: SymInts, or tensors with a symbolic size."""
        found = []
        for i, graph in enumerate(self.graphs):
            for x in graph:
                if isinstance(x, torch.SymInt) or (isinstance(x, torch.Tensor) and any(
                        isinstance(d, torch.SymInt) for d in x.shape)):
                    found.append(f"graph {i}: {x}")
        return found


def _call_shapes(fn, op: str, dims_list):
    spec = load_operator(op)
    for dims in dims_list:
        fn(**spec.make_inputs(dims, "fp32", 0))


RMS_SHAPES = [{"T": 4, "H": 64}, {"T": 8, "H": 64}, {"T": 8, "H": 96}, {"T": 3, "H": 200}]


@pytest.mark.parametrize("op, dims_list", [
    ("rms_norm", RMS_SHAPES),
    ("silu_and_mul", [{"T": 4, "I": 32}, {"T": 8, "I": 32}, {"T": 5, "I": 48}]),
    ("gemm", [{"M": 4, "N": 8, "K": 16}, {"M": 16, "N": 8, "K": 16}, {"M": 16, "N": 24, "K": 32}]),
])
def test_compile_baseline_specializes_every_shape(op, dims_list):
    """One static graph per shape, as a serving engine compiles each captured batch size: with torch.compile's
    default, the second shape already turns T symbolic (and rms_norm then reduces over a symbolic H)."""
    torch._dynamo.reset()
    rec = GraphRecorder()
    chosen = build(load_operator(op).module, "compile", backend=rec)
    _call_shapes(chosen.fn, op, dims_list)
    assert len(rec.graphs) == len(dims_list), f"expected one graph per shape, got {len(rec.graphs)}"
    assert rec.symbolic() == []


def test_the_static_check_catches_automatic_dynamic_shapes():
    """The check above fails on what `--baseline compile` did before 2026-12-01 (torch.compile's defaults)."""
    torch._dynamo.reset()
    rec = GraphRecorder()
    _call_shapes(torch.compile(load_operator("rms_norm").module.baseline, backend=rec), "rms_norm", RMS_SHAPES)
    assert rec.symbolic(), "torch.compile's default no longer goes dynamic on a second shape: revisit the test"
    assert len(rec.graphs) < len(RMS_SHAPES)


def test_compile_raises_the_recompile_limit_so_large_shape_sets_stay_compiled():
    torch._dynamo.reset()
    rec = GraphRecorder()
    chosen = build(load_operator("rms_norm").module, "compile", backend=rec)
    shapes = [{"T": t, "H": 32} for t in range(1, 13)]          # more than dynamo's default cache of 8
    _call_shapes(chosen.fn, "rms_norm", shapes)
    assert len(rec.graphs) == len(shapes) and rec.symbolic() == []


def test_library_baselines_are_offered_where_the_operator_defines_them():
    assert offered_by(load_operator("rms_norm").module) == ["eager", "compile", "liger"]
    assert offered_by(load_operator("silu_and_mul").module) == ["eager", "compile", "liger"]
    assert offered_by(load_operator("gemm").module) == ["eager", "compile", "cublas"]
    assert "liger" in offered_by(load_operator("fused_moe").module)


def test_unavailable_baselines_say_what_applies():
    gemm = load_operator("gemm").module
    msg = unavailable(gemm, "liger")
    assert "nothing for gemm" in msg and "eager, compile, cublas" in msg
    assert "not one of" in unavailable(gemm, "fast")
    with pytest.raises(ValueError, match="nothing for gemm"):
        build(gemm, "liger")
    assert unavailable(gemm, "cublas") is None and unavailable(gemm, "compile") is None


def test_a_missing_library_names_the_package_and_the_install(monkeypatch):
    fake = types.ModuleType("fake_operator")
    fake.NAME = "fake"
    fake.baseline_liger = lambda x: x
    monkeypatch.setitem(baselines.PACKAGES, "liger", ("aka_no_such_package_xyz", "pip install it"))
    msg = unavailable(fake, "liger")
    assert "aka_no_such_package_xyz" in msg and "not installed" in msg and "pip install it" in msg


def test_liger_silu_and_mul_gets_gate_and_up_as_two_tensors():
    spec = load_operator("silu_and_mul")
    chosen = build(spec.module, "liger")
    x = spec.make_inputs({"T": 3, "I": 40}, "fp32", 1)["x"]
    args = chosen.prepare({"x": x})
    assert set(args) == {"gate", "up"}
    assert args["gate"].is_contiguous() and args["up"].is_contiguous()
    assert torch.equal(args["gate"], x[:, :40]) and torch.equal(args["up"], x[:, 40:])


def test_layer_norm_has_a_liger_baseline():
    """measure_new_ops timed Liger's LayerNorm beside the seed, but `--baseline liger` (and so the counters of a
    missed shape) had nothing for layer_norm."""
    module = load_operator("layer_norm").module
    assert unavailable(module, "liger") is None
    assert callable(build(module, "liger").fn)


def test_liger_softmax_writes_fp32_probabilities_and_refuses_wide_rows():
    """Liger's softmax writes the input's dtype; the baseline casts bf16 logits to fp32 first, as a sampler
    wanting fp32 probabilities would, so it can pass the contract. Rows wider than 65536 (every hot shape)
    fail with Liger's own message, which the report then shows in place of a time."""
    module = load_operator("softmax").module
    assert unavailable(module, "liger") is None
    fn = build(module, "liger").fn
    x = module.make_inputs({"T": 2, "V": 3000}, "bf16", 4)["x"]
    out = fn(x)
    ref = module.reference(x)
    assert out.dtype == torch.float32 and out.shape == ref.shape
    torch.testing.assert_close(out, ref, rtol=1e-4, atol=1e-9)
    with pytest.raises(RuntimeError, match="65536"):
        fn(module.make_inputs({"T": 1, "V": 65537}, "fp32", 4)["x"])


def test_cublas_gemm_matches_the_reference():
    spec = load_operator("gemm")
    inputs = spec.make_inputs({"M": 5, "N": 7, "K": 9}, "fp32", 2)
    out = build(spec.module, "cublas").fn(**inputs)
    torch.testing.assert_close(out, spec.reference(**inputs).to(out.dtype), rtol=1e-5, atol=1e-5)


@pytest.mark.gpu
@pytest.mark.parametrize("op, dims", [("rms_norm", {"T": 64, "H": 4096}), ("silu_and_mul", {"T": 64, "I": 3584}),
                                      ("fused_moe", {"T": 16, "H": 256, "I": 128, "E": 8, "k": 2}),
                                      ("layer_norm", {"T": 64, "H": 4096}),
                                      ("softmax", {"T": 16, "V": 32000})])
def test_liger_baselines_match_the_reference_on_the_gpu(op, dims):
    spec = load_operator(op)
    missing = unavailable(spec.module, "liger")
    if missing:     # the GPU machine's image has no Liger unless its wheel is carried (agent/studies/batch/README.md)
        pytest.skip(missing)
    chosen = build(spec.module, "liger")
    inputs = spec.make_inputs(dims, "bf16", 3, "cuda")
    out = chosen.fn(**chosen.prepare(inputs))
    ref = spec.reference(**inputs)
    tol = spec.tolerance("bf16")
    assert out.shape == ref.shape and out.dtype == ref.dtype
    rel_l2 = ((out.float() - ref.float()).norm() / ref.float().norm()).item()
    assert rel_l2 <= tol.rel_l2, rel_l2
