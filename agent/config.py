"""Configuration: configs/default.yaml, then a user file, then `-c key.path=value` overrides,
validated into one frozen object. The one place environment variables are read.
"""
from __future__ import annotations

import dataclasses
import os
import types
import typing
from dataclasses import dataclass, field, fields, is_dataclass
from pathlib import Path
from typing import Any, get_type_hints

import yaml

from sandbox.settings import SandboxSettings

PROJECT_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_CONFIG = PROJECT_ROOT / "configs" / "default.yaml"


class ConfigError(ValueError):
    pass


# The sandbox owns its settings (sandbox/settings.py); the config file's `sandbox:` section is read into
# that very class, so no field is copied by hand between the config and an evaluation request.
SandboxConfig = SandboxSettings


@dataclass(frozen=True)
class DropoutConfig:
    enabled: bool = True
    """Optimization dropout on stalls; off for ablations."""
    patience: int = 4
    """Iterations without an accepted candidate before dropout rebuilds the context."""
    p: float = 0.5
    """Fraction of older memory records masked at a dropout."""


@dataclass(frozen=True)
class LLMConfig:
    api_base: str | None = None
    """Base URL of an OpenAI-compatible server (vLLM, SGLang, Ollama, OpenRouter)."""
    timeout_s: float = 120.0
    """Per-request timeout (a non-streamed 8192-token reply at ~100 tokens/s takes ~80 s)."""
    max_retries: int = 4
    """Retries with exponential backoff (or the server's Retry-After, capped) on 429, 5xx and timeouts."""
    proposal_timeout_s: float = 290.0
    """Wall-clock cap on one proposal, all its calls and retries together: no attempt starts that could
    end past it, so a dead provider costs at most this per proposal (under 5 minutes)."""
    max_retry_after_s: float = 60.0
    """Cap on a server's Retry-After wait."""
    max_tokens: int = 8192
    """Completion budget of one call."""
    temperature: float = 0.7
    stream: bool = False
    """Stream replies (the kernel is extracted once the stream ends)."""
    usd_per_mtok_in: float | None = None
    """Price for models the SDKs do not know, USD per million prompt tokens."""
    usd_per_mtok_out: float | None = None
    """Price for models the SDKs do not know, USD per million completion tokens."""


@dataclass(frozen=True)
class AcceptanceConfig:
    alpha: float = 0.01
    """False-accept rate of the one-worker A/B (README, "The A/B statistic"): a kernel no faster than the
    incumbent passes its paired test with probability at most alpha (rounds: sandbox.ab_rounds)."""
    repeats: int = 3
    """Interleaved A/B re-measurements in fresh processes, for evaluators that cannot time two kernels in
    one worker (test fakes); the sandbox itself uses the one-worker A/B."""
    min_gain: float = 0.0
    """Extra margin on top of the measured noise a candidate must clear."""
    screen: bool = True
    """Skip the A/B re-measurement of a candidate whose first score is below the incumbent's by more than
    screen_margin: the A/B can only confirm a gain, never create one, so the screen saves GPU time and
    accepts nothing the full rule would reject."""
    screen_margin: float = 0.005
    """Relative: a first score within this fraction below the incumbent's still gets its A/B (one
    measurement each side is noisy; a real gain near the noise can read slightly low once)."""
    timing_first: str = "auto"
    """Time a candidate alone before its correctness trials, and reject it there when it reads below the
    incumbent (timed the same way) by more than screen_margin: "auto" for the offline search on a GPU
    (most of its moves are slower, and the trials are most of a full evaluation), "always", or "never"
    (every candidate gets the full evaluation first; an LLM's broken kernel is then told its correctness
    failure, not that it was slow). A candidate that passes the screen gets every gate before acceptance."""
    screen_bar_every: int = 8
    """The screens' bar is the median of the incumbent's own timing-only evaluations, and the incumbent is timed
    alone again after this many screens against it (0: once per incumbent). One kernel's decode times read up to
    3-8% apart between two processes (an H100, session 36), so a bar timed once puts every screen of that
    incumbent that far ahead or behind for its whole life."""
    winner_holdouts: bool = True
    """Candidates' hidden hold-outs are drawn at the model sizes of the scored shapes, and a winner, before it
    becomes the incumbent, is checked once more on hold-outs drawn at every published shape of the operator
    (a correctness-only evaluation; rule "winner-holdouts"). Off: every candidate's hold-outs come from all
    published shapes. Either way an accepted kernel has passed hold-outs at every model; on the H200 those
    at models no scored shape uses compiled 22-76 s of new specializations per fused_moe candidate."""
    untimed: str = "keep-incumbent"
    """Without timing (the interpreter): "keep-incumbent" (nothing can be shown faster) or "accept-correct"
    (a changed candidate that passes every gate replaces the incumbent; for tests and demos of the loop)."""


