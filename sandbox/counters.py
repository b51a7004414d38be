"""Nsight Compute counters for a candidate's kernels: run ncu, parse its CSV, diagnose in plain English.

`collect` runs one ncu process per shape over `python -m sandbox.ncu_target`, which warms the candidate
up and then brackets a couple of calls with cudaProfilerStart/Stop; ncu runs with
`--profile-from-start off`, so only those calls are profiled. That is sturdier than
`--launch-skip/--launch-count`: how many launches a warm-up makes depends on the candidate (Triton
autotuning benchmarks every config, JIT compiles, allocator warm-up), so no fixed skip count is right.

Warp stalls use `smsp__average_warps_issue_stalled_<reason>_per_issue_active.ratio`: the metrics behind
the WarpStateStats section ("warp cycles per issued instruction", split by reason), present in
Nsight Compute 2019.5 through 2025.x. They are per-reason averages, so each reason's share of their sum
is its share of all warp cycles; unlike the smsp__pcsamp_* sampling counters they need no sampling pass.
A metric this ncu or GPU does not know makes ncu refuse the whole run: it is dropped and the run repeated.
"""
from __future__ import annotations

import csv
import dataclasses
import glob
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
NCU_LOCATIONS = ("/usr/local/cuda/bin/ncu", "/opt/nvidia/nsight-compute/*/ncu")

STALL_REASONS = ("barrier", "branch_resolving", "dispatch_stall", "drain", "imc_miss", "lg_throttle",
                 "long_scoreboard", "math_pipe_throttle", "membar", "mio_throttle", "misc", "no_instruction",
                 "not_selected", "selected", "short_scoreboard", "sleeping", "tex_throttle", "wait")
STALL_PREFIX, STALL_SUFFIX = "smsp__average_warps_issue_stalled_", "_per_issue_active.ratio"
# Not stalls: the warp issued, or was ready and another warp issued.
NOT_STALLS = ("selected", "not_selected")

M_DURATION = "gpu__time_duration.sum"
M_DRAM = "dram__throughput.avg.pct_of_peak_sustained_elapsed"
M_SM = "sm__throughput.avg.pct_of_peak_sustained_elapsed"
M_OCCUPANCY = "sm__warps_active.avg.pct_of_peak_sustained_active"
M_L2_HIT = "lts__t_sector_hit_rate.pct"
M_REGISTERS = "launch__registers_per_thread"
M_LOCAL = ("l1tex__t_bytes_pipe_lsu_mem_local_op_ld.sum", "l1tex__t_bytes_pipe_lsu_mem_local_op_st.sum")
M_TENSOR = ("sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active",    # mma.sync
            "sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active")    # Hopper wgmma
METRICS = (M_DURATION, M_DRAM, M_SM, M_OCCUPANCY, M_L2_HIT, M_REGISTERS, *M_LOCAL, *M_TENSOR,
           *(f"{STALL_PREFIX}{r}{STALL_SUFFIX}" for r in STALL_REASONS))

STALL_MEANING = {
    "long_scoreboard": "waiting on global or local memory: too few loads in flight, or register spills",
    "short_scoreboard": "waiting on shared memory or special math (exp, rsqrt)",
    "barrier": "waiting at a CTA barrier: warps finish their share unevenly",
    "math_pipe_throttle": "a math pipe is saturated: the kernel is compute-bound on it",
    "mio_throttle": "shared-memory / special-math instruction queue full",
    "lg_throttle": "global-memory instruction queue full: many small loads; use wider, contiguous tiles",
    "wait": "fixed-latency dependencies: little independent work between dependent instructions",
    "no_instruction": "instruction cache misses or branch targets not fetched",
    "dispatch_stall": "the dispatcher could not issue the selected instruction",
    "drain": "waiting for stores to drain at exit",
    "membar": "waiting at a memory barrier",
    "branch_resolving": "branch targets being computed",
    "imc_miss": "constant-cache misses",
    "sleeping": "warps asleep",
    "tex_throttle": "texture queue full",
    "misc": "miscellaneous",
}
# ncu's base units (--print-units base) first; the scaled spellings of --print-units auto after them.
_TIME_TO_US = {"": 1e-3, "ns": 1e-3, "nsecond": 1e-3, "us": 1.0, "usecond": 1.0, "µs": 1.0, "ms": 1e3, "msecond": 1e3,
               "s": 1e6, "second": 1e6}
