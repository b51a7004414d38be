"""fused_moe recovery, replayed on the CPU against the H200's measured config table: how many evaluations
does the search proposer need to get from the worst config back to the tuned seed?

The exhaustive table (benchmarks/results/moe_search_records/table.json) timed 216 flat configs (one config
for both grouped GEMMs and every bucket) on each hot shape. A shape reads only its own bucket's config, so
a bucketed CONFIGS is scored per shape from the table: the time of the flat config equal to the shape's
bucket, with gemm1 and gemm2 weighted 2/3 and 1/3 when they differ (gemm1 does twice gemm2's FLOPs; an
approximation the table cannot check). A bucket config outside the table's grid, or with W_TMA=1, has no
measurement: the replay treats it as a rejected candidate. The reduce and align settings are not in the
table and change nothing here. The score is the weighted attainment over the table's shapes with the
hot set's weights, like the run's.

    python -m agent.studies.recovery_replay [--budget 40] [--replays 20] [--samples 4]

The loop's acceptance is modelled as "the best of a round's samples beats the incumbent by more than
--margin": no noise, no A/B. It prints, per replay, the evaluations to reach 95% of the tuned seed.
"""
from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TABLE = ROOT / "benchmarks" / "results" / "moe_search_records" / "table.json"
GEMM1_SHARE = 2 / 3
TILE_KEYS = ("BLOCK_N", "BLOCK_K", "num_warps", "num_stages")


def _flat_key(config: dict) -> str:
    from agent.proposers.search_space import config_key
    return config_key(config)


class TableScorer:
    """Weighted attainment of a bucketed fused_moe CONFIGS, composed from the flat-config table."""

    def __init__(self, table: dict, shapes, floor_s: float | None = None):
        from benchmarks.hardware import study_hardware
        from benchmarks.registry import load_operator
        from benchmarks.roofline import roofline
        spec, hw = load_operator("fused_moe"), study_hardware()
        floor_s = table.get("floor_s") if floor_s is None else floor_s
        self.shapes = [s for s in shapes if s.id in table["shapes"]]
        roofs = {s.id: roofline(*spec.work(s), hw) for s in self.shapes}
        self.t_ref_us = {i: max(r.t_roof_s, floor_s or 0.0) * 1e6 for i, r in roofs.items()}
        self.bound = {i: r.bound for i, r in roofs.items()}
        self.rows = {s.id: dict(s.dims)["T"] * dict(s.dims)["k"] / dict(s.dims)["E"] for s in self.shapes}
        self.t_us = {}
        for row in table["table"].values():
            if row.get("score") is not None and row.get("t_us"):
                self.t_us[_flat_key(row["config"])] = row["t_us"]

    def bucket_of(self, configs: dict, sid: str) -> int:
        buckets = configs["buckets"]
        return next((i for i, (bound, _) in enumerate(buckets) if self.rows[sid] <= bound), len(buckets) - 1)

    def shape_time(self, bucket: dict, sid: str) -> float | None:
        if bucket.get("W_TMA", 0):
            return None
        times = []
        for gemm in ("gemm1", "gemm2"):
            flat = {"BLOCK_M": bucket["BLOCK_M"], "GROUP_M": bucket["GROUP_M"],
                    **{k: bucket[gemm][k] for k in TILE_KEYS}}
            t = (self.t_us.get(_flat_key(flat)) or {}).get(sid)
            if not isinstance(t, (int, float)) or t != t or t <= 0:
                return None
            times.append(t)
        return GEMM1_SHARE * times[0] + (1 - GEMM1_SHARE) * times[1]

    def score(self, configs: dict) -> float | None:
        num = den = 0.0
        for s in self.shapes:
            t = self.shape_time(configs["buckets"][self.bucket_of(configs, s.id)][1], s.id)
            if t is None:
                return None
            num += s.weight * min(1.0, self.t_ref_us[s.id] / t)
            den += s.weight
        return num / den if den else None

    def result(self, configs: dict, score: float | None):
        """An EvalResult like the sandbox's: per shape its bound and the CONFIGS leaves its launcher read."""
        from sandbox.launch_record import ShapeLaunches
        from sandbox.verdict import EvalResult, ShapeResult
        rows = []
        for s in self.shapes:
            b = self.bucket_of(configs, s.id)
            leaves = [["buckets", b, 1, "BLOCK_M"], ["buckets", b, 1, "GROUP_M"], ["buckets", b, 1, "W_TMA"]]
            leaves += [["buckets", b, 1, g, k] for g in ("gemm1", "gemm2") for k in TILE_KEYS]
            leaves += [["reduce", "BLOCK_H"], ["reduce", "num_warps"], ["gemm1_min_programs"]]
            row = ShapeResult(id=s.id, dims=dict(s.dims), dtype="bf16", weight=s.weight, bound=self.bound[s.id])
            row.launches = ShapeLaunches(configs_read=tuple(tuple(p) for p in leaves))
            rows.append(row)
        return EvalResult(op="fused_moe", verdict="accepted" if score is not None else "rejected", shapes=rows,
                          weighted_attainment=score)


