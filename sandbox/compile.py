"""Compile gate: record the candidate's kernel launches, compile them for the GPU, read the results.

Flow (inside the sandboxed worker): run the candidate once at a tiny shape under `LaunchRecorder`
(the interpreter on CPU, or the GPU), then `compile_recorded` compiles every distinct launch for
the present GPU or, without one, for Hopper (sm_90) offline, and reports per kernel the registers,
spilled bytes, shared memory and the hardware features found in its PTX and SASS (wgmma, tma,
cp.async, ldmatrix, mma). A compile error is a rejected candidate with a one-line reason.

Compilation runs in a child process (sandbox/compile_child.py) because an interpreter process
cannot compile: under TRITON_INTERPRET=1 triton.language's own jit functions are interpreted.
"""
from __future__ import annotations

import dataclasses
import functools
import inspect
import json
import os
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from sandbox.compile_child import FEATURES

# Set by the GPU worker (sandbox.settings.compile_in_worker): compile for the device in this process, which is
# already the sandboxed worker, instead of a child that imports torch and triton again. The interpreter
# cannot compile in-process (triton.language's own jit functions are interpreted there).
IN_PROCESS = False
COMPILE_TIMEOUT_S = 300          # the whole child; a large gemm compiles in ~1-2 s per launch
_REPO_ROOT = Path(__file__).resolve().parents[1]
_FEATURE_HINTS = {
    "wgmma": "tl.dot on bf16/fp16 tiles with BLOCK_M >= 64 and num_warps >= 4 lowers to wgmma on sm_90",
    "tma": "load through tl.make_tensor_descriptor / TensorDescriptor (TMA) instead of pointer arithmetic",
    "cp.async": "pipeline the K loop (num_stages >= 2) so loads become asynchronous copies",
    "ldmatrix": "tl.dot operands staged through shared memory use ldmatrix",
    "mma": "tl.dot on sm_80-style tiles lowers to mma.sync",
}


@dataclass(frozen=True)
class LaunchRecord:
    kernel_name: str
    signature: dict[str, str]           # parameter -> "*bf16" | "i32" | "fp32" | "constexpr" ...
    constexprs: dict[str, object]       # constexpr parameter -> value (ints equal to 1 included, as on GPU)
    num_warps: int
    num_stages: int
    # Parameters triton's launcher would mark 16-divisible (aligned pointers, ints % 16 == 0): they
    # change vectorization, so an offline compile without them would not be the GPU's compile.
    divisible_by_16: tuple[str, ...] = ()
    options: dict[str, object] = field(default_factory=dict)   # other launch options (num_ctas, maxnreg ...)
    grid: tuple[int, ...] = ()          # the first launch's grid, resolved (sandbox/launch_record.py)


@dataclass(frozen=True)
class KernelInfo:
    name: str
    registers: int | None
    spills_bytes: int | None
    shared_bytes: int | None
    features: tuple[str, ...]
    error: str | None
    compile_s: float | None = None      # wall time of this specialization's compile (cache hits are fast)
    # global loads outside loops, and how many follow the first global store / barrier in the PTX
    # (sandbox.compile_child.serial_loads): a fact for the proposers, never a rejection
    serial_loads: dict | None = field(default=None, hash=False)


@dataclass(frozen=True)
class CompileReport:
    ok: bool
    target: str
    kernels: tuple[KernelInfo, ...]
    errors: tuple[str, ...]

    def features(self) -> set[str]:
        return {f for k in self.kernels for f in k.features}


def _kernel_classes() -> list[type]:
    from triton.runtime.jit import JITFunction
    classes: list[type] = [JITFunction]
    try:
        from triton.runtime.interpreter import InterpretedFunction
        classes.append(InterpretedFunction)
    except ImportError:
        pass
    return classes


