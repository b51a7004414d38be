"""The nightly's plan, its state on disk, and its summary. The orchestration is in agent/cli_nightly.py.

configs/nightly.yaml:
    operators:                       # in order; per operator the `aka optimize` budget and proposer
      - {op: fused_moe, shape_set: hot, gpu_minutes: 60, model: anthropic/claude-sonnet-4-6, usd: 20}
      - {op: rms_norm, shape_set: decode, iterations: 40}
    overrides: []                    # -c key=value for every run (after the command line's own -c)
    continue_from_previous: true     # start each operator from the previous night's final kernel
    regression_tolerance: 0.01       # a final S_i this far below last night's counts as a regression (last
                                     # night's final kernel scored from its times on this night's floor)
    weights: traced.json             # optional: a weights file (aka weights --from-trace) for every run's shape
                                     # weights and the summary's w_i (`aka nightly --weights` overrides it)

Per-operator keys: op, shape_set, shapes (a shapes YAML), iterations, minutes, gpu_minutes, tokens, usd,
model, proposer, script (files for the scripted proposer), target, hardware, seed_kernel.

State: $AKA_HOME/nightly/NIGHT/state.json, rewritten atomically after every step, names for each
operator the audit head before its run started and the run's id; a restarted nightly finds an
unfinished night there and continues it (a run without run_end is resumed with `aka optimize --resume`).
"""
from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

BUDGET_KEYS = {"iterations": "--iterations", "minutes": "--minutes", "gpu_minutes": "--gpu-minutes",
               "tokens": "--tokens", "usd": "--usd", "target": "--target"}
TEXT_KEYS = {"shape_set": "--shape-set", "model": "--model", "proposer": "--proposer", "hardware": "--hardware",
             "shapes": "--shapes", "seed_kernel": "--seed-kernel"}
OP_KEYS = {"op", "script", *BUDGET_KEYS, *TEXT_KEYS}


class NightlyConfigError(ValueError):
    pass


@dataclass(frozen=True)
class OperatorJob:
    op: str
    options: dict[str, Any]

    @property
    def shape_set(self) -> str:
        return str(self.options.get("shape_set", "hot"))

    def optimize_args(self, base: Path, seed_kernel: str | None = None) -> list[str]:
        """The `aka optimize` arguments of a fresh run (paths relative to the config file's folder)."""
        args = ["--op", self.op]
        for key, flag in {**TEXT_KEYS, **BUDGET_KEYS}.items():
            value = self.options.get(key)
            if key == "seed_kernel" and value is None:
                value = seed_kernel
            if value is not None:
                args += [flag, str(base / value) if key in ("shapes", "seed_kernel") else str(value)]
        for s in self.options.get("script", []) or []:
            args += ["--script", str(base / s)]
        return args


@dataclass(frozen=True)
class NightlyPlan:
    jobs: tuple[OperatorJob, ...]
    overrides: tuple[str, ...] = ()
    continue_from_previous: bool = True
    regression_tolerance: float = 0.01
    base: Path = Path(".")
    weights: Path | None = None      # the weights file, resolved against the config's folder


def load_plan(path: Path) -> NightlyPlan:
    from benchmarks.registry import list_operators
    try:
        data = yaml.safe_load(Path(path).read_text()) or {}
    except (OSError, yaml.YAMLError) as e:
        raise NightlyConfigError(f"nightly config {path}: {e}")
    ops = data.get("operators")
    if not isinstance(ops, list) or not ops:
        raise NightlyConfigError(f"nightly config {path}: `operators` must be a non-empty list, e.g. "
                                 f"operators: [{{op: rms_norm, shape_set: decode, iterations: 40}}]")
    known, jobs, seen = list_operators(), [], set()
    for i, entry in enumerate(ops):
        if not isinstance(entry, dict) or "op" not in entry:
            raise NightlyConfigError(f"nightly config {path}: operators[{i}] needs an `op` key")
        unknown = set(entry) - OP_KEYS
        if unknown:
            raise NightlyConfigError(f"nightly config {path}: operators[{i}] ({entry['op']}): unknown key(s) "
                                     f"{', '.join(sorted(unknown))}; known: {', '.join(sorted(OP_KEYS))}")
        if entry["op"] not in known:
            raise NightlyConfigError(f"nightly config {path}: operators[{i}]: unknown operator {entry['op']!r}; "
                                     f"known: {', '.join(known)}")
        if entry["op"] in seen:
            raise NightlyConfigError(f"nightly config {path}: operator {entry['op']} is listed twice; one run each")
        seen.add(entry["op"])
        for key in BUDGET_KEYS:
            if key in entry and not (isinstance(entry[key], (int, float)) and entry[key] > 0):
                raise NightlyConfigError(f"nightly config {path}: {entry['op']}.{key} = {entry[key]!r}; "
                                         f"a positive number")
        jobs.append(OperatorJob(entry["op"], {k: v for k, v in entry.items() if k != "op"}))
    base = Path(path).resolve().parent
    weights = data.get("weights")
    if weights is not None and not isinstance(weights, str):
        raise NightlyConfigError(f"nightly config {path}: weights = {weights!r}; the path of a weights file "
                                 f"(aka weights --from-trace writes one)")
    return NightlyPlan(tuple(jobs), tuple(str(x) for x in data.get("overrides", []) or []),
                       bool(data.get("continue_from_previous", True)),
                       float(data.get("regression_tolerance", 0.01)), base, base / weights if weights else None)


