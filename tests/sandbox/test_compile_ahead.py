"""Compile ahead (sandbox/compile_ahead.py): specializations collected from a launcher run on meta tensors,
nothing launched, compiled for Hopper in forked processes into the Triton cache that the first real call
then reads. No GPU here: a stand-in driver names the sm_90 target (triton compiles for it on the CPU), and
each case runs in a fresh interpreter without TRITON_INTERPRET so that triton.jit is the real JIT."""
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

PRELUDE = textwrap.dedent('''
    import json, os, sys, time
    import torch, triton, triton.language as tl
    from triton.backends.compiler import GPUTarget
    from triton.runtime.driver import driver
    sys.path.insert(0, os.environ["AKA_ROOT"])
    from sandbox.compile_ahead import collect, compile_ahead, compile_forked, to_meta

    class CpuOnlyDriver:            # what JITFunction.run asks of the driver before it compiles
        def get_current_device(self): return 0
        def get_current_stream(self, device=None): return 0
        def get_current_target(self): return GPUTarget("cuda", 90, 32)
        def get_device_interface(self): return torch.cuda
    driver.set_active(CpuOnlyDriver())

    @triton.jit
    def scale_kernel(x_ptr, y_ptr, n, s, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        m = offs < n
        tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=m) * s, mask=m)

    LAUNCHES = []
    def scale(x, s):
        y = torch.empty_like(x)
        LAUNCHES.append(scale_kernel[(triton.cdiv(x.numel(), 256),)](x, y, x.numel(), s, BLOCK=256))
        return y

    def cache_files():
        return sorted(str(p) for p in __import__("pathlib").Path(os.environ["TRITON_CACHE_DIR"]).rglob("*") if p.is_file())
''')


def run_case(tmp_path, body: str) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env.update(AKA_ROOT=str(ROOT), TRITON_CACHE_DIR=str(tmp_path / "cache"), HOME=str(tmp_path))
    script = tmp_path / "case.py"            # @triton.jit needs its source in a file
    script.write_text(PRELUDE + textwrap.dedent(body))
    proc = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_meta_inputs_keep_dtype_strides_and_offset():
    torch = pytest.importorskip("torch")
    from sandbox.compile_ahead import to_meta
    base = torch.zeros(8, 16, dtype=torch.bfloat16)
    view = base[:, 3:]
    m = to_meta({"x": view, "n": 5, "pair": (view, 2)}["x"], torch)
    assert m.device.type == "meta" and m.dtype == torch.bfloat16
    assert m.shape == view.shape and m.stride() == view.stride() and m.storage_offset() == 3
    assert m.data_ptr() % 16 == view.data_ptr() % 16 - base.data_ptr() % 16   # the offset's divisibility
    assert to_meta((view, 2), torch)[1] == 2 and to_meta(7, torch) == 7


def test_collect_records_each_specialization_once_and_launches_nothing(tmp_path):
    out = run_case(tmp_path, '''
        metas = [{"x": to_meta(torch.empty(n), torch), "s": s} for n, s in ((1024, 2.0), (1000, 3.0), (1024, 4.0))]
        specs, notes = collect(scale, metas)
        names = sorted(str(sp[2]) for sp in specs)
        print(json.dumps({"n": len(specs), "launched": [x for x in LAUNCHES if x is not None], "notes": notes,
                          "files": len(cache_files()), "names": names}))
    ''')
    # n=1024 and n=1000 differ in divisibility by 16: two specializations; the third call repeats the first
    assert out["n"] == 2, out
    assert out["launched"] == [] and out["notes"] == []
    assert out["files"] == 0                      # collecting compiles nothing


def test_forked_compiles_fill_the_cache_that_the_next_compile_reads(tmp_path):
    out = run_case(tmp_path, '''
        metas = [{"x": to_meta(torch.empty(n), torch), "s": 2.0} for n in (1024, 1000, 48, 7)]
        specs, _ = collect(scale, metas)
        summary = compile_forked(specs, jobs=2, timeout_s=240)
        after_children = cache_files()
        from sandbox.compile_ahead import _compile
        t0 = time.monotonic()
        for sp in specs:                       # what JITFunction._do_compile does at the first real call
            _compile(sp)
        print(json.dumps({"n": len(specs), "summary": summary, "files": len(after_children),
                          "new_files": len(set(cache_files()) - set(after_children))}))
    ''')
    assert out["n"] >= 2 and out["summary"]["failed"] == 0 and out["summary"]["killed"] == 0
    assert out["summary"]["children"] == 2
    assert out["files"] > 0
    assert out["new_files"] == 0, out             # every specialization was already in the cache


def test_a_specialization_already_in_memory_is_not_launched_on_meta_tensors(tmp_path):
    out = run_case(tmp_path, '''
        x = to_meta(torch.empty(1024), torch)
        scale_kernel.warmup(torch.float32, torch.float32, 1024, 2.0, BLOCK=256, grid=(4,))   # compiled, in memory
        specs, notes = collect(scale, [{"x": x, "s": 2.0}, {"x": to_meta(torch.empty(1000), torch), "s": 2.0}])
        print(json.dumps({"n": len(specs), "notes": notes}))
    ''')
    # the 1024 specialization is in memory: looked up, not launched (launched, it would fail here: no driver to
    # load it with); the 1000 one is new and recorded
    assert out["notes"] == [] and out["n"] == 1, out