class LaunchRecorder:
    """While active, every launch of a triton JIT kernel (interpreter or GPU) is recorded as a LaunchRecord
    (argument types -> triton signature strings such as "*bf16", "i32", "fp32"; constexpr values; num_warps/num_stages),
    deduplicated by (kernel, signature, constexprs). Works with TRITON_INTERPRET=1 (where @triton.jit gives an
    InterpretedFunction) and on a GPU.

    It wraps the `run` method of triton's JITFunction and InterpretedFunction classes (what
    `kernel[grid](...)`, autotuners and heuristics all end in) and restores them on exit. Argument
    types are worked out by triton's own binder (`create_function_from_signature`), so they are the
    signature a GPU launch would compile."""

    def __init__(self, trace: bool = False) -> None:
        self.records: list[LaunchRecord] = []
        # trace=True: every launch in order, not deduplicated, with its runtime arguments (sandbox/call_trace.py)
        self.sequence: list | None = [] if trace else None
        self.functions: dict[str, object] = {}      # kernel name -> python function / JITFunction
        self.errors: list[str] = []                 # launches the recorder could not describe
        # record index -> the CompiledKernel triton's launcher returned for it (GPU only: the code that ran,
        # read by the feature gate without compiling again; the interpreter returns none)
        self.compiled: dict[int, object] = {}
        self._keys: dict[tuple, int] = {}
        self._saved: list[tuple[type, object]] = []
        self._binders: dict[int, tuple[object, list]] = {}

    def __enter__(self) -> "LaunchRecorder":
        for cls in _kernel_classes():
            original = cls.__dict__["run"]
            self._saved.append((cls, original))
            setattr(cls, "run", self._wrap(original))
        return self

    def __exit__(self, *exc) -> None:
        while self._saved:
            cls, original = self._saved.pop()
            setattr(cls, "run", original)

    def _wrap(self, original):
        recorder = self

        @functools.wraps(original)
        def run(kernel, *args, **kwargs):
            index = None
            try:
                index = recorder._record(kernel, args, {k: v for k, v in kwargs.items() if k not in ("grid", "warmup")},
                                         kwargs.get("grid"))
            except Exception as exc:    # recording must never change what the launch does
                name = getattr(getattr(kernel, "fn", None), "__name__", "?")
                recorder.errors.append(f"kernel {name}: launch not recorded: {type(exc).__name__}: {exc}")
            out = original(kernel, *args, **kwargs)
            if index is not None and hasattr(out, "asm"):
                recorder.compiled.setdefault(index, out)
            return out

        return run

    def _binder(self, kernel) -> tuple[object, list]:
        cached = self._binders.get(id(kernel))
        if cached is not None and cached[2] is kernel:
            return cached[0], cached[1]
        from triton.backends.compiler import BaseBackend
        from triton.runtime.jit import KernelParam, create_function_from_signature
        params = getattr(kernel, "params", None)
        signature = getattr(kernel, "signature", None)
        if params is None or not isinstance(signature, inspect.Signature):     # InterpretedFunction
            options = getattr(kernel, "kwargs", {}) or {}
            dns = options.get("do_not_specialize") or ()
            dnsa = options.get("do_not_specialize_on_alignment") or ()
            signature = inspect.signature(kernel.fn)
            params = [KernelParam(i, p, i in dns or p.name in dns, i in dnsa or p.name in dnsa)
                      for i, p in enumerate(signature.parameters.values())]
        binder = create_function_from_signature(signature, params, BaseBackend)
        self._binders[id(kernel)] = (binder, params, kernel)
        return binder, params

    def _record(self, kernel, args: tuple, kwargs: dict, grid=None) -> int:
        fn = kernel.fn
        name = fn.__name__
        binder, params = self._binder(kernel)
        bound, specialization, options = binder(*args, **kwargs)
        signature, constexprs, aligned = {}, {}, []
        for param, spec in zip(params, specialization):
            kind = spec[0]
            signature[param.name] = kind
            if kind == "constexpr":
                constexprs[param.name] = bound[param.name]
            elif isinstance(spec[1], str) and "D" in spec[1]:
                aligned.append(param.name)
        extra = {k: v for k, v in options.items()
                 if k not in ("num_warps", "num_stages", "debug", "instrumentation_mode")}
        record = LaunchRecord(name, signature, constexprs, int(options.get("num_warps", 4)),
                              int(options.get("num_stages", 3)), tuple(aligned), extra, _resolve_grid(grid, bound))
        key = (name, tuple(sorted(signature.items())), repr(sorted(constexprs.items(), key=lambda kv: kv[0])))
        if self.sequence is not None:
            from sandbox.call_trace import launch_entry
            self.sequence.append(launch_entry(kernel, record, bound, signature))
        self.functions.setdefault(name, kernel if type(kernel).__name__ == "JITFunction" else fn)
        if key not in self._keys:
            self._keys[key] = len(self.records)
            self.records.append(record)
        return self._keys[key]


