"""The PDL switch of the decode seeds (CONFIGS["PDL"]: programmatic dependent launch, sandbox/POLICY.md 7a): in
the Hopper build every such kernel waits for the kernel before it ahead of its first global read and lets the
next one start; on the CPU the switch changes nothing (the interpreter has no griddepcontrol); on a GPU the
outputs are bit for bit those without it (moe_align_block_size's, whose layout is free, by its invariants), and
the call still captures into a CUDA graph."""
from pathlib import Path

import hopper_compile
import pytest
from op_helpers import call_failures, load_seed
import torch

from benchmarks.registry import load_operator

BF16_PTRS = {"x_ptr": "*bf16", "w_ptr": "*bf16", "y_ptr": "*bf16", "out_ptr": "*bf16", "state_ptr": "*bf16",
             "b_ptr": "*bf16", "q_ptr": "*fp8e4nv", "s_ptr": "*fp32", "eps": "fp32"}
IDS = {"ids_ptr": "*i32", "counts_ptr": "*i32", "cursor_ptr": "*i32", "sorted_ptr": "*i32", "expert_ids_ptr": "*i32",
       "n_post_pad_ptr": "*i32"}

TOPK = {"x_ptr": "*fp32", "k_ptr": "*i32", "p_ptr": "*fp32", "y_ptr": "*fp32", "mx_ptr": "*fp32", "z_ptr": "*fp32",
        "cnt_in": "*i32", "cnt_out": "*i32", "h_in": "*i32", "h_out": "*i32", "acc_in": "*fp32", "acc_out": "*fp32",
        "st_in": "*i32", "st_out": "*i32", "tmx_ptr": "*fp32", "m_ptr": "*fp32", "a_ptr": "*i32", "l_ptr": "*i32",
        "h_ptr": "*i32", "dec_ptr": "*i32", "off_ptr": "*i32", "s_ptr": "*fp32", "bv_ptr": "*fp32", "bi_ptr": "*i32"}
BINS = dict(NB=128, SCALE=4.0)

MOE = {"hidden_ptr": "*bf16", "w1_ptr": "*bf16", "inter_ptr": "*bf16", "w2_ptr": "*bf16", "partial_ptr": "*bf16",
       "out_ptr": "*bf16", "topk_weights_ptr": "*fp32", "sorted_ids_ptr": "*i32", "block_expert_ptr": "*i32",
       "num_padded_ptr": "*i32", "topk_ids_ptr": "*i32", "chunk_counts_ptr": "*i32", "chunk_base_ptr": "*i32",
       "cursor_ptr": "*i32"}
MOE_GEMM = dict(TOPK=8, BLOCK_M=16, BLOCK_N=64, BLOCK_K=128, GROUP_M=16, EVEN_K=True, DOT_PRECISION="tf32", W_TMA=0)
MOE_LAYOUT = dict(BLOCK_M=16, PAD_TILE=16, MAP_TILE=32)

NORM = {**BF16_PTRS, "z_ptr": "*bf16", "r_ptr": "*bf16", "rout_ptr": "*bf16", "wq_ptr": "*bf16", "wk_ptr": "*bf16", "qo_ptr": "*bf16",
        "ko_ptr": "*bf16", "q_ptr": "*bf16", "k_ptr": "*bf16", "pos_ptr": "*i64", "cache_ptr": "*fp32",
        "key_ptr": "*bf16", "value_ptr": "*bf16", "kc_ptr": "*bf16", "vc_ptr": "*bf16", "slot_ptr": "*i64",
        "id_ptr": "*i32", "logits_ptr": "*bf16"}
KW_PTQ = dict(stride_x_col=1, ROWS=1, BLOCK_H=2048, NUM_CHUNKS=1, ROUND_IN_FP32=False)
KW_L2 = dict(stride_x_col=1, ROWS=1, BLOCK_H=2048, NUM_CHUNKS=1)
KW_GATED = dict(stride_x_col=1, stride_z_col=1, ROWS=1, BLOCK_H=1024, NUM_CHUNKS=1, FAST=0, X_EVICT="evict_first")
KW_SUM = dict(stride_wk=1, ROWS=1, BLOCK_H=1024)
GEMM = {"a_ptr": "*bf16", "b_ptr": "*bf16", "c_ptr": "*bf16", "ws_ptr": "*fp32", "flag_ptr": "*i32"}

