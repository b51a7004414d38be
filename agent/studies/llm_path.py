"""LLM-path study: does `aka optimize --proposer llm`, through the real OpenAI client code, accept exactly the
faster of four replayed kernels?

    python3 -m agent.studies.llm_path --op rms_norm --out /tmp/llm-path

One process does it all (issue 9, item 6):
1. from the operator's seed it builds (agent/studies/llm_path_candidates.py) the start, a correct kernel made
   clearly slower, and four replies: "slower" (correct, slower than the start), "broken" (a real numeric bug),
   "faster" (the tuned seed) and "cheat" (a red-team corpus file); each goes through the sandbox's lint
   here first (the cheat may fail it: the report says which gate stopped it);
2. it starts the local OpenAI-compatible server (agent/proposers/fake_llm_server.py) on 127.0.0.1, queued
   with an "ok" for the provider probe, then the four replies in the order slower, broken, faster, cheat;
3. it runs `aka optimize --op OP --shape-set hot --seed-kernel start.py --proposer llm --model openai/replay
   --api-base URL --iterations 4` in a subprocess with a dummy OPENAI_API_KEY and its own home under --out;
4. it reads the run's audit trail and matches each iteration to its reply by the sha256 of the kernel the
   proposer's own extractor takes from that reply.
The claim, on a GPU: exactly one candidate is accepted and it is "faster"; "slower" is rejected at
acceptance, "broken" at correctness, "cheat" at the gate its corpus header names. Without a GPU the kernels
run under Triton's interpreter and nothing is timed, so with the default acceptance.untimed=keep-incumbent
neither "faster" nor "slower" can be shown faster than the start: both are recorded as rejected at
acceptance, and the CPU claim checks only that the replies arrived in order and that "broken" and "cheat"
were stopped at their gates. It writes --out/llm_path.json (plus the kernels, the run's home and
optimize.log) and prints a short table last. Exit 0 the claim holds, 1 it does not, 2 a harness error (the
run did not finish, or a reply never reached the loop).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from agent.studies.llm_path_candidates import ORDER, ROOT, Candidate, build, cheat_stages, lint_all

MODEL = "openai/replay"
# The SDK will not start without a key; the local server never reads it.
DUMMY_KEY = "sk-replay-not-a-real-key-0000"
ITERATIONS = len(ORDER)
LOG_TAIL_LINES = 40


class HarnessError(RuntimeError):
    """The study could not run as designed (not a verdict on the loop): exit 2."""


def reply_text(c: Candidate) -> str:
    """A reply in the format the LLM proposer parses (CHANGED/WHY lines, then one python block)."""
    body = c.source if c.source.endswith("\n") else c.source + "\n"
    return f"CHANGED: {c.name}: {c.how}\nWHY: replayed by agent/studies/llm_path.py\n\n```python\n{body}```\n"


def expected_shas(op: str, replies: dict[str, str]) -> dict[str, str]:
    """sha256 -> reply name, of the kernel the proposer's own extractor takes from each reply."""
    from agent.audit import sha256_text
    from agent.proposers.llm_extract import extract_kernel
    out = {}
    for name, text in replies.items():
        source = extract_kernel(text, op)
        if source is None:
            raise HarnessError(f"reply {name!r} holds no kernel the LLM proposer can extract; fix reply_text")
        out[sha256_text(source)] = name
    if len(out) != len(replies):
        raise HarnessError(f"two replies carry the same kernel ({sorted(replies)}): they cannot be told apart")
    return out


def optimize_cmd(op: str, start: Path, home: Path, api_base: str) -> list[str]:
    return [sys.executable, "-m", "agent.cli_optimize", "--op", op, "--shape-set", "hot", "--seed-kernel",
            str(start), "--proposer", "llm", "--model", MODEL, "--api-base", api_base,
            "--iterations", str(ITERATIONS), "-c", f"home={home}", "-c", "knowledge.enabled=false"]