def _resolve_grid(grid, bound) -> tuple[int, ...]:
    """The launch grid as ints: a callable grid gets the bound arguments, as triton's launcher does."""
    try:
        if callable(grid):
            grid = grid(dict(bound))
        if isinstance(grid, int):
            grid = (grid,)
        return tuple(int(g) for g in grid)
    except Exception:   # noqa: BLE001 - a grid we cannot read is left out, never an error
        return ()


# ------------------------------------------------------------------------------------------------
# compiling

def _encode(value):
    """Constexpr values as JSON for the child; tl.dtype and jit functions by name."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    kind = type(value).__name__
    if hasattr(value, "value") and kind == "constexpr":
        return _encode(value.value)
    if kind == "dtype" and hasattr(value, "name"):
        return {"tl.dtype": value.name}
    if kind in ("JITFunction", "InterpretedFunction") and hasattr(value, "fn"):
        return {"jit": value.fn.__name__}
    if isinstance(value, tuple):
        return {"tuple": [_encode(v) for v in value]}
    raise TypeError(f"constexpr value {value!r} of type {kind} cannot be compiled offline; pass ints, floats, "
                    "bools, strings, tl dtypes or @triton.jit functions")


def _resolve_target(target) -> tuple[dict, str]:
    if not isinstance(target, str):                          # a GPUTarget
        return {"kind": "offline", "arch": int(target.arch), "warp_size": int(target.warp_size)}, \
            f"cuda:sm_{target.arch} (offline)"
    if target in ("auto", "device", "gpu"):
        on_gpu = False
        try:
            import torch
            on_gpu = torch.cuda.is_available()
        except Exception:
            pass
        if on_gpu:
            import torch
            return {"kind": "device"}, f"cuda:device ({torch.cuda.get_device_name()})"
        if target != "auto":
            raise ValueError(f"compile target {target!r} needs a CUDA GPU and none is available; use 'auto' or 'sm_90'")
        return {"kind": "offline", "arch": 90, "warp_size": 32}, "cuda:sm_90 (offline, no GPU)"
    match = re.fullmatch(r"(?:sm_?|cuda:)?(\d+)a?|hopper", target.lower())
    if not match:
        raise ValueError(f"unknown compile target {target!r}; use 'auto', 'device', 'sm_90' or a GPUTarget")
    arch = 90 if target.lower() == "hopper" else int(match.group(1))
    return {"kind": "offline", "arch": arch, "warp_size": 32}, f"cuda:sm_{arch} (offline)"


def _source_file(fn) -> str | None:
    code = getattr(getattr(fn, "fn", fn), "__code__", None)
    path = getattr(code, "co_filename", None)
    return path if path and os.path.isfile(path) else None


def _describe_launched(recorder: LaunchRecorder, sass: bool) -> dict[int, dict]:
    """record index -> the compile gate's description of the CompiledKernel its launch returned. A kernel that
    cannot be described is left to the compile child (a new triton may name things differently)."""
    from sandbox.compile_child import describe_compiled
    out = {}
    for index, kernel in recorder.compiled.items():      # indices of recorder.records (LaunchRecorder._wrap)
        try:
            out[index] = describe_compiled(kernel, recorder.records[index].kernel_name,
                                           int(kernel.metadata.target.arch), on_device=True, read_sass=sass)
        except Exception:
            continue
    return out


def _request_items(recorder: LaunchRecorder) -> tuple[list[tuple[int, dict]], list[str]]:
    """(record index, child request item) for each record that can be compiled offline; errors for the rest."""
    items, errors = [], []
    for index, rec in enumerate(recorder.records):
        fn = recorder.functions.get(rec.kernel_name)
        path = _source_file(fn) if fn is not None else None
        if path is None:
            errors.append(f"kernel {rec.kernel_name}: its source file is unknown; load the candidate from a file "
                          "(importlib spec_from_file_location) so it can be compiled")
            continue
        try:
            constexprs = {k: _encode(v) for k, v in rec.constexprs.items()}
        except TypeError as exc:
            errors.append(f"kernel {rec.kernel_name}: {exc}")
            continue
        items.append((index, {"name": rec.kernel_name, "module_path": path, "signature": rec.signature,
                      "constexprs": constexprs, "num_warps": rec.num_warps, "num_stages": rec.num_stages,
                      "divisible_by_16": list(rec.divisible_by_16), "options": _jsonable(rec.options)}))
    return items, errors


def _jsonable(options: dict) -> dict:
    out = {}
    for k, v in options.items():
        try:
            json.dumps(v)
            out[k] = v
        except TypeError:
            pass
    return out


def _child_env() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("TRITON_INTERPRET", None)
    root = str(_REPO_ROOT)
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


def compile_recorded(recorder: LaunchRecorder, target: str = "auto", sass: bool = False) -> CompileReport:
    """Compile every recorded launch; "auto": the present GPU if torch.cuda is available, else
    Hopper offline (GPUTarget("cuda", 90, 32)). Registers, spills and shared memory come from the
    compiled kernel (n_regs/n_spills on a GPU, the cubin's resource usage read with cuobjdump
    offline); features from its SASS with sass=True (what --require judges), else from its PTX. A
    compile error makes ok=False with "kernel X: <first useful line>"."""
    per_record, errors, target_name = compile_each(recorder, target, sass=sass)
    kernels = [k for k in per_record if k is not None]
    errors += [k.error for k in kernels if k.error]
    ok = not errors and bool(kernels)
    return CompileReport(ok, target_name, tuple(kernels), tuple(dict.fromkeys(errors)))


def compile_each(recorder: LaunchRecorder, target: str = "auto",
                 sass: bool = False) -> tuple[list[KernelInfo | None], list[str], str]:
    """(one KernelInfo per record, in record order, None where it could not be compiled; the errors of
    the recorder, the request and the child other than per-kernel ones; the target's name). On the device,
    a record whose launch returned its CompiledKernel is described from that kernel, the code that ran,
    with nothing compiled again (fused_moe's gate compiled its 3 kernels again in 6 s on the H200). One
    child compiles the rest; the worker's TRITON_CACHE_DIR is the child's, so a specialization compiled
    before by the same source is a cache hit."""
    target_spec, target_name = _resolve_target(target)
    errors = list(recorder.errors)
    per_record: list[KernelInfo | None] = [None] * len(recorder.records)
    if not recorder.records:
        errors.append("no kernel launch was recorded: run the candidate once under LaunchRecorder before compiling")
        return per_record, errors, target_name
    launched = _describe_launched(recorder, sass) if target_spec.get("kind") == "device" else {}
    for index, k in launched.items():
        per_record[index] = KernelInfo(k["name"], k["registers"], k["spills_bytes"], k["shared_bytes"],
                                       tuple(k["features"]), k["error"], 0.0, k.get("serial_loads"))
    items, item_errors = _request_items(recorder)
    items = [(index, item) for index, item in items if index not in launched]
    errors += item_errors
    if items:
        result, child_error = _run_child({"target": target_spec, "sass": bool(sass),
                                          "kernels": [{**item, "index": index} for index, item in items]})
        if child_error:
            errors.append(child_error)
        for k in result.get("kernels", []):
            per_record[int(k["index"])] = KernelInfo(k["name"], k["registers"], k["spills_bytes"],
                                                     k["shared_bytes"], tuple(k["features"]), k["error"],
                                                     k.get("compile_s"), k.get("serial_loads"))
        errors += result.get("errors", [])
        if not child_error and len(result.get("kernels", [])) < len(items) and not result.get("errors"):
            errors.append(f"compiled {len(result.get('kernels', []))} of {len(items)} recorded launches")
    return per_record, errors, target_name


class _SpareChild:
    """A compile child started early (sandbox.compile_child.serve_spare) that imports torch and triton
    while the worker is busy; it compiles the first request and exits. The interpreter worker starts one
    when it starts (its own imports run beside the child's on a second core)."""

    def __init__(self):
        self.tmp = tempfile.TemporaryDirectory(prefix="aka-compile-")
        self.err = Path(self.tmp.name) / "stderr.txt"
        if "torch" in sys.modules and "triton" not in sys.modules:
            # A worker forked by the fork server (sandbox/zygote.py): fork the child too, torch already loaded
            from sandbox.forked_child import ForkedChild
            self.proc = ForkedChild(_serve_forked_spare, cwd=_REPO_ROOT, env=_child_env(), stderr_path=self.err,
                                    name="sandbox.compile_child --spare (forked)")
            return
        with open(self.err, "wb") as err_file:   # the candidate's prints go nowhere; stderr to a file
            self.proc = subprocess.Popen([sys.executable, "-m", "sandbox.compile_child", "--spare"],
                                         cwd=str(_REPO_ROOT), env=_child_env(), stdin=subprocess.PIPE,
                                         stdout=subprocess.DEVNULL, stderr=err_file)


def _serve_forked_spare() -> int:
    from sandbox import compile_child     # what `python -m sandbox.compile_child --spare` runs
    return compile_child.serve_spare()


_SPARE: _SpareChild | None = None


def start_spare() -> None:
    """Start the compile child of this process's (one) compile gate ahead of time."""
    global _SPARE
    if _SPARE is None:
        _SPARE = _SpareChild()


def _run_spare(spare: _SpareChild, req: Path, res: Path) -> subprocess.CompletedProcess:
    line = json.dumps({"request": str(req), "result": str(res), "cache_dir": os.environ.get("TRITON_CACHE_DIR")})
    try:
        spare.proc.stdin.write((line + "\n").encode())
        spare.proc.stdin.close()
    except OSError:
        pass                       # it died while waiting: its exit code and stderr say why, below
    try:
        spare.proc.wait(timeout=COMPILE_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        spare.proc.kill()
        spare.proc.wait()
        raise
    return subprocess.CompletedProcess(spare.proc.args, spare.proc.returncode)


def _run_child(request: dict) -> tuple[dict, str | None]:
    global _SPARE
    with tempfile.TemporaryDirectory(prefix="aka-compile-") as tmp:
        req, res = Path(tmp) / "request.json", Path(tmp) / "result.json"
        req.write_text(json.dumps(request))
        if IN_PROCESS and request["target"].get("kind") == "device":
            from sandbox import compile_child
            compile_child.main(str(req), str(res))
            return _read_result(res), None
        spare, _SPARE = _SPARE, None           # used once: a second compile gets a fresh child
        err = spare.err if spare is not None else Path(tmp) / "stderr.txt"
        with open(err, "ab") as err_file:     # the candidate's prints go nowhere; stderr to a file, not memory
            try:
                if spare is not None:
                    proc = _run_spare(spare, req, res)
                else:
                    proc = subprocess.run([sys.executable, "-m", "sandbox.compile_child", str(req), str(res)],
                                          cwd=str(_REPO_ROOT), env=_child_env(), stdin=subprocess.DEVNULL,
                                          stdout=subprocess.DEVNULL, stderr=err_file, timeout=COMPILE_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                return _read_result(res), (f"compilation took longer than {COMPILE_TIMEOUT_S} s; smaller tiles or "
                                           "fewer unrolled loops (tl.static_range) compile faster")
        result = _read_result(res)
        if proc.returncode != 0:
            with open(err, "rb") as f:
                f.seek(max(0, err.stat().st_size - 4096))
                lines = f.read().decode("utf-8", "replace").strip().splitlines()
            return result, f"the compiler process died (exit {proc.returncode}): {(lines or [''])[-1][:300]}"
        return result, None


def _read_result(path: Path) -> dict:
    try:
        return json.loads(path.read_text()) if path.exists() and path.stat().st_size else {}
    except json.JSONDecodeError:          # cut short mid-write by a crash
        return {}


def feature_check(report: CompileReport, required: tuple[str, ...]) -> list[str]:
    """Messages for each required feature that no compiled kernel shows."""
    found = report.features()
    messages = []
    for feature in required:
        if feature not in FEATURES:
            messages.append(f"unknown feature {feature!r}; known: {', '.join(FEATURES)}")
        elif feature not in found:
            names = ", ".join(k.name for k in report.kernels) or "no kernel"
            messages.append(f"required feature {feature} is missing from the PTX/SASS of {names} "
                            f"(found: {', '.join(sorted(found)) or 'none'}) on {report.target}; "
                            f"{_FEATURE_HINTS[feature]}")
    return messages


def record_to_json(record: LaunchRecord) -> dict:
    """A LaunchRecord as plain JSON (constexprs encoded as for the compile child)."""
    d = dataclasses.asdict(record)
    d["constexprs"] = {k: _encode(v) for k, v in record.constexprs.items()}
    return d
