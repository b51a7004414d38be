"""How fast can anything move a decode shape's bytes? A device copy of the same bytes, timed as candidates are.

    python -m agent.studies.copy_floor --out OUT.json [--ops silu_and_mul,rms_norm] [--max-t 256] [--read] [--dry-run]

Issue 12 asks silu_and_mul's decode shapes (T <= 256) to run within 1.5x of the latency floor (the empty
kernel, ~1.3 us on the H200). Memory-bound kernels of a few MB cannot beat the time it takes to move their
bytes from cold HBM, and the roofline's bandwidth term assumes the full 4.8 TB/s, which a transfer of a few MB
does not reach. Here each such shape's bytes Q (the operator's work model) are moved by torch's device copy,
Q/2 read and Q/2 written, timed by the sandbox's own timer (CUDA-graph replay, L2 flushed before every call, 4
input sets rotated, median), beside the floor kernel in the same process. A shape whose copy already takes
longer than 1.5x the floor cannot meet that bound with any kernel that reads its inputs and writes its output.

Issue 15 asks a median attainment of 0.6 (T_ref = max(T_roof, floor), over the time). Each row also says the
attainment a kernel would have if it took only the copy's time (`attain_at_copy`): where that is below a target,
no kernel that moves the shape's bytes reaches it either (the copy moves them with nothing on its chain).
Weight-streaming operators (gemm at small M, fused_moe at decode) read almost all of Q and write little, and a
copy that reads Q/2 and writes Q/2 is not their bound: `--read` also streams all Q bytes through a read-only
reduction (benchmarks/calibrate.stream_read, its configurations and torch's sum; the fastest counts), timed the
same way (`read_us`, `attain_at_read`). A target that needs less time than that stream asks more than the card's
memory can give at that size, whatever the kernel.

It also times the floor kernel under programmatic dependent launch (`floor_pdl_us`): the seeds' PDL switch lets
a kernel start while the one ahead of it drains, so it could take less than the plain floor; the score's floor
is the lesser of the two (benchmarks/gpu_timer.measure_floor_s).
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

DEFAULT_OPS = ("silu_and_mul", "rms_norm")
BOUND = 1.5            # issue 12: decode shapes within 1.5x of the latency floor
# The token dimension of a shape: T (norms, activations, MoE), B (sampling, convolutions) or M (gemm).
TOKEN_DIMS = ("T", "B", "M")


def plan(ops, max_t: int) -> list[dict]:
    """The decode-size hot shapes (the token dimension, TOKEN_DIMS, <= max_t) of `ops` and their bytes moved."""
    from benchmarks.hardware import study_hardware
    from benchmarks.registry import load_operator
    from benchmarks.roofline import roofline
    hw = study_hardware()
    rows = []
    for op in ops:
        spec = load_operator(op)
        for shape in spec.select("hot"):
            dims = dict(shape.dims)
            tokens = next((dims[d] for d in TOKEN_DIMS if d in dims), None)
            if tokens is None or int(tokens) > max_t:
                continue
            work = spec.work(shape)
            rows.append({"op": op, "shape": shape.id, "dims": dims, "bytes": float(work[1]),
                         "t_roof_us": roofline(*work, hw).t_roof_s * 1e6})
    return rows


def attainment_at(t_us: float, t_roof_us: float, floor_us: float) -> float:
    """The score's attainment of a shape that took t_us (benchmarks/scoring.py: T_ref = max(T_roof, floor))."""
    from benchmarks.scoring import t_ref
    return min(1.0, t_ref(t_roof_us, floor_us) / t_us)


