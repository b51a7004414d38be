"""Why do the rms_norm and silu_and_mul seeds trail torch.compile and Liger on small decode shapes?

    python3 -m agent.studies.decode_probe --out DIR [--ops rms_norm,silu_and_mul] [--max-t 256] [--dry-run]

Issue 12: on the H200 the rms_norm seed reads 1.91 us at T1-H512 where torch.compile reads 1.60 (T256-H512:
2.49 against 2.02), and silu_and_mul 1.82 us at T16-I256 against Liger's 1.62, with the empty kernel at 1.32 us;
at H1536 the seed is at par or ahead. For every hot shape with T <= --max-t, in one process and by the
sandbox's own timer (CUDA-graph replay, L2 flushed before every call, 4 input sets rotated, median), this times:
- the seed, torch.compile (static shapes, per shape, as sandbox/baselines.py builds it) and Liger if installed;
- a grid of the seed's own CONFIGS for the bucket the shape uses: rms_norm's decode entry of its BLOCK_H with
  ROWS x num_warps (r<ROWS>w<warps>), silu_and_mul's flat bucket with BLOCK x num_warps (b<BLOCK>w<warps>);
- two minimal one-row-a-program kernels defined here (study code, not candidates): `min` with the row width a
  constexpr (no mask at a power of two, int32 offsets, times a constexpr 1/H) and `min_rt` with the seed's
  generality put back (width at run time: a mask and a division; int64 row offsets; a row stride).
Reading it: `min` against `min_rt` is what the generality costs (mask, division by a run-time width, int64
offsets); `min_rt` against the seed's grid is what the seed's launch shape costs (rms_norm: the 2-D [ROWS,
BLOCK_H] tile, eviction hints; silu_and_mul: a flat index split by a division by I); the best of ours against
torch.compile is what Inductor's code does that ours does not: DIR/inductor/<op>_<shape>.py holds it, headed by
the config its autotuner chose. The seed's own config is also a grid point (rms_norm r4w4 at H512, silu_and_mul
b1024w4), so those two rows show the timer's noise. `--seed-file OP:NAME=PATH` times another seed file of OP as
implementation NAME beside the working one (e.g. the committed seed: `git show HEAD:benchmarks/operators/...`),
so a change to a seed is measured against what it replaces in the same process.
Every implementation is checked against the operator's reference before it is timed; a failure is a row with
its error, not a crash. Rows go to DIR/decode_probe.json, written after every shape. `--dry-run` (with
TRITON_INTERPRET=1 set) checks everything on the CPU at interpreter_dims in fp32, without timing or dumps.
"""
from __future__ import annotations

import argparse
import functools
import json
import os
import sys
import time
from dataclasses import asdict
from pathlib import Path

import triton
import triton.language as tl

from agent.studies.copy_floor import plan
from agent.studies.measure_baselines import (MAX_INPUT_SETS, environment, expected_for, implementations,
                                             input_sets, measure_one)
from agent.studies.seed_variants import load_seed, seed_variant

DEFAULT_OPS = ("rms_norm", "silu_and_mul")
ROWS = (1, 2, 4)
WARPS = (1, 2, 4, 8)
SILU_BLOCKS = (256, 512, 1024, 2048)     # outputs per program of silu_and_mul's flat path
MIN_WARPS = (1, 2, 4)                    # rows of 2048+ elements also get 8, as the seed runs them
MAX_SECONDS = 130.0                      # device time is scarce: no new shape starts after this


# ---------------------------------------------------------------- the minimal kernels (study code)

@triton.jit
def _rms_norm_min_kernel(x_ptr, w_ptr, y_ptr, eps, H: tl.constexpr, BLOCK_H: tl.constexpr, INV_H: tl.constexpr):
    cols = tl.arange(0, BLOCK_H)
    offs = tl.program_id(0) * H + cols          # int32: H is a constant and x is contiguous
    if BLOCK_H == H:
        x = tl.load(x_ptr + offs).to(tl.float32)
        w = tl.load(w_ptr + cols).to(tl.float32)
    else:
        x = tl.load(x_ptr + offs, mask=cols < H, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + cols, mask=cols < H, other=0.0).to(tl.float32)
    y = (x * tl.rsqrt(tl.sum(x * x, axis=0) * INV_H + eps) * w).to(y_ptr.dtype.element_ty)
    if BLOCK_H == H:
        tl.store(y_ptr + offs, y)
    else:
        tl.store(y_ptr + offs, y, mask=cols < H)