def iteration_rows(audit_db: Path, by_sha: dict[str, str]) -> tuple[dict, list[dict]]:
    """(the run's start and end, one row per proposed candidate) from the one run in the audit trail."""
    from agent.audit import Audit
    if not audit_db.exists():
        raise HarnessError(f"no audit trail at {audit_db}: the optimize run never started (see optimize.log)")
    with Audit(audit_db) as audit:
        run_ids = audit.run_ids()
        if len(run_ids) != 1:
            raise HarnessError(f"{audit_db} holds {len(run_ids)} runs, not 1: give a fresh --out")
        run_id = run_ids[0]
        bodies = [r.body for r in audit.records(run_id, "iteration")]
        end = audit.records(run_id, "run_end")
        verified = audit.verify()
    seed = next((b for b in bodies if b["record"]["is_seed"]), None)
    run = {"run_id": run_id, "start_sha256": seed and seed["source_sha256"],
           "start_verdict": seed and seed["record"]["verdict"], "start_score": seed and seed["record"]["score"],
           "end_reason": end[-1].body.get("reason") if end else "no run_end record (killed?)",
           "audit_verified": verified.ok, "audit_note": str(verified)}
    rows = []
    for b in bodies:
        rec = b["record"]
        if rec["is_seed"]:
            continue
        decision = b.get("decision") or {}
        rows.append({"iteration": rec["iteration"], "reply": by_sha.get(b["source_sha256"], "unknown"),
                     "verdict": rec["verdict"], "failed_stage": rec["failed_stage"],
                     "accepted": bool(rec["accepted"]), "score": rec["score"], "rule": decision.get("rule"),
                     "reason": decision.get("reason"), "lesson": rec.get("lesson", "")})
    return run, rows


def judge(run: dict, rows: list[dict], cheat_gates: tuple[str, ...], timed: bool) -> list[dict]:
    """The claim's checks, each {check, ok, detail}; on the CPU only those that need no timing."""
    by = {r["reply"]: r for r in rows}

    def row(name):
        r = by.get(name)
        return (None, "never evaluated") if r is None else (r, f"{r['verdict']} at {r['failed_stage']}")

    # An incumbent that fails its own gates is replaced by any correct candidate (agent/loop.py), which
    # would let "slower" in: the comparison is only meaningful from a start that passes.
    checks = [{"check": "the start passed every gate", "ok": run.get("start_verdict") == "accepted",
               "detail": run.get("start_verdict")},
              {"check": "each reply became one iteration, in the order sent",
               "ok": [r["reply"] for r in rows] == list(ORDER), "detail": [r["reply"] for r in rows]}]
    r, d = row("broken")
    checks.append({"check": "broken rejected at correctness",
                   "ok": bool(r) and not r["accepted"] and r["failed_stage"] == "correctness", "detail": d})
    r, d = row("cheat")
    checks.append({"check": f"cheat rejected at {'|'.join(cheat_gates)}",
                   "ok": bool(r) and not r["accepted"] and r["failed_stage"] in cheat_gates, "detail": d})
    if timed:
        r, d = row("slower")
        checks.append({"check": "slower rejected at acceptance",
                       "ok": bool(r) and not r["accepted"] and r["failed_stage"] == "acceptance", "detail": d})
        accepted = [x["reply"] for x in rows if x["accepted"]]
        checks.append({"check": "exactly one accepted, and it is faster", "ok": accepted == ["faster"],
                       "detail": accepted})
    return checks


def _fmt(x) -> str:
    return "-" if x is None else f"{x:.3f}"


def table(rows: list[dict], run: dict, checks: list[dict], timed: bool) -> str:
    lines = [f"start (seed of the run): score {_fmt(run['start_score'])}",
             f"{'#':>3}  {'reply':<7} {'verdict':<9} {'stage':<12} {'acc':<4} {'score':>6}  rule"]
    for r in rows:
        lines.append(f"{r['iteration']:>3}  {r['reply']:<7} {r['verdict']:<9} {r['failed_stage'] or '-':<12} "
                     f"{'yes' if r['accepted'] else 'no':<4} {_fmt(r['score']):>6}  {r['rule'] or '-'}")
    lines += [f"  [{'ok' if c['ok'] else 'FAIL'}] {c['check']}" for c in checks]
    if not timed:
        lines.append("  (no GPU: untimed, so faster vs slower is not checked; see the module docstring)")
    lines.append(f"claim {'holds' if all(c['ok'] for c in checks) else 'does NOT hold'}")
    return "\n".join(lines)


