"""The tunables of a candidate file: its module-level CONFIGS literal, read and rewritten with ast.

A candidate declares its tunables in one literal the search may rewrite (benchmarks/operators/
README.md): a flat dict (`{"BLOCK_M": 64, "num_warps": 4}`), a dict of size buckets
(`{"by_block_h": {256: {...}, 512: {...}}}`), a list of (threshold, dict(...)) pairs as the gemm and
fused_moe seeds write (`"buckets": [(16, dict(BLOCK_M=16, ...)), (1 << 62, dict(...))]`), or any
nesting of these; `dict(KEY=value)` calls and integer arithmetic on constants are read as
literals, nothing else is. Every int value
whose key is a name is a *slot*; its *rule*, picked by the name, gives the grid of values the
search may try and the *side* of the roofline the knob acts on:

  name                            grid                                   side
  num_warps, *_warps              1 2 4 8 16                             both
  num_stages, *_stages            1 .. 6                                 both     (loads in flight per CTA)
  BLOCK_M, BLOCK_N (matmul tile,  powers of two 16 .. 256                both     (reuse and MMA size)
    also TILE_M, BLOCK_SIZE_N)
  BLOCK_K, TILE_K                 powers of two 16 .. 256                both     (bytes per stage, MMA depth)
  NUM_CONSUMER_GROUPS (warp       1 2                                    compute  (MMA issue rate only)
    specialization)
  GROUP_M (L2 swizzle)            1 2 4 8 16                             memory   (L2 reuse of A/B tiles)
  SPLIT_K                         1 2 4 8 16                             memory   (CTAs in flight on skinny GEMMs)
  other BLOCK*/TILE*/CHUNK*       powers of two, value/4 .. value*4      memory   (bytes per CTA, vector width)
                                  (16 .. 65536)
  other power-of-two ints         powers of two, value/4 .. value*4      both
    (ROWS ...)                    (1 .. 65536)
  num_ctas, maxnreg, other ints   fixed                                  -
  min_*/max_* keys and all below  fixed (bucket bounds, launch policy)   -

Structural switches (a constexpr that picks a code path: 1-D vs 2-D grid, persistent grid, TMA, eviction
hints) are slots too:
  a bool (True/False)             False True                             both
  a 0/1 int named USE_*, ENABLE_*, 0 1                                    both
    HAS_*, *_2D, *_1D, PERSISTENT*, *TMA*
  any value (int, bool, str) named in SEARCH_SPACE: its declared values, in the declared order

A module-level `SEARCH_SPACE = {"NAME": [values...]}` literal overrides the grid of a name (for a
kernel that, say, needs BLOCK_H >= H, or a switch among several code paths: `"EVICT": ["", "evict_first"]`). A move shrinks resource use when it lowers a block size or
num_stages (registers and shared memory per CTA).

`apply_config` rewrites only the changed numbers in place, so the rest of the file, comments
inside the literal included, stays byte-identical; a config that changes the literal's structure
replaces the whole literal with a formatted one.
"""
from __future__ import annotations

import ast
import hashlib
import itertools
import pprint
import random
import re
from dataclasses import dataclass
from typing import Any, Iterator

CONFIGS_NAME = "CONFIGS"
SPACE_NAME = "SEARCH_SPACE"
DEFAULT_ENUMERATE_LIMIT = 200_000
SIDES = ("memory", "compute", "both")


class SearchSpaceError(ValueError):
    pass