@triton.jit
def _rms_norm_rt_kernel(x_ptr, w_ptr, y_ptr, H, stride_x_row, eps, BLOCK_H: tl.constexpr):
    cols = tl.arange(0, BLOCK_H)
    mask = cols < H
    row = tl.program_id(0).to(tl.int64)
    x = tl.load(x_ptr + row * stride_x_row + cols, mask=mask, other=0.0).to(tl.float32)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    y = x * tl.rsqrt(tl.sum(x * x, axis=0) / H + eps) * w
    tl.store(y_ptr + row * H + cols, y.to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _silu_and_mul_min_kernel(x_ptr, out_ptr, I: tl.constexpr, BLOCK_I: tl.constexpr):
    cols = tl.arange(0, BLOCK_I)
    row = tl.program_id(0)
    gate_ptrs = x_ptr + row * (2 * I) + cols
    if BLOCK_I == I:
        gate = tl.load(gate_ptrs).to(tl.float32)
        up = tl.load(gate_ptrs + I).to(tl.float32)
    else:
        gate = tl.load(gate_ptrs, mask=cols < I, other=0.0).to(tl.float32)
        up = tl.load(gate_ptrs + I, mask=cols < I, other=0.0).to(tl.float32)
    out = (gate / (1.0 + tl.exp(-gate)) * up).to(out_ptr.dtype.element_ty)   # the seed's formula: -0 at a ~ -400
    if BLOCK_I == I:
        tl.store(out_ptr + row * I + cols, out)
    else:
        tl.store(out_ptr + row * I + cols, out, mask=cols < I)


@triton.jit
def _silu_and_mul_rt_kernel(x_ptr, out_ptr, I, stride_x_row, BLOCK_I: tl.constexpr):
    cols = tl.arange(0, BLOCK_I)
    mask = cols < I
    row = tl.program_id(0).to(tl.int64)
    gate = tl.load(x_ptr + row * stride_x_row + cols, mask=mask, other=0.0).to(tl.float32)
    up = tl.load(x_ptr + row * stride_x_row + I + cols, mask=mask, other=0.0).to(tl.float32)
    out = gate / (1.0 + tl.exp(-gate)) * up
    tl.store(out_ptr + row * I + cols, out.to(out_ptr.dtype.element_ty), mask=mask)


def _contiguous(x):
    if not x.is_contiguous():
        raise ValueError(f"the minimal kernels read rows {x.shape[1]} elements apart; got strides {x.stride()}")
    return x


def _rms_norm_min(x, weight, eps, num_warps):
    import torch
    T, H = _contiguous(x).shape
    y = torch.empty_like(x)
    _rms_norm_min_kernel[(T,)](x, weight, y, eps, H=H, BLOCK_H=triton.next_power_of_2(H), INV_H=1.0 / H,
                               num_warps=num_warps)
    return y


def _rms_norm_rt(x, weight, eps, num_warps):
    import torch
    T, H = x.shape
    y = torch.empty((T, H), dtype=x.dtype, device=x.device)
    _rms_norm_rt_kernel[(T,)](x, weight, y, H, x.stride(0), eps, BLOCK_H=triton.next_power_of_2(H),
                              num_warps=num_warps)
    return y


def _silu_and_mul_min(x, num_warps):
    import torch
    T, I = _contiguous(x).shape[0], x.shape[1] // 2
    out = torch.empty((T, I), dtype=x.dtype, device=x.device)
    _silu_and_mul_min_kernel[(T,)](x, out, I=I, BLOCK_I=triton.next_power_of_2(I), num_warps=num_warps)
    return out


def _silu_and_mul_rt(x, num_warps):
    import torch
    T, I = x.shape[0], x.shape[1] // 2
    out = torch.empty((T, I), dtype=x.dtype, device=x.device)
    _silu_and_mul_rt_kernel[(T,)](x, out, I, x.stride(0), BLOCK_I=triton.next_power_of_2(I), num_warps=num_warps)
    return out


# op -> (row width's dim, the min launcher, the min_rt launcher)
MINIMAL = {"rms_norm": ("H", _rms_norm_min, _rms_norm_rt), "silu_and_mul": ("I", _silu_and_mul_min, _silu_and_mul_rt)}


def minimal_kernels(op: str, dims: dict) -> list[tuple[str, object]]:
    """(name, callable) of each minimal kernel at each warp count for a row of this shape's width."""
    width, run_min, run_rt = MINIMAL[op]
    warps = MIN_WARPS + ((8,) if triton.next_power_of_2(int(dims[width])) >= 2048 else ())
    return ([(f"min_w{w}", functools.partial(run_min, num_warps=w)) for w in warps] +
            [(f"min_rt_w{w}", functools.partial(run_rt, num_warps=w)) for w in warps])


# ---------------------------------------------------------------- the seed's own CONFIGS, one bucket

def variant_grid(op: str, configs: dict, dims: dict) -> list[tuple[str, object]]:
    """(name, seed_variants overrides) of the CONFIGS grid for the bucket this shape takes; the bucket is found as
    the seed's launcher finds it (rms_norm `_config`, silu_and_mul `_launch`)."""
    if op == "rms_norm":
        table = "decode_by_block_h" if dims["T"] <= configs["decode_max_t"] else "by_block_h"
        block_h = min(triton.next_power_of_2(int(dims["H"])), configs["max_block_h"])
        key = min((k for k in configs[table] if k >= block_h), default=max(configs[table]))
        entry = f"{table}.{key}"
        # an entry with its own warps for small calls (small_t_num_warps) gets the grid's warps there too
        warps_keys = ["num_warps"] + (["small_t_num_warps"] if "small_t_num_warps" in configs[table][key] else [])
        return [(f"r{r}w{w}", {f"{entry}.ROWS": r, f"{entry}.PERSISTENT": 0,
                               **{f"{entry}.{k}": w for k in warps_keys}})
                for r in ROWS for w in WARPS]
    if op == "silu_and_mul":
        n = int(dims["T"]) * int(dims["I"])
        bound = next((b for b, _ in configs["by_outputs"] if n <= b), configs["by_outputs"][-1][0])

        def flat(block, warps):
            def edit(cfg):             # by_outputs holds (bound, dict) pairs, which set_path paths cannot index
                for b, entry in cfg["by_outputs"]:
                    if b == bound:
                        entry.update(FLAT=1, BLOCK=block, num_warps=warps)
            return edit
        return [(f"b{b}w{w}", flat(b, w)) for b in SILU_BLOCKS for w in WARPS]
    raise ValueError(f"decode_probe has no CONFIGS grid for {op!r}; it probes {', '.join(MINIMAL)}")


# ---------------------------------------------------------------- Inductor's code

def inductor_source(fn, inputs: dict) -> str:
    """Inductor's output code for one call of a torch.compile'd fn (compiled afresh: run_and_get_code resets
    dynamo), headed by the launch config its autotuner chose for each kernel (its DEBUG log line)."""
    import logging
    from torch._inductor.utils import run_and_get_code
    chosen: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record):
            if record.getMessage().startswith("Best config"):
                chosen.append(record.getMessage())
    logger = logging.getLogger("torch._inductor.runtime.triton_heuristics")
    saved, keep = (logger.level, logger.propagate), Keep()
    logger.addHandler(keep)
    logger.setLevel(logging.DEBUG)
    logger.propagate = False       # the DEBUG lines go to this handler only, not to torch's console handlers
    try:
        _, codes = run_and_get_code(fn, **inputs)
    finally:
        logger.removeHandler(keep)
        logger.setLevel(saved[0])
        logger.propagate = saved[1]
    head = ("".join(f"# autotuned: {c}\n" for c in chosen) or
            "# autotuned: no 'Best config' logged (one config per kernel, or a cached choice)\n")
    return head + "\n# ---------------- next graph\n".join(codes)


