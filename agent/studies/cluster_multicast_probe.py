"""Can this Triton build a Hopper matmul whose CTA pairs share operand loads (a cluster with TMA multicast)?

cuBLAS's kernel at gemm's M256-N7168-K8192 (`nvjet_sm90_tst_112x128_64x7_2x1`) runs clusters of 2 CTAs; a cluster
can load a tile both CTAs need once from L2 and multicast it into both shared memories. Triton's lever for that is
the compile option num_ctas. This probe compiles a minimal tensor-descriptor matmul for sm_90 (no GPU needed) at
each (BLOCK_M, BLOCK_N, num_ctas, epilogue) and reports whether it compiled, its shared memory, and how many PTX
instructions carry the .multicast::cluster qualifier (a TMA load into several CTAs' shared memory). Offline: the
results say which Triton gave them.

    python3 agent/studies/cluster_multicast_probe.py            # with the venv whose Triton is to be asked
"""
from __future__ import annotations

import argparse
import json

import triton
import triton.language as tl
from triton.backends.compiler import GPUTarget

BLOCK_K = 64
CONFIGS = ((128, 128, 1), (128, 128, 2), (256, 128, 1), (256, 128, 2), (128, 256, 2))


@triton.jit
def _mm(a_desc, b_desc, c, K, stride_cm, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
        TMA_STORE: tl.constexpr):
    # c is a tensor descriptor with TMA_STORE, else a pointer
    pid_m, pid_n = tl.program_id(0), tl.program_id(1)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for kt in range(0, tl.cdiv(K, BK)):
        acc = tl.dot(a_desc.load([pid_m * BM, kt * BK]), b_desc.load([pid_n * BN, kt * BK]).T, acc)
    if TMA_STORE:
        c.store([pid_m * BM, pid_n * BN], acc.to(tl.bfloat16))
    else:
        rm = pid_m * BM + tl.arange(0, BM)
        rn = pid_n * BN + tl.arange(0, BN)
        tl.store(c + rm[:, None] * stride_cm + rn[None, :], acc.to(tl.bfloat16))


def probe(bm: int, bn: int, ctas: int, epilogue: str) -> dict:
    """One compile for sm_90: {"compiled", "shared", "multicast_lines", "error"}."""
    tma = epilogue == "tma"
    sig = {"a_desc": f"tensordesc<bf16[{bm},{BLOCK_K}]>", "b_desc": f"tensordesc<bf16[{bn},{BLOCK_K}]>",
           "c": f"tensordesc<bf16[{bm},{bn}]>" if tma else "*bf16", "K": "i32", "stride_cm": "i32",
           "BM": "constexpr", "BN": "constexpr", "BK": "constexpr", "TMA_STORE": "constexpr"}
    aligned = (4,) if tma else (2, 4)          # stride_cm, and c when it is a pointer
    attrs = {(i,): [["tt.divisibility", 16]] for i in aligned}
    src = triton.compiler.ASTSource(fn=_mm, signature=sig, attrs=attrs,
                                    constexprs={"BM": bm, "BN": bn, "BK": BLOCK_K, "TMA_STORE": tma})
    row = {"BLOCK_M": bm, "BLOCK_N": bn, "num_ctas": ctas, "epilogue": epilogue}
    try:
        kernel = triton.compile(src, target=GPUTarget("cuda", 90, 32),
                                options={"num_warps": 4, "num_stages": 4, "num_ctas": ctas})
    except Exception as exc:            # a compiler failure is this probe's finding, not its error
        return {**row, "compiled": False, "shared": None, "multicast_lines": None,
                "error": f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"}
    return {**row, "compiled": True, "shared": kernel.metadata.shared,
            "multicast_lines": multicast_loads(kernel.asm["ptx"]), "error": None}


def multicast_loads(ptx: str) -> int:
    """PTX instructions with the .multicast::cluster qualifier (the qualifier, not the word: .loc comments carry
    this file's name)."""
    return sum(".multicast::cluster" in line.split("//")[0] for line in ptx.splitlines())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", help="also write the rows here")
    ap.add_argument("--configs", default=",".join(f"{m}x{n}x{c}" for m, n, c in CONFIGS),
                    help="comma-separated BLOCK_MxBLOCK_NxNUM_CTAS (default: %(default)s)")
    args = ap.parse_args(argv)
    try:
        configs = [tuple(int(v) for v in item.split("x")) for item in args.configs.split(",")]
        assert all(len(c) == 3 for c in configs)
    except (ValueError, AssertionError):
        ap.error(f"--configs {args.configs!r}: give BLOCK_MxBLOCK_NxNUM_CTAS items, e.g. 128x128x2,256x128x2")
    rows = [probe(bm, bn, ctas, epi) for bm, bn, ctas in configs for epi in ("pointer", "tma")]
    print(f"triton {triton.__version__}, target sm_90, BLOCK_K {BLOCK_K}, 4 warps, 4 stages")
    print("| BLOCK_M x BLOCK_N | num_ctas | epilogue | compiled | shared bytes | PTX multicast loads |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['BLOCK_M']} x {r['BLOCK_N']} | {r['num_ctas']} | {r['epilogue']} | "
              f"{'yes' if r['compiled'] else 'no: ' + r['error']} | {r['shared'] if r['compiled'] else '-'} | "
              f"{r['multicast_lines'] if r['compiled'] else '-'} |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"triton": triton.__version__, "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
