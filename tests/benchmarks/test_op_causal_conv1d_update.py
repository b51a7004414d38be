"""causal_conv1d_update operator folder: work model by hand, the update by hand, agreement with the
prefill operator (prefill then token-by-token updates = prefill of the longer sequence), the seed under
the interpreter (output and state, silu on and off), an unshifted state failing, decode-only call counts."""
import random
from pathlib import Path

import pytest
from op_helpers import call_failures, load_seed, assert_seed_accepted, tolerance_failures
import torch
import yaml

from benchmarks.registry import load_operator

ROOT = Path(__file__).resolve().parents[2]
MODELS = yaml.safe_load((ROOT / "configs" / "models.yaml").read_text())


@pytest.fixture(scope="module")
def spec():
    return load_operator("causal_conv1d_update")


@pytest.fixture(scope="module")
def seed(spec):
    return load_seed(spec.seed_path, "aka_seed_causal_conv1d_update_test")


def _clone(inputs):
    return {k: v.clone() if isinstance(v, torch.Tensor) else v for k, v in inputs.items()}


def test_work_by_hand(spec):
    W, Q = spec.module.work({"B": 64, "D": 4096, "W": 4}, "bf16")
    assert W == {"fp32": 9 * 64 * 4096}
    # x + out: 2 * 64*4096 * 2 B = 1,048,576; state read + written: 2 * 64*4096*3 * 2 = 3,145,728;
    # weight 4096*4*2 = 32,768; bias 4096*2 = 8,192
    assert Q == 1_048_576 + 3_145_728 + 32_768 + 8_192
    assert spec.module.MUTATES == ("conv_state",) and "conv_state" in spec.arg_names


def test_update_by_hand(spec):
    state = torch.tensor([[[1.0, 2.0, 3.0]]])            # oldest first
    x = torch.tensor([[4.0]])
    w = torch.tensor([[1.0, 10.0, 100.0, 1000.0]])     # w[3] multiplies the new token
    out = spec.reference(x, state, w, torch.tensor([0.5]), False)
    assert out.tolist() == [[4321.5]]
    assert state.tolist() == [[[2.0, 3.0, 4.0]]]
    out = spec.reference(torch.tensor([[-1.0]]), torch.zeros(1, 1, 3), torch.tensor([[0.0, 0.0, 0.0, 2.0]]),
                         torch.tensor([0.0]), True)
    torch.testing.assert_close(out, torch.nn.functional.silu(torch.tensor([[-2.0]])))


@pytest.mark.parametrize("silu", [False, True])
def test_reference_with_scale_updates_the_state_and_gives_the_terms_magnitude(spec, silu):
    state = torch.tensor([[[1.0, -2.0, 3.0]]])
    w = torch.tensor([[1.0, 10.0, -100.0, 1000.0]])
    out, scale = spec.module.reference_with_scale(torch.tensor([[-4.0]]), state, w, torch.tensor([0.5]), silu)
    # 1 - 20 - 300 - 4000 + 0.5; magnitudes 1 + 20 + 300 + 4000 + 0.5
    assert out.tolist() == [[-0.0 if silu else -4318.5]] and scale.tolist() == [[4321.5]]
    assert state.tolist() == [[[-2.0, 3.0, -4.0]]]
    bf16 = torch.zeros(1, 1, 3, dtype=torch.bfloat16)
    _, scale = spec.module.reference_with_scale(torch.ones(1, 1, dtype=torch.bfloat16), bf16, w.bfloat16(),
                                                torch.zeros(1, dtype=torch.bfloat16), silu)
    assert scale is None                                  # bf16 keeps the plain bound


@pytest.mark.parametrize("dtype", ["fp32", "bf16"])
def test_a_dropped_tap_still_fails(spec, dtype):
    # fp32 against the element scale, bf16 against the plain bound
    dims = {"B": 4, "D": 64, "W": 4}
    inputs = spec.make_inputs(dims, dtype, seed=3)

    def oldest_tap_dropped(x, conv_state, weight, bias, silu):
        w = weight.clone()
        w[:, 0] = 0
        return spec.reference(x, conv_state, w, bias, silu)

    assert call_failures(spec, oldest_tap_dropped, inputs, dims, dtype)
    assert call_failures(spec, spec.reference, inputs, dims, dtype) == []