# softmax's pass-2 switches as the seed sets them (changed by `aka optimize`'s find in session 32), so the build
# checked is the one the seed launches
_SOFTMAX = load_seed(load_operator("softmax").seed_path, "pdl_softmax_configs").CONFIGS
SOFTMAX_PASS2 = dict(REVERSE=_SOFTMAX["REVERSE"], STORE_CS=_SOFTMAX["STORE_CS"])

# (operator, kernel, constexprs, pointer types, warps or (warps, stages)): each kernel a PDL seed launches, at a decode configuration
KERNELS = [
    ("rms_norm", "_rms_norm_kernel", dict(stride_x_col=1, stride_w=1, ROWS=1, BLOCK_H=512, NUM_CHUNKS=1, PERSISTENT=0,
                                          LOOP_STAGES=1, EVEN=1), BF16_PTRS, 1),
    ("silu_and_mul", "_silu_and_mul_flat_kernel", dict(I=3584, BLOCK=1024, EVEN=1, EVICT=""), BF16_PTRS, 4),
    ("silu_and_mul", "_silu_and_mul_row_kernel", dict(I=256, BLOCK_I=256, WIDE=False), BF16_PTRS, 2),
    ("silu_and_mul", "_silu_and_mul_kernel", dict(stride_x_col=1, FLAT=0, BLOCK=1, ROWS=4, BLOCK_I=512), BF16_PTRS, 4),
    ("rms_norm_quant_fp8", "_rms_norm_quant_fp8_kernel", dict(stride_x_col=1, stride_w=1, ROWS=1, BLOCK_H=8192,
                                                              NUM_CHUNKS=1, ROUND_IN_FP32=False, ONE_REDUCE=1, EVEN=1),
     BF16_PTRS, 8),
    ("causal_conv1d_update", "_causal_conv1d_update_packed_kernel", dict(SILU=True, BLOCK_G=128), BF16_PTRS, 4),
    ("causal_conv1d_update", "_causal_conv1d_update_w4_kernel", dict(SILU=True, BLOCK_D=128), BF16_PTRS, 4),
    ("causal_conv1d_update", "_causal_conv1d_update_kernel", dict(W=4, SILU=True, BLOCK_D=256, BLOCK_W=4),
     BF16_PTRS, 4),
    ("softmax", "_softmax_partials_kernel", dict(BLOCK_V=4096, EVICT_LAST=0, GROUP=8, STAGES=1),
     {"x_ptr": "*bf16", "part_ptr": "*fp32"}, 8),
    ("softmax", "_softmax_normalize_kernel", dict(BLOCK_V=4096, BLOCK_S=8, STAGES=1, **SOFTMAX_PASS2),
     {"x_ptr": "*bf16", "part_ptr": "*fp32", "y_ptr": "*fp32"}, 8),
    *[("softmax", "_softmax_one_read_kernel", dict(BLOCK=8192, BLOCK_S=32, POLL_LOADS=poll),
       {"x_ptr": "*bf16", "ws_ptr": "*i64", "y_ptr": "*fp32"}, 8) for poll in (0, 1)],
    ("top_k_top_p_filter", "_top_k_top_p_filter_kernel", dict(BLOCK_V=1024, WAYS=16, PASSES=8), TOPK, 8),
    ("top_k_top_p_filter", "_split_topk_kernel", dict(BLOCK_V=512, WAYS=4, RED=32, FIRST=True, LOCAL_ACC=1), TOPK, 4),
    ("top_k_top_p_filter", "_split_topk_radix_kernel", dict(BLOCK_V=512, BINS=256, RED=32, SHIFT=16, FIRST=False),
     TOPK, 4),
    ("top_k_top_p_filter", "_split_topp_kernel", dict(BLOCK_V=512, WAYS=4, RED=32, FIRST=False, LOCAL_ACC=1), TOPK, 4),
    ("top_k_top_p_filter", "_split_write_kernel", dict(BLOCK_V=512, WAYS=4, RED=32), TOPK, 4),
    ("top_k_top_p_filter", "_bins_stats_kernel", dict(BLOCK_V=1024, PREFETCH=1, **BINS), TOPK, 4),
    ("top_k_top_p_filter", "_bins_decide_kernel", dict(RED=32, TIGHT=1, **BINS), TOPK, 8),
    ("top_k_top_p_filter", "_bins_write_kernel", dict(BLOCK_V=1024, PREFETCH=1, **BINS), TOPK, 4),
    # the search on 4 warps (the variant bins_search_w4): on the seed's 8, with V not known to be a multiple of 16,
    # ptxas keeps a 16-byte stack; V of every hot shape is, and there it has none (test_op_top_k_top_p_filter.py)
    ("top_k_top_p_filter", "_bins_search_kernel", dict(BLOCK=1024, WAYS=16, RED=32, SORT_MAX=4096, **BINS), TOPK, 4),
    ("fused_moe", "_fused_moe_align_small_kernel", dict(TOPK=8, CHUNK=512, NUM_BINS=128, ALIGN_RANK=1, **MOE_LAYOUT),
     MOE, 4),
    ("fused_moe", "_fused_moe_count_kernel", dict(TOPK=8, CHUNK=1024, NUM_BINS=128), MOE, 4),
    ("fused_moe", "_fused_moe_offsets_kernel", dict(CHUNKS_P2=2, NUM_BINS=128, **MOE_LAYOUT), MOE, 16),
    ("fused_moe", "_fused_moe_scatter_kernel", dict(TOPK=8, CHUNK=1024, NUM_BINS=128), MOE, 4),
    ("fused_moe", "_fused_moe_place_kernel", dict(TOPK=8, CHUNK=256, NUM_BINS=128, TABLE_ROWS=64, **MOE_LAYOUT), MOE,
     16),
    ("fused_moe", "_fused_moe_gemm1_kernel", dict(stride_hh=1, stride_wk=1, stride_ii=1, w1_desc=None, **MOE_GEMM),
     MOE, 4),
    ("fused_moe", "_fused_moe_gemm2_kernel", dict(stride_ii=1, stride_wk=1, stride_ph=1, stride_rj=1, w2_desc=None,
                                                  **MOE_GEMM), MOE, 4),
    ("fused_moe", "_fused_moe_reduce_kernel", dict(stride_ph=1, stride_oh=1, TOPK=8, BLOCK_H=1024), MOE, 4),
    ("gemm", "_gemm_kernel", dict(stride_ak=1, stride_bk=1, stride_cn=1, BLOCK_M=64, BLOCK_N=64, BLOCK_K=128, GROUP_M=1,
                                  EVEN_K=True, DOT_PRECISION="tf32", SPLIT_K=1, TMA=0, PERSISTENT=0, WARP_SPECIALIZE=0,
                                  FLATTEN=0, a_desc=None, b_desc=None, c_desc=None), GEMM, (4, 4)),
    ("gemm", "_gemm_stream_k_kernel", dict(stride_ak=1, stride_bk=1, stride_cn=1, BLOCK_M=64, BLOCK_N=64, BLOCK_K=128,
                                           EVEN_K=True, DOT_PRECISION="tf32", TMA=0, FIX_ROWS=32, a_desc=None,
                                           b_desc=None, c_desc=None), GEMM, (4, 4)),
    ("gemm", "_gemm_splitk_reduce_kernel", dict(SPLIT_K=4, BLOCK=1024), GEMM, 4),
    ("fused_add_rms_norm", "_fused_add_rms_norm_kernel", dict(ROWS=1, BLOCK_H=8192, NUM_CHUNKS=1, ROUND_NORMED=0,
                                                              PRELOAD_W=1), NORM, 8),
    ("layer_norm", "_layer_norm_kernel", dict(ROWS=1, BLOCK_H=4096, NUM_CHUNKS=1, PRELOAD_WB=0, RSQRT=1, CHAN=0,
                                              SHIFT=1, EVEN=1), NORM, 16),
    ("qk_rms_norm", "_qk_rms_norm_kernel", dict(BLOCK_H=8, BLOCK_D=128, PRELOAD_W=0), NORM, 4),
    ("qk_rms_norm", "_qk_rms_norm_fused_kernel", dict(TOKENS=4, HEADS_Q=8, HEADS_K=1, BLOCK_D=128), NORM, 8),
    ("rotary_embedding", "_rotary_embedding_kernel", dict(HALF=64, BLOCK_HALF=64, BLOCK_H=8, IS_NEOX=True), NORM, 4),
    ("rotary_embedding", "_rotary_embedding_fused_kernel", dict(HALF=64, BLOCK_HALF=64, TOKENS=1, HEADS_Q=8, HEADS_K=1,
                                                                IS_NEOX=True, X_EVICT="evict_first"), NORM, 4),
    ("reshape_and_cache", "_reshape_and_cache_kernel", dict(BLOCK=256, TOKENS=2, BS_CONST=16), NORM, 2),
    ("per_token_group_quant_fp8", "_per_token_group_quant_fp8_kernel", dict(GROUP=128, BLOCK_G=16, ROUND_IN_FP32=False,
                                                                            INDEX32=True),
     NORM, 4),
    ("moe_topk_softmax", "_moe_topk_softmax_kernel", dict(ROWS=1, BLOCK_E=128, BLOCK_K=8, RENORMALIZE=True, SELECT=3,
                                                          KEY32=True), NORM, 1),
    ("per_token_quant_fp8", "_per_token_quant_fp8_kernel", KW_PTQ, NORM, 8),
    ("l2_norm", "_l2_norm_kernel", KW_L2, NORM, 8),
    ("gated_rms_norm", "_gated_rms_norm_kernel", KW_GATED, NORM, 4),
    ("moe_sum_reduce", "_moe_sum_reduce_kernel", KW_SUM, NORM, 4),
    ("moe_align_block_size", "_moe_align_block_size_count_kernel", dict(K=8, CHUNK=256, NUM_BINS=128), IDS, 4),
    ("moe_align_block_size", "_moe_align_block_size_kernel",
     dict(K=8, CHUNK=256, NUM_BINS=128, BLOCK=32, ONE_CHUNK=False, COUNT_ROWS=64, EXPERTS=16, EXPERT_TILE=16,
          MAP_TILE=4, RANK=1, MATCH_TILE=32, DIRECT=False, FILL=False, FILL_TILE=1024), IDS, 4),
]
OPS = sorted({op for op, *_ in KERNELS})
# integer arguments built as multiples of 16 (as the operator tests build them; names a kernel lacks are ignored):
# without the hint fused_moe's GEMM tiles load element by element and spill
ALIGNED_INTS = ["H", "I", "stride_ht", "stride_we", "stride_wn", "stride_im", "stride_pp", "stride_x_row",
                "stride_y_row", "stride_q_row", "stride_x", "stride_y", "K", "stride_am", "stride_bn", "stride_cm"]


