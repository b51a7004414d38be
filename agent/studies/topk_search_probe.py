"""Where top_k_top_p_filter's search kernel spends its time: the same launch timed over subsets of its rows.

    python -m agent.studies.topk_search_probe [--shape B256-V151936] [--variants bins_eighth,...] [--out F.json]

The bins path's last kernel takes one program a row, and its time is its slowest rows'. The probe runs the seed
once (PDL off) with the search launch captured, then replays that launch alone on the captured workspace, timed
by CUDA events (median of 20), with the undecided count of every row outside a subset set to 0 (such a row's
program returns at once): all rows; the rows sorted in registers (n <= BIN_SEARCH_BLOCK); the rows searched by
passes; the single row with the most entries of each kind. A replay writes the same bytes as the call did. It
prints the rows' undecided counts too. Needs a CUDA GPU.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def _events_us(fn, reps: int = 20) -> float:
    import torch
    fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) * 1000.0)
    return sorted(times)[len(times) // 2]


class _Captured:
    """Stands in for the search kernel in the seed module: records the launch's grid, arguments and keywords, and
    launches the real kernel."""

    def __init__(self, kernel):
        self.kernel, self.launch = kernel, None

    def __getitem__(self, grid):
        def go(*args, **kw):
            self.launch = (grid, args, kw)
            return self.kernel[grid](*args, **kw)
        return go


def probe(module, inputs: dict, overrides: dict) -> dict:
    import torch
    from agent.studies import seed_variants as sv
    real = module._bins_search_kernel
    cap = _Captured(real)
    module._bins_search_kernel = cap
    try:
        sv.seed_variant(module, {**overrides, "PDL": 0})(**inputs)
    finally:
        module._bins_search_kernel = real
    grid, args, kw = cap.launch
    names = real.arg_names
    dec = args[names.index("dec_ptr")]
    words = dec.view(-1, 8)
    n = words[:, 6].clone()
    spill = (words[:, 7] & 4) != 0
    block = kw["BLOCK"]
    sorted_rows = (n > 0) & (n <= block) & ~spill
    searched = (n > block) | spill

    def timed(keep) -> float:
        words[:, 6] = torch.where(keep, n, torch.zeros_like(n))
        try:
            return _events_us(lambda: real[grid](*args, **kw))
        finally:
            words[:, 6] = n

    def largest(mask):
        only = torch.zeros_like(mask)
        if mask.any():
            only[int(torch.argmax(torch.where(mask, n, torch.full_like(n, -1))))] = True
        return only

    counts = n.tolist()
    return {
        "rows": len(counts), "rows_sorted": int(sorted_rows.sum()), "rows_searched": int(searched.sum()),
        "rows_spilled": int(spill.sum()), "n_max": max(counts), "n_sorted_max": int(torch.where(sorted_rows, n, 0).max()),
        "us_all": timed(torch.ones_like(sorted_rows)), "us_none": timed(torch.zeros_like(sorted_rows)),
        "us_sorted_rows": timed(sorted_rows), "us_searched_rows": timed(searched),
        "us_largest_sorted_row": timed(largest(sorted_rows)), "us_largest_searched_row": timed(largest(searched)),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shape", default="B256-V151936")
    ap.add_argument("--variants", default="", help="seed variants (agent/studies/seed_variants.py) after the seed")
    ap.add_argument("--out", default="")
    args = ap.parse_args(argv)
    from agent.studies import seed_variants as sv
    from benchmarks.registry import load_operator
    spec = load_operator("top_k_top_p_filter")
    shape = next((s for s in spec.shapes if s.id == args.shape), None)
    named = dict(sv.VARIANTS["top_k_top_p_filter"])
    wanted = [v for v in args.variants.split(",") if v]
    unknown = [v for v in wanted if v not in named]
    if shape is None or unknown:
        print(f"topk_search_probe: unknown shape {args.shape!r} or variants {unknown}; shapes: "
              f"{', '.join(s.id for s in spec.shapes if s.hot)}; variants: {', '.join(named)}", file=sys.stderr)
        return 2
    import torch
    if not torch.cuda.is_available():
        print("topk_search_probe needs a CUDA GPU", file=sys.stderr)
        return 2
    module = sv.load_seed(spec)
    inputs = spec.make_inputs(dict(shape.dims), shape.dtype, seed=0, device="cuda")
    results = {}
    for name in ["seed", *wanted]:
        results[name] = probe(module, inputs, named.get(name) or {})
        print(name, json.dumps(results[name]), flush=True)
        if args.out:
            Path(args.out).write_text(json.dumps({"shape": args.shape, "results": results}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
