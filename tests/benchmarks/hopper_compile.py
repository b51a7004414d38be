"""Compile seed kernels for Hopper (sm_90) without a GPU, for the operator tests.

triton.compile cannot run in this process: with TRITON_INTERPRET=1 set at import, triton's own @jit
helpers (tl.cdiv, ...) are interpreter objects. A child process without it compiles for sm_90, with this
Python's Triton or, when AKA_DEVICE_TRITON_PYTHON names another interpreter, with that one's (`make
test-device-triton`: the GPU machine's version, since register allocation differs between versions).
"""
import json
import os
import subprocess
import sys

_COMPILE_CHILD = r"""
import importlib.util, json, re, subprocess, sys, tempfile
from pathlib import Path
import triton
from triton.backends.compiler import GPUTarget
job = json.load(sys.stdin)
spec = importlib.util.spec_from_file_location("seed_for_hopper", job["seed"])
seed = importlib.util.module_from_spec(spec)
spec.loader.exec_module(seed)
cuobjdump = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "cuobjdump"
results = []
for c in job["compiles"]:
    fn = getattr(seed, c["kernel"])
    const = {n: v for n, v in c["constexprs"].items() if n in fn.arg_names}   # one list fits old and new kernels
    sig = {n: "constexpr" if n in const else c["types"].get(n, "i32") for n in fn.arg_names}
    attrs = {(fn.arg_names.index(n),): [["tt.divisibility", 16]] for n in c["aligned"] if n in fn.arg_names}
    src = triton.compiler.ASTSource(fn=fn, signature=sig, constexprs=const, attrs=attrs)
    k = triton.compile(src, target=GPUTarget("cuda", 90, 32),
                       options={"num_warps": c["num_warps"], "num_stages": c["num_stages"]})
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(k.asm["cubin"]); f.flush()
        usage = subprocess.run([str(cuobjdump), "--dump-resource-usage", f.name], capture_output=True,
                               text=True, check=True).stdout
    line = [ln.strip() for ln in usage.splitlines() if "REG:" in ln][0]
    ptx_lines = k.asm["ptx"].splitlines()
    loads = [i for i, ln in enumerate(ptx_lines) if "ld.global" in ln]
    barriers = [i for i, ln in enumerate(ptx_lines) if "bar.sync" in ln]
    stores = [i for i, ln in enumerate(ptx_lines) if "st.global" in ln]
    reads = [i for i, ln in enumerate(ptx_lines) if any(op in ln for op in ("ld.global", "cp.async", "atom.", "ld.volatile"))]
    waits = [i for i, ln in enumerate(ptx_lines) if "griddepcontrol.wait" in ln]
    forms = {}
    for ln in ptx_lines:
        if "ld.global" in ln:
            op = ln.split("ld.global", 1)[1].split()[0]          # ".v4.b32", ".b16", ".L1::evict_last.b16" ...
            form = "ld.global" + "".join("." + q for q in op.split(".")[1:] if "::" not in q)
            forms[form] = forms.get(form, 0) + 1
    results.append({"kernel": c["kernel"], "triton": triton.__version__, "wgmma": "wgmma" in k.asm["ptx"],
                    "usage": line, "load_forms": forms,
                    "volatile_loads": sum("ld.volatile" in ln for ln in ptx_lines),
                    "atomics": sum(bool(re.match(r"\s*(@!?%\w+\s+)?atom\.", ln)) for ln in ptx_lines),  # predicated too
                    "tma": "cp.async.bulk.tensor" in k.asm["ptx"],
                    "loads_before_barriers": not barriers or not loads or max(loads) < min(barriers),
                    "loads_before_stores": not stores or not loads or max(loads) < min(stores),
                    "pdl_wait": bool(waits), "pdl_wait_before_reads": bool(waits) and (not reads or min(waits) < min(reads)),
                    "pdl_trigger": "griddepcontrol.launch_dependents" in k.asm["ptx"]})
print(json.dumps(results))
"""


def compile_for_hopper(seed_path, compiles: list[dict]) -> list[dict]:
    """Compile seed kernels for sm_90 in a child process; per compile: the Triton version that built it
    ("triton"), wgmma and TMA in the PTX, cuobjdump's usage,
    the global loads by form ("load_forms", cache hints dropped: {"ld.global.v4.b32": 4, "ld.global.b16": 10}),
    the volatile loads and the atomic instructions in the PTX ("volatile_loads", "atomics"),
    and whether every global load comes before the first barrier, and before the first global store, in the PTX
    (a load after either waits for the loads that the barrier's layout conversion or the store needs: one more
    DRAM round trip in the program's dependent chain); with USE_PDL, whether the PTX has the wait for the kernel before
    it (griddepcontrol.wait) ahead of every global read ("pdl_wait_before_reads": the compiler kept it first) and
    the trigger for the next one ("pdl_trigger")."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    python = child_python()
    proc = subprocess.run([python, "-c", _COMPILE_CHILD], input=json.dumps(
        {"seed": str(seed_path), "compiles": compiles}), capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def child_python() -> str:
    """The interpreter that compiles: AKA_DEVICE_TRITON_PYTHON when set (`make device-triton` builds one with the
    GPU machine's Triton, whose ptxas may allocate registers differently from the local one), else this one."""
    python = os.environ.get("AKA_DEVICE_TRITON_PYTHON", "")
    if not python:
        return sys.executable
    assert os.access(python, os.X_OK), (
        f"AKA_DEVICE_TRITON_PYTHON={python!r} is not an executable Python: run `make device-triton` (it builds "
        f".venv-device-triton/bin/python) or unset the variable to compile with this Triton")
    return python
