"""causal_conv1d operator folder: work model by hand, the causal formula (zero history), the seed under the
interpreter (tile edges, lengths shorter than W, strides), prefill-only call counts."""
import random
from pathlib import Path

import pytest
from op_helpers import call_failures, load_seed, tolerance_failures
import torch
import yaml

from benchmarks.registry import load_operator

ROOT = Path(__file__).resolve().parents[2]
MODELS = yaml.safe_load((ROOT / "configs" / "models.yaml").read_text())


@pytest.fixture(scope="module")
def spec():
    return load_operator("causal_conv1d")


@pytest.fixture(scope="module")
def seed(spec):
    return load_seed(spec.seed_path, "aka_seed_causal_conv1d_test")


def test_work_by_hand(spec):
    W, Q = spec.module.work({"B": 2, "D": 4096, "L": 2048, "W": 4}, "bf16")
    assert W == {"fp32": 9 * 2 * 4096 * 2048}
    # x + out: 2 * 2*4096*2048 * 2 B = 67,108,864; weight 4096*4*2 = 32,768; bias 4096*2 = 8,192
    assert Q == 67_108_864 + 32_768 + 8_192


def test_reference_is_causal_with_zero_history(spec):
    x = torch.tensor([[[1.0, 2.0, 3.0, 4.0, 5.0]]])
    w = torch.tensor([[1.0, 10.0, 100.0, 1000.0]])     # w[3] multiplies the current position
    b = torch.tensor([0.5])
    # l=0: 1000*1; l=1: 100*1 + 1000*2; l=2: 10 + 200 + 3000; l=3: 1 + 20 + 300 + 4000; l=4: 2 + 30 + 400 + 5000
    expect = torch.tensor([[[1000.5, 2100.5, 3210.5, 4321.5, 5432.5]]])
    torch.testing.assert_close(spec.reference(x, w, b), expect)


@pytest.mark.interpreter
@pytest.mark.parametrize("vec", [0, 1])
@pytest.mark.parametrize("B, D, L", [(1, 8, 256), (2, 5, 300), (3, 3, 2), (1, 9, 1), (2, 11, 72)])
def test_seed_matches_reference(spec, seed, B, D, L, vec, monkeypatch):
    # VEC_W4 takes L % 8 == 0 (L = 256, 72: several 8-position rows, a partial tile); the others fall back
    monkeypatch.setitem(seed.CONFIGS, "VEC_W4", vec)
    monkeypatch.setitem(seed.CONFIGS, "BLOCK_L", 64)
    inputs = spec.make_inputs({"B": B, "D": D, "L": L, "W": 4}, "fp32", seed=B + D + L)
    out = seed.causal_conv1d(**inputs)
    assert out.is_contiguous()
    assert tolerance_failures(out, spec.reference(**inputs), spec.tolerance("fp32")) == []


@pytest.mark.interpreter
def test_seed_reads_a_channel_last_view(spec, seed):
    inputs = spec.make_inputs({"B": 2, "D": 6, "L": 40, "W": 4}, "fp32", seed=3)
    x = inputs["x"].transpose(1, 2).contiguous().transpose(1, 2)     # [B, D, L] with stride (L*D, 1, D)
    assert x.stride() == (240, 1, 6)
    out = seed.causal_conv1d(x, inputs["weight"], inputs["bias"])
    assert tolerance_failures(out, spec.reference(x, inputs["weight"], inputs["bias"]), spec.tolerance("fp32")) == []


def test_reference_with_scale_is_the_reference_and_the_terms_magnitude(spec):
    x = torch.tensor([[[1.0, -2.0, 3.0, -4.0, 5.0]]])
    w = torch.tensor([[1.0, -10.0, 100.0, -1000.0]])
    b = torch.tensor([-0.5])
    out, scale = spec.module.reference_with_scale(x, w, b)
    assert torch.equal(out, spec.reference(x, w, b)) and scale.dtype == torch.float32
    # l=3: |1*1| + |-10*-2| + |100*3| + |-1000*-4| + |-0.5| = 4321.5; l=0: 1000 + 0.5
    assert scale.tolist() == [[[1000.5, 2100.5, 3210.5, 4321.5, 5432.5]]]
    # bf16 and fp16 keep the plain bound: their atol covers the fp32 sum's error
    for dt in (torch.bfloat16, torch.float16):
        out, scale = spec.module.reference_with_scale(x.to(dt), w.to(dt), b.to(dt))
        assert scale is None and torch.equal(out, spec.reference(x.to(dt), w.to(dt), b.to(dt)))


def _bias_then_taps_oldest_first(x, weight, bias):
    """A kernel that starts from the bias and adds the taps oldest first, in the inputs' dtype: in fp32 an honest
    kernel that sums in another order than the reference (fp64, rounded once); in bf16 one that accumulates in
    bf16, which the contract forbids."""
    W, L = weight.shape[1], x.shape[-1]
    padded = torch.nn.functional.pad(x, (W - 1, 0))
    acc = bias[None, :, None].expand_as(x).clone()
    for i in range(W):
        acc = acc + weight[None, :, i, None] * padded[..., i:i + L]
    return acc


