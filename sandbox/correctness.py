"""The correctness gate's pieces: tolerances, input digests, poisoned memory, output checks, seeds, hold-outs.

Parent side: `compare` (the tolerance math), `input_digests` of its own seeded inputs, `holdout_shapes`
drawn with a secret rng, `derive_seed`. Worker side: `scrub_free_memory` before each call and
`output_problem` after it. torch is imported inside the functions: the parent's planning code and the
worker's start-up (resource limits first) must not pay for it.
"""
from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.registry import contract_problems, load_operator, load_shapes
from benchmarks.spec import OperatorSpec, Shape, Tolerance

_DTYPE_NAMES = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32", "fp8": "float8_e4m3fn",
                "fp64": "float64", "int32": "int32", "int64": "int64", "int8": "int8", "uint8": "uint8",
                "bool": "bool"}
POISON_BYTE = 0xFF   # 0xFF.. is NaN in bf16, fp16, fp32 and fp8 e4m3fn alike
SMALL_POOL_CHUNK = 1 << 20


class HarnessError(RuntimeError):
    """A bug on our side (operator, reference, worker). Raised, never turned into a verdict."""


class Rejected(Exception):
    """A candidate failure: the evaluation stops with a rejected verdict at `stage` naming `reason`."""

    def __init__(self, stage: str, reason: str):
        super().__init__(reason)
        self.stage, self.reason = stage, reason