@pytest.mark.slow
@pytest.mark.parametrize("op", OPS)
def test_every_pdl_kernel_waits_before_its_first_read_in_the_hopper_build(op):
    spec = load_operator(op)
    rows = [k for k in KERNELS if k[0] == op]
    compiles = [{"kernel": kernel, "types": types, "constexprs": {**const, "USE_PDL": pdl},
                 "aligned": list(types) + [n for n in ALIGNED_INTS if n not in const],
                 "num_warps": warps if isinstance(warps, int) else warps[0],
                 "num_stages": 1 if isinstance(warps, int) else warps[1]}
                for _, kernel, const, types, warps in rows for pdl in (True, False)]
    results = hopper_compile.compile_for_hopper(spec.seed_path, compiles)
    assert len(results) == len(compiles)
    for c, r in zip(compiles, results):
        name = f"{c['kernel']} USE_PDL={c['constexprs']['USE_PDL']}"
        assert "STACK:0" in r["usage"] and "LOCAL:0" in r["usage"], f"{name}: {r['usage']}"
        if c["constexprs"]["USE_PDL"]:
            assert r["pdl_wait_before_reads"] and r["pdl_trigger"], f"{name}: {r}"
        else:
            assert not r["pdl_wait"] and not r["pdl_trigger"], f"{name}: griddepcontrol without PDL"