# --- rules --------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Rule:
    kind: str               # warps | stages | mm_block | consumers | group | split_k | block | pow2 | declared | fixed
    side: str               # memory | compute | both
    lo: int = 1
    hi: int = 1
    choices: tuple[Any, ...] = ()

    def grid(self, value: Any) -> tuple[Any, ...]:
        """The values the search may give this slot, always including the current one."""
        if self.kind == "fixed":
            return (value,)
        if self.kind in ("switch", "declared"):      # declared order; bools and strings stay what they are
            return tuple(self.choices) + tuple(() if _in(value, self.choices) else (value,))
        if self.choices:
            values = set(self.choices)
        elif self.kind == "stages":
            values = set(range(self.lo, self.hi + 1))
        else:
            values = {1 << e for e in range(self.hi.bit_length()) if self.lo <= 1 << e <= self.hi}
        return tuple(sorted(values | {value}))

    def shrinks(self, old: int, new: int) -> bool:
        """True when old -> new lowers registers or shared memory per CTA."""
        return self.kind in ("stages", "mm_block", "block") and new < old


_POW2 = (1, 2, 4, 8, 16)
_SWITCH_NAME = re.compile(r"^(USE|ENABLE|HAS|DO)_|_[12]D$|PERSISTENT|TMA")


def _in(value: Any, choices: tuple) -> bool:
    """Membership by value and type (True is not 1 here: a switch keeps the literal's spelling)."""
    return any(type(c) is type(value) and c == value for c in choices)


def is_switch(name: Any, value: Any) -> bool:
    return isinstance(value, bool) or (isinstance(name, str) and value in (0, 1) and type(value) is int
                                       and bool(_SWITCH_NAME.search(name.upper())))


def is_policy_name(name: Any) -> bool:
    """min_*/max_* keys are bucket bounds and launch policy (`max_block_h`, `min_programs`,
    `min_block: {...}`), not tile sizes: fixed unless SEARCH_SPACE opens them."""
    return isinstance(name, str) and bool(re.search(r"(^|_)(MIN|MAX)(_|$)", name.upper()))