def test_what_the_launcher_does_during_the_pass_stays_out_of_the_worker(tmp_path):
    out = run_case(tmp_path, '''
        WORKSPACE = {}
        def caching(x, s):          # a launcher that keeps a workspace per size in a module global
            WORKSPACE.setdefault(x.numel(), torch.empty_like(x))
            return scale(x, s)
        metas = [{"x": to_meta(torch.empty(n), torch), "s": 2.0} for n in (1024, 1000)]
        summary = compile_ahead(caching, metas, jobs=2)
        from triton.runtime.driver import driver
        print(json.dumps({"summary": summary, "workspace": len(WORKSPACE), "launches": len(LAUNCHES),
                          "driver": type(driver.active).__name__}))
    ''')
    assert out["summary"]["specializations"] == 2 and out["summary"]["failed"] == 0, out
    assert out["workspace"] == 0 and out["launches"] == 0       # the collector's, not this process's
    assert out["driver"] == "CpuOnlyDriver"                      # the test's own, not the collector's stand-in


def test_a_launcher_that_never_returns_ends_the_pass_not_the_worker(tmp_path):
    out = run_case(tmp_path, '''
        import sandbox.compile_ahead as ca
        ca.COLLECTOR_GRACE_S = 1.0
        def forever(x, s):
            while True:
                pass
        t0 = time.monotonic()
        summary = compile_ahead(forever, [{"x": to_meta(torch.empty(16), torch), "s": 1.0}], jobs=1, timeout_s=1.0)
        print(json.dumps({"summary": summary, "s": time.monotonic() - t0}))
    ''')
    # it returned at all (run_case would time out otherwise): the collector was stopped at its own limit
    assert out["summary"]["specializations"] == 0 and "without a summary" in out["summary"]["notes"][0]


def test_a_launcher_that_asks_torch_for_the_sm_count_is_answered_with_the_workers_gpu(tmp_path):
    out = run_case(tmp_path, '''
        import types
        import sandbox.compile_ahead as ca
        props = types.SimpleNamespace(multi_processor_count=132)
        ca._device_queries = lambda device: {"properties": props, "capability": (9, 0), "device": device}
        def persistent(x, s):      # a persistent grid: one program per SM, as the gemm and rms_norm seeds size it
            sms = torch.cuda.get_device_properties(x.device).multi_processor_count
            y = torch.empty_like(x)
            scale_kernel[(min(sms, triton.cdiv(x.numel(), 256)),)](x, y, x.numel(), s, BLOCK=256)
            return y
        summary = compile_ahead(persistent, [{"x": to_meta(torch.empty(1024), torch), "s": 2.0}], jobs=1)
        print(json.dumps({"summary": summary, "here": torch.cuda.get_device_properties.__module__}))
    ''')
    assert out["summary"]["specializations"] == 1 and out["summary"]["notes"] == [], out
    assert out["here"] == "torch.cuda"                  # answered in the collector only


def test_an_autotuned_kernel_stops_the_pass_before_its_tuner_caches_anything(tmp_path):
    out = run_case(tmp_path, '''
        @triton.autotune(configs=[triton.Config({"BLOCK": 128}), triton.Config({"BLOCK": 256})], key=["n"])
        @triton.jit
        def tuned_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
            offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)

        def copy(x):
            y = torch.empty_like(x)
            tuned_kernel[lambda meta: (triton.cdiv(x.numel(), meta["BLOCK"]),)](x, y, x.numel())
            return y

        specs, notes = collect(copy, [{"x": to_meta(torch.empty(1024), torch)}])
        print(json.dumps({"n": len(specs), "notes": notes, "tuner_cache": len(tuned_kernel.cache)}))
    ''')
    assert out["n"] == 0 and "autotuned" in out["notes"][0]
    assert out["tuner_cache"] == 0


def test_a_launcher_that_fails_on_meta_tensors_is_noted_and_the_rest_still_collected(tmp_path):
    out = run_case(tmp_path, '''
        def picky(x, s):
            if x.numel() == 48:
                raise ValueError("not this one")
            return scale(x, s)
        metas = [{"x": to_meta(torch.empty(n), torch), "s": 2.0} for n in (48, 1024)]
        specs, notes = collect(picky, metas)
        whole = compile_ahead(picky, metas, jobs=1)
        print(json.dumps({"n": len(specs), "notes": notes, "whole": whole}))
    ''')
    assert out["n"] == 1 and out["notes"] == ["shape 0: the launcher raised ValueError on meta tensors"]
    assert out["whole"]["specializations"] == 1 and out["whole"]["failed"] == 0



def test_meta_tensors_say_is_cuda_where_the_real_inputs_are_on_the_gpu(tmp_path):
    """A launcher that picks its path by x.is_cuda (PDL, the interpreter's rounding) collects the path the trials
    will take: the GPU's when the worker's inputs are on the GPU, the CPU's otherwise; the worker's torch is left
    as it was."""
    out = run_case(tmp_path, '''
        seen = os.path.join(os.environ["HOME"], "seen.txt")
        def by_device(x, s):
            with open(seen, "a") as f:
                f.write(f"{x.is_cuda}\\n")
            y = torch.empty_like(x)
            scale_kernel[(triton.cdiv(x.numel(), 256),)](x, y, x.numel(), s, BLOCK=256 if x.is_cuda else 128)
            return y
        metas = [{"x": to_meta(torch.empty(1024), torch), "s": 2.0}]
        on_gpu = compile_ahead(by_device, metas, jobs=1, inputs_on_cuda=True)
        on_cpu = compile_ahead(by_device, metas, jobs=1)
        print(json.dumps({"seen": open(seen).read().split(), "on_gpu": on_gpu, "on_cpu": on_cpu,
                          "meta_here": metas[0]["x"].is_cuda}))
    ''')
    assert out["seen"] == ["True", "False"], out
    assert out["on_gpu"]["specializations"] == out["on_cpu"]["specializations"] == 1
    assert out["meta_here"] is False                    # the worker's own torch is not patched