_BYTES = {"": 1.0, "byte": 1.0, "b": 1.0, "kbyte": 1e3, "kb": 1e3, "mbyte": 1e6, "mb": 1e6, "gbyte": 1e9, "gb": 1e9,
          "kib": 1024.0, "mib": 1024.0 ** 2, "gib": 1024.0 ** 3}


@dataclass(frozen=True)
class KernelCounters:
    kernel: str
    duration_us: float | None
    dram_pct: float | None
    sm_pct: float | None
    achieved_occupancy_pct: float | None
    l2_hit_pct: float | None
    registers: int | None
    local_spill_bytes: float | None      # local-memory traffic (register spills), bytes
    tensor_pipe_pct: float | None        # the busier of the mma.sync and wgmma tensor pipes
    top_stalls: tuple[tuple[str, float], ...]   # (reason, % of warp cycles), largest first, stalls only


@dataclass(frozen=True)
class CounterRecord:
    available: bool
    reason: str
    shapes: tuple[tuple[dict, tuple[KernelCounters, ...]], ...]
    raw_csv_tail: str

    def to_json(self) -> dict:
        return {"available": self.available, "reason": self.reason,
                "shapes": [{"dims": dict(d), "kernels": [dataclasses.asdict(k) for k in ks]} for d, ks in self.shapes],
                "diagnoses": self.diagnoses(), "raw_csv_tail": self.raw_csv_tail}

    def diagnoses(self) -> list[str]:
        """Short English diagnoses for the proposer, for each kernel taking >= 10% of a shape's time."""
        lines: list[str] = []
        for dims, kernels in self.shapes:
            total = sum(k.duration_us or 0.0 for k in kernels)
            label = " ".join(f"{name}={value}" for name, value in dims.items())
            for k in sorted(kernels, key=lambda k: -(k.duration_us or 0.0)):
                if total > 0 and (k.duration_us or 0.0) < 0.1 * total:
                    continue
                lines += [f"[{label}] {short_kernel_name(k.kernel)}: {text}" for text in diagnose_kernel(k)]
        return lines


# ---------------------------------------------------------------- diagnoses (pure)

def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.0f}%"


def _bytes(n: float) -> str:
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n:.0f} B"


def short_kernel_name(name: str) -> str:
    """A C++ kernel name without its template arguments and signature ('void at::native::foo<4, F>(int, T2)'
    -> 'at::native::foo'); Triton kernel names are already short."""
    name = name.removeprefix("void ").strip()
    cut = min((i for i in (name.find("<"), name.find("(")) if i > 0), default=len(name))
    return name[:cut]