def check_weights(plan: NightlyPlan, weights) -> None:
    """Every job's shapes can be weighed by the file (benchmarks.weights_file.WeightsFile): checked before the
    night starts, not when its optimize run refuses them hours later. Raises WeightsFileError."""
    from benchmarks.registry import load_operator, load_shapes
    from benchmarks.spec import select_shapes
    for job in plan.jobs:
        spec = load_operator(job.op)
        own = job.options.get("shapes")
        known = load_shapes(plan.base / own) if own else spec.shapes
        weights.reweigh(job.op, select_shapes(known, job.shape_set), known)


# ---- state ---------------------------------------------------------------------------------------
@dataclass
class NightState:
    night: str
    folder: Path
    ops: list[dict] = field(default_factory=list)   # op, status, run_id, audit_seq_before, exit_code
    finished: bool = False
    sessions: int = 1

    def save(self) -> None:
        from agent.audit import atomic_write
        atomic_write(self.folder / "state.json", json.dumps(
            {"night": self.night, "ops": self.ops, "finished": self.finished, "sessions": self.sessions}, indent=1))

    def entry(self, op: str) -> dict:
        return next(e for e in self.ops if e["op"] == op)


def nights_dir(home: Path) -> Path:
    return home / "nightly"


def open_night(home: Path, plan: NightlyPlan) -> tuple[NightState, bool]:
    """(state, resumed): the latest unfinished night, or a new one."""
    root = nights_dir(home)
    for folder in sorted(root.glob("*"), reverse=True):
        try:
            d = json.loads((folder / "state.json").read_text())
        except (OSError, ValueError):
            continue
        if not d.get("finished"):
            st = NightState(d["night"], folder, d["ops"], False, int(d.get("sessions", 1)) + 1)
            known = {e["op"] for e in st.ops}
            st.ops += [_new_entry(j.op) for j in plan.jobs if j.op not in known]
            st.save()
            return st, True
        break          # the latest night is finished: start a new one
    night = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    st = NightState(night, root / night, [_new_entry(j.op) for j in plan.jobs])
    st.folder.mkdir(parents=True, exist_ok=True)
    st.save()
    return st, False


def _new_entry(op: str) -> dict:
    return {"op": op, "status": "pending", "run_id": None, "audit_seq_before": None, "exit_code": None}


def previous_summary(home: Path, night: str) -> dict | None:
    """The summary of the latest finished night before `night`."""
    for folder in sorted(nights_dir(home).glob("*"), reverse=True):
        if folder.name < night and (folder / "summary.json").is_file():
            return json.loads((folder / "summary.json").read_text())
    return None


# ---- summary -------------------------------------------------------------------------------------
def _final_score(run) -> float | None:
    accepted = [p for p in run.iterations if p.accepted]
    return accepted[-1].score if accepted else None


def _first_score(run) -> float | None:
    """The score the run started from: its seed's, or in a --from-reference run (no seed) the first kernel
    that passed every gate; the failed tries before it have no score to start from."""
    return next((p.score for p in run.iterations if p.accepted), None)


def final_times(final) -> dict[str, float] | None:
    """The final kernel's time (us) at each visible shape, for the next night's comparison; None untimed."""
    if final is None or final.interpreter:
        return None
    times = {r.id: r.t_us for r in final.visible_shapes() if r.t_us is not None and r.error is None}
    return times or None


def previous_on_this_floor(prev: dict, final) -> tuple[float | None, bool]:
    """Last night's final S_i, rescored from its times on tonight's T_roof and T_floor (True) where it recorded
    a time at every shape tonight's final kernel was timed on; else its S_i as recorded (False). A decode
    shape's attainment is T_floor / T, and two nights' processes read floors up to 10% apart (more with an
    outlier: agent/run_floor.py), so comparing S_i as recorded flags a regression that is the floor's."""
    from benchmarks.scoring import operator_score, score_shape
    recorded = prev.get("s_i_after")
    times = prev.get("t_us_after") or {}
    rows = final.visible_shapes() if final is not None and not final.interpreter else []
    if not rows or any(r.id not in times or r.t_roof_us is None or not r.t_floor_us for r in rows):
        return recorded, False
    scores = [score_shape(r.id, r.weight, float(times[r.id]) * 1e-6, r.t_roof_us * 1e-6, r.t_floor_us * 1e-6)
              for r in rows]
    return operator_score(scores), True