def rule_for(name: str, value: Any, declared: dict[str, tuple[Any, ...]] | None = None) -> Rule:
    upper = name.upper()
    if declared and name in declared:
        side = rule_for(name, value).side
        return Rule("declared", side if side in SIDES else "both", choices=tuple(declared[name]))
    if upper in ("NUM_CTAS", "MAXNREG") or is_policy_name(name):
        return Rule("fixed", "both")
    if is_switch(name, value):
        return Rule("switch", "both", choices=(False, True) if isinstance(value, bool) else (0, 1))
    if not isinstance(value, int) or isinstance(value, bool):
        return Rule("fixed", "both")
    if upper == "NUM_WARPS" or upper.endswith("_WARPS"):
        return Rule("warps", "both", choices=_POW2)
    if upper == "NUM_STAGES" or upper.endswith("_STAGES"):
        return Rule("stages", "both", lo=1, hi=6)
    if re.fullmatch(r"(BLOCK|TILE)(_SIZE)?_?K", upper):
        return Rule("mm_block", "both", lo=16, hi=256)
    if upper == "NUM_CONSUMER_GROUPS":
        return Rule("consumers", "compute", choices=(1, 2))
    if re.fullmatch(r"(BLOCK|TILE)(_SIZE)?_?[MN]", upper):
        return Rule("mm_block", "both", lo=16, hi=256)
    if re.fullmatch(r"GROUP(_SIZE)?_?M", upper):
        return Rule("group", "memory", choices=_POW2)
    if re.fullmatch(r"SPLIT_?K", upper):
        return Rule("split_k", "memory", choices=_POW2)
    is_pow2 = value >= 1 and value & (value - 1) == 0
    if re.search(r"BLOCK|TILE|CHUNK", upper) and value >= 1:
        return Rule("block", "memory", lo=max(16, value // 4), hi=min(65536, max(value * 4, 16)))
    if is_pow2:
        return Rule("pow2", "both", lo=max(1, value // 4), hi=min(65536, value * 4))
    return Rule("fixed", "both")


# --- the literal --------------------------------------------------------------------------------

Path = tuple[Any, ...]


@dataclass(frozen=True)
class Slot:
    path: Path              # keys/indices from the top of CONFIGS to the value
    name: str               # the key the value sits under
    value: Any              # an int, or a switch's bool / declared value
    rule: Rule

    def label(self) -> str:
        outer = "".join(f"[{p!r}]" for p in self.path[:-1])
        return f"{self.name}{' in CONFIGS' + outer if outer else ''}"


@dataclass(frozen=True)
class ConfigsLiteral:
    source: str
    node: ast.expr          # the literal's expression node
    value: Any              # ast.literal_eval of it
    declared: dict[str, tuple[Any, ...]]

    @property
    def span(self) -> tuple[int, int]:
        return _byte_span(self.source, self.node)

    def slots(self) -> list[Slot]:
        return list(_walk_slots(self.value, (), self.declared))

    def body_hash(self) -> str:
        """Hash of the file without the literal: the kernel the configs belong to."""
        raw = self.source.encode()
        a, b = self.span
        return hashlib.sha256(raw[:a] + b"<CONFIGS>" + raw[b:]).hexdigest()[:16]


_BINOPS = {ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b, ast.Mult: lambda a, b: a * b,
           ast.FloorDiv: lambda a, b: a // b, ast.LShift: lambda a, b: a << b, ast.Pow: lambda a, b: a ** b}


def literal_value(node: ast.expr) -> Any:
    """ast.literal_eval plus what the seed kernels write: `dict(KEY=value, ...)` and integer
    arithmetic on constants (`1 << 62`). Anything else (names, other calls) is refused."""
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        v = literal_value(node.operand)
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            return -v if isinstance(node.op, ast.USub) else v
    if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
        a, b = literal_value(node.left), literal_value(node.right)
        if all(isinstance(x, int) and not isinstance(x, bool) for x in (a, b)) and not (
                isinstance(node.op, (ast.LShift, ast.Pow)) and b > 256):   # no 10**10**10 bombs
            return _BINOPS[type(node.op)](a, b)
    if isinstance(node, ast.Dict) and None not in node.keys:
        return {literal_value(k): literal_value(v) for k, v in zip(node.keys, node.values)}
    if isinstance(node, ast.List):
        return [literal_value(e) for e in node.elts]
    if isinstance(node, ast.Tuple):
        return tuple(literal_value(e) for e in node.elts)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "dict" \
            and not node.args and all(k.arg for k in node.keywords):
        return {k.arg: literal_value(k.value) for k in node.keywords}
    raise ValueError(f"line {getattr(node, 'lineno', '?')}: {ast.unparse(node)[:60]!r} is not a literal")


def _line_starts(raw: bytes) -> list[int]:
    starts = [0]
    for i, byte in enumerate(raw):
        if byte == 0x0A:
            starts.append(i + 1)
    return starts


def _byte_span(source: str, node: ast.AST) -> tuple[int, int]:
    starts = _line_starts(source.encode())   # ast offsets are UTF-8 byte columns
    return starts[node.lineno - 1] + node.col_offset, starts[node.end_lineno - 1] + node.end_col_offset


def _module_literal(tree: ast.Module, name: str) -> list[ast.expr]:
    found = []
    for stmt in tree.body:
        if isinstance(stmt, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in stmt.targets):
            found.append(stmt.value)
        elif isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and stmt.target.id == name \
                and stmt.value is not None:
            found.append(stmt.value)
    return found


def read_configs(source: str) -> ConfigsLiteral:
    """The CONFIGS literal of a candidate file, or SearchSpaceError saying what to fix."""
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        raise SearchSpaceError(f"candidate does not parse (line {exc.lineno}: {exc.msg})") from None
    nodes = _module_literal(tree, CONFIGS_NAME)
    if not nodes:
        raise SearchSpaceError(f"no module-level {CONFIGS_NAME} literal: declare the kernel's tunables as "
                               f"{CONFIGS_NAME} = {{\"BLOCK\": 1024, \"num_warps\": 4}} so the search can rewrite it")
    if len(nodes) > 1:
        lines = ", ".join(str(n.lineno) for n in nodes)
        raise SearchSpaceError(f"{CONFIGS_NAME} is assigned {len(nodes)} times (lines {lines}); assign it once")
    try:
        value = literal_value(nodes[0])
    except ValueError as exc:
        raise SearchSpaceError(f"{CONFIGS_NAME} at line {nodes[0].lineno} is not a literal ({exc}); write it "
                               f"with dict(...)/dict/list/tuple/number literals only, no names or calls") from None
    declared: dict[str, tuple[Any, ...]] = {}
    space_nodes = _module_literal(tree, SPACE_NAME)
    if space_nodes:
        try:
            raw = literal_value(space_nodes[-1])
            declared = {str(k): tuple(vals) for k, vals in dict(raw).items()}
            if not all(vals and all(isinstance(v, (int, float, str)) for v in vals) for vals in declared.values()):
                raise TypeError
        except (ValueError, TypeError):
            raise SearchSpaceError(f"{SPACE_NAME} at line {space_nodes[-1].lineno} must be a literal "
                                   f"{{\"NAME\": [value, ...]}} of ints, bools or strings") from None
    return ConfigsLiteral(source, nodes[0], value, declared)


def _walk_slots(value: Any, path: Path, declared, frozen: bool = False) -> Iterator[Slot]:
    if isinstance(value, dict):
        for k, v in value.items():
            if isinstance(k, str) and (isinstance(v, int) or (isinstance(v, (str, float)) and k in declared)):
                rule = rule_for(k, v, declared)
                if frozen and k not in declared:
                    rule = Rule("fixed", rule.side)
                yield Slot(path + (k,), k, v, rule)
            elif isinstance(v, (dict, list, tuple)):
                yield from _walk_slots(v, path + (k,), declared, frozen or is_policy_name(k))
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            if isinstance(v, (dict, list, tuple)):
                yield from _walk_slots(v, path + (i,), declared, frozen)


def get_at(value: Any, path: Path) -> Any:
    for p in path:
        value = value[p]
    return value


def set_at(value: Any, path: Path, new: Any) -> Any:
    """A copy of value with the leaf at path replaced (tuples stay tuples)."""
    if not path:
        return new
    head, rest = path[0], path[1:]
    if isinstance(value, dict):
        out = dict(value)
        out[head] = set_at(value[head], rest, new)
        return out
    items = list(value)
    items[head] = set_at(items[head], rest, new)
    return tuple(items) if isinstance(value, tuple) else items


def config_key(value: Any) -> str:
    """Canonical text of a literal value: equal configs, equal keys, whatever the formatting."""
    if isinstance(value, dict):
        return "{" + ",".join(f"{k!r}:{config_key(v)}" for k, v in sorted(value.items(), key=lambda kv: repr(kv[0]))) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(config_key(v) for v in value) + "]"
    return repr(value)


# --- rewriting ----------------------------------------------------------------------------------

def _leaf_nodes(node: ast.expr, path: Path = ()) -> dict[Path, ast.expr]:
    """Path -> AST node of every scalar leaf in the literal (the nodes a rewrite may replace in place)."""
    out: dict[Path, ast.expr] = {}
    if isinstance(node, ast.Dict):
        for k, v in zip(node.keys, node.values):
            out.update(_leaf_nodes(v, path + (literal_value(k),)))
    elif isinstance(node, ast.Call):                       # dict(KEY=value, ...)
        for kw in node.keywords:
            out.update(_leaf_nodes(kw.value, path + (kw.arg,)))
    elif isinstance(node, (ast.List, ast.Tuple)):
        for i, v in enumerate(node.elts):
            out.update(_leaf_nodes(v, path + (i,)))
    else:
        out[path] = node
    return out


def _leaves(value: Any, path: Path = ()) -> dict[Path, Any]:
    if isinstance(value, dict):
        return {p: v for k, sub in value.items() for p, v in _leaves(sub, path + (k,)).items()}
    if isinstance(value, (list, tuple)):
        return {p: v for i, sub in enumerate(value) for p, v in _leaves(sub, path + (i,)).items()}
    return {path: value}


def _merge(old: Any, new: Any) -> Any:
    if isinstance(old, dict) and isinstance(new, dict):
        out = dict(old)
        for k, v in new.items():
            out[k] = _merge(old[k], v) if k in old else v
        return out
    return new


def apply_config(source: str, config: Any) -> str:
    """The source with CONFIGS set to `config`, merged into the current literal (a dict gives only
    the keys to change; nested dicts merge). Everything outside the changed numbers stays byte-identical."""
    lit = read_configs(source)
    new_value = _merge(lit.value, config)
    old_leaves, new_leaves = _leaves(lit.value), _leaves(new_value)
    raw = source.encode()
    nodes = _leaf_nodes(lit.node)
    if old_leaves.keys() == new_leaves.keys() and nodes.keys() >= old_leaves.keys():
        edits = sorted(((_byte_span(source, nodes[p]), repr(v)) for p, v in new_leaves.items()
                        if v != old_leaves[p] or type(v) is not type(old_leaves[p])), reverse=True)
        for (a, b), text in edits:
            raw = raw[:a] + text.encode() + raw[b:]
        out = raw.decode()
    else:
        a, b = lit.span
        out = (raw[:a] + pprint.pformat(new_value, sort_dicts=False, width=100).encode() + raw[b:]).decode()
    check = read_configs(out).value
    if config_key(check) != config_key(new_value):
        raise SearchSpaceError(f"rewriting {CONFIGS_NAME} produced {check!r}, expected {new_value!r} (a bug in the rewriter)")
    return out


# --- enumeration --------------------------------------------------------------------------------

def _slots_within(lit: ConfigsLiteral, within: Path) -> list[Slot]:
    slots = [s for s in lit.slots() if s.path[:len(within)] == tuple(within)]
    if within and not slots:
        raise SearchSpaceError(f"no tunable under CONFIGS{''.join(f'[{p!r}]' for p in within)}; "
                               f"paths with tunables: {sorted({s.path[:-1] for s in lit.slots()}, key=repr)}")
    return slots


def space_size(source: str, within: Path = ()) -> int:
    """Grid points of the CONFIGS (or of the part under the path `within`, e.g. ("buckets", 2))."""
    size = 1
    for slot in _slots_within(read_configs(source), within):
        size *= len(slot.rule.grid(slot.value))
    return size


def enumerate_space(source: str, limit: int = DEFAULT_ENUMERATE_LIMIT, within: Path = ()) -> list[Any]:
    """Every CONFIGS value of the grid (the product of each slot's grid), for exhaustive baselines.
    `within` restricts the product to the slots under one path (one size bucket), the rest fixed:
    buckets serve different shapes, so a benchmark can search them one at a time."""
    lit = read_configs(source)
    slots = _slots_within(lit, within)
    size = space_size(source, within)
    if size > limit:
        raise SearchSpaceError(f"the CONFIGS grid has {size} points, over the limit {limit}; pass a larger limit, "
                               f"one bucket with within=(...), or sample it with random_configs(source, n, seed)")
    out = []
    for combo in itertools.product(*(slot.rule.grid(slot.value) for slot in slots)):
        value = lit.value
        for slot, v in zip(slots, combo):
            value = set_at(value, slot.path, v)
        out.append(value)
    return out


def random_configs(source: str, n: int, seed: int = 0, within: Path = ()) -> list[Any]:
    """Up to n distinct grid points drawn uniformly with a seeded RNG, for random-search baselines."""
    lit = read_configs(source)
    slots, rng = _slots_within(lit, within), random.Random(seed)
    want = min(n, space_size(source, within))
    seen: dict[str, Any] = {}
    for _ in range(max(n * 50, 100)):
        if len(seen) >= want:
            break
        value = lit.value
        for slot in slots:
            value = set_at(value, slot.path, rng.choice(slot.rule.grid(slot.value)))
        seen.setdefault(config_key(value), value)
    return list(seen.values())
