"""The five kernels of the LLM-path study (agent/studies/llm_path.py), built from an operator's seed.

- start: the incumbent the run begins from, the seed made clearly slower but still correct;
- slower: correct, and slower than the start on every hot shape;
- broken: the seed with a real numeric bug, which the correctness gate must reject;
- faster: the tuned seed itself;
- cheat: a red-team corpus file (tests/sandbox/redteam) whose rejection needs no GPU.
Each recipe is data per operator (`RECIPES`); an operator without one is refused with the known names.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
REDTEAM = ROOT / "tests" / "sandbox" / "redteam"
ORDER = ("slower", "broken", "faster", "cheat")     # the order the replayed replies come in


@dataclass(frozen=True)
class Detune:
    """CONFIGS changes: `top` sets top-level keys (launch policy such as max_block_h, which is no tunable
    leaf), `leaves` sets every tunable leaf of that name in every bucket (agent.studies.recovery)."""

    top: dict = field(default_factory=dict)
    leaves: dict = field(default_factory=dict)

    def apply(self, source: str) -> str:
        from agent.proposers.search_space import apply_config, read_configs
        from agent.studies.recovery import set_everywhere
        missing = sorted(set(self.top) - set(read_configs(source).value))
        if missing:
            raise ValueError(f"CONFIGS has no top-level keys {missing}; fix the recipe in {__name__}.RECIPES")
        out = apply_config(source, dict(self.top)) if self.top else source
        return set_everywhere(out, self.leaves) if self.leaves else out

    def describe(self) -> str:
        return ", ".join(f"{k}={v}" for k, v in {**self.top, **self.leaves}.items())


@dataclass(frozen=True)
class Recipe:
    start: Detune
    start_why: str
    slower: Detune
    slower_why: str
    broken: tuple[tuple[str, str], ...]     # (text in the seed, its replacement): every occurrence
    broken_why: str
    cheat: str                              # file name under tests/sandbox/redteam


_RMS_SCALE = "y = x * rstd[:, None] * w[None, :]"

RECIPES: dict[str, Recipe] = {
    "rms_norm": Recipe(
        # Not warps_double: its measured 0.598 (vs the seed's 0.719, benchmarks/results/h200_records) was on
        # the H 4096-8192 hot set of that day. Today's hot shapes are H 512/1536, where doubled warps still
        # give each thread one 16-byte vector and the latency-bound decode shapes (89% of the hot weight)
        # are expected to time alike (not measured on today's set). The two-pass path makes every row at
        # least two dependent memory round trips (x, then w with the second read of x) instead of one, and
        # walks the chunks of a row one after another, on every hot shape.
        start=Detune(top={"max_block_h": 256}),
        start_why="rows wider than 256 take the two-pass chunked path (sum of squares, then normalize, "
                  "re-reading x): one more dependent memory round trip on every hot shape",
        # 4x the chunks of the start, each read by one warp a row: on the decode shapes 4x the sequential
        # chunk loads, on the prefill shapes 2 elements per thread per load.
        slower=Detune(top={"max_block_h": 64}, leaves={"ROWS": 1, "num_warps": 1}),
        slower_why="64-wide chunks (4x the start's), one row per program, one warp",
        broken=((_RMS_SCALE, "y = x * rstd[:, None]"),),
        broken_why="the weight is never applied (y = x * rstd): gains of 1 +- 0.1 leave a ~10% error",
        cheat="rt_output_cache.py",
    ),
}


@dataclass(frozen=True)
class Candidate:
    name: str
    source: str
    how: str
    expect: str        # what the loop must do with it, in words (the report prints it)


def recipe_for(op: str) -> Recipe:
    if op not in RECIPES:
        raise ValueError(f"no LLM-path recipe for operator {op!r}; known: {', '.join(sorted(RECIPES))} "
                         f"(add one to {__name__}.RECIPES)")
    return RECIPES[op]


def _break(seed: str, edits: tuple[tuple[str, str], ...]) -> str:
    out = seed
    for old, new in edits:
        if old not in out:
            raise ValueError(f"the seed no longer contains {old!r}, so the broken kernel would be the seed; "
                             f"update the recipe's `broken` edit in {__name__}.RECIPES")
        out = out.replace(old, new)
    return out


def strip_corpus_header(text: str) -> str:
    """The file without its leading `# key: value` comment block: the reply carries a kernel, not the
    corpus's verdict label."""
    lines = text.splitlines(keepends=True)
    k = next((i for i, ln in enumerate(lines) if not ln.startswith("#")), len(lines))
    return "".join(lines[k:])


def cheat_stages(op: str) -> tuple[str, ...]:
    """The gates the corpus header says reject the cheat (`stage: correctness|lint`: either)."""
    from sandbox.corpus import parse_header
    head = parse_header((REDTEAM / recipe_for(op).cheat).read_text())
    if head.get("op") != op or head.get("expect") != "reject" or head.get("needs") != "cpu":
        raise ValueError(f"{recipe_for(op).cheat}: the cheat must be a CPU-decidable reject for {op}; its "
                         f"header says op={head.get('op')}, expect={head.get('expect')}, needs={head.get('needs')}")
    return tuple(head["stage"].split("|"))


def build(op: str, seed: str) -> dict[str, Candidate]:
    """start, slower, broken, faster, cheat (in that order)."""
    r = recipe_for(op)
    stages = cheat_stages(op)
    return {
        "start": Candidate("start", r.start.apply(seed), f"seed with {r.start.describe()}: {r.start_why}",
                           "the incumbent the run starts from"),
        "slower": Candidate("slower", r.slower.apply(seed), f"seed with {r.slower.describe()}: {r.slower_why}",
                            "rejected at acceptance (slower than the incumbent)"),
        "broken": Candidate("broken", _break(seed, r.broken), r.broken_why, "rejected at correctness"),
        "faster": Candidate("faster", seed, "the tuned seed", "accepted (on a GPU; untimed on the CPU)"),
        "cheat": Candidate("cheat", strip_corpus_header((REDTEAM / r.cheat).read_text()),
                           f"red-team corpus {r.cheat}", f"rejected at {' or '.join(stages)}"),
    }


def lint_all(op: str, cands: dict[str, Candidate], arg_names) -> dict[str, dict]:
    """name -> {"ok", "issues"}: the sandbox's own static gate, run here before any reply is sent."""
    from sandbox.lint import lint_source
    out = {}
    for name, c in cands.items():
        rep = lint_source(c.source, op, tuple(arg_names))
        out[name] = {"ok": rep.ok, "issues": [f"line {i.line}: {i.message}" for i in rep.issues][:3]}
    return out