def set_count(nbytes: float) -> int:
    """Input sets to rotate for a shape of `nbytes`, as the sandbox's worker rotates a candidate's (its limits)."""
    from sandbox.worker import MAX_INPUT_SET_BYTES, MAX_INPUT_SETS
    return int(min(MAX_INPUT_SETS, max(1, MAX_INPUT_SET_BYTES // max(int(nbytes), 1))))


def time_copies(rows: list[dict], read: bool = False) -> float:
    """Fill each row's copy_us (and read_us, read_by with `read`); returns the latency floor in us (same process,
    same timer)."""
    import torch

    from benchmarks.gpu_timer import measure_floor_s
    from sandbox.timing import time_call
    floor_us = measure_floor_s(pdl=False) * 1e6          # the plain launch; pdl_floor() times the other
    for row in rows:
        n = max(16, int(row["bytes"] // 2) // 16 * 16)          # bytes read = bytes written = Q/2, 16-aligned
        sets = [{"src": torch.randn(n // 4, device="cuda"), "dst": torch.empty(n // 4, device="cuda")}
                for _ in range(set_count(row["bytes"]))]
        res = time_call(lambda inputs: inputs["dst"].copy_(inputs["src"]), sets)
        row["copy_us"], row["mode"] = res.t_s * 1e6, res.mode
        del sets
        if read:
            row["read_us"], row["read_by"] = time_read(row["bytes"])
    return floor_us


def readers() -> dict:
    """Read-only streams of a flat fp32 tensor, by name: torch's sum and calibrate's Triton reader in each of its
    configurations (the same readers `aka calibrate` takes the card's bandwidth from)."""
    import torch

    from benchmarks.calibrate import READ_CONFIGS, stream_read
    out = {"torch.sum": lambda inputs: torch.sum(inputs["src"])}
    for block, iters, warps in READ_CONFIGS:
        out[f"stream_read[{block}x{iters},w{warps}]"] = (
            lambda inputs, b=block, i=iters, w=warps: stream_read(inputs["src"], inputs[f"partial{b}x{i}"], b, i, w))
    return out


def time_read(nbytes: float) -> tuple[float, str]:
    """(us, reader) of the fastest read-only stream of `nbytes` (Q, all of it read), timed like a candidate."""
    import torch
    import triton

    from benchmarks.calibrate import READ_CONFIGS
    from sandbox.timing import time_call
    n = max(16, int(nbytes) // 16 * 4)                          # fp32 values, 16-byte aligned
    sets = []
    for _ in range(set_count(nbytes)):
        s = {"src": torch.randn(n, device="cuda")}
        for block, iters, _w in READ_CONFIGS:
            s[f"partial{block}x{iters}"] = torch.empty(triton.cdiv(n, block * iters), device="cuda")
        sets.append(s)
    times = {name: time_call(fn, sets).t_s * 1e6 for name, fn in readers().items()}
    del sets
    best = min(times, key=times.get)
    return times[best], best


def pdl_floor() -> float | str:
    """The floor kernel under programmatic dependent launch (Hopper and later), in us, or why it was not timed:
    whether a PDL kernel can take less than the floor the score divides by."""
    from benchmarks.gpu_timer import measure_floor_s
    try:
        return measure_floor_s(pdl=True) * 1e6
    except Exception as exc:  # noqa: BLE001 - a GPU or triton without PDL: the study still times its copies
        return f"{type(exc).__name__}: {str(exc)[:200]}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--ops", default=",".join(DEFAULT_OPS))
    ap.add_argument("--max-t", type=int, default=256, help="decode shapes: token dimension at most this")
    ap.add_argument("--read", action="store_true", help="also stream all Q bytes read-only (weight-streaming ops)")
    ap.add_argument("--dry-run", action="store_true", help="list the shapes and their bytes; time nothing")
    args = ap.parse_args(argv)
    rows = plan([o for o in args.ops.split(",") if o], args.max_t)
    if not rows:
        raise SystemExit(f"no hot shape of {args.ops} has a token dimension ({'/'.join(TOKEN_DIMS)}) "
                         f"<= {args.max_t}; raise --max-t")
    floor_us = floor_pdl = None
    if not args.dry_run:
        floor_us = time_copies(rows, read=args.read)
        floor_pdl = pdl_floor()
        for row in rows:
            row["copy_over_floor"] = row["copy_us"] / floor_us
            row["copy_within_bound"] = row["copy_us"] <= BOUND * floor_us
            row["attain_at_copy"] = attainment_at(row["copy_us"], row["t_roof_us"], floor_us)
            if "read_us" in row:
                row["attain_at_read"] = attainment_at(row["read_us"], row["t_roof_us"], floor_us)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"floor_us": floor_us, "floor_pdl_us": floor_pdl, "bound": BOUND, "rows": rows},
                                   indent=1))
    print(f"latency floor {floor_us:.2f} us, bound {BOUND}x = {BOUND * floor_us:.2f} us" if floor_us else
          "dry run: nothing timed")
    if floor_pdl is not None:
        print("the floor kernel under programmatic dependent launch: " +
              (f"{floor_pdl:.2f} us" if isinstance(floor_pdl, float) else f"not timed ({floor_pdl})"))
    for row in rows:
        timed = (f" copy {row['copy_us']:.2f} us = {row['copy_over_floor']:.2f}x floor "
                 f"({'within' if row['copy_within_bound'] else 'beyond'} {BOUND}x), attainment at the copy's time "
                 f"{row['attain_at_copy']:.2f}") if floor_us else ""
        if "read_us" in row:
            timed += (f"; read-only stream {row['read_us']:.2f} us ({row['read_by']}), "
                      f"attainment {row['attain_at_read']:.2f}")
        print(f"{row['op']:20} {row['shape']:22} {row['bytes'] / 1e6:8.3f} MB{timed}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
