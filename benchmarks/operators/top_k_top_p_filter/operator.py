"""Top-k then top-p (nucleus) filtering of sampling logits: the reference, seeded logits with ties and
well-posed nucleus boundaries, the work model and where a serving engine calls it.

Per row: keep the entries >= the k-th largest logit (ties at the threshold all kept), then, under the
softmax of the kept entries, keep an entry when the probability mass strictly above its logit is < p
(ties again all kept); every other entry becomes -inf. k >= V and p >= 1 disable their filter.
Contract: benchmarks/operators/README.md.
"""
from __future__ import annotations

import torch

from benchmarks import model_calls as mc
from benchmarks.inputs import row_dims, row_holdout_dims, scale_down, torch_dtype
from benchmarks.spec import Tolerance

NAME = "top_k_top_p_filter"
SIGNATURE = "top_k_top_p_filter(logits[B,V] fp32, k[B] int32, p[B] fp32) -> [B,V] fp32"
ARGS = ("logits", "k", "p")
DESCRIPTION = (
    "The top-k / top-p filter of a sampler, per row b of next-token logits [B, V] fp32 (B sequences, V the "
    "vocabulary, 32000-256000): (1) top-k: t_k = the k[b]-th largest logit of the row (counting repeats); "
    "entries < t_k are excluded, so every entry tied with t_k stays (k[b] >= V disables top-k). (2) top-p: "
    "over the softmax q of the remaining entries, an entry v stays when the mass of the entries whose logit "
    "is strictly greater than its own, sum of q[u] for logits[u] > logits[v], is < p[b] (so tied entries "
    "stay or go together; the largest always stays; p[b] >= 1 disables top-p). The output is a new "
    "contiguous [B, V] fp32 tensor: the logit where the entry stays, -inf where it is excluded; kept "
    "logits are copied exactly. k is int32 in [1, V], p fp32 in (0, 1]. Logits are bf16 values stored as "
    "fp32, as an LM head in bf16 produces them: many exact ties. Inputs are drawn so every nucleus "
    "boundary has a margin of at least 1e-3 in probability mass: an fp32 sum in any order decides it the "
    "same way. No host synchronization: the call must be capturable in a CUDA graph."
)

# Exact: kept logits are copies and excluded ones exactly -inf (compare requires the same infinity at the
# same place); nothing is computed that could round. rel_l2 must be positive by the contract: 1e-12.
_EXACT = Tolerance(atol=0.0, rtol=0.0, rel_l2=1e-12)
TOLERANCES = {"bf16": _EXACT, "fp16": _EXACT, "fp32": _EXACT}

LOGIT_STD = 3.0
TOP_TOKENS = 8
TOP_LIFT = (3.0, 12.0)         # a few likely tokens, not a single certain one
K_CHOICES = ("V", 1, 20, 50, "tie")      # per row, cycling: disabled, greedy, common settings, a tie at the cut
P_TARGETS = (0.9, 1.0, 0.8, 0.95, 0.6)   # per row, cycling (1.0: disabled); others snapped to a safe group
P_MARGIN_MASS = 2e-3                     # a group of tied logits straddling the cut holds at least this mass
P_WINDOW = 12.0                          # logits this far below the max cannot: 100 * e^-12 < P_MARGIN_MASS
HOLDOUT_MAX_B = 512
INTERACT_KS = (20, 50, 10, 100, 5)       # k values tried for the row whose two filters interact
INTERACT_TARGET = 0.8                    # its p: the interacting safe centre nearest this
INTERACT_REDRAWS = 16                    # rows redrawn until one has an interacting cut (~85% each at V=600)
# Interpreter rows: up to 16 (the hot shapes' B=2 stays 2). Every call still has a row whose filters interact and a
# tie at a top-k cut (_row_settings): with rows cycling through the settings alone, 2-row calls told a nucleus
# measured on the whole row from the right one in only 33 of 200 seeded calls. The seed's ~70 passes per row cost
# ~0.1 s a row under the interpreter.
_INTERP_MAX_B, _INTERP_MAX_V = 16, 1024


def _dims(dims) -> tuple[int, int]:
    return row_dims(NAME, dims, row="B", col="V")