@dataclass(frozen=True)
class KnowledgeConfig:
    enabled: bool = True
    """Retrieve snippets for the prompt."""
    k: int = 6
    """Snippets per prompt."""
    token_budget: int = 3000
    """Approximate token cap on retrieved text in one prompt."""
    hide_provenance: bool = False
    """Hide source paths and project names from the prompt (hidden-provenance contract)."""


@dataclass(frozen=True)
class Config:
    hardware: str = "auto"
    """Hardware profile (configs/hardware/<name>.yaml) or "auto" to read the GPU's name."""
    ceilings: str = "calibrated"
    """Ceilings scores use: "calibrated" (when `aka calibrate` has run, else datasheet) or "datasheet"."""
    home: str = ""
    """Where aka keeps runs, the audit database, calibration and the knowledge base ($AKA_HOME, else ~/.aka)."""
    sandbox: SandboxConfig = field(default_factory=SandboxConfig)
    dropout: DropoutConfig = field(default_factory=DropoutConfig)
    llm: LLMConfig = field(default_factory=LLMConfig)
    acceptance: AcceptanceConfig = field(default_factory=AcceptanceConfig)
    knowledge: KnowledgeConfig = field(default_factory=KnowledgeConfig)

    @property
    def home_dir(self) -> Path:
        return Path(self.home).expanduser()

    @property
    def audit_db(self) -> Path:
        return self.home_dir / "audit.db"

    @property
    def kb_dir(self) -> Path:
        return self.home_dir / "kb"


def _coerce(value: Any, typ: Any, key: str) -> Any:
    if type(typ) is types.UnionType or typing.get_origin(typ) is typing.Union:
        args = typing.get_args(typ)
        if value is None and type(None) in args:
            return None
        typ = next(a for a in args if a is not type(None))
    try:
        if typ is bool:
            if isinstance(value, bool):
                return value
            if str(value).lower() in ("1", "true", "yes", "on"):
                return True
            if str(value).lower() in ("0", "false", "no", "off"):
                return False
            raise ValueError(value)
        if typ is int:
            if isinstance(value, bool) or float(value) != int(float(value)):
                raise ValueError(value)
            return int(float(value))
        if typ is float:
            if isinstance(value, bool):
                raise ValueError(value)
            return float(value)
        if typ is str:
            if not isinstance(value, str):
                raise ValueError(value)
            return value
        if typing.get_origin(typ) is tuple:
            if isinstance(value, str):
                value = [v.strip() for v in value.split(",") if v.strip()]
            return tuple(value)
    except (TypeError, ValueError):
        raise ConfigError(f"config key {key}: {value!r} is not a valid {typ.__name__}") from None
    return value


def _build(cls, data: dict[str, Any], prefix: str = ""):
    hints = get_type_hints(cls)
    known = {f.name for f in fields(cls)}
    unknown = set(data) - known
    if unknown:
        raise ConfigError(f"unknown config key(s) {', '.join(sorted(prefix + u for u in unknown))}; "
                          f"{prefix or 'top level'} accepts: {', '.join(sorted(known))}")
    kwargs = {}
    for f in fields(cls):
        if f.name not in data:
            continue
        typ = hints[f.name]
        if is_dataclass(typ):
            if not isinstance(data[f.name], dict):
                raise ConfigError(f"config key {prefix}{f.name} must be a mapping")
            kwargs[f.name] = _build(typ, data[f.name], f"{prefix}{f.name}.")
        else:
            kwargs[f.name] = _coerce(data[f.name], typ, prefix + f.name)
    return cls(**kwargs)


def _merge(base: dict, extra: dict) -> dict:
    out = dict(base)
    for k, v in extra.items():
        out[k] = _merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def parse_override(text: str) -> dict[str, Any]:
    """`a.b=value` -> {"a": {"b": value}}; the value is parsed as YAML (so 3, true, [1,2] work)."""
    if "=" not in text:
        raise ConfigError(f"override {text!r} must look like key.path=value, e.g. dropout.p=0.3")
    key, raw = text.split("=", 1)
    value = yaml.safe_load(raw) if raw else ""
    out: dict[str, Any] = {}
    node = out
    parts = key.strip().split(".")
    for p in parts[:-1]:
        node = node.setdefault(p, {})
    node[parts[-1]] = value
    return out


