"""Child process of the compile gate: compile recorded launches with the real (non-interpreted) Triton.

Run as `python -m sandbox.compile_child REQUEST.json RESULT.json` by sandbox.compile. It exists
because the interpreter and the compiler cannot share a process: with TRITON_INTERPRET=1 every
@triton.jit function, including triton.language's own (tl.sum, tl.sigmoid, tl.max ...), is an
InterpretedFunction, and the code generator would run them as Python on IR values. A child
without TRITON_INTERPRET imports the candidate afresh and gets real JITFunctions. It also keeps a
compiler crash (ptxas SIGSEGV, an MLIR abort) from taking the worker down.

The request names each kernel by its module file and function name; the result is JSON (stdout
belongs to the candidate's prints and is ignored).
"""
from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import time
import sys
import tempfile
from pathlib import Path

# Hopper's opt-in shared memory per block (227 KiB): what cudaFuncSetAttribute allows on H100/H200.
SHARED_LIMIT_BY_ARCH = {90: 232448, 80: 166912, 89: 101376, 86: 101376}
_PTX_FEATURES = {
    "wgmma": re.compile(r"\bwgmma\.mma_async"),
    "tma": re.compile(r"\bcp\.async\.bulk\.tensor"),
    "cp.async": re.compile(r"\bcp\.async\.(?:ca|cg)\.shared"),
    "ldmatrix": re.compile(r"\bldmatrix\."),
    "mma": re.compile(r"\bmma\.sync\."),
}
_SASS_FEATURES = {
    "wgmma": re.compile(r"\b[HQIB]GMMA\b"),       # bf16/fp16, fp8, int8 and binary warpgroup MMAs
    "tma": re.compile(r"\bUTMA(?:LDG|STG|PF|REDG)\b"),
    "cp.async": re.compile(r"\bLDGSTS\b"),
    "ldmatrix": re.compile(r"\bLDSM\b"),
    "mma": re.compile(r"\b[HIQ]MMA\b"),
}
_PTX_COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.DOTALL)
FEATURES = tuple(_PTX_FEATURES)


def features_of(ptx: str, sass: str) -> tuple[str, ...]:
    """The features a kernel uses. The SASS, where it was read, decides: it is what runs, and text a kernel
    only mentions (an inline-asm comment, a string in the PTX) is not in it. Without it, the PTX with its
    comments removed: an instruction there is one ptxas was asked to emit."""
    if sass.strip():
        return tuple(sorted(name for name, rx in _SASS_FEATURES.items() if rx.search(sass)))
    code = _PTX_COMMENT.sub(" ", ptx)
    return tuple(sorted(name for name, rx in _PTX_FEATURES.items() if rx.search(code)))


_PTX_LABEL = re.compile(r"^\s*(\$L__\w+):")
_PTX_BRANCH = re.compile(r"\bbra(?:\.uni)?\s+(\$L__\w+)\s*;")
_PTX_BARRIER = re.compile(r"\bbar(?:rier)?\.(?:cta\.)?sync\b")


def serial_loads(ptx: str) -> dict[str, int]:
    """Global loads outside loops in the PTX, and how many of them come after the kernel's first global store and
    after its first barrier, in program order: {"global_loads", "after_first_store", "after_first_barrier"}.

    Why: a GPU issues a warp's instructions in order, so a load placed after a store (which may alias it) or
    after a barrier (a reduction's or a layout conversion's) is not even issued until the values before it have
    arrived: one more memory round trip in the program's dependent chain. In a latency-bound kernel (decode
    shapes, a few microseconds) that round trip is a large share of its time; five seeds of ours lost 5-30%
    this way (benchmarks/results/new_ops_h200.md, sessions 11-13). Loads in loops (a K loop, a chunked row's
    second pass) are left out: re-reading there is the algorithm, not an ordering accident."""
    lines = _PTX_COMMENT.sub(" ", ptx).splitlines()
    labels = {m.group(1): i for i, ln in enumerate(lines) if (m := _PTX_LABEL.match(ln))}
    loops = [(labels[m.group(1)], i) for i, ln in enumerate(lines) for m in _PTX_BRANCH.finditer(ln)
             if labels.get(m.group(1), i) < i]
    loads = [i for i, ln in enumerate(lines) if "ld.global" in ln and not any(a <= i <= b for a, b in loops)]
    first_store = next((i for i, ln in enumerate(lines) if "st.global" in ln), None)
    first_barrier = next((i for i, ln in enumerate(lines) if _PTX_BARRIER.search(ln)), None)
    return {"global_loads": len(loads),
            "after_first_store": sum(1 for i in loads if first_store is not None and i > first_store),
            "after_first_barrier": sum(1 for i in loads if first_barrier is not None and i > first_barrier)}


def nvidia_tool(name: str) -> str | None:
    """The CUDA binary tools that ship inside triton's wheel, else the system's."""
    import triton
    bundled = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / name
    if bundled.exists():
        return str(bundled)
    return shutil.which(name)