def run_study(op: str, out: Path, timeout_s: float) -> tuple[dict, str]:
    from agent.config import load_config, use_interpreter_if_no_gpu
    interpreter = use_interpreter_if_no_gpu()     # the driver's own view; the run decides the same for itself
    from agent.proposers.fake_llm_server import FakeLLMServer, Scripted
    from benchmarks.registry import load_operator

    spec = load_operator(op)
    cands = build(op, Path(spec.seed_path).read_text())
    lint = lint_all(op, cands, spec.arg_names)
    bad = [n for n, v in lint.items() if not v["ok"] and n != "cheat"]
    if bad:
        raise HarnessError(f"{bad} fail the lint ({[lint[n]['issues'] for n in bad]}): only the cheat may; "
                           f"fix the recipe in agent/studies/llm_path_candidates.py")
    (out / "candidates").mkdir(parents=True, exist_ok=True)
    for c in cands.values():
        (out / "candidates" / f"{c.name}.py").write_text(c.source)
    home = out / "home"
    replies = {name: reply_text(cands[name]) for name in ORDER}
    by_sha = expected_shas(op, replies)
    from agent.audit import sha256_text
    t0 = time.monotonic()
    probe = Scripted("ok", prompt_tokens=5, completion_tokens=1)
    with FakeLLMServer([probe] + [Scripted(replies[n], prompt_tokens=2000, completion_tokens=1500)
                                  for n in ORDER]) as srv:
        cmd = optimize_cmd(op, out / "candidates" / "start.py", home, srv.openai_base)
        env = {**os.environ, "OPENAI_API_KEY": DUMMY_KEY}
        with open(out / "optimize.log", "w") as log:
            try:
                proc = subprocess.run(cmd, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
                                      timeout=timeout_s)
            except subprocess.TimeoutExpired:
                raise HarnessError(f"aka optimize ran past --timeout-s {timeout_s:.0f}; see {out / 'optimize.log'}")
        paths = [r.path for r in srv.requests]
        unused = len(srv.queue)
    if proc.returncode != 0:
        raise HarnessError(f"aka optimize exited {proc.returncode}; see {out / 'optimize.log'}")
    run, rows = iteration_rows(load_config(None, [f"home={home}"]).audit_db, by_sha)
    if run["start_sha256"] != sha256_text(cands["start"].source):
        raise HarnessError("the run's seed is not start.py: --seed-kernel did not reach the loop")
    checks = judge(run, rows, cheat_stages(op), timed=not interpreter)
    report = {"op": op, "interpreter": interpreter, "timed": not interpreter, "model": MODEL,
              "command": cmd, "candidates": {n: {"how": c.how, "expect": c.expect, "lint": lint[n],
                                                 "sha256": sha256_text(c.source)} for n, c in cands.items()},
              "server": {"requests": len(paths), "paths": sorted(set(paths)), "replies_left": unused},
              **run, "iterations": rows, "checks": checks, "claim_holds": all(c["ok"] for c in checks),
              "wall_s": time.monotonic() - t0}
    return report, table(rows, run, checks, not interpreter)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--op", default="rms_norm")
    ap.add_argument("--out", required=True, type=Path, help="a fresh folder: kernels, the run's home, report")
    ap.add_argument("--timeout-s", type=float, default=1800.0, help="wall limit of the optimize run")
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    try:
        report, text = run_study(args.op, args.out, args.timeout_s)
    except (HarnessError, ValueError, SystemExit) as e:   # SystemExit: set_everywhere's refusal of a recipe
        (args.out / "llm_path.json").write_text(json.dumps({"op": args.op, "harness_error": str(e)}, indent=2))
        log = args.out / "optimize.log"
        if log.exists():    # the run's own words, for a caller that sees only this process's output
            print("".join(log.read_text().splitlines(keepends=True)[-LOG_TAIL_LINES:]), file=sys.stderr)
        print(f"harness error: {e}", file=sys.stderr)
        return 2
    (args.out / "llm_path.json").write_text(json.dumps(report, indent=2, default=str))
    print(text)
    return 0 if report["claim_holds"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