def diagnose_kernel(k: KernelCounters) -> list[str]:
    out: list[str] = []
    d, s, t = k.dram_pct, k.sm_pct, k.tensor_pipe_pct
    l2 = f" (L2 hit rate {k.l2_hit_pct:.0f}%)" if k.l2_hit_pct is not None else ""
    if d is not None or s is not None:
        dv, sv = d or 0.0, s or 0.0
        if dv >= 70:
            out.append(f"memory-bound at {dv:.0f}% of DRAM peak{l2}: near the bandwidth roof; "
                       "only moving fewer bytes helps (fuse passes, read each input once)")
        elif sv >= 70:
            pipes = f"; tensor pipes {t:.0f}% busy" if t is not None else ""
            hint = ("the math is not on tensor cores: use tl.dot on bf16/fp8 tiles"
                    if t is not None and t < 20 else "larger tiles or fewer instructions per FLOP help")
            out.append(f"compute-bound at {sv:.0f}% of SM throughput{pipes}: {hint}")
        elif max(dv, sv) < 30:
            out.append(f"latency-bound: DRAM {_pct(d)} and SM {_pct(s)} of peak: too little work in flight "
                       "(grid too small or a long dependent chain per program): more programs, split long "
                       "loops, more num_stages")
        elif dv >= sv:
            out.append(f"memory-bound at {dv:.0f}% of DRAM peak{l2}: loads are not coalesced or too few are in "
                       "flight (contiguous BLOCK tiles along the fastest dimension, more programs or num_stages)")
        else:
            out.append(f"SM-bound at {sv:.0f}% of SM throughput with DRAM at {_pct(d)}: instruction overhead "
                       "(index math, masks, conversions) limits it; fewer instructions per element help")
    spill = k.local_spill_bytes or 0.0
    if spill > 0:
        regs = f"registers {k.registers}" if k.registers is not None else "registers"
        out.append(f"{regs} with {_bytes(spill)} local spills: lower BLOCK sizes or num_stages")
    elif k.registers is not None and k.registers >= 128:
        warps = 65536 // (-(-k.registers * 32 // 256) * 256)
        out.append(f"registers {k.registers} per thread allow only {warps} of 64 warps per SM: "
                   "smaller BLOCK sizes or fewer num_warps raise occupancy if latency limits the kernel")
    occ = k.achieved_occupancy_pct
    if occ is not None and occ < 20 and (s is None or s < 70):
        out.append(f"achieved occupancy {occ:.0f}%: few warps to hide latency (registers, shared memory or a "
                   "small grid limit it)")
    if k.top_stalls:
        reason, share = k.top_stalls[0]
        out.append(f"top stall: {reason}, {share:.0f}% of warp cycles ({STALL_MEANING.get(reason, reason)})")
    return out


# ---------------------------------------------------------------- CSV parsing (pure)

def _number(text: str) -> float | None:
    s = text.strip().replace("\u00a0", "")
    if s.lower() in ("", "n/a", "na", "nan", "-"):
        return None
    if re.fullmatch(r"[-+]?\d{1,3}(,\d{3})+(\.\d*)?([eE][-+]?\d+)?", s):
        s = s.replace(",", "")                     # thousands separators: "1,234,567.5"
    elif "," in s and "." not in s:
        s = s.replace(",", ".")                    # decimal comma from a non-English locale: "9,25"
    try:
        return float(s)
    except ValueError:
        return None


def _scaled(value: float | None, unit: str, table: dict[str, float]) -> float | None:
    """value in the table's unit; None for a unit spelling we do not know (better absent than wrong)."""
    factor = table.get(unit.strip().lower())
    return None if value is None or factor is None else value * factor


def _rows(text: str) -> tuple[list[str], list[list[str]]]:
    """Header and data rows of ncu's CSV, skipping ==PROF== lines and the program's own output."""
    lines = [ln for ln in text.splitlines() if ln.startswith('"')]
    for i, line in enumerate(lines):
        if '"Kernel Name"' in line and '"ID"' in line:
            parsed = list(csv.reader(lines[i:]))
            return parsed[0], parsed[1:]
    return [], []


def _launches(text: str) -> list[tuple[str, dict[str, tuple[str, str]]]]:
    """[(kernel name, {metric: (unit, value text)})] per profiled launch, in ncu's ID order."""
    header, rows = _rows(text)
    if not header:
        return []
    col = {name: i for i, name in enumerate(header)}
    launches: dict[str, tuple[str, dict]] = {}
    if "Metric Name" in col:                                    # long format: one row per launch and metric
        for r in rows:
            if len(r) < len(header):
                continue
            unit = r[col["Metric Unit"]] if "Metric Unit" in col else ""
            _, metrics = launches.setdefault(r[col["ID"]], (r[col["Kernel Name"]], {}))
            metrics[r[col["Metric Name"]]] = (unit, r[col["Metric Value"]])
    else:                                                        # wide format: a units row, then one row per launch
        metric_cols = [(n, i) for n, i in col.items() if "__" in n]
        units = {}
        for r in rows:
            if len(r) < len(header):
                continue
            if not r[col["ID"]].strip():
                units = {n: r[i] for n, i in metric_cols}
                continue
            launches[r[col["ID"]]] = (r[col["Kernel Name"]], {n: (units.get(n, ""), r[i]) for n, i in metric_cols})
    order = sorted(launches, key=lambda x: (0, int(x)) if x.strip().isdigit() else (1, x))
    return [launches[i] for i in order]


