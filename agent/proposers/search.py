"""The offline proposer: a profile-guided search over a kernel's CONFIGS (no model, no API key).

How it searches
1. The space is the incumbent's CONFIGS literal (agent/proposers/search_space.py): every int under
   a name is a slot with a grid of values (powers of two for block sizes, 1-16 warps, 1-6 stages,
   ...) and a side of the roofline it acts on (memory | compute | both).
2. The launch record prunes and orders moves (agent/proposers/search_usage.py): only the CONFIGS
   leaves that a scored shape's launcher read are moved (a bucket no scored shape reaches is left as
   it is), each with the regime of the shapes that read it, and, until the model below has data,
   the leaves read by the heaviest shapes are tried first. Without a record every leaf is movable.
   Structural switches (bools, 0/1 USE_*-style ints, SEARCH_SPACE choices) are slots like tile
   sizes, so a bucket can flip its code path as well as its tiles.
   The profile prunes moves (`read_profile`):
   - regime: the weighted majority (>= 2/3 of the weight) of the visible shapes' roofline `bound`
     in ctx.incumbent_result; Nsight counters override it when decisive (a kernel at >= 70% of DRAM
     or SM peak). A memory-bound kernel is offered only memory- and both-side moves (no num_stages,
     no BLOCK_K), a compute-bound one only compute- and both-side moves; mixed or unknown: all.
   - pressure: a failing shape or spilled registers (compile report or ncu) -> only moves that
     shrink resource use (a smaller block size or fewer stages).
   - low achieved occupancy (< 20%): shrinking moves are tried first (ordering only).
3. Hill-climbing by coordinate descent from a climb point (at first the incumbent's config): its
   neighbours change one slot by one grid step, or one *tied group* by one step: the movable slots
   that hold the same value under the same path outside its indices (`buckets.*.gemm1.BLOCK_N`), or
   under the same name with the same rule anywhere (`BLOCK_N` of gemm1 and gemm2 in every bucket),
   move together. A group carries the weight of every shape its members serve, so it is tried before
   its members while nothing is known (coarse before fine: a kernel badly tuned the same way in every
   bucket, as a flat config is, is fixed in a few moves, not one per bucket); among moves of equal
   weight, the one that sets the larger share of its name's leaves first (BLOCK_M, one a bucket, tied
   over six buckets is as coarse as BLOCK_N tied over two GEMMs in six: counting leaves instead put
   BLOCK_M, fused_moe's largest gain on the H200, behind every two-GEMM group); groups split as their
   members' values part. After a step that improved the score, the same slot or group in the same
   direction is tried first at twice the stride (1, 2, 4 grid steps while each improves; a stride that
   fails falls back to the last one that worked): momentum. Otherwise the order is a seeded shuffle until
   three configs are measured, then the additive model of agent/proposers/search_model.py (fit on
   every measured config of this kernel) ranks them by its prediction plus an exploration bonus for
   rarely measured values, weighted by the same shares (`AdditiveModel.optimistic_move`). A *jump* to the
   model's best unmeasured config of the whole (pruned) space comes first when the model predicts it
   to beat the climb point by 1% and every neighbour's optimistic estimate: several slots change
   at once.
   A tabu set holds every config proposed or dropped: key = hash of the file outside CONFIGS +
   the canonical CONFIGS value, so no config of a kernel is ever proposed twice.
4. `observe`: a valid candidate that beats the climb point's score becomes the climb point (even
   when the loop kept its incumbent, which happens while climbing from a restart point).
5. When the neighbourhood is exhausted: the alternative kernels the knowledge base holds for the
   operator (constructor `alternatives`; those that do not define the operator's function and a
   @triton.jit kernel are skipped), once each; then restarts: the model's best (optimistic) unmeasured
   grid point over the unpruned slots, or a seeded random one while there is no model; its score
   becomes the climb point's, whatever it is.
6. Nothing left: Proposal(source=None, meta={"final": True}), and the loop stops.

The check before the GPU (agent/proposers/search_prefetch.py): every move is compiled for Hopper on CPU cores
before it is handed out, and dropped (tabu, `dropped` with the reason) when a kernel does not compile, spills
heavily, or needs more shared memory per block than Hopper has (232448 bytes): on the GPU such a launch fails
after the evaluation has started. The sandbox's compile gate runs a tiny shape, which reads one size bucket, so a
move in another bucket is also compiled as a *probe*, that bucket copied into every sibling: fused_moe's
"up to 24" bucket, the one its T256-E128 decode shape reads, was never compiled before, and 6 of 10 GPU screens of
the H100 run in benchmarks/results/moe_decode_tiles.md failed there. A probe that compiled nothing drops nothing:
that move goes to the GPU as before, and its proposal says what was not checked (meta "precheck"); so does a move
whose own tiny run failed before compiling when the incumbent's run fails the same way (the check's control,
search_prefetch.MoveChecks: Triton 3.6's interpreter once failed every move of six operators so). The next
proposal handed out (the final one included) lists the drops made since the last, each {changed, why}, in its
meta "dropped": the loop stores that meta in the iteration's audit record. Each drop is also reported as it happens
(`on_drop`, which the loop prints): a run of drops can take minutes before a proposal goes out.
Prefetch: `prefetch(n)` takes the next n moves now and starts their checks while the GPU times other
candidates; `propose` hands them out in order, waiting for a check that has not finished. A move taken without
prefetch (the first of a run, the first after a climb, the rest of a round larger than the prefetch) is checked
then, and waited for, when the incumbent was timed on a GPU (`precheck` forces it on or off). A climb to a new
point discards prefetched moves that were not proposed yet (their compile results stay cached).

Determinism: one random.Random, seeded by `seed` (else the first ctx.seed), drives every shuffle
and restart; compile results are consumed in proposal order, so the sequence for a given seed and
the same observations is the same however fast the compiles finish.
"""
from __future__ import annotations