def test_every_kernel_a_pdl_seed_launches_is_built_here():
    """A new kernel in one of these seeds gets its Hopper build above (or the PDL claim covers less than it says)."""
    import ast
    for op in OPS:
        tree = ast.parse(Path(load_operator(op).seed_path).read_text())
        gated = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)
                 and any(a.arg == "USE_PDL" for a in n.args.args)}
        assert gated == {k for o, k, *_ in KERNELS if o == op}, op


# PDL's defaults where a GPU timed a gain (H100s): seeds that launch several short kernels a call
# (moe_align_block_size: where it launches two; top_k_top_p_filter: below 64 rows; softmax: x of at most 4 MB;
# 2026-12-05), and fused_moe's three to six launches (0.985-0.989x at E = 128 decode in 5 of 5 rounds, 2026-12-06).
# Elsewhere it stays off: single-launch seeds were within noise with it.
PDL_ON_BY_DEFAULT = {"moe_align_block_size": 1, "top_k_top_p_filter": 1, "softmax": 1, "fused_moe": 1}


@pytest.mark.interpreter
@pytest.mark.parametrize("op", OPS)
def test_the_switch_changes_nothing_on_the_cpu(op):
    spec = load_operator(op)
    shape = max((s for s in spec.shapes if s.hot), key=lambda s: s.weight)
    dims = spec.interpreter_dims(shape.dim)
    seed = load_seed(spec.seed_path, f"pdl_cpu_{op}")
    want = PDL_ON_BY_DEFAULT.get(op, 0)
    assert seed.CONFIGS["PDL"] == want, f"PDL's default is {want} until a GPU times it otherwise"
    if want:
        return      # on by default: test_operators.py's interpreter test already calls the seed with it (top_k: 25 s)
    inputs = spec.make_inputs(dims, "fp32", seed=3)
    seed.CONFIGS["PDL"] = 1
    assert call_failures(spec, lambda **a: seed.__dict__[op](**a), inputs, dims) == []


