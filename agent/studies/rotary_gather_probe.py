"""Is rotary_embedding's decode gap to Liger the contract's cos/sin gather? Time the seed beside the same kernel
fed rows gathered before the call, and beside Liger, in one process.

    python -m agent.studies.rotary_gather_probe --out OUT.json [--max-t 256] [--rounds 9] [--dry-run]

The operator's contract (vLLM's) hands the kernel positions[T] and the whole cos_sin_cache[P, D]: the kernel loads
positions[t], then the cache row it names, two DRAM round trips one after the other with L2 flushed before every
call (the score's timer). Liger's RoPE, as HF users call it in every layer, is handed cos and sin rows that the
model gathered once per forward pass, so its loads have no such chain. On the H200 the seed trailed Liger by
0.3-0.4 us on every decode shape (1.96 against 1.62 us at T = 1, h200.md, session 26), and ncu put both kernels
behind long-scoreboard stalls (counters_h200.md).

`pregathered` is the seed's fused kernel (the same tiles, warps and loads, imported from the seed) with the one
change the contract forbids: row t of a [T, D] array gathered before the call, instead of cache[positions[t]].
If `pregathered` reads like Liger and the seed one DRAM round trip behind it, the gap is the gather, which no
kernel under this contract can leave out; if `pregathered` still trails Liger, the kernel itself has room. The
gathered rows are built outside the timed call, as Liger's are. Every implementation is checked against the
operator's reference before it is timed; all are timed round-robin `--rounds` times and each keeps the median of
its rounds (the same as measure_baselines --rounds).
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

IMPLS = ("seed", "pregathered", "liger")


def probe_kernel(seed):
    """The seed's fused kernel with row t of a pre-gathered [T, D] cos/sin array in place of cache[positions[t]]
    (the seed's own jit helpers, so the tiles and the loads' order are the seed's)."""
    import triton
    import triton.language as tl

    # a jit function resolves the names it calls among its module's globals (a closure's are not seen)
    globals().update(_token_tile=seed._token_tile, _rotate_store=seed._rotate_store)

    @triton.jit
    def _pregathered_kernel(q_ptr, k_ptr, rows_ptr, qo_ptr, ko_ptr, T, HQ, HK, stride_q, stride_k, stride_rows,
                            stride_qo, stride_ko, HALF: tl.constexpr, BLOCK_HALF: tl.constexpr,
                            TOKENS: tl.constexpr, HEADS_Q: tl.constexpr, HEADS_K: tl.constexpr,
                            X_EVICT: tl.constexpr):
        tok = (tl.program_id(0) * TOKENS + tl.arange(0, TOKENS)).to(tl.int64)
        t_mask = tok < T
        i = tl.arange(0, BLOCK_HALF)
        i_mask = i < HALF
        qa_off, qb_off, q_mask = _token_tile(tok, t_mask, HQ, i, i_mask, 2 * HALF, HALF, HEADS_Q, True)
        q_row = q_ptr + (tok * stride_q)[:, None, None]
        qa = tl.load(q_row + qa_off, mask=q_mask, other=0.0, eviction_policy=X_EVICT).to(tl.float32)
        qb = tl.load(q_row + qb_off, mask=q_mask, other=0.0, eviction_policy=X_EVICT).to(tl.float32)
        ka_off, kb_off, k_mask = _token_tile(tok, t_mask, HK, i, i_mask, 2 * HALF, HALF, HEADS_K, True)
        k_row = k_ptr + (tok * stride_k)[:, None, None]
        ka = tl.load(k_row + ka_off, mask=k_mask, other=0.0, eviction_policy=X_EVICT).to(tl.float32)
        kb = tl.load(k_row + kb_off, mask=k_mask, other=0.0, eviction_policy=X_EVICT).to(tl.float32)
        cs_mask = t_mask[:, None] & i_mask[None, :]
        row = rows_ptr + (tok * stride_rows)[:, None] + i[None, :]      # the one change: no positions[t] load
        c = tl.load(row, mask=cs_mask, other=0.0)
        s = tl.load(row + HALF, mask=cs_mask, other=0.0)
        c, s = c[:, None, :], s[:, None, :]
        _rotate_store(qo_ptr, tok, stride_qo, qa_off, qb_off, q_mask, qa, qb, c, s)
        _rotate_store(ko_ptr, tok, stride_ko, ka_off, kb_off, k_mask, ka, kb, c, s)

    def pregathered(q, k, rows):
        import torch
        T, D = q.shape[0], rows.shape[1]
        HQ, HK, half = q.shape[1] // D, k.shape[1] // D, D // 2
        block_half = triton.next_power_of_2(half)
        cfg = seed._config(T, block_half)
        heads_q, heads_k = triton.next_power_of_2(HQ), triton.next_power_of_2(HK)
        token_tile = max(heads_q, heads_k) * block_half
        if not cfg["FUSED"] or token_tile > seed.CONFIGS["max_fused_tile"] or seed.CONFIGS["PDL"]:
            raise ValueError(f"the seed does not take its fused path without PDL at T={T}, Hq={HQ}, Hk={HK}, D={D} "
                             f"(entry {cfg}, PDL {seed.CONFIGS['PDL']}): this probe mirrors that path only")
        tokens = min(cfg["TOKENS"], triton.next_power_of_2(T), seed.CONFIGS["max_fused_tile"] // token_tile)
        q_out, k_out = torch.empty_like(q), torch.empty_like(k)
        _pregathered_kernel[(triton.cdiv(T, tokens),)](
            q, k, rows, q_out, k_out, T, HQ, HK, q.stride(0), k.stride(0), rows.stride(0), q_out.stride(0),
            k_out.stride(0), HALF=half, BLOCK_HALF=block_half, TOKENS=tokens, HEADS_Q=heads_q, HEADS_K=heads_k,
            X_EVICT=seed.CONFIGS["x_evict"], num_warps=cfg["num_warps"])
        return q_out, k_out
    return pregathered


def implementations(spec, seed):
    """name -> (fn taking the prepared inputs as keywords, prepare(inputs) -> the prepared inputs)."""
    pregathered = probe_kernel(seed)
    op = spec.module
    return {
        "seed": (seed.rotary_embedding, None),
        "pregathered": (pregathered, lambda s: {"q": s["q"], "k": s["k"],
                                                "rows": s["cos_sin_cache"].index_select(0, s["positions"])}),
        "liger": (op.baseline_liger, lambda s: op.baseline_liger_inputs(**s)),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--max-t", type=int, default=256, help="decode shapes: T at most this")
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--dry-run", action="store_true", help="CPU: check every implementation under the interpreter")
    args = ap.parse_args(argv)
    if args.rounds < 1:
        print(f"error: --rounds {args.rounds} must be at least 1", file=sys.stderr)
        return 2
    import os
    if args.dry_run:
        os.environ.setdefault("TRITON_INTERPRET", "1")
    import torch

    from agent.studies.measure_baselines import MAX_INPUT_SETS, check, expected_for, input_sets
    from agent.studies.seed_variants import load_seed
    from benchmarks.registry import load_operator
    device = "cpu" if args.dry_run else "cuda"
    if device == "cuda" and not torch.cuda.is_available():
        print("error: no CUDA GPU visible; use --dry-run on the CPU", file=sys.stderr)
        return 2
    spec = load_operator("rotary_embedding")
    seed = load_seed(spec)
    impls = implementations(spec, seed)
    shapes = [s for s in spec.select("hot") if int(s.dim["T"]) <= args.max_t]
    floor_us = None
    if device == "cuda":
        from sandbox.timing import measure_floor
        floor_us = statistics.median(measure_floor() for _ in range(9)) * 1e6
    rows = []
    for shape in shapes:
        dims = spec.interpreter_dims(shape.dim) if args.dry_run else shape.dim
        dtype = "fp32" if args.dry_run else shape.dtype       # the interpreter's bf16 arithmetic is unreliable
        sets = input_sets(spec, dims, dtype, device, n_max=1 if args.dry_run else MAX_INPUT_SETS)
        pristine, exp = expected_for(spec, sets, dims, dtype)
        row = {"shape": shape.id, "dims": dict(dims), "failed": {}, "rel_l2": {}, "times_us": {n: [] for n in impls}}
        ready = {}
        for name, (fn, prepare) in impls.items():
            try:
                rel_l2, _, why = check(spec, fn, prepare, pristine, dtype, exp)
            except Exception as exc:  # noqa: BLE001 - an implementation that fails is listed, never timed
                rel_l2, why = None, f"{type(exc).__name__}: {str(exc)[:200]}"
            if why:
                row["failed"][name] = why
                continue
            row["rel_l2"][name] = rel_l2
            ready[name] = (fn, [prepare(s) if prepare else s for s in sets])
        if device == "cuda":
            from sandbox.timing import time_call
            for _ in range(args.rounds):
                for name, (fn, prepared) in ready.items():
                    res = time_call(lambda inputs, f=fn: f(**inputs), prepared, eager=False)
                    row["times_us"][name].append(res.t_s * 1e6)
        row["median_us"] = {n: statistics.median(t) for n, t in row["times_us"].items() if t}
        rows.append(row)
        print(shape.id, " ".join(f"{n} {t:.2f}" for n, t in row["median_us"].items()),
              "checked: " + ", ".join(ready), ("failed: " + "; ".join(f"{n}: {w}" for n, w in row["failed"].items()))
              if row["failed"] else "", flush=True)
        del sets, exp, ready
    result = {"floor_us": floor_us, "rounds": args.rounds, "rows": rows,
              "env": {"torch": torch.__version__, "gpu": torch.cuda.get_device_name() if device == "cuda" else "cpu"}}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1))
    if device == "cuda":
        print(f"\nlatency floor {floor_us:.2f} us; median of {args.rounds} rounds, us")
        print("| shape | seed | pregathered | liger | seed - pregathered | pregathered / liger |")
        print("|---|---|---|---|---|---|")
        for row in rows:
            m = row["median_us"]
            if all(n in m for n in IMPLS):
                print(f"| {row['shape']} | {m['seed']:.2f} | {m['pregathered']:.2f} | {m['liger']:.2f} | "
                      f"{m['seed'] - m['pregathered']:.2f} | {m['pregathered'] / m['liger']:.3f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