import dataclasses
import hashlib
import itertools
import random
from collections import deque
from dataclasses import dataclass
from typing import Any, Callable

from agent.proposers.llm_extract import defines_candidate
from agent.proposers.search_model import AdditiveModel, name_shares
from agent.proposers.search_prefetch import (DEFAULT_MAX_SPILL_BYTES, MAX_PROBES, CompileFn, MoveChecks,
                                               bucket_probes, sandbox_compile_check)
from agent.proposers.search_space import (ConfigsLiteral, SearchSpaceError, Slot, apply_config, config_key,
                                          get_at, read_configs, set_at)
from agent.proposers.search_usage import Usage, read_usage
from agent.types import Proposal, ProposalContext

REGIME_SHARE = 2 / 3          # weight share of one bound that makes the kernel's regime
DECISIVE_PCT = 70.0           # ncu % of peak that overrides the roofline regime
LOW_OCCUPANCY_PCT = 20.0
ENUMERATE_LEFTOVERS_UP_TO = 20_000   # grid points a restart may list when random draws keep missing
JUMP_MARGIN = 0.01            # a jump must be predicted to beat the climb point by this fraction
MODEL_POOL = 4096             # spaces up to this size are ranked whole by the model; larger ones by a sample


@dataclass(frozen=True)
class Profile:
    regime: str = "unknown"            # memory | compute | mixed | unknown
    reduce: bool = False               # failing shapes or spills: only shrinking moves
    low_occupancy: bool = False
    notes: tuple[str, ...] = ()
    from_counters: bool = False        # the regime is Nsight's, for the whole kernel (not per bucket)

    def allows(self, side: str, regime: str | None = None) -> bool:
        """`regime`: that of the shapes using the slot (launch record); the kernel's when None."""
        regime = self.regime if regime is None or self.from_counters else regime
        if regime == "memory":
            return side in ("memory", "both")
        if regime == "compute":
            return side in ("compute", "both")
        return True

    def describe(self) -> str:
        return "; ".join((f"{self.regime} regime",) + self.notes)