def parse_resource_usage(text: str, kernel: str) -> dict[str, int]:
    """`cuobjdump --dump-resource-usage` -> {"REG": .., "STACK": .., "SHARED": .., "LOCAL": ..}."""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if line.strip().startswith("Function") and line.strip().rstrip(":").split()[-1] == kernel:
            usage = lines[i + 1] if i + 1 < len(lines) else ""
            return {k: int(v) for k, v in re.findall(r"([A-Z]+(?:\[\d+\])?):(\d+)", usage)}
    return {}


def cubin_facts(cubin: bytes, kernel: str, sass: bool = True) -> tuple[dict[str, int], str]:
    """Resource usage (and, with sass=True, the SASS) of one compiled kernel, read with cuobjdump on any
    machine. The usage takes milliseconds; disassembling takes ~0.3 s a kernel, so callers read SASS only
    where a verdict depends on it (--require)."""
    tool = nvidia_tool("cuobjdump")
    if tool is None:
        return {}, ""
    with tempfile.TemporaryDirectory(prefix="aka-cubin-") as tmp:
        path = Path(tmp) / "kernel.cubin"
        path.write_bytes(cubin)
        usage = subprocess.run([tool, "--dump-resource-usage", str(path)], capture_output=True, text=True,
                               timeout=120).stdout
        text = subprocess.run([tool, "-sass", str(path)], capture_output=True, text=True,
                              timeout=120).stdout if sass else ""
    return parse_resource_usage(usage, kernel), text


def first_useful_line(exc: BaseException, module) -> str:
    """One readable line from a compile error: the innermost message, with the file line."""
    from triton.compiler.errors import CompilationError
    chain, cur = [], exc
    while cur is not None and len(chain) < 20:
        chain.append(cur)
        cur = cur.__cause__ or cur.__context__
    inner = [e for e in chain if isinstance(e, CompilationError)]
    if inner:
        err = inner[-1]
        message = _last_message_line(err.error_message or str(err))
        where = _file_line(err, module)
        return f"{where}{message}" if message else f"{where}{type(err).__name__}"
    text = str(exc).strip()
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    for ln in lines:
        if "error" in ln.lower() and not ln.lower().startswith("repro command"):
            return f"{type(exc).__name__}: {ln}"[:400]
    return f"{type(exc).__name__}: {lines[0] if lines else ''}"[:400]


def _last_message_line(text: str) -> str:
    lines = text.splitlines()
    for i in range(len(lines) - 1, -1, -1):
        if lines[i].strip() == "^":
            lines = lines[i + 1:]
            break
    kept = [ln.strip() for ln in lines if ln.strip() and not re.match(r"^at \d+:\d+:$", ln.strip())]
    return " ".join(kept)[:400]


def _file_line(err, module) -> str:
    node, src = getattr(err, "node", None), getattr(err, "src", None)
    if node is None or not hasattr(node, "lineno") or not src:
        return ""
    match = re.search(r"^\s*def\s+(\w+)\s*\(", src, re.MULTILINE)
    fn = getattr(module, match.group(1), None) if match else None
    while fn is not None and not hasattr(fn, "__code__") and hasattr(fn, "fn"):
        fn = fn.fn
    code = getattr(fn, "__code__", None)
    if code is None:
        return f"in {match.group(1)}: " if match else ""
    lines = Path(code.co_filename).read_text().splitlines()
    def_line = code.co_firstlineno
    while def_line <= len(lines) and not re.match(r"^\s*def\s", lines[def_line - 1]):
        def_line += 1
    return f"line {def_line + node.lineno - 1} (in {match.group(1)}): "


def _load_module(path: str, index: int):
    name = f"aka_compile_candidate_{index}"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _jit_function(obj):
    from triton.runtime.jit import JITFunction
    seen = 0
    while not isinstance(obj, JITFunction) and hasattr(obj, "fn") and seen < 8:
        obj, seen = obj.fn, seen + 1            # Autotuner / Heuristics wrap the JITFunction
    return obj if isinstance(obj, JITFunction) else None


def _decode(value, module):
    import triton.language as tl
    if isinstance(value, dict):
        if "tl.dtype" in value:
            return tl.dtype(value["tl.dtype"])
        if "jit" in value:
            return _jit_function(getattr(module, value["jit"]))
        if "tuple" in value:
            return tuple(_decode(v, module) for v in value["tuple"])
    return value


def _as_tuples(value):
    return tuple(_as_tuples(v) for v in value) if isinstance(value, list) else value


def _target(spec: dict):
    from triton.backends.compiler import GPUTarget
    if spec["kind"] == "device":
        from triton.runtime import driver
        return driver.active.get_current_target()
    return GPUTarget("cuda", int(spec["arch"]), int(spec.get("warp_size", 32)))