# ---- operators ---------------------------------------------------------------------------------
def load_spec(op: str, operator_dir: str | os.PathLike | None = None) -> OperatorSpec:
    """The operator by name from benchmarks/operators, or from `operator_dir/<op>/` (tests' tiny operators)."""
    if operator_dir is None:
        return load_operator(op)
    folder = Path(operator_dir) / op
    path = folder / "operator.py"
    if not path.is_file():
        raise FileNotFoundError(f"no operator at {path}")
    mod_name = f"aka_operator_{op}_{hashlib.sha1(str(folder.resolve()).encode()).hexdigest()[:10]}"
    spec = importlib.util.spec_from_file_location(mod_name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    contract_problems(module, path)
    shapes_path = folder / "shapes.yaml"
    return OperatorSpec(name=op, signature=module.SIGNATURE, arg_names=tuple(module.ARGS),
                        description=module.DESCRIPTION,
                        shapes=load_shapes(shapes_path) if shapes_path.is_file() else (),
                        seed_path=str(folder / "seed.py"), module=module)


def torch_dtype(name: str):
    import torch
    if name not in _DTYPE_NAMES:
        raise KeyError(f"unknown dtype {name!r}; known: {', '.join(_DTYPE_NAMES)}")
    return getattr(torch, _DTYPE_NAMES[name])


def dtype_name(dtype) -> str:
    for short, long in _DTYPE_NAMES.items():
        if str(dtype) == f"torch.{long}":
            return short
    return str(dtype).replace("torch.", "")


def tolerance_for(spec: OperatorSpec, out_dtype: str, in_dtype: str) -> Tolerance:
    """Tolerances are per output dtype (DESIGN.md section 3); fall back to the input dtype's."""
    try:
        return spec.tolerance(out_dtype)
    except KeyError:
        return spec.tolerance(in_dtype)


# ---- seeds and hold-out shapes -----------------------------------------------------------------
def fresh_base_seed() -> int:
    return int.from_bytes(os.urandom(8), "little") >> 1


def derive_seed(base: int, *parts: Any) -> int:
    """A 63-bit seed for one (purpose, shape, trial): distinct per part, reproducible from `base`."""
    digest = hashlib.blake2b(repr((int(base),) + parts).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") >> 1


def holdout_shapes(spec: OperatorSpec, rng, dtypes: list[str], at=None) -> list[Shape]:
    """Hidden shapes drawn with the parent's secret rng, at the model sizes of the shapes `at` (None: all of
    the operator's); dtypes cycle over the visible shapes' dtypes.

    They carry weight 0: correctness only, never timed, never scored, never shown to a proposer."""
    if not dtypes:
        raise ValueError("hold-out shapes need at least one dtype from the visible shapes")
    return [Shape.make(f"holdout-{i + 1}", dims, dtype=dtypes[i % len(dtypes)], phase="decode",
                       source="hold-out (hidden)", weight=0.0, hot=False)
            for i, dims in enumerate(spec.holdout_dims(rng, at))]


# ---- tolerance math ----------------------------------------------------------------------------
@dataclass(frozen=True)
class ErrorStats:
    """How far an output is from the reference. Elementwise: |out - ref| <= atol + rtol * |ref|, or
    atol + rtol * max(|ref|, scale) with the reference's per-element scale (`scaled`); overall:
    rel_l2 = ||out - ref|| / ||ref||. max_rel_err = max |out - ref| / max(|ref|, atol)."""

    max_abs_err: float
    max_rel_err: float
    rel_l2: float
    n_bad: int                   # elements outside the elementwise bound (non-finite ones included)
    n_nonfinite: int             # NaN or Inf in the output
    numel: int
    worst_index: tuple[int, ...] | None = None
    worst_got: float | None = None
    worst_expected: float | None = None
    rel_l2_limit: float = 0.0
    exact: bool = False          # an integer/bool output: compared for equality, no tolerance
    scaled: bool = False         # the element bound used the reference's scale (compare's `scale`)
    worst_scale: float | None = None

    def bound_text(self, tol: Tolerance) -> str:
        """The element bound, as the failure message states it."""
        if not self.scaled:
            return f"|out-ref| <= {tol.atol:g} + {tol.rtol:g}*|ref|"
        return (f"|out-ref| <= {tol.atol:g} + {tol.rtol:g}*max(|ref|, scale) (scale: the summed magnitudes of the "
                f"terms the reference adds up at that element, from the operator's reference_with_scale)")

    @property
    def passed(self) -> bool:
        return self.n_nonfinite == 0 and self.n_bad == 0 and self.rel_l2 <= self.rel_l2_limit

    def describe(self, tol: Tolerance, detail: bool = True) -> str:
        """Why it failed, with the values and the limits (empty string when it passed). Without `detail`
        (hidden shapes) no element counts or indices: they would reveal the shape."""
        if self.passed:
            return ""
        if self.exact:
            where = (f"; first at index {list(self.worst_index)}: got {self.worst_got:.0f}, expected "
                     f"{self.worst_expected:.0f}") if detail and self.worst_index is not None else ""
            count = f"{self.n_bad} of {self.numel} elements differ" if detail else "elements differ"
            return f"{count} (integer and bool outputs are compared exactly){where}"
        parts = []
        if self.n_nonfinite and not detail:
            parts.append("the output holds NaN/Inf (NaN never passes; outputs are poisoned with NaN before each "
                         "call, so this is often an element the kernel never wrote)")
        elif self.n_nonfinite:
            parts.append(f"{self.n_nonfinite} of {self.numel} output elements are NaN/Inf (NaN never passes; "
                         f"outputs are poisoned with NaN before each call, so this is often an element the "
                         f"kernel never wrote)")
        if self.n_bad > self.n_nonfinite and not detail:
            parts.append(f"elements exceed {self.bound_text(tol)}")
        elif self.n_bad > self.n_nonfinite:
            where = ""
            if self.worst_index is not None:
                where = (f"; worst at index {list(self.worst_index)}: got {self.worst_got:.6g}, "
                         f"expected {self.worst_expected:.6g}")
                if self.worst_scale is not None:
                    where += f" (scale {self.worst_scale:.6g})"
            parts.append(f"{self.n_bad - self.n_nonfinite} of {self.numel} elements exceed "
                         f"{self.bound_text(tol)}{where}")
        if self.rel_l2 > self.rel_l2_limit:
            parts.append(f"rel_l2 {self.rel_l2:.3g} > {self.rel_l2_limit:g}")
        parts.append(f"max_abs_err {self.max_abs_err:.3g}, max_rel_err {self.max_rel_err:.3g}")
        return "; ".join(parts)


def compare(out, ref, tol: Tolerance, scale=None) -> ErrorStats:
    """Compare a candidate's output with the reference (same shape). Non-finite outputs never pass, except
    the very infinity the reference holds at the same position.

    `scale` (optional, the reference's shape): the trusted side's per-element magnitude of what the
    reference sums there (OperatorSpec.reference_with_scale), never the candidate's. The element bound is
    then atol + rtol * max(|ref|, scale): a sum rounded in parts (fused_moe's bf16 partials) errs in
    proportion to its summands, which can be far larger than the result they cancel to. rel_l2 stays global."""
    import torch
    if tuple(out.shape) != tuple(ref.shape):
        raise ValueError(f"compare: shapes differ, {tuple(out.shape)} vs {tuple(ref.shape)}; check shapes first")
    numel = ref.numel()
    if numel == 0:
        return ErrorStats(0.0, 0.0, 0.0, 0, 0, 0, rel_l2_limit=tol.rel_l2)
    if is_exact(ref.dtype) or is_exact(out.dtype):
        return compare_exact(out, ref)
    work = torch.float64 if numel <= (1 << 26) else torch.float32   # float32 halves memory on huge outputs
    r = ref.detach().to(device=ref.device, dtype=work)
    o = out.detach().to(device=ref.device, dtype=work)
    if bool(torch.isnan(r).any()):
        raise HarnessError(f"the reference output holds {int(torch.isnan(r).sum())} NaN values: "
                           f"an operator bug (make_inputs or reference), not the candidate's")
    # An infinite reference value is an operator's answer (top_k_top_p_filter masks logits to -inf): the output
    # must hold the same infinity there, and those positions are left out of the norms; any other value is
    # an element off by inf.
    ref_inf = torch.isinf(r)
    matched = ref_inf & (o == r)
    off_inf = ref_inf & ~matched & ~torch.isnan(o)     # NaN (an unwritten, poisoned element) stays non-finite
    r_shown = r
    if bool(ref_inf.any()):
        r = torch.where(ref_inf, torch.zeros_like(r), r)
        o = torch.where(matched, torch.zeros_like(o), o)
    nonfinite = ~torch.isfinite(o) & ~off_inf
    n_nonfinite = int(nonfinite.sum())
    diff = (o - r).abs()
    diff[nonfinite | off_inf] = math.inf
    magnitude = r.abs()
    if scale is not None:
        s = _checked_scale(scale, ref, work)
        magnitude = torch.maximum(magnitude, s)
    bound = tol.atol + tol.rtol * magnitude
    violation = diff / bound if tol.atol > 0 else torch.where(diff == 0, torch.zeros_like(diff), diff / bound)
    n_bad = int((~(diff <= bound)).sum())
    flat = int(torch.argmax(torch.nan_to_num(violation, nan=math.inf, posinf=math.inf)).item())
    worst = tuple(int(i) for i in torch.unravel_index(torch.tensor(flat), tuple(ref.shape)))
    ref_norm = float(torch.linalg.vector_norm(r, dtype=torch.float64))
    err_norm = math.inf if n_nonfinite or bool(off_inf.any()) else float(
        torch.linalg.vector_norm(o - r, dtype=torch.float64))
    if ref_norm > 0:
        rel_l2 = err_norm / ref_norm
    else:
        rel_l2 = 0.0 if err_norm == 0 else math.inf
    denom = r.abs().clamp_min(max(tol.atol, 1e-12))
    return ErrorStats(max_abs_err=float(diff.max()), max_rel_err=float((diff / denom).max()), rel_l2=rel_l2,
                      n_bad=n_bad, n_nonfinite=n_nonfinite, numel=numel, worst_index=worst,
                      worst_got=float(o.reshape(-1)[flat]), worst_expected=float(r_shown.reshape(-1)[flat]),
                      rel_l2_limit=tol.rel_l2, scaled=scale is not None,
                      worst_scale=None if scale is None else float(s.reshape(-1)[flat]))


def _checked_scale(scale, ref, work):
    """The reference's scale in the comparison's dtype; anything but a finite, non-negative tensor of the
    reference's shape is an operator bug (a NaN or inf scale would let every element pass)."""
    import torch
    if not isinstance(scale, torch.Tensor) or tuple(scale.shape) != tuple(ref.shape):
        raise HarnessError(f"the reference's scale is {getattr(scale, 'shape', type(scale).__name__)}, but the "
                           f"output is {tuple(ref.shape)}: an operator bug (reference_with_scale)")
    s = scale.detach().to(device=ref.device, dtype=work)
    if not bool(torch.isfinite(s).all()) or bool((s < 0).any()):
        raise HarnessError("the reference's scale holds NaN, Inf or negative values: an operator bug "
                           "(reference_with_scale), not the candidate's")
    return s


def is_exact(dtype) -> bool:
    """Integer and bool results (expert ids, sorted token ids, counts) have one right answer: no tolerance."""
    import torch
    return not (dtype.is_floating_point or dtype.is_complex) or dtype == torch.bool


def compare_exact(out, ref) -> ErrorStats:
    """Elementwise equality for integer/bool outputs: every differing element is bad; the worst is the first."""
    import torch
    o = out.detach().to(device=ref.device).to(torch.int64)
    r = ref.detach().to(torch.int64)
    bad = o != r
    n_bad = int(bad.sum())
    diff = (o - r).abs().to(torch.float64)
    if not n_bad:
        return ErrorStats(0.0, 0.0, 0.0, 0, 0, ref.numel(), exact=True)
    flat = int(torch.nonzero(bad.reshape(-1))[0])
    worst = tuple(int(i) for i in torch.unravel_index(torch.tensor(flat), tuple(ref.shape)))
    return ErrorStats(max_abs_err=float(diff.max()), max_rel_err=float((diff / r.abs().clamp_min(1)).max()),
                      rel_l2=0.0, n_bad=n_bad, n_nonfinite=0, numel=ref.numel(), worst_index=worst,
                      worst_got=float(o.reshape(-1)[flat]), worst_expected=float(r.reshape(-1)[flat]), exact=True)


# ---- input integrity ---------------------------------------------------------------------------
def tensor_digest(t, key: int = 0) -> str:
    """A digest of a tensor's dtype, shape, strides, offset and bytes: any in-place edit or restride changes it.

    CPU tensors: blake2b of the bytes. CUDA tensors: keyed weighted sums computed on the device, because
    copying expert weights (2.8 GB for DeepSeek-V3's MoE layer) to the host and hashing them there took
    seconds a trial on the H200. The weights come from `key` (the trial's secret seed), so an edit that
    keeps the sums cannot be planned without knowing it (sandbox/digest_kernel.py)."""
    import torch
    h = hashlib.blake2b(digest_size=16)
    h.update(f"{t.dtype}|{tuple(t.shape)}|{tuple(t.stride())}|{t.storage_offset()}|".encode())
    flat = t.detach().contiguous().reshape(-1)
    if flat.numel():
        raw = flat.view(torch.uint8)
        if raw.is_cuda:
            h.update(_device_checksum(raw, key).tobytes())
        else:
            h.update(memoryview(raw.numpy()))
    return h.hexdigest()


def _device_checksum(raw, key: int):
    """Three keyed 64-bit sums of the tensor's words, in one pass on the device (sandbox/digest_kernel.py)."""
    from sandbox.digest_kernel import keyed_sums
    return keyed_sums(raw, key)


def input_digests(inputs: dict[str, Any], key: int = 0) -> dict[str, str]:
    import torch
    return {k: tensor_digest(v, key) for k, v in inputs.items() if isinstance(v, torch.Tensor)}


def digest_mismatches(expected: dict[str, str], got: dict[str, Any]) -> list[str]:
    """Names of inputs whose digest after the call differs from the parent's digest of the same seed."""
    if not isinstance(got, dict):
        return sorted(expected)
    return [k for k in sorted(expected) if got.get(k) != expected[k]]


# ---- worker side: poisoned memory and the output's type ----------------------------------------
def scrub_free_memory(nbytes: int, device) -> None:
    """Fill the memory the next allocations will reuse with NaN (0xFF bytes), so an output the kernel never
    writes (torch.empty) cannot hold a stale answer. On CUDA: empty torch's cache first, so the poisoned
    blocks are the only free ones the caching allocator can hand out."""
    import torch
    size = max(2 * int(nbytes), 1 << 16)
    if device.type == "cuda":
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        size = max(size, 64 << 20)
        bufs = [torch.full((SMALL_POOL_CHUNK,), POISON_BYTE, dtype=torch.uint8, device=device) for _ in range(2)]
        bufs.append(torch.full((size,), POISON_BYTE, dtype=torch.uint8, device=device))
        torch.cuda.synchronize()
    else:
        bufs = [torch.full((size,), POISON_BYTE, dtype=torch.uint8)]
    del bufs


@contextlib.contextmanager
def poisoned_allocations():
    """While active, torch.empty and friends hand out NaN-filled memory (the largest integer for integer
    dtypes): torch's deterministic mode fills uninitialized memory. On the CPU the scrub alone cannot steer
    which freed chunk malloc returns; this can. warn_only: no torch op raises because of the mode.
    Only around correctness calls: the fill is a memset that must not be timed."""
    import torch
    import torch.utils.deterministic as det
    saved = (torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled(),
             det.fill_uninitialized_memory)
    _set_deterministic(True, warn_only=True)
    det.fill_uninitialized_memory = True
    try:
        yield
    finally:
        _set_deterministic(saved[0], warn_only=saved[1])
        det.fill_uninitialized_memory = saved[2]


def _set_deterministic(mode: bool, warn_only: bool) -> None:
    """torch.use_deterministic_algorithms without its import of torch._inductor (for inductor's own flag): 1.6 s
    of a worker's first correctness trial on 2 CPU cores; imported at start-up instead, a GPU worker's imports
    went from 3.8 s to 7.2 s on the H200. The candidate's eager ops read only the C++ flag set here."""
    import torch
    setter = getattr(torch._C, "_set_deterministic_algorithms", None)
    if setter is None:      # a torch without the private setter: the public call, import and all
        torch.use_deterministic_algorithms(mode, warn_only=warn_only)
    else:
        setter(mode, warn_only=warn_only)


OUTPUT_LAYOUTS = ("contiguous", "any")


def output_layout(spec: OperatorSpec) -> str:
    """The operator's output layout contract: `OUTPUT_LAYOUT` in operator.py, "contiguous" when absent
    (the reference's layout: a consumer reads the result row-major without a copy)."""
    layout = getattr(spec.module, "OUTPUT_LAYOUT", "contiguous")
    if layout not in OUTPUT_LAYOUTS:
        raise HarnessError(f"operator {spec.name}: OUTPUT_LAYOUT={layout!r} is not one of {OUTPUT_LAYOUTS}")
    return layout


def layout_problem(out, layout: str = "contiguous") -> str | None:
    """Why the output's memory layout breaks the contract, or None. Strides of size-1 dims are free
    (no consumer can tell them apart); a storage offset is allowed (a view into a larger buffer reads
    the same)."""
    if layout == "any" or out.is_contiguous():
        return None
    want, at = [], 1
    for size in reversed(out.shape):
        want.insert(0, at)
        at *= max(int(size), 1)
    return (f"output layout rule: the output's strides are {list(out.stride())}, but the operator's contract "
            f"(OUTPUT_LAYOUT={layout!r}) wants the reference's contiguous strides {want}; a consumer would have "
            f"to copy it. Write the result row-major into torch.empty(shape) (no transposed or strided views)")


def output_problem(out, shape: tuple[int, ...], dtype: str, device_type: str,
                   inputs: dict[str, Any], layout: str = "contiguous") -> tuple[str, str] | None:
    """(kind, why) this output cannot be accepted as the operator's result, or None.

    kind is one of type|dtype|shape|device|alias|layout: the parent shows only the kind for hidden shapes."""
    import torch
    if type(out) is not torch.Tensor:
        kind = type(out)
        what = f"a torch.Tensor subclass ({kind.__module__}.{kind.__qualname__})" if isinstance(out, torch.Tensor) \
            else f"{kind.__module__}.{kind.__qualname__}"
        return "type", f"the output must be exactly a torch.Tensor, got {what}; return a plain tensor"
    if out.dtype != torch_dtype(dtype):
        return "dtype", f"output dtype is {dtype_name(out.dtype)}, but the operator returns {dtype}; store in {dtype}"
    if tuple(out.shape) != tuple(shape):
        return "shape", f"output shape is {list(out.shape)}, but the operator returns {list(shape)}"
    if out.device.type != device_type:
        return "device", f"output is on {out.device}, but the inputs are on {device_type}; allocate it on the inputs' device"
    ptr = out.untyped_storage().data_ptr()
    for name, v in inputs.items():
        if isinstance(v, torch.Tensor) and v.numel() and v.untyped_storage().data_ptr() == ptr:
            return "alias", (f"the output shares memory with input '{name}': writing into or returning an input is not "
                    f"allowed; allocate a new output tensor")
    why = layout_problem(out, layout)
    return ("layout", why) if why else None


def same_bytes(a, b) -> bool:
    """Bitwise equality (NaN == NaN here), for the stream-order check."""
    import torch
    fa, fb = a.detach().contiguous().reshape(-1), b.detach().contiguous().reshape(-1)
    return fa.dtype == fb.dtype and fa.numel() == fb.numel() and bool(
        torch.equal(fa.view(torch.uint8), fb.view(torch.uint8)))