def _counter_kernels(result: dict) -> list[dict]:
    counters = result.get("counters") or {}
    if not counters.get("available", True):
        return []
    return [k for s in counters.get("shapes") or [] for k in s.get("kernels") or [] if isinstance(k, dict)]


def _mean(kernels: list[dict], field: str) -> float | None:
    pairs = [(k[field], k.get("duration_us") or 1.0) for k in kernels if k.get(field) is not None]
    return sum(v * w for v, w in pairs) / sum(w for _, w in pairs) if pairs else None


def read_profile(result: dict[str, Any] | None) -> Profile:
    """Regime, resource pressure and occupancy from an EvalResult.to_json() (hold-outs removed)."""
    if not result:
        return Profile()
    rows = [r for r in result.get("shapes") or [] if not r.get("holdout")]
    weight = {b: sum(float(r.get("weight") or 0.0) for r in rows if r.get("bound") == b) for b in ("memory", "compute")}
    total = weight["memory"] + weight["compute"]
    regime = "unknown" if total <= 0 else ("memory" if weight["memory"] >= REGIME_SHARE * total else
                                           "compute" if weight["compute"] >= REGIME_SHARE * total else "mixed")
    notes = []
    kernels = _counter_kernels(result)
    dram, sm = _mean(kernels, "dram_pct"), _mean(kernels, "sm_pct")
    measured = False
    if dram is not None and dram >= DECISIVE_PCT and dram >= (sm or 0.0):
        regime, notes, measured = "memory", notes + [f"ncu: {dram:.0f}% of DRAM peak"], True
    elif sm is not None and sm >= DECISIVE_PCT and sm > (dram or 0.0):
        regime, notes, measured = "compute", notes + [f"ncu: {sm:.0f}% of SM peak"], True
    failing = [r.get("id", "?") for r in rows if r.get("error")]
    compiled = (result.get("compile_info") or {}).get("kernels") or []
    spills = max([int(k.get("spills_bytes") or 0) for k in compiled if isinstance(k, dict)]
                 + [int(k.get("local_spill_bytes") or 0) for k in kernels], default=0)
    if failing:
        notes.append(f"failing shapes {', '.join(failing)}: shrinking tiles and stages")
    if spills > 0:
        notes.append(f"{spills} bytes of register spills: shrinking tiles and stages")
    occupancy = _mean(kernels, "achieved_occupancy_pct")
    low = occupancy is not None and occupancy < LOW_OCCUPANCY_PCT
    if low:
        notes.append(f"achieved occupancy {occupancy:.0f}%: smaller tiles first")
    return Profile(regime, bool(failing) or spills > 0, low, tuple(notes), measured)


def _jsonable(value: Any) -> Any:
    """A CONFIGS value as the audit trail stores it: string keys, lists for tuples."""
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    return value


@dataclass(frozen=True)
class Move:
    kind: str                     # neighbour | jump | restart | alternative
    source: str
    key: str                      # tabu key
    config: Any = None            # the CONFIGS value it sets (None for an alternative)
    changed: str = ""
    why: str = ""
    slot: tuple = ()              # the changed slot's path, or a tied group's paths (neighbour moves)
    step: int = 0                 # grid steps along that slot's grid: +-1, or a momentum stride
    precheck: str = ""            # what the compile check before the GPU could not judge