# ---------------------------------------------------------------- one shape

def probe_shape(spec, shape, impls, *, device: str, dry_run: bool, floor_s: float | None, inductor_dir: Path | None,
                log) -> tuple[list, str | None]:
    """Records of every implementation at one shape (checked, then timed unless a dry run), and where Inductor's
    code went (or why it did not). Runs under no_grad: dynamo guards on grad mode, so a check without grad and a
    timing with it would compile two graphs and the dumped one need not be the timed one."""
    import torch
    dims = spec.interpreter_dims(shape.dim) if dry_run else shape.dim
    dtype = "fp32" if dry_run else shape.dtype
    sets = input_sets(spec, dims, dtype, device, n_max=1 if dry_run else MAX_INPUT_SETS)
    dumped = None
    pristine, exp = expected_for(spec, sets, dims, dtype)
    with torch.no_grad():
        compiled = next((i for i in impls if i[0] == "compile" and i[2] is not None), None)
        if compiled and inductor_dir is not None:
            path = inductor_dir / f"{spec.name}_{shape.id}.py"
            try:                   # its first call at this shape: the compile the timing below reuses
                path.write_text(inductor_source(compiled[2], compiled[3](sets[0])))
                dumped = str(path)
            except Exception as e:  # noqa: BLE001 - no dump is a note; the timing still runs
                dumped = f"no Inductor code: {type(e).__name__}: {str(e)[:300]}"
        records = [measure_one(spec, shape, dims, dtype, impl, sets, exp, floor_s=floor_s, dry_run=dry_run,
                               eager=False, log=log, check_inputs=pristine) for impl in impls]
    del sets, exp
    if device == "cuda":
        torch.cuda.empty_cache()
    return records, dumped


