"""An A/B worker's compile caches: each kernel compiles from and loads its own source's sealed directory.

The A/B used to get one directory for the pair, empty at first, so every specialization of both kernels
compiled inside the timed re-measure (20-39 s of fused_moe's A/Bs on the H200, session 9). The GPU side
(that the first calls then hit the cache) is in tests/sandbox/test_gpu_sandbox.py.
"""
import os

from sandbox.ab import _with_cache
from sandbox.compile_cache import CompileCache
from sandbox.conversation import Conversation
from sandbox.isolation import WorkerProcess
from sandbox.settings import SandboxSettings
from sandbox.verdict import EvalResult

SRC_A = "import triton\n# the incumbent\n"
SRC_B = "import triton\n# the candidate\n"


class _Setup(Conversation):
    """The parent's side of a conversation, only as far as the setup request it would send."""

    def __init__(self, cache: CompileCache):
        self.settings, self.cache, self.op, self.operator_dir = SandboxSettings(), cache, "rms_norm", None
        self.interpreter, self.device, self.result = True, "cpu", EvalResult(op="rms_norm")
        self._init_conversation()


def _sealed(cache: CompileCache, source: str, name: str):
    folder, _ = cache.checkout(source)
    (folder / name).write_bytes(name.encode())
    cache.seal(source)
    return folder


def test_an_ab_checks_out_each_kernels_own_sealed_directory(tmp_path):
    cache = CompileCache(tmp_path / "cache")
    a, b = _sealed(cache, SRC_A, "a.cubin"), _sealed(cache, SRC_B, "b.cubin")
    w = WorkerProcess(interpreter=True, timeout_s=60.0, network_namespace=False)
    try:
        conv = _Setup(cache)
        msg = conv._setup_message(w, {"candidate_sources": [SRC_A, SRC_B]})
    finally:
        w.close()
    assert msg["cache_dir"] == str(a) and msg["ab_cache_dir"] == str(b)
    env = conv.result.environment
    assert "sealed cache of this source reused" in env["compile_cache"]
    assert "sealed cache of this source reused" in env["compile_cache_b"]
    # no directory of the pair: the cache holds exactly the two sources' own (and their manifests)
    assert sorted(p.name for p in (tmp_path / "cache").iterdir() if p.is_dir()) == sorted([a.name, b.name])


def test_a_single_source_worker_gets_no_second_directory(tmp_path):
    cache = CompileCache(tmp_path / "cache")
    a = _sealed(cache, SRC_A, "a.cubin")
    w = WorkerProcess(interpreter=True, timeout_s=60.0, network_namespace=False)
    try:
        msg = _Setup(cache)._setup_message(w, {"candidate_sources": [SRC_A]})
    finally:
        w.close()
    assert msg["cache_dir"] == str(a) and msg["ab_cache_dir"] is None


def test_each_kernel_runs_with_its_own_cache_directory(monkeypatch):
    monkeypatch.setenv("TRITON_CACHE_DIR", "/the/worker/setting")
    seen = []

    def kernel(inputs):
        seen.append((inputs["k"], os.environ["TRITON_CACHE_DIR"]))

    run_a, run_b = _with_cache(kernel, "/cache/a"), _with_cache(kernel, "/cache/b")
    for k, run in enumerate((run_a, run_b, run_a, run_b)):
        run({"k": k})
    assert seen == [(0, "/cache/a"), (1, "/cache/b"), (2, "/cache/a"), (3, "/cache/b")]
    assert _with_cache(kernel, None) is kernel        # no cache (or a private one): the worker's setting stands