def compile_one(item: dict, module, target, on_device: bool, read_sass: bool = False) -> dict:
    import triton
    from triton.compiler import ASTSource
    name = item["name"]
    result = {"name": name, "registers": None, "spills_bytes": None, "shared_bytes": None,
              "features": [], "error": None}
    jit = _jit_function(getattr(module, name, None))
    if jit is None:
        result["error"] = f"kernel {name}: not found as a module-level @triton.jit function of the candidate"
        return result
    constexprs = {k: _decode(v, module) for k, v in item["constexprs"].items()}
    attrs = {(jit.arg_names.index(p),): [["tt.divisibility", 16]] for p in item["divisible_by_16"]
             if p in jit.arg_names}
    options = dict(item.get("options") or {})
    options.update(num_warps=item["num_warps"], num_stages=item["num_stages"])
    try:
        signature = {k: _as_tuples(v) for k, v in item["signature"].items()}     # tuple args came back as lists
        src = ASTSource(fn=jit, signature=signature, constexprs=constexprs, attrs=attrs)
        kernel = triton.compile(src, target=target, options=options)
    except Exception as exc:   # a bad candidate is data: report the error, keep going
        result["error"] = f"kernel {name}: {first_useful_line(exc, module)}"
        return result
    return describe_compiled(kernel, name, getattr(target, "arch", 0), on_device, read_sass)


def describe_compiled(kernel, name: str, arch: int, on_device: bool, read_sass: bool = False) -> dict:
    """What the compile gate reports of one CompiledKernel, whether compiled here or returned by the launch
    that ran it (sandbox.compile.LaunchRecorder.compiled): registers, spills, shared memory, features, and
    an error when the kernel needs more shared memory than sm_<arch> has."""
    result = {"name": name, "registers": None, "spills_bytes": None, "shared_bytes": None,
              "features": [], "error": None, "serial_loads": None}
    usage, sass = cubin_facts(kernel.asm.get("cubin", b""), kernel.metadata.name, sass=read_sass)
    registers = usage.get("REG")
    spills = usage.get("STACK", 0) + usage.get("LOCAL", 0) if usage else None
    if on_device:
        try:
            kernel._init_handles()
            registers, spills = kernel.n_regs, kernel.n_spills * 4   # triton counts spills in 4-byte words
        except Exception:
            pass
    shared = int(getattr(kernel.metadata, "shared", 0) or 0) + usage.get("SHARED", 0)
    result.update(registers=registers, spills_bytes=spills, shared_bytes=shared,
                  features=list(features_of(kernel.asm.get("ptx", ""), sass)),
                  serial_loads=serial_loads(kernel.asm.get("ptx", "")) if kernel.asm.get("ptx") else None,
                  features_from="sass" if sass.strip() else "ptx")
    limit = SHARED_LIMIT_BY_ARCH.get(arch)
    if limit is not None and shared > limit:
        result["error"] = (f"kernel {name}: needs {shared} bytes of shared memory per block; sm_{arch} allows "
                           f"{limit}; reduce BLOCK sizes or num_stages")
    return result


def main(request_path: str, result_path: str) -> int:
    request = json.loads(Path(request_path).read_text())
    out: dict = {"target": "", "kernels": [], "errors": []}
    try:
        target = _target(request["target"])
        out["target"] = f"{target.backend}:sm_{target.arch}"
    except Exception as exc:
        out["errors"].append(f"compile target unavailable: {type(exc).__name__}: {exc}")
        Path(result_path).write_text(json.dumps(out))
        return 0
    modules: dict[str, object] = {}
    for item in request["kernels"]:
        path = item["module_path"]
        if path not in modules:
            try:
                modules[path] = _load_module(path, len(modules))
            except BaseException as exc:   # the candidate's import-time code: data, not a crash
                modules[path] = None
                out["errors"].append(f"cannot import the candidate for compilation: {type(exc).__name__}: {exc}")
        if modules[path] is None:
            continue
        t0 = time.monotonic()
        info = compile_one(item, modules[path], target, request["target"]["kind"] == "device",
                           read_sass=bool(request.get("sass")))
        info["compile_s"] = round(time.monotonic() - t0, 4)
        info["index"] = item.get("index", len(out["kernels"]))     # which record it answers (sandbox.compile)
        out["kernels"].append(info)
        Path(result_path).write_text(json.dumps(out))      # partial results survive a later crash
    Path(result_path).write_text(json.dumps(out))
    return 0


def serve_spare() -> int:
    """A child started ahead of its request (sandbox.compile.start_spare): import torch and triton now,
    while the worker loads and first runs the candidate, then take one request line from stdin:
    JSON {"request": path, "result": path, "cache_dir": dir or null}. EOF (the worker needed no compile,
    or exited) ends it. Measured on 2 cores: a compile gate of one small kernel 1.7-2.0 s -> 0.8-1.1 s."""
    import torch  # noqa: F401 - the candidate imports it first thing; importing it early is the point
    import triton  # noqa: F401
    line = sys.stdin.readline()
    if not line.strip():
        return 0
    msg = json.loads(line)
    if msg.get("cache_dir"):
        os.environ["TRITON_CACHE_DIR"] = msg["cache_dir"]   # read when triton compiles, not at import
    return main(msg["request"], msg["result"])


if __name__ == "__main__":
    os.environ.pop("TRITON_INTERPRET", None)
    code = serve_spare() if sys.argv[1:] == ["--spare"] else main(sys.argv[1], sys.argv[2])
    # The result file is written and closed: skip the interpreter's teardown of torch and triton (~0.5 s of
    # the gate's wall time on 2 cores), which the worker would wait for.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