def _kernel_counters(name: str, metrics: dict[str, tuple[str, str]]) -> KernelCounters:
    def val(metric: str, table: dict[str, float] | None = None) -> float | None:
        if metric not in metrics:
            return None
        unit, text = metrics[metric]
        return _scaled(_number(text), unit, table) if table else _number(text)

    local = [v for v in (val(m, _BYTES) for m in M_LOCAL) if v is not None]
    tensor = [v for v in (val(m) for m in M_TENSOR) if v is not None]
    stalls = {r: v for r in STALL_REASONS if (v := val(f"{STALL_PREFIX}{r}{STALL_SUFFIX}")) is not None}
    total = sum(stalls.values())
    top = tuple(sorted(((r, 100.0 * v / total) for r, v in stalls.items() if r not in NOT_STALLS and v > 0),
                       key=lambda rv: -rv[1])[:3]) if total > 0 else ()
    regs = val(M_REGISTERS)
    return KernelCounters(kernel=name, duration_us=val(M_DURATION, _TIME_TO_US), dram_pct=val(M_DRAM),
                          sm_pct=val(M_SM), achieved_occupancy_pct=val(M_OCCUPANCY), l2_hit_pct=val(M_L2_HIT),
                          registers=None if regs is None else int(round(regs)),
                          local_spill_bytes=sum(local) if local else None,
                          tensor_pipe_pct=max(tensor) if tensor else None, top_stalls=top)


def parse_ncu_csv(text: str) -> list[KernelCounters]:
    """One KernelCounters per profiled kernel launch, in launch order. "n/a" becomes None."""
    return [_kernel_counters(name, metrics) for name, metrics in _launches(text)]


def merge_launches(launches: list[KernelCounters]) -> tuple[KernelCounters, ...]:
    """One record per kernel name (first-launch order): the mean of each counter over its launches."""
    groups: dict[str, list[KernelCounters]] = {}
    for k in launches:
        groups.setdefault(k.kernel, []).append(k)

    def mean(values):
        vs = [v for v in values if v is not None]
        return sum(vs) / len(vs) if vs else None

    merged = []
    for name, ks in groups.items():
        fields = {f.name: mean(getattr(k, f.name) for k in ks) for f in dataclasses.fields(KernelCounters)
                  if f.name not in ("kernel", "registers", "top_stalls")}
        stalls: dict[str, list[float]] = {}
        for k in ks:
            for reason, share in k.top_stalls:
                stalls.setdefault(reason, []).append(share)
        top = tuple(sorted(((r, sum(v) / len(ks)) for r, v in stalls.items()), key=lambda rv: -rv[1])[:3])
        merged.append(KernelCounters(kernel=name, registers=ks[0].registers, top_stalls=top, **fields))
    return tuple(merged)


def unknown_metrics(output: str, requested: tuple[str, ...]) -> set[str]:
    """Metrics ncu refused ("Failed to find metric regex:^name...", "Failed to access the following N metrics:")."""
    bad: set[str] = set()
    for m in re.finditer(r"Failed to find metric (?:regex:)?\^?([A-Za-z0-9_.]+)", output):
        stem = m.group(1).replace("\\", "").rstrip(".")
        bad |= {r for r in requested if r == stem or r.startswith(stem + ".")}
    for m in re.finditer(r"Failed to access the following \d+ metrics?: ([^\n]+)", output):
        bad |= {r for r in requested if r in {x.strip() for x in m.group(1).split(",")}}
    return bad


# ---------------------------------------------------------------- running ncu

def find_ncu(path: str | None = None, locations: tuple[str, ...] = NCU_LOCATIONS) -> str | None:
    found = shutil.which("ncu", path=path)
    if found:
        return found
    for pattern in locations:
        hits = sorted(p for p in glob.glob(pattern) if os.access(p, os.X_OK))
        if hits:
            return hits[-1]
    return None