def contenders(spec, seed, dims: dict, base: list) -> list:
    """The baselines and seed (`base`, from measure_baselines.implementations), the CONFIGS grid, the minimal
    kernels: (name, kind, callable, prepare) each."""
    grid = [(f"seed:{name}", "variant", seed_variant(seed, ov), None)
            for name, ov in variant_grid(spec.name, seed.CONFIGS, dims)]
    return base + grid + [(name, "minimal", fn, None) for name, fn in minimal_kernels(spec.name, dims)]


# ---------------------------------------------------------------- the summary

def _cell(recs: list, dry_run: bool) -> str:
    """The fastest of `recs` as 't name' (a dry run: how many passed the check); '-' when none ran."""
    ok = [r for r in recs if r.error is None]
    if dry_run:
        return f"{len(ok)}/{len(recs)} ok" if recs else "-"
    timed = [r for r in ok if r.t_us]
    if not timed:
        return "-"
    best = min(timed, key=lambda r: r.t_us)
    return f"{best.t_us:.2f}" + ("" if len(recs) == 1 else f" {best.impl.removeprefix('seed:')}")


def summary(records: list, dry_run: bool) -> list[str]:
    lines = [f"{'op':13} {'shape':11} {'seed':>8} {'compile':>8} {'liger':>8}  {'best variant':16} best minimal"
             "  (other seed files)"]
    shapes = list(dict.fromkeys((r.op, r.shape) for r in records))
    for op, shape in shapes:
        at = [r for r in records if (r.op, r.shape) == (op, shape)]
        cols = [_cell([r for r in at if r.impl == name], dry_run) for name in ("seed", "compile", "liger")]
        others = " ".join(f"{r.impl}={_cell([r], dry_run)}" for r in at if r.kind == "seed" and r.impl != "seed")
        lines.append(f"{op:13} {shape:11} {cols[0]:>8} {cols[1]:>8} {cols[2]:>8}  "
                     f"{_cell([r for r in at if r.kind == 'variant'], dry_run):16} "
                     f"{_cell([r for r in at if r.kind == 'minimal'], dry_run)}" + (f"  {others}" if others else ""))
    errors: dict[tuple[str, str], list[str]] = {}
    for r in records:
        if r.error:
            errors.setdefault((r.impl, r.error), []).append(r.shape)
    lines += [f"not timed: {impl} at {', '.join(where)}: {err[:160]}" for (impl, err), where in errors.items()]
    return lines


def seed_files(items: list[str]) -> dict[str, list[tuple[str, str]]]:
    """`OP:NAME=PATH` items -> {op: [(name, path)]}; a malformed item or a missing file stops with what to give."""
    out: dict[str, list[tuple[str, str]]] = {}
    for item in items:
        head, sep, path = item.partition("=")
        op, colon, name = head.partition(":")
        if not (sep and colon and op and name and path):
            raise SystemExit(f"--seed-file {item!r}: give OP:NAME=PATH, e.g. rms_norm:committed=/tmp/seed_head.py")
        if not Path(path).is_file():
            raise SystemExit(f"--seed-file {item!r}: {path} is not a file")
        out.setdefault(op, []).append((name, path))
    return out