def load_config(path: str | Path | None = None, overrides: list[str] | tuple[str, ...] = ()) -> Config:
    data: dict[str, Any] = {}
    for p in (DEFAULT_CONFIG, path):
        if p is None:
            continue
        p = Path(p)
        if not p.is_file():
            raise ConfigError(f"config file {p} does not exist")
        data = _merge(data, yaml.safe_load(p.read_text()) or {})
    for o in overrides:
        data = _merge(data, parse_override(o))
    if not data.get("home"):
        data["home"] = env("AKA_HOME") or str(Path.home() / ".aka")
    cfg = _build(Config, data)
    if cfg.ceilings not in ("calibrated", "datasheet"):
        raise ConfigError(f"ceilings={cfg.ceilings!r}; choose calibrated or datasheet")
    if cfg.acceptance.timing_first not in ("auto", "always", "never"):
        raise ConfigError(f"acceptance.timing_first={cfg.acceptance.timing_first!r}; choose auto, always or never")
    if cfg.acceptance.untimed not in ("keep-incumbent", "accept-correct"):
        raise ConfigError(f"acceptance.untimed={cfg.acceptance.untimed!r}; choose keep-incumbent or accept-correct")
    _check_ranges(cfg)
    return cfg


# (key, lowest, highest, lowest allowed itself, what to do): checked at load time, so a bad value stops
# before any evaluation instead of failing every one of them inside the sandbox.
_RANGES = (
    ("sandbox.trials", 1, None, True, "give at least 1 trial per shape"),
    ("sandbox.timeout_s", 0, None, False, "give a positive number of seconds, e.g. 900"),
    ("sandbox.dsl_threshold", 0, 1, True, "give a share in [0, 1], e.g. 0.9"),
    ("sandbox.gpu_memory_fraction", 0, 1, False, "give a share in (0, 1], e.g. 0.9"),
    ("sandbox.counter_shapes", 0, None, True, "give 0 or more shapes"),
    ("sandbox.gpu_spares", 1, None, True, "give at least 1 spare GPU worker (4 is the default)"),
    ("dropout.patience", 1, None, True, "give at least 1 iteration"),
    ("dropout.p", 0, 1, True, "give a fraction in [0, 1), e.g. 0.5"),
    ("llm.timeout_s", 0, None, False, "give a positive number of seconds, e.g. 120"),
    ("llm.max_retries", 0, None, True, "give 0 or more retries"),
    ("llm.max_tokens", 1, None, True, "give at least 1 token"),
    ("llm.proposal_timeout_s", 0, None, False, "give a positive number of seconds, e.g. 290"),
    ("llm.max_retry_after_s", 0, None, True, "give 0 or more seconds"),
    ("llm.usd_per_mtok_in", 0, None, True, "give a price >= 0 in USD per million tokens"),
    ("llm.usd_per_mtok_out", 0, None, True, "give a price >= 0 in USD per million tokens"),
    ("acceptance.repeats", 1, None, True, "give at least 1 A/B pair (3 or more tell a gain from noise)"),
    ("acceptance.min_gain", 0, None, True, "give a margin >= 0, e.g. 0.0"),
    ("acceptance.screen_margin", 0, None, True, "give a fraction >= 0, e.g. 0.005"),
    ("acceptance.screen_bar_every", 0, None, True, "give 0 (time the incumbent once) or a number of screens, e.g. 8"),
    ("knowledge.k", 0, None, True, "give 0 or more snippets"),
    ("knowledge.token_budget", 0, None, True, "give 0 or more tokens"),
)


def _check_ranges(cfg: "Config") -> None:
    import math
    for key, low, high, low_ok, fix in _RANGES:
        node: Any = cfg
        for part in key.split("."):
            node = getattr(node, part, None)
        if node is None or isinstance(node, bool) or not isinstance(node, (int, float)):
            continue
        if not math.isfinite(node):
            raise ConfigError(f"{key}={node} is not a finite number; {fix} (-c {key}=VALUE)")
        bad_low = node < low or (node == low and not low_ok)
        bad_high = high is not None and (node > high or (key == "dropout.p" and node >= high))
        if bad_low or bad_high:
            limit = (f">= {low}" if low_ok else f"> {low}") + (f" and <= {high}" if high is not None else "")
            if key == "dropout.p":
                limit = "in [0, 1)"
            raise ConfigError(f"{key}={node} is out of range: it must be {limit}; {fix} (-c {key}=VALUE)")


def env(name: str, default: str | None = None) -> str | None:
    """Read an environment variable. Everything in aka reads the environment through here."""
    return os.environ.get(name, default)


def has_gpu_env() -> bool:
    return env("CUDA_VISIBLE_DEVICES", None) != ""


def as_dict(cfg: Config) -> dict[str, Any]:
    return dataclasses.asdict(cfg)


def gpu_present() -> bool:
    """An NVIDIA device node exists (decided without importing torch or triton)."""
    return Path("/dev/nvidia0").exists() or Path("/dev/nvidiactl").exists()


def use_interpreter_if_no_gpu() -> bool:
    """Without a GPU, kernels run under Triton's interpreter; it must be chosen before triton is imported.

    Returns True when the interpreter is (or already was) selected."""
    if env("TRITON_INTERPRET") == "1":
        return True
    if not gpu_present():
        os.environ["TRITON_INTERPRET"] = "1"
        return True
    return False