HAS_NCU: bool = find_ncu() is not None


def collect(candidate_path: str, op: str, dims_list: list[dict], dtype: str, timeout_s: float = 600) -> CounterRecord:
    """Counters of the candidate's kernels for each shape; CounterRecord(available=False, reason) without ncu."""
    return collect_using(find_ncu(), candidate_path, op, dims_list, dtype, timeout_s)


def collect_using(ncu: str | None, candidate_path: str, op: str, dims_list: list[dict], dtype: str,
                  timeout_s: float = 600) -> CounterRecord:
    if ncu is None:
        return CounterRecord(False, "ncu not found on PATH, /usr/local/cuda/bin or /opt/nvidia/nsight-compute/*/: "
                             "install Nsight Compute to get counters", (), "")
    if not dims_list:
        return CounterRecord(False, "no shapes to profile: dims_list is empty", (), "")
    deadline = time.monotonic() + timeout_s
    shapes, problems, tail, dropped = [], [], "", set()
    metrics = METRICS
    for dims in dims_list:
        while True:
            left = deadline - time.monotonic()
            if left <= 1:
                problems.append(f"{dims}: no time left of timeout_s={timeout_s:g}")
                break
            rc, output = _run_ncu(ncu, metrics, candidate_path, op, dims, dtype, left)
            tail = output[-4000:]
            refused = unknown_metrics(output, metrics)
            if rc != 0 and refused:
                dropped |= refused
                metrics = tuple(m for m in metrics if m not in refused)
                continue                       # repeat without the metrics this ncu/GPU does not know
            kernels = merge_launches(parse_ncu_csv(output))
            if kernels:
                shapes.append((dict(dims), kernels))
            else:
                problems.append(f"{dims}: {_failure(rc, output)}")
            break
    notes = [f"not collected (unknown to this ncu or GPU): {', '.join(sorted(dropped))}"] if dropped else []
    reason = "; ".join(problems + notes)
    return CounterRecord(bool(shapes), reason, tuple(shapes), tail)


def _failure(rc: int | None, output: str) -> str:
    if "ERR_NVGPUCTRPERM" in output:
        return ("ncu may not read GPU performance counters (ERR_NVGPUCTRPERM): run as root or load the driver "
                "with NVreg_RestrictProfilingToAdminUsers=0")
    if rc is None:
        return "ncu timed out and was killed"
    errors = [ln for ln in output.splitlines() if "ERROR" in ln or "Error" in ln or "Traceback" in ln]
    detail = " | ".join(errors[-3:]) or output.strip()[-300:]
    return f"ncu exited with {rc} and profiled no kernel ({detail or 'no output'})"


def _run_ncu(ncu: str, metrics: tuple[str, ...], candidate_path: str, op: str, dims: dict, dtype: str,
             timeout_s: float) -> tuple[int | None, str]:
    """(exit code or None on timeout, ncu log + the target's output)."""
    with tempfile.TemporaryDirectory(prefix="aka-ncu-") as tmp:
        log = os.path.join(tmp, "ncu.csv")
        cmd = [ncu, "--clock-control", "none", "--profile-from-start", "off", "--print-units", "base", "--csv",
               "--log-file", log, "--metrics", ",".join(metrics),
               sys.executable, "-m", "sandbox.ncu_target", "--op", op, "--candidate",
               str(Path(candidate_path).resolve()), "--dims", json.dumps(dims), "--dtype", dtype]
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")])),
                   LC_ALL="C")
        proc = subprocess.Popen(cmd, cwd=REPO_ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True, start_new_session=True)
        try:
            out, _ = proc.communicate(timeout=timeout_s)
            rc: int | None = proc.returncode
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)    # ncu and the target it launched, nothing else
            out, _ = proc.communicate()
            rc = None
        logged = Path(log).read_text(errors="replace") if os.path.exists(log) else ""
    return rc, logged + "\n" + (out or "")