def summarize(state: NightState, reports: dict, plan: NightlyPlan, previous: dict | None, home: Path,
              weights=None) -> dict:
    """What improved by how much, what regressed against the previous night, S_agg before and after.
    `weights` (benchmarks.weights_file.WeightsFile): each operator's w_i from it, else from its shape set."""
    from agent.run_floor import measured_floor_us
    from agent.suite import shape_set_weights
    from benchmarks.registry import load_operator
    from benchmarks.scoring import aggregate
    prev_ops = {o["op"]: o for o in (previous or {}).get("operators", [])}
    rows = []
    for job in plan.jobs:
        e, run = state.entry(job.op), reports.get(job.op)
        row = {"op": job.op, "shape_set": job.shape_set, "run_id": e["run_id"], "status": e["status"],
               "exit_code": e["exit_code"]}
        if run is not None:
            seed_si = run.seed.s_i if run.seed is not None else None
            final_si = run.final.s_i if run.final is not None else None
            row.update({"s_i_before": seed_si, "s_i_after": final_si,
                        "score_before": _first_score(run), "score_after": _final_score(run),
                        "iterations": len(run.iterations) - 1, "accepted": run.accepted_count,
                        "interpreter": run.interpreter, "end": run.end_reason,
                        "kernel_path": str(home / "runs" / run.run_id / "best.py")})
            row["improvement"] = (final_si - seed_si) if final_si is not None and seed_si is not None else None
            row["t_us_after"], row["t_floor_us"] = final_times(run.final), measured_floor_us(run.final)
            prev, rescored = previous_on_this_floor(prev_ops.get(job.op, {}), run.final)
            row["s_i_previous_night"], row["previous_night_rescored"] = prev, rescored
            row["regressed"] = bool(prev is not None and final_si is not None
                                    and final_si < prev - plan.regression_tolerance)
        rows.append(row)
    w_i = {j.op: (weights.operator_weights(j.shape_set, [j.op]) if weights is not None else   # each job's own set
                  shape_set_weights({j.op: load_operator(j.op)}, j.shape_set))[j.op] for j in plan.jobs if j.op in reports}

    def agg(key: str) -> float | None:
        vals = {r["op"]: r.get(key) for r in rows if r["op"] in w_i}
        return aggregate(vals, w_i) if vals and all(v is not None for v in vals.values()) else None
    return {"kind": "nightly", "night": state.night, "sessions": state.sessions, "operators": rows,
            "s_agg_before": agg("s_i_before"), "s_agg_after": agg("s_i_after"), "w_i": w_i,
            "weights_source": weights.path if weights is not None else "shape sets",
            "previous_night": (previous or {}).get("night"),
            "improved": [r["op"] for r in rows if (r.get("improvement") or 0) > 0],
            "regressed": [r["op"] for r in rows if r.get("regressed")],
            "failed": [r["op"] for r in rows if r["status"] == "failed"]}


def _f(v, spec=".3f") -> str:
    return "-" if v is None else format(v, spec)


def _w_source(s: dict) -> str:
    source = s.get("weights_source", "shape sets")
    return "its shape set" if source == "shape sets" else f"the weights file {source}"


def summary_markdown(s: dict) -> str:
    out = [f"# aka nightly {s['night']}", "",
           f"S_agg before {_f(s['s_agg_before'])}, after {_f(s['s_agg_after'])} (over this night's operators; "
           f"each operator's w_i from {_w_source(s)}). Previous night: {s['previous_night'] or 'none'}.", ""]
    if any(r.get("interpreter") for r in s["operators"]):
        out += ["**No GPU: kernels ran under Triton's interpreter; correctness is real, nothing is scored.**", ""]
    out += ["| operator | set | run | status | iterations | accepted | S_i before | S_i after | change | "
            "previous night | regressed |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in s["operators"]:
        out.append(f"| {r['op']} | {r['shape_set']} | {r['run_id'] or '-'} | {r['status']} | "
                   f"{r.get('iterations', '-')} | {r.get('accepted', '-')} | {_f(r.get('s_i_before'))} | "
                   f"{_f(r.get('s_i_after'))} | {_f(r.get('improvement'), '+.3f')} | "
                   f"{_f(r.get('s_i_previous_night'))}{'*' if r.get('previous_night_rescored') else ''} | "
                   f"{'yes' if r.get('regressed') else ''} |")
    out += ["", f"Improved: {', '.join(s['improved']) or 'none'}. Regressed: {', '.join(s['regressed']) or 'none'}. "
                f"Failed: {', '.join(s['failed']) or 'none'}."]
    if any(r.get("previous_night_rescored") for r in s["operators"]):
        out += ["", "\\* the previous night's final kernel scored from its recorded times on this night's T_roof "
                    "and T_floor (each night's processes measure their own floor)."]
    out += ["", "Report: report/index.html"]
    return "\n".join(out) + "\n"