def test_an_honest_fp32_sum_that_cancels_in_an_outlier_channel_passes(spec):
    # seed 95 at this shape: terms of an outlier channel cancel, and the reordered fp32 sum is off by more
    # than 1e-5 + 1e-5 * |ref| (what CI rejected an honest corpus kernel for); against the terms it is tiny
    dims = {"B": 2, "D": 8, "L": 256, "W": 4}
    inputs = spec.make_inputs(dims, "fp32", seed=95)
    out = _bias_then_taps_oldest_first(**inputs)
    assert tolerance_failures(out, spec.reference(**inputs), spec.tolerance("fp32"))
    assert call_failures(spec, _bias_then_taps_oldest_first, inputs, dims) == []


def test_accumulating_in_bf16_still_fails_where_terms_cancel(spec):
    # the contract asks fp32 accumulation; in bf16 the gate keeps the plain bound, which catches a kernel that
    # rounds every product and partial sum to bf16 (its error follows the terms' magnitudes)
    dims = {"B": 2, "D": 64, "L": 256, "W": 4}
    inputs = spec.make_inputs(dims, "bf16", seed=5)
    assert call_failures(spec, _bias_then_taps_oldest_first, inputs, dims, "bf16")


@pytest.mark.parametrize("dtype", ["fp32", "bf16"])
def test_a_dropped_or_shifted_tap_still_fails(spec, dtype):
    # fp32 against the element scale, bf16 against the plain bound
    dims = {"B": 2, "D": 16, "L": 64, "W": 4}
    inputs = spec.make_inputs(dims, dtype, seed=4)

    def oldest_tap_dropped(x, weight, bias):
        w = weight.clone()
        w[:, 0] = 0
        return spec.reference(x, w, bias)

    def taps_one_position_late(x, weight, bias):
        return torch.nn.functional.pad(spec.reference(x, weight, bias), (1, 0))[..., :x.shape[-1]].contiguous()

    for cheat in (oldest_tap_dropped, taps_one_position_late):
        assert call_failures(spec, cheat, inputs, dims, dtype), cheat.__name__


def test_history_from_another_sequence_fails(spec):
    inputs = spec.make_inputs({"B": 2, "D": 16, "L": 64, "W": 4}, "bf16", seed=1)
    x, w, b = inputs["x"], inputs["weight"], inputs["bias"]
    ref = spec.reference(x, w, b)
    flat = x.transpose(0, 1).reshape(1, 16, 128)                     # sequences packed end to end
    packed = spec.reference(flat, w, b).reshape(16, 2, 64).transpose(0, 1)
    assert tolerance_failures(packed.contiguous(), ref, spec.tolerance("bf16"))
    assert tolerance_failures(spec.module.baseline(x, w, b), ref, spec.tolerance("bf16")) == []


def test_holdout_dims(spec):
    hot = [s.dim for s in spec.shapes]
    for s in range(20):
        hold = spec.module.holdout_dims(random.Random(s), hot)
        assert any(d["L"] < d["W"] for d in hold)
        assert any(d["L"] > max(h["L"] for h in hot) for d in hold)
        assert any(d["D"] % 2 for d in hold) and all(d["W"] == 4 for d in hold)


def test_occurrences_prefill_only(spec):
    occ = spec.module.occurrences
    cfg = MODELS["qwen3-next-80b-a3b"]
    # conv channels 2*16*128 + 32*128 = 8192, / tp 2 = 4096; 36 Gated DeltaNet layers
    assert occ(cfg, 2, 1024, "prefill") == [({"B": 1, "D": 4096, "L": 1024, "W": 4}, 36)]
    assert occ(cfg, 2, 8192, "prefill") == [({"B": 4, "D": 4096, "L": 2048, "W": 4}, 36)]
    assert occ(cfg, 2, 64, "decode") == []
    assert occ(MODELS["llama-3.1-8b"], 1, 4096, "prefill") == []
    assert spec.module.PHASES == ("prefill",) and {s.phase for s in spec.shapes} == {"prefill"}


def test_vec_kernel_loads_x_as_16_byte_vectors_for_hopper(spec, seed):
    # The tile kernel issues a 2-byte load per tap and output (74 a thread at 8 x 256); VEC_W4 loads each row of
    # 8 positions and the 8 before it as 16-byte vectors, leaving 2-byte loads only for the weights and bias
    # (5 per row a thread)
    from hopper_compile import compile_for_hopper
    cfg = seed.CONFIGS
    assert cfg["VEC_W4"] == 1
    bf16 = {n: "*bf16" for n in ("x_ptr", "w_ptr", "b_ptr", "y_ptr")}
    aligned = list(bf16) + ["D", "L", "stride_xb", "stride_xd", "stride_yb", "stride_yd"]
    job = {"kernel": "_causal_conv1d_w4_vec_kernel", "types": bf16, "aligned": aligned,
           "constexprs": {"BLOCK_D": cfg["BLOCK_D"], "BLOCK_L": cfg["BLOCK_L"]}, "num_warps": cfg["num_warps"],
           "num_stages": 1}
    forms = compile_for_hopper(spec.seed_path, [job])[0]["load_forms"]
    rows = cfg["BLOCK_D"] * cfg["BLOCK_L"] // 8 // (32 * cfg["num_warps"])
    assert forms.get("ld.global.v4.b32", 0) >= 2 * rows, forms
    assert sum(n for f, n in forms.items() if f != "ld.global.v4.b32") <= 5 * rows, forms
