"""Which kernel each operator uses inside the model: the seeds, a directory of <op>.py files, or the final
accepted kernel of aka runs (their op comes from the run). Kernels run in this process, outside the sandbox:
they are kernels the sandbox accepted (or our own seeds), loaded the way a serving engine would import them."""
from __future__ import annotations

import importlib.util
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from benchmarks.registry import OPERATORS_DIR

# Operators a decoder's modules map to (agent/e2e/modules.py); later operators join here and there.
E2E_OPS = ("rms_norm", "silu_and_mul", "gemm", "fused_moe")


class KernelError(ValueError):
    """Kernels that cannot be loaded as asked; the message says which, why, and how to fix it."""


@dataclass(frozen=True)
class Kernel:
    op: str
    fn: Callable
    origin: str          # "seed", a file path, or "run <id> iteration <n>"
    sha256: str


def _load_file(op: str, path: Path, origin: str) -> Kernel:
    import hashlib
    text = path.read_text()
    mod_name = f"aka_e2e_{op}_{hashlib.sha256(text.encode()).hexdigest()[:12]}"
    spec = importlib.util.spec_from_file_location(mod_name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[mod_name] = module          # triton's JIT reads the source through the module
    try:
        spec.loader.exec_module(module)
    except Exception as e:
        raise KernelError(f"{path}: importing the {op} kernel raised {type(e).__name__}: {e}") from e
    fn = getattr(module, op, None)
    if not callable(fn):
        raise KernelError(f"{path} defines no function {op}(...); a kernel file defines one named after its operator")
    return Kernel(op, fn, origin, hashlib.sha256(text.encode()).hexdigest())


def from_seeds(ops=E2E_OPS) -> dict[str, Kernel]:
    return {op: _load_file(op, OPERATORS_DIR / op / "seed.py", "seed") for op in ops}


def from_dir(path: Path, ops=E2E_OPS) -> dict[str, Kernel]:
    if not path.is_dir():
        raise KernelError(f"--kernels {path}: not a directory (pass a folder of <op>.py files, or run ids)")
    found = {op: _load_file(op, path / f"{op}.py", str(path / f"{op}.py")) for op in ops if (path / f"{op}.py").is_file()}
    if not found:
        raise KernelError(f"--kernels {path}: no kernel file for any of {', '.join(ops)} (expected e.g. {path}/rms_norm.py)")
    return found


def from_runs(audit, runs: list[str]) -> dict[str, Kernel]:
    """The final accepted kernel of each run (a run id, a unique prefix, or `last`); one run per operator."""
    from agent.audit_export import load_run
    out: dict[str, Kernel] = {}
    for ref in runs:
        view = load_run(audit, audit.resolve_run(ref))
        final = view.final()
        op = view.start.op
        if op in out:
            raise KernelError(f"runs {out[op].origin} and {view.run_id} both optimize {op}: name one run per operator")
        text = audit.source(final.source_sha256)
        tmp = Path(audit.path).parent / "e2e_kernels" / f"{op}-{final.source_sha256[:12]}.py"
        tmp.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_text(text)
        k = _load_file(op, tmp, f"run {view.run_id} iteration {final.iteration}")
        out[op] = k
    return out


def resolve(spec: list[str] | None, ops: tuple[str, ...], open_audit) -> dict[str, Kernel]:
    """--kernels as given: nothing -> seeds; one existing directory -> its files (seeds fill the rest);
    otherwise run references (seeds fill the operators no run covers). `open_audit()` opens the audit DB lazily."""
    bad = [op for op in ops if op not in E2E_OPS]
    if bad:
        raise KernelError(f"--ops {','.join(bad)}: e2e maps only {', '.join(E2E_OPS)} onto model modules")
    kernels = from_seeds(ops)
    if not spec:
        return kernels
    if len(spec) == 1 and Path(spec[0]).exists():
        chosen = from_dir(Path(spec[0]), ops)
    else:
        with open_audit() as audit:
            chosen = {op: k for op, k in from_runs(audit, spec).items() if op in ops}
    kernels.update(chosen)
    return kernels