def replay(start_src: str, scorer: TableScorer, target: float, budget: int, samples: int, seed: int,
           margin: float) -> dict:
    """One run of the search from start_src: evaluations until the incumbent reaches `target` (None: never)."""
    from agent.proposers.search import SearchProposer
    from agent.proposers.search_prefetch import CompileCheck
    from agent.proposers.search_space import read_configs
    from agent.types import OperatorContract, ProposalContext
    contract = OperatorContract("fused_moe", "", "", (), {}, tuple({"id": s.id} for s in scorer.shapes))
    prop = SearchProposer(seed=seed, compile_fn=lambda source, op: CompileCheck(True))
    inc_src = start_src
    inc = scorer.score(read_configs(inc_src).value)
    used, reached, accepted, path = 0, None, 0, []
    while used < budget and reached is None:
        ctx = ProposalContext(contract, inc_src, inc, "", scorer.result(read_configs(inc_src).value, inc).to_json(),
                              iteration=used + 1, seed=seed)
        round_ = []
        for _ in range(samples):
            p = prop.propose(ctx)
            if p.source is None:
                break
            config = read_configs(p.source).value
            round_.append((p, scorer.score(config)))
            used += 1
        if not round_:
            break
        best = max(round_, key=lambda ps: -1.0 if ps[1] is None else ps[1])
        for p, score in round_:
            win = p is best[0] and score is not None and score > inc * (1 + margin)
            prop.observe(p, scorer.result(read_configs(p.source).value, score), win)
        if best[1] is not None and best[1] > inc * (1 + margin):
            inc_src, inc, accepted = best[0].source, best[1], accepted + 1
            path.append(f"{used}: {best[0].changed} -> {inc:.3f}")
            if inc >= target:
                reached = used
    prop.close()
    return {"seed": seed, "evaluations": used, "reached_at": reached, "final": inc, "acceptances": accepted,
            "accepted": path}


def main(argv: list[str] | None = None) -> int:
    from agent.proposers.search_space import read_configs
    from agent.studies.recovery import start_source
    from benchmarks.registry import load_operator
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--budget", type=int, default=40, help="evaluations per replay")
    ap.add_argument("--replays", type=int, default=20)
    ap.add_argument("--samples", type=int, default=4)
    ap.add_argument("--margin", type=float, default=0.01, help="an acceptance beats the incumbent by this fraction")
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("-v", "--verbose", action="store_true", help="print each replay's accepted moves")
    args = ap.parse_args(argv)
    spec = load_operator("fused_moe")
    seed_src = Path(spec.seed_path).read_text()
    scorer = TableScorer(json.loads(TABLE.read_text()), spec.select("hot"))
    tuned = scorer.score(read_configs(seed_src).value)
    start_src, how = start_source("fused_moe", seed_src, None)
    start = scorer.score(read_configs(start_src).value)
    if tuned is None or start is None:
        raise SystemExit(f"the table cannot score the {'tuned seed' if tuned is None else 'start'}")
    target = 0.95 * tuned
    runs = [replay(start_src, scorer, target, args.budget, args.samples, seed, args.margin) for seed in range(args.replays)]
    reached = [r["reached_at"] for r in runs if r["reached_at"] is not None]
    out = {"start": how, "start_score": start, "tuned_score": tuned, "target": target, "samples": args.samples,
           "budget": args.budget, "runs": runs}
    if args.json:
        args.json.write_text(json.dumps(out, indent=1))
    print(f"start {start:.3f}  tuned {tuned:.3f}  target {target:.3f}  samples {args.samples}  budget {args.budget}")
    for r in runs:
        print(f"  seed {r['seed']:>2}: final {r['final']:.3f} after {r['evaluations']} evaluations, "
              f"{r['acceptances']} acceptances, reached at {r['reached_at']}")
        if args.verbose:
            for line in r["accepted"]:
                print(f"      {line}")
    print(f"reached in {len(reached)} of {len(runs)} replays; median evaluations to reach "
          f"{statistics.median(reached) if reached else '-'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