class SearchProposer:
    name = "search"
    timing_first = True     # most moves are slower: time them before the correctness trials (agent/loop.py)

    def __init__(self, cfg: Any = None, seed: int | None = None, alternatives: list[str] | None = None,
                 compile_fn: CompileFn | None = None, max_workers: int | None = None,
                 max_spill_bytes: int = DEFAULT_MAX_SPILL_BYTES, restart_tries: int = 200,
                 precheck: bool | None = None):
        """`cfg` is accepted for the proposer table's uniform call and not needed; `alternatives`
        are other kernels for the operator (knowledge `alternatives(op)`); `compile_fn(source, op)`
        is the compile check before the GPU (default: the sandbox's lint + compile gates); `precheck`:
        check moves that were not prefetched too (None: when the incumbent was timed on a GPU)."""
        self.seed, self.alternatives = seed, list(alternatives or [])
        self.max_spill_bytes, self.restart_tries, self.precheck = max_spill_bytes, restart_tries, precheck
        self._checks = MoveChecks(compile_fn or sandbox_compile_check, max_workers, max_spill_bytes)
        self._rng: random.Random | None = None
        self._ctx: ProposalContext | None = None
        self._incumbent: str | None = None
        self._lit: ConfigsLiteral | None = None
        self._space_error = ""
        self._body = ""                             # hash of the incumbent outside its CONFIGS
        self._slots: list[Slot] = []
        self._point: Any = None
        self._point_score: float | None = None
        self._profile = Profile()
        self._usage = Usage()
        self._usage_sig: tuple = ()
        self._queue: list[Move] = []
        self._queue_sig: tuple | None = None
        self._momentum: tuple[tuple, int] | None = None
        self._prefetched: deque[Move] = deque()
        self._alt_next = 0
        self._tabu: set[str] = set()
        self._moves: dict[str, Move] = {}          # key -> move, for observe
        self.scores: dict[str, float | None] = {}   # key -> observed score (None: invalid)
        self._points: dict[str, list[tuple[Any, float]]] = {}   # kernel body hash -> measured (config, score)
        self._model: AdditiveModel | None = None
        self._model_sig: tuple | None = None
        self._pool_configs: tuple[tuple, list] | None = None   # (slots signature, [(config, key)])
        self.dropped: list[tuple[str, str]] = []   # (changed, why) of moves the pre-compile dropped
        self._reported = 0                          # dropped[:_reported] went out in a proposal's meta
        # called with (changed, why) as each move is dropped; the loop sets it to print a progress line
        self.on_drop: Callable[[str, str], None] | None = None

    # ---- protocol -----------------------------------------------------------------------------
    def propose(self, ctx: ProposalContext) -> Proposal:
        self._sync(ctx)
        while True:
            move = self._take_prefetched()
            if move is None:
                move = self._next_move()
                if move is not None and self._check_unprefetched():
                    self._submit(move)
                    move = self._verdict(move)
                    if move is None:      # dropped: the next one
                        continue
            if move is None:
                what = self._space_error or "every reachable config and alternative has been tried"
                return Proposal(source=None, error=f"search exhausted: {what} ({len(self.scores)} evaluated, "
                                                   f"{len(self.dropped)} dropped before the GPU)",
                                meta=self._with_drops({"proposer": self.name, "final": True}))
            if move.key not in self._tabu:
                break
        self._tabu.add(move.key)
        self._moves[move.key] = dataclasses.replace(move, source="")   # observe needs all but the text
        meta = self._with_drops({"proposer": self.name, "move": move.kind, "key": move.key,
                                 "profile": self._profile.describe()})
        if move.config is not None:
            meta["config"] = _jsonable(move.config)
        if move.precheck:
            meta["precheck"] = move.precheck
        return Proposal(source=move.source, changed=move.changed, why=move.why, meta=meta)

    def observe(self, proposal: Proposal, result: Any, accepted: bool) -> None:
        meta = proposal.meta or {}
        move = self._moves.get(meta.get("key", "")) if meta.get("proposer") == self.name else None
        if move is None:
            return
        valid = result is not None and getattr(result, "verdict", None) == "accepted"
        score = getattr(result, "weighted_attainment", None) if valid else None
        self.scores[move.key] = score
        if move.kind == "alternative" or not valid:
            return
        if score is not None and move.config is not None:
            self._points.setdefault(move.key.split(":", 1)[0], []).append((move.config, score))
            self._model = None
        if score is not None and self._point_score is not None:
            improved = score > self._point_score
        else:
            improved = accepted     # no timings (interpreter): the loop's decision is the only signal
        if move.kind == "restart" or improved:
            self._momentum = (move.slot, move.step) if improved and move.kind == "neighbour" else None
            self._point, self._point_score = move.config, score
            self._prefetched.clear()

    def prefetch(self, n: int) -> int:
        """Take the next n moves now and start compiling them on CPU cores; returns how many."""
        if self._ctx is None:
            raise RuntimeError("prefetch needs the search's context: call propose() once first")
        added = 0
        for _ in range(max(0, n)):
            move = self._next_move()
            if move is None:
                break
            self._prefetched.append(move)
            self._submit(move)
            added += 1
        return added

    def close(self) -> None:
        self._checks.close()

    # ---- state --------------------------------------------------------------------------------
    def _key(self, config: Any) -> str:
        return f"{self._body}:{config_key(config)}"

    def _sync(self, ctx: ProposalContext) -> None:
        self._ctx = ctx
        if self._rng is None:
            self._rng = random.Random(self.seed if self.seed is not None else ctx.seed)
        self._profile = read_profile(ctx.incumbent_result)
        usage = read_usage(ctx.incumbent_result)
        sig = (usage.known, tuple(sorted(usage.shapes.items(), key=repr)))
        if sig != self._usage_sig:
            self._usage, self._usage_sig = usage, sig
            self._model, self._pool_configs = None, None
        if ctx.incumbent_source == self._incumbent:
            return
        self._incumbent = ctx.incumbent_source
        self._prefetched.clear()
        try:
            self._lit = read_configs(ctx.incumbent_source)
            self._body, self._space_error = self._lit.body_hash(), ""
        except SearchSpaceError as e:
            self._lit, self._slots, self._space_error = None, [], f"the incumbent has no searchable CONFIGS ({e})"
            return
        self._slots = [s for s in self._lit.slots() if s.rule.kind != "fixed"]
        self._point, self._point_score = self._lit.value, ctx.incumbent_score
        self._tabu.add(self._key(self._point))
        points = self._points.setdefault(self._body, [])
        if ctx.incumbent_score is not None and not any(config_key(c) == config_key(self._point) for c, _ in points):
            points.append((self._point, ctx.incumbent_score))
        self._model, self._pool_configs = None, None

    def _take_prefetched(self) -> Move | None:
        while self._prefetched:
            move = self._verdict(self._prefetched.popleft())
            if move is not None:
                return move
        return None

    # ---- the compile check before the GPU (agent/proposers/search_prefetch.py) -------------------
    def _check_unprefetched(self) -> bool:
        """A move taken without prefetch waits for its check only where it would go to a GPU: there a failed
        launch costs an iteration (the fused_moe run of moe_decode_tiles.md made 10 in its 330 s step), the
        check a few seconds of CPU (the move's and its probes' sources side by side in the pool, each one
        sandbox compile-only evaluation: 2.5-5.8 s of wall time for fused_moe on a 2-core host). Under the
        interpreter nothing reaches a GPU, and the evaluation itself runs the same compile gate."""
        if self.precheck is not None:
            return self.precheck
        rows = (self._ctx.incumbent_result or {}).get("shapes") or []
        return any(isinstance(r, dict) and r.get("timing_mode") in ("graph", "eager") for r in rows)

    def _submit(self, move: Move) -> None:
        """Start the compile of the move, of its probes (the buckets it changes, heaviest shapes' first) and of
        the incumbent, the control that tells a move's own failure from a tiny run this machine cannot do."""
        probes = []
        if move.config is not None and self._lit is not None:
            found = bucket_probes(self._point, move.config)
            found.sort(key=lambda p: -self._usage.weight_of_all(list(p.changed)))
            probes = [(p.where, self._key(p.config), apply_config(self._lit.source, p.config))
                      for p in found[:MAX_PROBES]]
        control = (f"incumbent:{hashlib.sha256(self._incumbent.encode()).hexdigest()}", self._incumbent) \
            if self._incumbent else None
        self._checks.submit(move.key, move.source, self._ctx.contract.name, probes, control)

    def _verdict(self, move: Move) -> Move | None:
        """The move, with a note on what could not be checked; None when it was dropped (tabu, self.dropped)."""
        if move.key in self._tabu:
            return None
        why, note = self._checks.verdict(move.key)
        if why is None:
            return dataclasses.replace(move, precheck=note) if note else move
        self._tabu.add(move.key)
        self.dropped.append((move.changed, why))
        if self.on_drop is not None:    # live: a run of drops can take minutes before a proposal goes out
            self.on_drop(move.changed, why)
        return None

    def _with_drops(self, meta: dict) -> dict:
        """`meta` plus the moves dropped since the last proposal went out: the loop records a proposal's meta
        in its iteration record (agent/loop.py _commit), so every drop and its reason reach the audit trail."""
        if len(self.dropped) > self._reported:
            meta["dropped"] = [{"changed": c, "why": w} for c, w in self.dropped[self._reported:]]
            self._reported = len(self.dropped)
        return meta

    def _free(self, key: str) -> bool:
        return key not in self._tabu and all(m.key != key for m in self._prefetched)

    def _next_move(self) -> Move | None:
        if self._lit is not None:
            sig = (config_key(self._point), self._profile, self._usage_sig, len(self._points.get(self._body, [])))
            if sig != self._queue_sig:      # a new climb point, profile or measurement: re-rank
                self._queue, self._queue_sig = self._neighbours(), sig
            jump = self._jump()
            if jump is not None:
                return jump
            while self._queue:
                move = self._queue.pop(0)
                if self._free(move.key):
                    return dataclasses.replace(move, source=apply_config(self._lit.source, move.config))
        return self._next_alternative() or (self._restart() if self._lit is not None else None)

    def _movable(self) -> list[Slot]:
        """Slots a scored shape uses (launch record), on the side of the roofline its shapes sit."""
        return [s for s in self._slots if self._usage.uses(s.path)
                and self._profile.allows(s.rule.side, self._usage.regime(s.path))]

    def _groups(self, slots: list[Slot]) -> list[tuple[tuple, list[Slot]]]:
        """(key, members) of every single slot and every tied group of two or more movable slots that
        hold the same value now: by the path with its indices wildcarded, and by name and rule kind.
        A group whose members the other level already holds is listed once."""
        out: list[tuple[tuple, list[Slot]]] = [(s.path, [s]) for s in slots]
        seen: set[tuple] = set()
        families: dict[tuple, list[Slot]] = {}
        for s in slots:
            value = get_at(self._point, s.path)
            wild = tuple("*" if isinstance(p, int) and not isinstance(p, bool) else p for p in s.path)
            families.setdefault(("path", wild, repr(value)), []).append(s)
            families.setdefault(("name", s.name, s.rule.kind, repr(value)), []).append(s)
        for members in families.values():
            key = tuple(sorted((m.path for m in members), key=repr))
            if len(members) >= 2 and key not in seen:
                seen.add(key)
                out.append((key, sorted(members, key=lambda m: repr(m.path))))
        return out

    def _steps(self, key: tuple) -> list[int]:
        """Grid steps to try for a slot or group: one either way; after an improving move of this one, the
        momentum's stride and twice it in its direction as well."""
        steps = [-1, 1]
        if self._momentum and self._momentum[0] == key:
            stride = self._momentum[1]
            steps += [s for s in (stride, 2 * stride) if s not in steps]
        return steps

    def _neighbours(self) -> list[Move]:
        prof, moves = self._profile, []
        for key, members in self._groups(self._movable()):
            current = get_at(self._point, members[0].path)
            for step in self._steps(key):
                config, ok = self._point, True
                for slot in members:
                    grid = slot.rule.grid(slot.value)
                    if current not in grid or not 0 <= grid.index(current) + step < len(grid):
                        ok = False
                        break
                    new = grid[grid.index(current) + step]
                    if prof.reduce and not slot.rule.shrinks(current, new):
                        ok = False
                        break
                    config = set_at(config, slot.path, new)
                if not ok:
                    continue
                new = get_at(config, members[0].path)
                if any(get_at(config, m.path) != new for m in members):   # grids that disagree: not one move
                    continue
                label = (members[0].label() if len(members) == 1 else
                         f"{members[0].name} tied in {len(members)} places ({self._group_label(members)})")
                used = self._usage.describe_all([m.path for m in members])
                moves.append(Move("neighbour", "", self._key(config), config,      # source: when taken
                                  f"{label}: {current} -> {new}",
                                  f"hill-climb step{'' if abs(step) == 1 else f' ({abs(step)} grid steps)'}"
                                  f"{'; ' + used if used else ''} ({prof.describe()})",
                                  key, step))
        self._rng.shuffle(moves)
        model = self._fitted_model()
        # coarse before fine, by the share of a name's leaves a move sets (not by how many: BLOCK_M, one a
        # bucket, is as coarse tied over every bucket as BLOCK_N tied over both GEMMs of every bucket)
        movable = self._movable()
        share = dict(zip((s.path for s in movable), name_shares(movable)))

        def priority(m: Move) -> tuple[float, float, float]:
            if self._momentum and self._momentum[0] == m.slot and m.step * self._momentum[1] > 0:
                stride = self._momentum[1]
                return (0.0 if m.step == 2 * stride else 0.1 if m.step == stride else 0.2), 0.0, 0.0
            paths = list(m.slot) if m.slot and isinstance(m.slot[0], tuple) else [m.slot]
            slot = next(s for s in self._slots if s.path == paths[0])
            shrinking = slot.rule.shrinks(get_at(self._point, paths[0]), get_at(m.config, paths[0]))
            first = 1 if prof.low_occupancy and shrinking else 2
            # the model, once fit, says which move gains most; before, the heaviest shapes' slots go first,
            # and of those the move that sets the largest share of its name's leaves (coarse before fine)
            weight = -self._usage.weight_of_all(paths)
            if model is not None:
                return first, -model.optimistic_move(m.config, self._point), weight
            return first, weight, -sum(share.get(p, 0.0) for p in paths)
        return sorted(moves, key=priority)

    @staticmethod
    def _group_label(members: list[Slot]) -> str:
        """Where a tied group's members sit, short: the distinct outer keys of their paths."""
        outer = sorted({"/".join(str(p) for p in m.path[:-1] if not isinstance(p, int)) or "top" for m in members})
        return ", ".join(outer)[:80]

    # ---- the model: rank moves, jump across the space ----------------------------------------
    def _fitted_model(self) -> AdditiveModel | None:
        slots = self._movable()
        sig = (self._body, tuple(s.path for s in slots))
        if self._model is None or self._model_sig != sig:
            self._model, self._model_sig = AdditiveModel(slots), sig
            for config, score in self._points.get(self._body, []):
                self._model.add(config, score)
        return self._model if self._model.ready else None

    def _grid_points(self) -> list[tuple[Any, str]]:
        """(config, tabu key) of every point of the pruned space (a seeded sample of MODEL_POOL points when
        it is larger)."""
        slots = self._movable()
        sig = (self._body, tuple(s.path for s in slots))
        if self._pool_configs is not None and self._pool_configs[0] == sig:
            return self._pool_configs[1]
        grids = [slot.rule.grid(slot.value) for slot in slots]
        size = 1
        for g in grids:
            size *= len(g)
        combos = (itertools.product(*grids) if size <= MODEL_POOL else
                  (tuple(self._rng.choice(g) for g in grids) for _ in range(MODEL_POOL)))
        points = []
        for combo in combos:
            config = self._lit.value
            for slot, v in zip(slots, combo):
                config = set_at(config, slot.path, v)
            points.append((config, self._key(config)))     # keys once: the pool is ranked every proposal
        self._pool_configs = (sig, points)
        return points

    def _best_unmeasured(self, model: AdditiveModel, rank) -> tuple[Any, str] | None:
        best = None
        for config, key in self._grid_points():
            if self._free(key):
                value = rank(config)
                if best is None or value > best[0]:
                    best = (value, config, key)
        return None if best is None else (best[1], best[2])

    def _jump(self) -> Move | None:
        """The model's best unmeasured config, when it predicts more than any neighbour's optimistic bound."""
        model = self._fitted_model()
        queue = [m for m in self._queue if self._free(m.key)]
        if model is None or not queue or (self._momentum and any(
                m.slot == self._momentum[0] and m.step * self._momentum[1] > 0 for m in queue)):
            return None
        found = self._best_unmeasured(model, model.predict)
        if found is None:
            return None
        config, key = found
        predicted = model.predict(config)
        floor = (self._point_score or 0.0) * (1 + JUMP_MARGIN)
        if predicted <= max([floor] + [model.optimistic(m.config) for m in queue]):
            return None
        slots = self._movable()
        changed = ", ".join(f"{s.label()}={get_at(config, s.path)}" for s in slots
                            if get_at(config, s.path) != get_at(self._point, s.path))
        return Move("jump", apply_config(self._lit.source, config), key, config, f"model jump: {changed}"[:300],
                    f"an additive model of {len(model.points)} measured configs predicts {predicted:.3f}, above "
                    f"every neighbour ({self._profile.describe()})")

    def _next_alternative(self) -> Move | None:
        while self._alt_next < len(self.alternatives):
            i = self._alt_next
            self._alt_next += 1
            source = self.alternatives[i]
            key = "alternative:" + hashlib.sha256(source.encode()).hexdigest()[:16]
            if source != self._incumbent and self._free(key) and defines_candidate(source, self._ctx.contract.name):
                return Move("alternative", source, key, None, f"alternative kernel #{i + 1} for the operator",
                            "the tunable neighbourhood is exhausted: a different kernel from the knowledge base")
        return None

    def _restart(self) -> Move | None:
        slots = self._movable()
        if not slots:
            return None
        model = self._fitted_model()
        if model is not None:
            found = self._best_unmeasured(model, model.optimistic)
            if found is not None:
                return self._restart_move(found[0], found[1], slots, "the model's best unmeasured point")
        for _ in range(self.restart_tries):
            config = self._lit.value
            for slot in slots:
                config = set_at(config, slot.path, self._rng.choice(slot.rule.grid(slot.value)))
            key = self._key(config)
            if self._free(key):
                return self._restart_move(config, key, slots)
        # Random draws keep hitting tabu points: list what is left of a small space and pick from it.
        size = 1
        for slot in slots:
            size *= len(slot.rule.grid(slot.value))
        if size > ENUMERATE_LEFTOVERS_UP_TO:
            return None
        left = []
        for combo in itertools.product(*(slot.rule.grid(slot.value) for slot in slots)):
            config = self._lit.value
            for slot, v in zip(slots, combo):
                config = set_at(config, slot.path, v)
            if self._free(self._key(config)):
                left.append(config)
        if not left:
            return None
        config = self._rng.choice(left)
        return self._restart_move(config, self._key(config), slots)

    def _restart_move(self, config: Any, key: str, slots: list[Slot], origin: str = "a random point") -> Move:
        changed = ", ".join(f"{s.label()}={get_at(config, s.path)}" for s in slots if get_at(config, s.path) != s.value)
        return Move("restart", apply_config(self._lit.source, config), key, config, f"random restart: {changed}"[:300],
                    f"neighbourhood exhausted: climb again from {origin} ({self._profile.describe()})")