GPU_DIMS = {"rms_norm": [{"T": 1, "H": 512}, {"T": 256, "H": 1536}, {"T": 4096, "H": 8192}],
            "silu_and_mul": [{"T": 16, "I": 256}, {"T": 64, "I": 3584}, {"T": 4096, "I": 3584}],
            "rms_norm_quant_fp8": [{"T": 16, "H": 8192}, {"T": 4096, "H": 8192}],
            "softmax": [{"T": 64, "V": 151936}, {"T": 256, "V": 129280}, {"T": 2, "V": 1000}],
            "top_k_top_p_filter": [{"B": 2, "V": 151936}, {"B": 64, "V": 129280}, {"B": 3, "V": 2000}],
            "gemm": [{"M": 64, "N": 7168, "K": 8192}, {"M": 1, "N": 1280, "K": 8192}, {"M": 256, "N": 7168, "K": 8192}],
            "fused_add_rms_norm": [{"T": 256, "H": 7168}, {"T": 8192, "H": 8192}],
            "per_token_quant_fp8": [{"T": 64, "H": 2048}, {"T": 4096, "H": 7168}],
            "l2_norm": [{"T": 128, "H": 128}, {"T": 2048, "H": 128}],
            "gated_rms_norm": [{"T": 256, "H": 128}, {"T": 4096, "H": 128}],
            "moe_sum_reduce": [{"T": 64, "k": 8, "H": 7168}, {"T": 4096, "k": 8, "H": 7168}],
            "layer_norm": [{"T": 16, "H": 4096}, {"T": 4096, "H": 4096}],
            "qk_rms_norm": [{"T": 64, "Hq": 8, "Hk": 1, "D": 128}, {"T": 8192, "Hq": 8, "Hk": 1, "D": 128}],
            "rotary_embedding": [{"T": 64, "Hq": 8, "Hk": 1, "D": 128}, {"T": 8192, "Hq": 8, "Hk": 1, "D": 128}],
            "reshape_and_cache": [{"T": 64, "S": 64, "Hk": 1, "D": 128, "BS": 16}],
            "per_token_group_quant_fp8": [{"T": 64, "H": 7168}, {"T": 4096, "H": 7168}],
            "moe_topk_softmax": [{"T": 64, "E": 128, "k": 8}, {"T": 1024, "E": 128, "k": 8}],
            "fused_moe": [{"T": 16, "H": 4096, "I": 192, "E": 128, "k": 8}, {"T": 256, "H": 7168, "I": 256, "E": 256, "k": 8},
                          {"T": 4097, "H": 2048, "I": 768, "E": 128, "k": 8}],
            "causal_conv1d_update": [{"B": 16, "D": 4096, "W": 4}, {"B": 256, "D": 4096, "W": 4},
                                     {"B": 3, "D": 100, "W": 3}],
            "moe_align_block_size": [{"T": 16, "k": 8, "E": 128, "block": 16}, {"T": 256, "k": 8, "E": 128, "block": 32},
                                     {"T": 4096, "k": 8, "E": 256, "block": 64}]}