def other_seeds(spec, files: list[tuple[str, str]]) -> list:
    """(name, "seed", callable, None) for each other seed file of this operator, loaded as its own module."""
    import dataclasses
    out = []
    for name, path in files:
        module = load_seed(dataclasses.replace(spec, name=f"{spec.name}_{name}", seed_path=path))
        out.append((name, "seed", getattr(module, spec.name), None))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, required=True, help="folder for decode_probe.json and inductor/")
    ap.add_argument("--ops", default=",".join(DEFAULT_OPS))
    ap.add_argument("--max-t", type=int, default=256, help="decode shapes: token dimension at most this")
    ap.add_argument("--max-seconds", type=float, default=MAX_SECONDS, help="start no new shape after this")
    ap.add_argument("--dry-run", action="store_true", help="CPU, TRITON_INTERPRET=1: check everything, time nothing")
    ap.add_argument("--seed-file", action="append", default=[], metavar="OP:NAME=PATH",
                    help="also time this seed file of OP as NAME (repeatable)")
    args = ap.parse_args(argv)
    extra_seeds = seed_files(args.seed_file)
    started = time.monotonic()
    ops = [o for o in args.ops.split(",") if o]
    unknown = [o for o in ops if o not in MINIMAL]
    if unknown:
        print(f"decode_probe: no probe for {', '.join(unknown)}; it probes {', '.join(MINIMAL)}", file=sys.stderr)
        return 2
    if args.dry_run and os.environ.get("TRITON_INTERPRET") != "1":
        print("decode_probe: --dry-run runs the kernels under Triton's interpreter, which must be chosen before "
              "triton is imported: run it as TRITON_INTERPRET=1 python3 -m agent.studies.decode_probe --dry-run ...",
              file=sys.stderr)
        return 2
    import torch
    device = "cpu" if args.dry_run else "cuda"
    if device == "cuda" and not torch.cuda.is_available():
        print("decode_probe: no CUDA GPU visible; use --dry-run (with TRITON_INTERPRET=1) on the CPU", file=sys.stderr)
        return 2
    from benchmarks.registry import load_operator
    from sandbox.baselines import build
    rows = plan(ops, args.max_t)
    if not rows:
        raise SystemExit(f"no hot shape of {args.ops} has T <= {args.max_t}")
    args.out.mkdir(parents=True, exist_ok=True)
    inductor_dir = None if args.dry_run else args.out / "inductor"
    if inductor_dir:
        inductor_dir.mkdir(exist_ok=True)
    floor_s = None
    if device == "cuda":
        from benchmarks.gpu_timer import measure_floor_s
        floor_s = measure_floor_s()
        print(f"latency floor {floor_s * 1e6:.2f} us", flush=True)
    env = environment() if device == "cuda" else {"device": "cpu (dry run)"}
    meta = {"floor_us": floor_s and floor_s * 1e6, "env": env, "dry_run": args.dry_run, "inductor": {}, "skipped": [],
            "command": "python3 -m agent.studies.decode_probe " + " ".join(argv if argv is not None else sys.argv[1:])}
    records: list = []

    def write() -> None:       # after every shape: a run cut short by the device's time limit still leaves rows
        meta["wall_s"] = time.monotonic() - started
        (args.out / "decode_probe.json").write_text(json.dumps({**meta, "rows": [asdict(r) for r in records]},
                                                               indent=1, default=str))
    with open(args.out / "log.txt", "a") as log:
        for op in ops:
            spec = load_operator(op)
            hot = {s.id: s for s in spec.select("hot")}
            seed = load_seed(spec)
            base = implementations(spec, variants=False, slow=False, only={"compile", "liger"})
            base += other_seeds(spec, extra_seeds.get(op, []))
            if args.dry_run:   # Inductor's CPU code is C++, not the GPU's Triton, and its first build took 24 s here
                base = [(n, k, build(spec.module, n, backend="eager").fn if n == "compile" else f, p)
                        for n, k, f, p in base]
            for row in (r for r in rows if r["op"] == op):
                if time.monotonic() - started > args.max_seconds:
                    meta["skipped"].append(f"{op}/{row['shape']}")
                    continue
                shape = hot[row["shape"]]
                dims = spec.interpreter_dims(shape.dim) if args.dry_run else shape.dim
                recs, dumped = probe_shape(spec, shape, contenders(spec, seed, dims, base), device=device,
                                           dry_run=args.dry_run, floor_s=floor_s, inductor_dir=inductor_dir, log=log)
                records += recs
                if dumped:
                    meta["inductor"][f"{op}/{shape.id}"] = dumped
                write()
    write()
    if floor_s:
        print(f"latency floor {floor_s * 1e6:.2f} us; times in us (graph replay, L2 flushed, median)")
    else:
        print("dry run: checked against the reference on the CPU, nothing timed")
    print("\n".join(summary(records, args.dry_run)))
    if meta["skipped"]:
        print(f"skipped after {args.max_seconds:.0f} s: {', '.join(meta['skipped'])}")
    print(f"wrote {args.out / 'decode_probe.json'} in {time.monotonic() - started:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
