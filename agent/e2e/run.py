"""One e2e measurement: build, swap, measure, and the verdict record (JSON-able, kept for `aka audit export`)."""
from __future__ import annotations

import datetime
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import yaml

from agent.e2e import measure
from agent.e2e.kernels import Kernel
from agent.e2e.models import ModelInfo, build

SERVING_MIX = Path(__file__).resolve().parents[2] / "configs" / "serving_mix.yaml"


def hot_tokens(phase: str, path: Path = SERVING_MIX) -> list[int]:
    """The token counts (prefill) or batch sizes (decode) of the serving mix, the ones the hot shapes come from."""
    mix = yaml.safe_load(path.read_text())
    return sorted(int(t) for t in mix["phases"][phase]["tokens"])


@dataclass(frozen=True)
class E2EReport:
    model: ModelInfo
    kernels: dict[str, dict[str, str]]           # op -> {origin, sha256}
    replaced: dict[str, int]                      # aka module class -> count
    latency: tuple[measure.LatencyRow, ...]
    drift: measure.Drift
    device: str
    notes: tuple[str, ...] = ()
    env: dict[str, Any] = field(default_factory=dict)
    accuracy: Any = None                          # agent.e2e.accuracy.Accuracy with real weights (--accuracy)

    @property
    def scores(self) -> dict[str, float | None]:
        return measure.gates(list(self.latency))

    @property
    def passed(self) -> bool:
        s = [v for v in self.scores.values() if v is not None]
        return (self.drift.passed and all(v >= measure.GATE for v in s)
                and (self.accuracy is None or self.accuracy.passed))

    def to_json(self) -> dict:
        return {"kind": "e2e", "model": {**self.model.__dict__}, "kernels": self.kernels, "replaced": self.replaced,
                "latency": [r.to_json() for r in self.latency], "drift": self.drift.to_json(),
                "scores": self.scores, "gate": measure.GATE, "passed": self.passed, "device": self.device,
                "notes": list(self.notes), "env": self.env,
                "accuracy": None if self.accuracy is None else self.accuracy.to_json()}


def run(name: str, kernels: dict[str, Kernel], *, tp: int = 1, layers: int | None = None,
        phases: tuple[str, ...] = ("prefill", "decode"), tokens: dict[str, list[int]] | None = None,
        device: str = "cuda", overrides: dict | None = None, dtype: str = "bf16",
        say: Callable[[str], None] = print) -> E2EReport:
    from agent.e2e.modules import swap
    model, info = build(name, tp=tp, layers=layers, device=device, overrides=overrides, dtype=dtype)
    say(f"built {info.line()}")
    plan = swap(model, {op: k.fn for op, k in kernels.items()})
    say("replaced: " + ", ".join(f"{n} x{c}" for n, c in sorted(plan.counts().items())))
    vocab = int(info.config["vocab_size"])
    notes = []
    rows: list[measure.LatencyRow] = []
    if device == "cuda":
        for phase in phases:
            for t in (tokens or {}).get(phase) or hot_tokens(phase):
                row = measure.latency(model, plan, phase, t, vocab=vocab)
                say(f"{phase} tokens={t}: stock {row.stock_us:.1f} us, aka {row.aka_us:.1f} us "
                    f"({row.speedup:.3f}x, {row.mode})")
                rows.append(row)
        notes.append("decode step: B new tokens with no KV cache (attention over the cache left out; it is not "
                     "replaced and would add the same time to both), so S_TPOT bounds the ratio with a cache")
    else:
        notes.append("no GPU: kernels ran under Triton's interpreter; latency not measured, drift only")
    d = measure.drift(model, plan, vocab=vocab, device=device, dtype=dtype,
                      tokens=64 if device == "cuda" else 8, prompts=4 if device == "cuda" else 2)
    say(f"drift vs the fp32 model: aka rel L2 {d.rel_l2:.3g}, stock {d.stock_rel_l2:.3g} (bound {d.bound:.3g}); "
        f"aka vs stock: max |d| {d.max_abs:.4g}, mean KL {d.mean_kl:.3g}, top-1 agreement {d.top1_agreement:.3f}")
    return E2EReport(model=info, kernels=kernel_origins(kernels), replaced=plan.counts(), latency=tuple(rows),
                     drift=d, device=device, notes=tuple(notes), env=environment(device))


def kernel_origins(kernels: dict[str, Kernel]) -> dict[str, dict[str, str]]:
    return {op: {"origin": k.origin, "sha256": k.sha256} for op, k in kernels.items()}


def environment(device: str) -> dict[str, Any]:
    import torch
    env = {"torch": torch.__version__}
    try:
        import transformers
        import triton
        env.update(transformers=transformers.__version__, triton=triton.__version__)
        if device == "cuda":
            env["gpu"] = torch.cuda.get_device_name(0)
    except Exception:
        pass
    return env


def save(report: E2EReport, home: Path) -> Path:
    """Keep the record where `aka audit export` looks for a kernel's e2e evidence ($AKA_HOME/e2e/)."""
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    path = home / "e2e" / f"{report.model.name}-{stamp}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(report.to_json(), indent=2, default=str))
    return path


def evidence_for(home: Path, sha256: str) -> list[dict]:
    """Every saved e2e record that used the kernel with this source hash, oldest first."""
    out = []
    for p in sorted((home / "e2e").glob("*.json")) if (home / "e2e").is_dir() else []:
        try:
            rec = json.loads(p.read_text())
        except (OSError, json.JSONDecodeError):
            continue
        if any(k.get("sha256") == sha256 for k in rec.get("kernels", {}).values()):
            out.append({**rec, "file": str(p)})
    return out
