"""Drive `aka e2e` on the H200 for the models of issue 14 and write benchmarks/results/e2e_h200.md.

    python3 agent/studies/e2e_h200.py --out $OUT            # Llama-3.1-8B full depth, DeepSeek-V3 4 layers at TP8

Each model runs in its own `aka e2e` process (a fresh CUDA context, so one model's memory never shapes the
other's timing); the records come back as JSON and one markdown table is written from them.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RUNS = (("llama-3.1-8b", []), ("deepseek-v3", ["--tp", "8", "--layers", "4"]))


def render(records: list[dict], commands: list[str]) -> str:
    env = records[0]["env"] if records else {}
    lines = [f"# aka kernels inside a model on the H200 ({datetime.date.today().isoformat()})", "",
             f"GPU: {env.get('gpu', '?')}; torch {env.get('torch', '?')}, triton {env.get('triton', '?')}, "
             f"transformers {env.get('transformers', '?')}. Kernels: the seeds of this commit. Random weights "
             f"(configs/models.yaml, no download), bf16, sdpa attention.", "", "Commands:", ""]
    lines += [f"    {c}" for c in commands]
    for r in records:
        m = r["model"]
        lines += ["", f"## {m['name']}: {m['layers']} of {m['full_layers']} layers, tp={m['tp']}", "",
                  "replaced: " + ", ".join(f"{k} x{v}" for k, v in sorted(r["replaced"].items())), "",
                  "| phase | tokens | timing | stock us | aka us | stock/aka |", "|---|---|---|---|---|---|"]
        for row in r["latency"]:
            lines.append(f"| {row['phase']} | {row['tokens']} | {row['mode']} | {row['stock_us']:.1f} | "
                         f"{row['aka_us']:.1f} | {row['speedup']:.3f} |")
        s, d = r["scores"], r["drift"]
        fmt = lambda v: "-" if v is None else f"{v:.3f}"
        lines += ["", f"S_TTFT {fmt(s.get('S_TTFT'))}, S_TPOT {fmt(s.get('S_TPOT'))} (gate {r['gate']}); logits "
                      f"rel L2 against the fp32 model: aka {d['rel_l2']:.3g}, stock {d['stock_rel_l2']:.3g} (bound "
                      f"{d['bound']:.3g}); aka vs stock: max |d| {d['max_abs']:.3g}, mean KL "
                      f"{d['mean_kl']:.3g}, top-1 agreement {d['top1_agreement']:.3f}; "
                      f"**{'passed' if r['passed'] else 'failed'}**"]
        lines += [f"- {n}" for n in r["notes"]]
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True, help="folder for the JSON records and e2e_h200.md")
    ap.add_argument("--models", default=",".join(n for n, _ in RUNS))
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    records, commands = [], []
    for name, extra in RUNS:
        if name not in args.models.split(","):
            continue
        out = args.out / f"e2e_{name}.json"
        cmd = [sys.executable, "-m", "agent.cli", "e2e", "--model", name, *extra, "--json", str(out)]
        commands.append(" ".join(["python3 -m agent.cli e2e --model", name, *extra]))
        print("$", " ".join(cmd), flush=True)
        r = subprocess.run(cmd, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
        if out.is_file():
            records.append(json.loads(out.read_text()))
        else:
            print(f"{name}: no record (exit {r.returncode})", flush=True)
    text = render(records, commands)
    (args.out / "e2e_h200.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