# moe_align_block_size places an expert's pairs in any order and leaves the entries past n_post_pad unwritten
# (its contract): judged by its invariants (call_failures) only, not bit for bit
FREE_LAYOUT = {"moe_align_block_size"}


def _bits(t):
    """A tensor's bytes, for a bit-for-bit comparison of any dtype (fp8 included, NaN equal to itself)."""
    return t.contiguous().view(torch.uint8)


def _pdl_set(seed, on: bool):
    """PDL off everywhere, or on for every call (the highest PDL its SEARCH_SPACE lists: 2 is every call where a
    seed's 1 holds it to some calls), in CONFIGS and in any table of overrides that sets PDL (MANY_ROWS)."""
    value = max(seed.SEARCH_SPACE.get("PDL", [1])) if on else 0
    seed.CONFIGS["PDL"] = value
    for table in seed.CONFIGS.values():
        if isinstance(table, dict) and "PDL" in table:
            table["PDL"] = value
    return seed


@pytest.mark.gpu
@pytest.mark.parametrize("op, dims", [(op, d) for op in OPS for d in GPU_DIMS[op]],
                         ids=lambda v: v if isinstance(v, str) else "-".join(f"{k}{x}" for k, x in v.items()))
def test_pdl_gives_the_same_bits_and_captures_into_a_graph_on_the_gpu(op, dims):
    from sandbox.timing import time_call
    spec = load_operator(op)
    inputs = spec.make_inputs(dims, "bf16", seed=6, device="cuda")
    plain = _pdl_set(load_seed(spec.seed_path, f"pdl_off_{op}"), on=False)
    pdl = _pdl_set(load_seed(spec.seed_path, f"pdl_on_{op}"), on=True)
    assert pdl._pdl(next(v for v in inputs.values() if torch.is_tensor(v)))
    clones = {k: (v.clone() if torch.is_tensor(v) else v) for k, v in inputs.items()}
    want, got = plain.__dict__[op](**inputs), pdl.__dict__[op](**clones)
    if op not in FREE_LAYOUT:
        outs = [(a, b) for a, b in zip(want if isinstance(want, tuple) else (want,),
                                       got if isinstance(got, tuple) else (got,)) if torch.is_tensor(a)]
        outs += [(inputs[k], clones[k]) for k in spec.mutates]     # in-place operators: the state after one call
        for a, b in outs:
            assert torch.equal(_bits(a), _bits(b))
    assert call_failures(spec, lambda **a: pdl.__dict__[op](**a), spec.make_inputs(dims, "bf16", seed=7, device="cuda"),
                         dims, "bf16") == []
    sets = [spec.make_inputs(dims, "bf16", seed=8 + i, device="cuda") for i in range(2)]
    assert time_call(lambda d: pdl.__dict__[op](**d), sets, reps=5, warmup=2).mode == "graph"