def _masks(x: torch.Tensor, k: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(top-k keep mask, mass strictly above each entry under the softmax of the kept entries), in x's dtype
    (the reference's float64, the baseline's fp32)."""
    V = x.shape[-1]
    desc = x.sort(dim=-1, descending=True).values
    kk = k.long().clamp(1, V)
    t_k = desc.gather(1, (kk - 1)[:, None])
    keep_k = x >= t_k
    q = torch.softmax(torch.where(keep_k, x, torch.full_like(x, float("-inf"))), dim=-1)
    # mass above v = sum of q over entries with a strictly larger logit: sort, exclusive cumsum, then the
    # value at the first position of v's tie group.
    order = x.argsort(dim=-1, descending=True)
    xs, qs = x.gather(1, order), q.gather(1, order)
    excl = qs.cumsum(-1) - qs
    first = torch.searchsorted((-xs).contiguous(), (-xs).contiguous(), right=False)
    above_sorted = excl.gather(1, first)
    above = torch.empty_like(above_sorted).scatter_(1, order, above_sorted)
    return keep_k, above


def reference(logits: torch.Tensor, k: torch.Tensor, p: torch.Tensor) -> torch.Tensor:
    x = logits.double()
    keep_k, above = _masks(x, k)
    keep = keep_k & ((above < p.double()[:, None]) | (p.double()[:, None] >= 1.0))
    return torch.where(keep, logits, torch.full_like(logits, float("-inf")))


def baseline(logits: torch.Tensor, k: torch.Tensor, p: torch.Tensor) -> torch.Tensor:
    """What a user runs instead: a sort-based PyTorch filter as vLLM's sampler computes it, in fp32 (the sort,
    the softmax of the kept entries and its cumulative sum), with this contract's tie rules. The reference's
    float64 would time slower than what users run (sessions up to 24 timed this baseline in float64); fp32
    decides the same way, since every nucleus boundary has a margin of 1e-3 in mass."""
    x = logits.float()
    keep_k, above = _masks(x, k)
    keep = keep_k & ((above < p.float()[:, None]) | (p.float()[:, None] >= 1.0))
    return torch.where(keep, x, torch.full_like(x, float("-inf")))


def _tie_k(desc_row: torch.Tensor, lo: int = 10, hi: int = 200) -> int | None:
    """A k whose k-th and (k+1)-th largest logits are equal (a tie straddles the cut), if the row has one."""
    n = desc_row.numel()
    seg = desc_row[lo - 1:min(hi, n - 1) + 1]
    eq = (seg[:-1] == seg[1:]).nonzero()
    return int(eq[0]) + lo if eq.numel() else None


def _tie_groups(x_row: torch.Tensor, keep_row: torch.Tensor):
    """The groups of tied kept logits within P_WINDOW of the maximum, largest first: (mass of each group under
    the softmax of the kept entries, mass strictly above it, the safe centres: above + mass/2 of each group
    holding at least P_MARGIN_MASS). Only logits that close to the maximum can hold that much (even 100 tied
    ones), and every larger logit is inside the window too, so `above` is exact."""
    vals = x_row[keep_row].double()
    top = vals.max()
    log_z = torch.logsumexp(vals - top, 0)
    uniq, counts = torch.unique(vals[vals >= top - P_WINDOW], sorted=True, return_counts=True)
    mass = counts.flip(0) * torch.exp(uniq.flip(0) - top - log_z)
    above = mass.cumsum(0) - mass
    ok = (mass >= P_MARGIN_MASS).nonzero().flatten()
    return mass, above, above[ok] + mass[ok] / 2


def _safe_p(x_row: torch.Tensor, keep_row: torch.Tensor, target: float) -> float:
    """The p nearest `target` that falls mid-way inside a group of tied kept logits holding at least
    P_MARGIN_MASS (_tie_groups): the nucleus boundary is then far from any rounding of an fp32 cumulative
    sum; 1.0 where no group holds that much."""
    centres = _tie_groups(x_row, keep_row)[2]
    if centres.numel() == 0:
        return 1.0
    return float(centres[int(torch.argmin((centres - target).abs()))])


def _draw_rows(gen, n: int, V: int, device) -> torch.Tensor:
    """n rows of N(0, 3^2) logits with TOP_TOKENS of them lifted by 3-12, rounded to bf16 values (ties)."""
    x = LOGIT_STD * torch.randn(n, V, generator=gen, device=device, dtype=torch.float32)
    n_top = min(TOP_TOKENS, V)
    top = torch.randint(0, V, (n, n_top), generator=gen, device=device)
    lo, hi = TOP_LIFT
    x.scatter_add_(1, top, lo + (hi - lo) * torch.rand(n, n_top, generator=gen, device=device, dtype=torch.float32))
    return x.to(torch.bfloat16).float()


def _interacting_setting(x_row: torch.Tensor, target: float) -> tuple[int, float] | None:
    """(k, p) with both filters active where the order of the filters decides the result: the nucleus measured
    under the softmax of the whole row (top-p and top-k applied independently) keeps a tie group that the
    nucleus of the top-k entries excludes. p is a safe centre (see _safe_p), the nearest `target` of those."""
    V = x_row.numel()
    desc = x_row.sort(descending=True).values
    x64 = x_row.double()
    log_z_row = torch.logsumexp(x64 - x64.max(), 0)
    for k in INTERACT_KS:
        if k >= V:
            continue
        keep = x_row >= desc[k - 1]
        _, above, centres = _tie_groups(x_row, keep)
        # the share of the row's mass that top-k keeps (both logsumexps shifted by the row's maximum)
        ratio = float(torch.exp(torch.logsumexp(x64[keep] - x64.max(), 0) - log_z_row))
        # the group after the cut: excluded under the kept softmax (above >= p), kept under the whole row's
        moved = [c for c in centres.tolist() if int((above * ratio < c).sum()) > int((above < c).sum())]
        if moved:
            return k, min(moved, key=lambda c: abs(c - target))
    return None


def _row_settings(B: int, offset: int) -> list[str]:
    """The setting of each row: every call with B >= 2 has one row whose two filters interact and one whose
    top-k cut falls inside a tie (at random rows, so a kernel cannot key on the row index); the other rows
    cycle through K_CHOICES."""
    kinds = [K_CHOICES[(b + offset) % len(K_CHOICES)] for b in range(B)]
    if B >= 2:
        a, t = offset % B, (offset + 1 + offset // B) % B
        t = t if t != a else (a + 1) % B
        kinds[a], kinds[t] = "interact", "tie"
    elif B == 1 and offset % 2 == 0:
        kinds[0] = "interact"
    return kinds


def make_inputs(dims, dtype: str, seed: int, device="cpu") -> dict:
    """Logits: N(0, 3^2) body plus TOP_TOKENS tokens lifted by 3-12, rounded to bf16 values (ties); k and p
    set per row (_row_settings): one row where top-k then top-p differs from the two filters applied
    independently (redrawn until it does), one k cut inside a tie (top-p off in that row), the others common
    settings; every p < 1 is moved to the middle of a tie group of >= P_MARGIN_MASS mass (see _safe_p)."""
    B, V = _dims(dims)
    torch_dtype(NAME, dtype)
    gen = torch.Generator(device=device)
    gen.manual_seed(int(seed))
    x = _draw_rows(gen, B, V, device)
    offset = int(torch.randint(0, 10 ** 6, (1,), generator=gen, device=device))
    kinds = _row_settings(B, offset)
    settings: dict[int, tuple[int, float]] = {}
    for b in (i for i, kind in enumerate(kinds) if kind == "interact"):
        for _ in range(INTERACT_REDRAWS):
            found = _interacting_setting(x[b], INTERACT_TARGET)
            if found:
                settings[b] = found
                break
            x[b] = _draw_rows(gen, 1, V, device)[0]
        else:
            kinds[b] = 50          # no row drawn had an interacting cut (tiny V): an ordinary setting
    desc = x.sort(dim=-1, descending=True).values.cpu()
    ks = []
    for b, kind in enumerate(kinds):
        kb = settings[b][0] if b in settings else V if kind == "V" else \
            (_tie_k(desc[b]) or 40) if kind == "tie" else int(kind)
        ks.append(max(1, min(kb, V)))
    k = torch.tensor(ks, dtype=torch.int32, device=device)
    t_k = desc.to(device).gather(1, (k.long() - 1)[:, None])
    keep_k = x >= t_k
    ps = []
    for b, kind in enumerate(kinds):
        target = P_TARGETS[(b + 2 * offset) % len(P_TARGETS)]
        if kind == "tie":
            target = 1.0          # a nucleus would cut above the tied entries: this row tests top-k's ties
        ps.append(settings[b][1] if b in settings else 1.0 if target >= 1.0 else _safe_p(x[b], keep_k[b], target))
    return {"logits": x.contiguous(), "k": k, "p": torch.tensor(ps, dtype=torch.float32, device=device)}


def output_spec(dims, dtype: str) -> tuple[tuple[int, int], str]:
    B, V = _dims(dims)
    torch_dtype(NAME, dtype)
    return (B, V), "fp32"


def work(dims, dtype: str) -> tuple[dict[str, float], float]:
    """W: 4 FLOPs per logit (the top-k comparison, exp of the shifted logit, its share of the mass, the
    top-p comparison) on the fp32 peak. Q: logits read once and the output written once (4 bytes each),
    k and p read once (4 bytes per row each). A kernel that finds its thresholds by repeated passes reads
    the row many times, out of L2 at best."""
    B, V = _dims(dims)
    return {"fp32": 4.0 * B * V}, float(8 * B * V + 8 * B)


def interpreter_dims(dims) -> dict[str, int]:
    B, V = _dims(dims)
    return {"B": scale_down(B, _INTERP_MAX_B, 13), "V": scale_down(V, _INTERP_MAX_V, 600 + V % 64)}


def holdout_dims(rng, hot_dims) -> list[dict[str, int]]:
    return row_holdout_dims(rng, hot_dims, row="B", col="V", default_cols=151936, max_rows=HOLDOUT_MAX_B)


def occurrences(model_cfg: dict, tp: int, tokens: int, phase: str = "decode") -> list[tuple[dict[str, int], int]]:
    """One filter per forward pass, over the rows that sample (as softmax: every decode token, one row per
    2048 prefill tokens; model_calls.sampled_rows) and the full vocabulary (gathered across TP)."""
    mc.check_call(NAME, tp, tokens)
    return [({"B": mc.sampled_rows(tokens, phase), "V": int(model_cfg["vocab_size"])}, 1)]
