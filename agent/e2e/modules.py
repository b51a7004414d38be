"""Thin modules that call aka's kernels in place of a decoder's own, and the swap in and out.

Recognised by structure, not class name, so every transformers family with the same building blocks is covered:
  RMSNorm     a module with a 1-D `weight` and `variance_epsilon` (or `eps`) whose class name ends in RMSNorm
  gated MLP   `gate_proj`, `up_proj`, `down_proj` linears and a SiLU `act_fn`  -> gemm, silu_and_mul, gemm
  experts     3-D `gate_up_proj` [E, 2I, H] and `down_proj` [E, H, I] parameters (Qwen3-MoE, DeepSeek-V3)
              called as experts(hidden[T,H], top_k_index[T,k], top_k_weights[T,k]) -> fused_moe
  linear      any other nn.Linear (attention projections, lm_head, router)      -> gemm
The aka modules share the stock modules' weight tensors (the gated MLP keeps one concatenated gate/up copy), so
stock and aka compute with the same weights, and `swap` is undone by `restore`.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import torch
from torch import nn


def _rows(x: torch.Tensor) -> torch.Tensor:
    return x.reshape(-1, x.shape[-1]).contiguous()


class AkaRMSNorm(nn.Module):
    def __init__(self, stock: nn.Module, fn):
        super().__init__()
        self.weight, self.fn = stock.weight, fn
        self.eps = float(getattr(stock, "variance_epsilon", getattr(stock, "eps", 1e-6)))

    def forward(self, x):
        return self.fn(_rows(x), self.weight, self.eps).view(x.shape)


class AkaLinear(nn.Module):
    def __init__(self, stock: nn.Linear, fn):
        super().__init__()
        self.weight, self.bias, self.fn = stock.weight, stock.bias, fn

    def forward(self, x):
        y = self.fn(_rows(x), self.weight)
        if self.bias is not None:
            y = y + self.bias
        return y.view(*x.shape[:-1], self.weight.shape[0])


class AkaGatedMLP(nn.Module):
    """down(silu(gate(x)) * up(x)) as one gate/up gemm, silu_and_mul and the down gemm; a matmul whose operator
    is not being replaced stays torch's (F.linear)."""

    def __init__(self, stock: nn.Module, silu_and_mul, gemm):
        super().__init__()
        if stock.gate_proj.bias is not None or stock.up_proj.bias is not None or stock.down_proj.bias is not None:
            raise ValueError("gated MLP with biases: not mapped (no aka operator adds a bias)")
        self.gate_up = nn.Parameter(torch.cat([stock.gate_proj.weight, stock.up_proj.weight], 0).detach(),
                                    requires_grad=False)
        self.down = stock.down_proj.weight
        self.silu_and_mul = silu_and_mul
        self.gemm = gemm or (lambda a, b: nn.functional.linear(a, b))

    def forward(self, x):
        h = self.gemm(_rows(x), self.gate_up)
        a = self.silu_and_mul(h) if self.silu_and_mul is not None else (
            nn.functional.silu(h[:, : h.shape[1] // 2]) * h[:, h.shape[1] // 2:])
        return self.gemm(a, self.down).view(*x.shape[:-1], self.down.shape[0])


class AkaExperts(nn.Module):
    def __init__(self, stock: nn.Module, fn):
        super().__init__()
        self.w1, self.w2, self.fn = stock.gate_up_proj, stock.down_proj, fn

    def forward(self, hidden_states, top_k_index, top_k_weights):
        x = _rows(hidden_states)
        out = self.fn(x, self.w1, self.w2, top_k_weights.reshape(x.shape[0], -1).float().contiguous(),
                      top_k_index.reshape(x.shape[0], -1).to(torch.int32).contiguous())
        return out.view(hidden_states.shape)


def _is_rms_norm(m: nn.Module) -> bool:
    w = getattr(m, "weight", None)
    return (type(m).__name__.endswith("RMSNorm") and isinstance(w, torch.Tensor) and w.dim() == 1
            and getattr(m, "bias", None) is None and (hasattr(m, "variance_epsilon") or hasattr(m, "eps")))


def _is_gated_mlp(m: nn.Module) -> bool:
    act = getattr(m, "act_fn", None)
    return (all(isinstance(getattr(m, n, None), nn.Linear) for n in ("gate_proj", "up_proj", "down_proj"))
            and "silu" in type(act).__name__.lower())


def _is_experts(m: nn.Module) -> bool:
    w1, w2 = getattr(m, "gate_up_proj", None), getattr(m, "down_proj", None)
    return (isinstance(w1, torch.Tensor) and isinstance(w2, torch.Tensor) and w1.dim() == 3 and w2.dim() == 3
            and w1.shape[0] == w2.shape[0] and w1.shape[1] == 2 * w2.shape[2] and w1.shape[2] == w2.shape[1]
            and "silu" in type(getattr(m, "act_fn", None)).__name__.lower() and not hasattr(m, "gate_up_proj_bias"))


@dataclass
class Swap:
    """What `swap` replaced: (parent, attribute, stock module, aka module), to restore or re-apply."""
    entries: list[tuple[nn.Module, str, nn.Module, nn.Module]] = field(default_factory=list)

    def counts(self) -> dict[str, int]:
        return dict(Counter(type(aka).__name__ for _, _, _, aka in self.entries))

    def use(self, aka: bool) -> None:
        for parent, name, stock, mod in self.entries:
            setattr(parent, name, mod if aka else stock)


def swap(model: nn.Module, fns: dict) -> Swap:
    """Build the aka modules for every recognised module whose operator is in `fns` (op -> callable) and put them
    in place. Returns the Swap; `swap.use(False)` puts the stock modules back, `use(True)` aka's again."""
    plan = Swap()

    def visit(parent: nn.Module) -> None:
        for name, child in list(parent.named_children()):
            aka = None
            if _is_rms_norm(child) and "rms_norm" in fns:
                aka = AkaRMSNorm(child, fns["rms_norm"])
            elif _is_gated_mlp(child) and ("silu_and_mul" in fns or "gemm" in fns):
                aka = AkaGatedMLP(child, fns.get("silu_and_mul"), fns.get("gemm"))
            elif _is_experts(child) and "fused_moe" in fns:
                aka = AkaExperts(child, fns["fused_moe"])
            elif isinstance(child, nn.Linear) and "gemm" in fns:
                aka = AkaLinear(child, fns["gemm"])
            if aka is not None:
                plan.entries.append((parent, name, child, aka))
            else:
                visit(child)

    visit(model)
    plan.use(True)
    return plan