def test_prefill_then_updates_is_the_longer_prefill(spec):
    prefill = load_operator("causal_conv1d")
    full = prefill.make_inputs({"B": 2, "D": 8, "L": 12, "W": 4}, "fp32", seed=1)
    x, w, b = full["x"], full["weight"], full["bias"]
    want = prefill.reference(x, w, b)
    L0 = 5
    state = x[:, :, L0 - 3:L0].contiguous()              # the prefill's last W - 1 inputs
    for t in range(L0, 12):
        out = spec.reference(x[:, :, t].contiguous(), state, w, b, False)
        torch.testing.assert_close(out, want[:, :, t], rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(state, x[:, :, -3:])


@pytest.mark.interpreter
@pytest.mark.parametrize("B, D, seed_", [(1, 256, 0), (3, 37, 1), (20, 300, 2), (65, 130, 3)])
def test_seed_matches_reference(spec, seed, B, D, seed_):
    inputs = spec.make_inputs({"B": B, "D": D, "W": 4}, "fp32", seed=seed_)
    assert inputs["silu"] == (seed_ % 2 == 0)
    ref_in = _clone(inputs)
    ref = spec.reference(**ref_in)
    out = seed.causal_conv1d_update(**inputs)
    assert out.is_contiguous() and out.shape == (B, D)
    assert tolerance_failures(out, ref, spec.tolerance("fp32")) == []
    assert torch.equal(inputs["conv_state"], ref_in["conv_state"]), "the state shifts by copies: exact"
    for k in ("x", "weight", "bias"):
        assert torch.equal(inputs[k], ref_in[k])


@pytest.mark.interpreter
@pytest.mark.parametrize("W", [2, 3, 5])
def test_seed_matches_reference_at_other_widths(spec, seed, W):
    """The window tile is next_pow2(W) wide with masked columns: widths other than 4 (3 and 5 are not powers of
    two) shift the state and sum the taps exactly as the reference."""
    inputs = spec.make_inputs({"B": 3, "D": 70, "W": W}, "fp32", seed=W)
    ref_in = _clone(inputs)
    ref = spec.reference(**ref_in)
    out = seed.causal_conv1d_update(**inputs)
    assert tolerance_failures(out, ref, spec.tolerance("fp32")) == []
    assert torch.equal(inputs["conv_state"], ref_in["conv_state"])


@pytest.mark.interpreter
@pytest.mark.parametrize("taps_1d", [0, 1])
def test_both_kernels_match_the_reference(spec, seed, monkeypatch, taps_1d):
    """TAPS_1D=1 (W = 4: the taps as 1-D loads) and 0 (the window tile): the same output and the same shifted
    state, bf16 included (copies are exact in any dtype), silu on and off; W = 5 takes the tile either way."""
    buckets = [(bound, dict(cfg, TAPS_1D=taps_1d)) for bound, cfg in seed.CONFIGS["buckets"]]
    monkeypatch.setitem(seed.CONFIGS, "buckets", buckets)
    for dims, dtype, seed_ in (({"B": 5, "D": 300, "W": 4}, "fp32", 0), ({"B": 2, "D": 130, "W": 4}, "fp32", 1),
                               ({"B": 3, "D": 64, "W": 4}, "bf16", 2), ({"B": 2, "D": 40, "W": 5}, "fp32", 3)):
        inputs = spec.make_inputs(dims, dtype, seed=seed_)
        ref_in = _clone(inputs)
        ref = spec.reference(**ref_in)
        out = seed.causal_conv1d_update(**inputs)
        if dtype == "fp32":
            assert tolerance_failures(out, ref, spec.tolerance(dtype)) == []
        assert torch.equal(inputs["conv_state"], ref_in["conv_state"]), (dims, dtype)


@pytest.mark.interpreter
@pytest.mark.parametrize("packed", [0, 1])
@pytest.mark.parametrize("dims, dtype, seed_", [({"B": 3, "D": 64, "W": 4}, "fp16", 0),
                                                ({"B": 2, "D": 520, "W": 4}, "fp16", 1),
                                                ({"B": 5, "D": 36, "W": 4}, "bf16", 2),
                                                ({"B": 2, "D": 38, "W": 4}, "fp16", 3)])
def test_the_packed_kernel_matches_the_reference_and_shifts_the_state_exactly(spec, seed, monkeypatch, packed,
                                                                              dims, dtype, seed_):
    """PACKED=1 moves four channels a lane as 64-bit words: the same output and the bit-exact shifted state as
    the element-wise kernels, fp16 and bf16, with a bucket's tile smaller and larger than D (D = 38 is not a
    multiple of 4: the element-wise kernel takes it)."""
    buckets = [(bound, dict(cfg, PACKED=packed, PACKED_BLOCK_D=64)) for bound, cfg in seed.CONFIGS["buckets"]]
    monkeypatch.setitem(seed.CONFIGS, "buckets", buckets)
    inputs = spec.make_inputs(dims, dtype, seed=seed_)
    y = torch.empty_like(inputs["x"])
    assert seed._packs(inputs["x"], inputs["conv_state"], inputs["weight"], inputs["bias"], y) == (dims["D"] % 4 == 0)
    ref_in = _clone(inputs)
    ref = spec.reference(**ref_in)
    out = seed.causal_conv1d_update(**inputs)
    assert tolerance_failures(out, ref, spec.tolerance(dtype)) == []
    if dtype == "fp16":        # fp16 arithmetic is exact enough under the interpreter (bf16's is not)
        assert (out.float() - ref.float()).abs().max().item() <= 2e-3
    assert torch.equal(inputs["conv_state"], ref_in["conv_state"]), "the state shifts by copies: exact"
    for k in ("x", "weight", "bias"):
        assert torch.equal(inputs[k], ref_in[k])


def test_packing_needs_one_2_byte_dtype_contiguous_and_aligned(spec, seed):
    inputs = spec.make_inputs({"B": 2, "D": 64, "W": 4}, "bf16", seed=0)
    x, state, w, b = inputs["x"], inputs["conv_state"], inputs["weight"], inputs["bias"]
    assert seed._packs(x, state, w, b, torch.empty_like(x))
    assert not seed._packs(x.float(), state.float(), w.float(), b.float(), torch.empty_like(x.float()))
    assert not seed._packs(x, state.half(), w, b, torch.empty_like(x))
    shifted = torch.empty(x.numel() + 1, dtype=x.dtype)[1:].view(x.shape)       # contiguous, 2 bytes off 8
    assert shifted.is_contiguous() and not seed._packs(shifted, state, w, b, torch.empty_like(x))
    assert not seed._packs(x, state.transpose(0, 1).contiguous().transpose(0, 1), w, b, torch.empty_like(x))


def test_seed_issues_every_load_before_its_first_store_on_hopper(spec, seed):
    """The state update is in place. Walked tap by tap (load tap i, store it at i - 1, load tap i + 1), each tap's
    load came after the previous store in the sm_90 PTX and waited for its DRAM round trip: three dependent
    round trips a program on a kernel whose whole time is latency. Every bucket's config, all three kernels (the
    window tile, TAPS_1D's and PACKED's), no spills either."""
    from hopper_compile import compile_for_hopper
    ptrs = ("x_ptr", "state_ptr", "w_ptr", "b_ptr", "y_ptr")
    types = {p: "*bf16" for p in ptrs}
    compiles = [{"kernel": kernel, "types": types, "aligned": list(ptrs) + ["D"],
                 "constexprs": dict(stride_xd=1, stride_si=1, stride_wi=1, W=4, SILU=True,
                                    BLOCK_D=cfg["BLOCK_D"], BLOCK_W=4),
                 "num_warps": cfg["num_warps"], "num_stages": 1} for _, cfg in seed.CONFIGS["buckets"]
                for kernel in ("_causal_conv1d_update_kernel", "_causal_conv1d_update_w4_kernel")]
    compiles += [{"kernel": "_causal_conv1d_update_packed_kernel", "types": types, "aligned": list(ptrs) + ["D"],
                  "constexprs": dict(SILU=True, BLOCK_G=cfg["PACKED_BLOCK_D"] // 4),
                  "num_warps": cfg["packed_num_warps"], "num_stages": 1} for _, cfg in seed.CONFIGS["buckets"]]
    for c, r in zip(compiles, compile_for_hopper(spec.seed_path, compiles)):
        assert "STACK:0" in r["usage"] and "LOCAL:0" in r["usage"], f"{c['constexprs']} spills: {r['usage']}"
        assert r["loads_before_stores"], f"{c['constexprs']}: a global load after a global store"


def test_an_unshifted_or_misplaced_state_fails(spec):
    inputs = spec.make_inputs({"B": 4, "D": 64, "W": 4}, "bf16", seed=2)
    ref_in = _clone(inputs)
    spec.reference(**ref_in)
    stale = inputs["conv_state"].clone()
    stale[:, :, -1] = inputs["x"]                         # x written, the rest not shifted
    assert tolerance_failures(stale, ref_in["conv_state"], spec.tolerance("bf16"))
    assert tolerance_failures(ref_in["conv_state"].roll(1, 0), ref_in["conv_state"], spec.tolerance("bf16"))
    base_in = _clone(inputs)
    base = spec.module.baseline(**base_in)
    assert tolerance_failures(base, spec.reference(**_clone(inputs)), spec.tolerance("bf16")) == []
    assert torch.equal(base_in["conv_state"], ref_in["conv_state"])


def test_holdout_dims(spec):
    hot = [s.dim for s in spec.shapes]
    for s in range(20):
        hold = spec.module.holdout_dims(random.Random(s), hot)
        assert any(d["B"] > max(h["B"] for h in hot) for d in hold)
        assert any(d["D"] % 2 for d in hold) and all(d["W"] == 4 for d in hold)


def test_occurrences_decode_only(spec):
    occ = spec.module.occurrences
    cfg = MODELS["qwen3-next-80b-a3b"]
    # conv channels 2*16*128 + 32*128 = 8192, / tp 2 = 4096; 36 Gated DeltaNet layers; one token per sequence
    assert occ(cfg, 2, 64, "decode") == [({"B": 64, "D": 4096, "W": 4}, 36)]
    assert occ(cfg, 2, 4096, "prefill") == []
    assert occ(MODELS["llama-3.1-8b"], 1, 64, "decode") == []
    assert spec.module.PHASES == ("decode",) and {s.phase for s in spec.shapes} == {"decode"}
    assert "causal_conv1d_update" in load_operator("causal_conv1d").description



@pytest.mark.interpreter
def test_seed_is_accepted_by_the_sandbox(spec):
    assert_seed_accepted(spec)


@pytest.mark.gpu
def test_seed_is_accepted_and_timed_on_the_gpu(spec):
    assert_seed_accepted(spec, gpu=True)
