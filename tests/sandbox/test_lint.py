"""The lint gate: red-team corpus rejected for its reason, honest corpus accepted, one case per rule."""
from __future__ import annotations

import ast
import textwrap
from pathlib import Path

import pytest

from benchmarks.registry import list_operators, load_operator
from sandbox.lint import LintIssue, LintReport, lint_source

HERE = Path(__file__).parent
REDTEAM = sorted((HERE / "redteam").glob("lint_*.py"))
HONEST = sorted((HERE / "honest").glob("*.py"))
REPO = HERE.parents[1]

# The operator contract (benchmarks/operators/README.md): the candidate function's parameters, for every
# operator folder the registry finds (a new operator needs an honest corpus file, below).
OP_ARGS = {name: load_operator(name).arg_names for name in list_operators()}

# Each red-team file and the issue code(s) that name its reason; one of them must be reported.
EXPECTED_CODES = {
    "lint_builtins_escape": {"escape"},
    "lint_class_state": {"class"},
    "lint_data_ptr_cache": {"data-ptr", "global-state"},
    "lint_dummy_kernel_torch_result": {"torch-compute"},
    "lint_dunder_import": {"escape"},
    "lint_exec_string": {"escape"},
    "lint_exit_builtin": {"exit"},
    "lint_file_io": {"io"},
    "lint_gc_snoop_reference": {"import"},
    "lint_getattr_torch": {"escape"},
    "lint_global_last_result": {"global-state"},
    "lint_hallucinated_tl_name": {"tl-name"},
    "lint_host_sync_item": {"host-sync"},
    "lint_id_cache": {"data-ptr"},
    "lint_import_benchmark_reference": {"import"},
    "lint_importlib_reference": {"import"},
    "lint_inspect_snoop_frames": {"import"},
    "lint_kernel_internals": {"kernel-attr", "monkeypatch"},
    "lint_kernel_never_launched": {"no-launch"},
    "lint_lru_cache": {"global-state"},
    "lint_missing_function": {"missing-op"},
    "lint_module_alias": {"escape"},
    "lint_mutable_default_cache": {"global-state"},
    "lint_default_arg_cache_update": {"global-state"},
    "lint_numpy_host": {"import"},
    "lint_os_exit": {"import"},
    "lint_patch_cuda_event": {"torch-cuda", "monkeypatch"},
    "lint_patch_do_bench": {"triton-api", "monkeypatch"},
    "lint_patch_synchronize": {"monkeypatch"},
    "lint_plain_pytorch_gemm": {"torch-compute"},
    "lint_setattr_patch_timer": {"monkeypatch"},
    "lint_subprocess": {"import"},
    "lint_syntax_error": {"syntax"},
    "lint_sys_modules": {"import"},
    "lint_tensor_method_chain": {"torch-compute"},
    "lint_threading": {"import"},
    "lint_torch_compile": {"escape"},
    "lint_torch_functional": {"import", "torch-compute"},
    "lint_torch_ops_aten": {"escape"},
    "lint_wrong_signature": {"signature"},
    "lint_cast_launders_tensor": {"torch-compute"},
    "lint_lambda_table_compute": {"call", "torch-compute"},
    "lint_builtin_alias_sum": {"call"},
    "lint_torch_size_reads_ids": {"torch-compute"},
    "lint_closure_collects_tensors": {"torch-compute"},
    "lint_heuristics_reads_weight": {"host-sync", "torch-compute"},
    "lint_pre_hook_computes_output": {"torch-compute"},
    "lint_type_hints_eval": {"escape"},
    "lint_target_info_driver": {"escape"},
    "lint_pdl_without_wait": {"pdl"},
}


def headers(path: Path) -> dict[str, str]:
    out = {}
    for line in path.read_text().splitlines():
        if not line.startswith("# "):
            break
        key, _, value = line[2:].partition(":")
        out[key.strip()] = value.strip()
    return out


def lint_file(path: Path) -> LintReport:
    op = headers(path)["op"]
    return lint_source(path.read_text(), op, OP_ARGS[op])


# ---------------------------------------------------------------- corpus

def test_every_redteam_file_has_an_expected_reason():
    assert {p.stem for p in REDTEAM} == set(EXPECTED_CODES)


@pytest.mark.parametrize("path", REDTEAM, ids=lambda p: p.stem)
def test_redteam_rejected_for_its_reason(path):
    h = headers(path)
    assert h["expect"] == "reject" and h["stage"] == "lint" and h["op"] in OP_ARGS and h["why"]
    report = lint_file(path)
    assert not report.ok
    codes = {i.code for i in report.issues}
    assert codes & EXPECTED_CODES[path.stem], report.summary()
    for issue in report.issues:
        assert "\n" not in issue.message and issue.line >= 1


@pytest.mark.parametrize("path", HONEST, ids=lambda p: p.stem)
def test_honest_file_passes_with_zero_issues(path):
    h = headers(path)
    assert h["expect"] == "accept" and h["op"] in OP_ARGS
    report = lint_file(path)
    assert report.ok, report.summary()
    assert report.issues == ()
    assert report.kernels and set(report.launched) <= set(report.kernels) and report.launched


def test_honest_corpus_covers_every_operator():
    assert {headers(p)["op"] for p in HONEST} == set(OP_ARGS)


def _operator_args(operator_py: Path) -> tuple[str, ...] | None:
    for node in ast.parse(operator_py.read_text()).body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "ARGS" for t in node.targets):
            return tuple(ast.literal_eval(node.value))
    return None


SEEDS = sorted((REPO / "benchmarks" / "operators").glob("*/seed.py"))


@pytest.mark.skipif(not SEEDS, reason="no operator seed.py written yet")
@pytest.mark.parametrize("seed", SEEDS, ids=lambda p: p.parent.name)
def test_operator_seeds_pass_the_lint(seed):
    args = _operator_args(seed.parent / "operator.py")
    if args is None:
        pytest.skip(f"{seed.parent.name}/operator.py has no literal ARGS yet")
    report = lint_source(seed.read_text(), seed.parent.name, args)
    assert report.ok, report.summary()


# ---------------------------------------------------------------- one case per rule

PRELUDE = '''\
import torch
import triton
import triton.language as tl


@triton.jit
def _copy_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)

'''
PRELUDE_LINES = PRELUDE.count("\n")


def launcher(body: str, head: str = "def rms_norm(x, weight, eps=1e-6):") -> str:
    """The prelude, then a launcher whose body starts on line PRELUDE_LINES + 2."""
    launch = "y = torch.empty_like(x)\n_copy_kernel[(1,)](x, y, x.numel(), BLOCK=128)\n"
    return PRELUDE + head + "\n" + textwrap.indent(launch + textwrap.dedent(body).strip() + "\n", "    ")


def issues(source: str, op: str = "rms_norm") -> list[LintIssue]:
    return list(lint_source(source, op, OP_ARGS[op]).issues)


BODY_LINE = PRELUDE_LINES + 4          # first line of `body` in launcher(body)

RULES = [
    # (id, body, expected code, expected line offset within body)
    ("tensor_plus", "return y + 1", "torch-compute", 0),
    ("matmul_operator", "return x @ weight", "torch-compute", 0),
    ("torch_sum", "s = torch.sum(x)\nreturn y", "torch-compute", 0),
    ("method_mean", "m = y.mean()\nreturn y", "torch-compute", 0),
    ("cast_to", "return y.to(torch.float32)", "torch-compute", 0),
    ("tensor_compare", "mask = y > 0\nreturn y", "torch-compute", 0),
    ("unary_minus", "return -y", "torch-compute", 0),
    ("gather_index", "idx = torch.zeros(2)\nreturn y[idx]", "torch-compute", 1),
    ("list_index", "return y[[0, 1]]", "torch-compute", 0),
    ("setitem", "y[0] = 1.0\nreturn y", "torch-compute", 0),
    ("augassign", "y += x\nreturn y", "torch-compute", 0),
    ("iterate_tensor", "for row in y:\n    pass\nreturn y", "torch-compute", 0),
    ("builtin_sum_of_tensors", "return sum([x, y])", "torch-compute", 0),
    ("cdiv_of_tensor", "g = triton.cdiv(x, 2)\nreturn y", "torch-compute", 0),
    ("helper_arith", "return _twice(y)\n", "torch-compute", None),
    ("item", "v = y.item()\nreturn y", "host-sync", 0),
    ("print_tensor", "print(y)\nreturn y", "host-sync", 0),
    ("float_of_tensor", "v = float(y)\nreturn y", "host-sync", 0),
    ("fstring_tensor", "s = f'{y}'\nreturn y", "host-sync", 0),
    ("data_ptr", "k = x.data_ptr()\nreturn y", "data-ptr", 0),
    ("id_builtin", "k = id(x)\nreturn y", "data-ptr", 0),
    ("cuda_event", "e = torch.cuda.Event(enable_timing=True)\nreturn y", "torch-cuda", 0),
    ("cuda_synchronize_call", "torch.cuda.synchronize()\nreturn y", "torch-cuda", 0),
    ("patch_synchronize", "torch.cuda.synchronize = lambda: None\nreturn y", "monkeypatch", 0),
    ("patch_tl", "tl.sum = None\nreturn y", "monkeypatch", 0),
    ("del_attribute", "del torch.cuda.synchronize\nreturn y", "monkeypatch", 0),
    ("attr_store_on_value", "y.cached = 1\nreturn y", "monkeypatch", 0),
    ("setattr", "setattr(y, 'a', 1)\nreturn y", "monkeypatch", 0),
    ("rebind_import", "torch = None\nreturn y", "monkeypatch", 0),
    ("global_stmt", "global _G\nreturn y", "global-state", 0),
    ("eval", "eval('1')\nreturn y", "escape", 0),
    ("exec", "exec('1')\nreturn y", "escape", 0),
    ("compile_builtin", "compile('1', 'f', 'eval')\nreturn y", "escape", 0),
    ("dunder_import", "__import__('os')\nreturn y", "escape", 0),
    ("globals", "g = globals()\nreturn y", "escape", 0),
    ("vars", "v = vars(torch)\nreturn y", "escape", 0),
    ("dunder_attr", "c = y.__class__\nreturn y", "escape", 0),
    ("subclasses", "s = object.__subclasses__()\nreturn y", "escape", 0),
    ("private_attr", "c = y._base\nreturn y", "escape", 0),
    ("getattr_computed", "f = getattr(y, 'su' + 'm')\nreturn y", "escape", 0),
    ("getattr_module", "f = getattr(torch, 'empty')\nreturn y", "escape", 0),
    ("getattr_literal_compute", "return getattr(y, 'sum')()", "torch-compute", 0),
    ("module_as_value", "t = torch\nreturn y", "escape", 0),
    ("type_builtin", "t = type(y)\nreturn y", "escape", 0),
    ("format_field", "s = '{0.__class__}'.format(y)\nreturn y", "escape", 0),
    ("open", "f = open('/tmp/x')\nreturn y", "io", 0),
    ("input", "s = input()\nreturn y", "io", 0),
    ("exit", "exit(0)", "exit", 0),
    ("quit", "quit()", "exit", 0),
    ("breakpoint", "breakpoint()\nreturn y", "escape", 0),
    ("undefined", "return foo(y)", "undefined-name", 0),
    ("bare_except", "try:\n    pass\nexcept:\n    pass\nreturn y", "except", 2),
    ("base_exception", "try:\n    pass\nexcept BaseException:\n    pass\nreturn y", "except", 2),
    ("torch_ops", "z = torch.ops.aten.mm(x, x)\nreturn y", "escape", 0),
    ("torch_compile", "f = torch.compile(None)\nreturn y", "escape", 0),
    ("triton_testing", "t = triton.testing.do_bench(None)\nreturn y", "triton-api", 0),
    ("triton_runtime", "d = triton.runtime.driver\nreturn y", "triton-api", 0),
    ("kernel_attribute", "c = _copy_kernel.cache\nreturn y", "kernel-attr", 0),
    ("kernel_run", "_copy_kernel.run(x, y, 1, BLOCK=128, grid=(1,), warmup=False)\nreturn y", "kernel-attr", 0),
    ("import_inside", "import math\nreturn y", "import", 0),
    ("tl_reexported_builtins", "e = tl.core.builtins.eval\nreturn y", "escape", 0),
    ("tl_reexported_importlib", "m = tl.extra.module_from_spec\nreturn y", "escape", 0),
    ("typing_reexported_sys", "m = typing.sys.modules\nreturn y", "escape", 0),
    ("reduce_lambda_on_tensors", "return functools.reduce(lambda a, b: a + b, [x, y])", "torch-compute", 0),
    ("comprehension_on_tensors", "zs = [t * 2 for t in (x, y)]\nreturn y", "torch-compute", 0),
    ("tensor_class_method", "return torch.Tensor.sum(y)", "torch-compute", 0),
    ("default_param_cache", "return _stash(1, y)", "global-state", None),
    ("tl_name_in_launcher", "d = tl.bfloat17\nreturn y", "tl-name", 0),
]


@pytest.mark.parametrize("case", RULES, ids=lambda c: c[0])
def test_rule(case):
    name, body, code, offset = case
    extra = {"helper_arith": "\n\ndef _twice(t):\n    return t * 2\n",
             "default_param_cache": "\n\ndef _stash(k, v, memo=_G):\n    memo[k] = v\n    return v\n"}.get(name, "")
    extra_mod = "_G = {}\n" if name in ("global_stmt", "default_param_cache") else ""
    extra_mod += "import functools\nimport typing\n" if name in ("reduce_lambda_on_tensors", "typing_reexported_sys") else ""
    found = issues(extra_mod + launcher(body) + extra)
    codes = [(i.code, i.line) for i in found]
    assert code in {c for c, _ in codes}, codes
    if offset is not None:
        assert (code, BODY_LINE + offset + extra_mod.count("\n")) in codes, codes


def test_clean_launcher_has_no_issues():
    body = """
    T, H = x.shape
    x2 = x.reshape(-1, H).contiguous()
    out = torch.empty((T, H), device=x.device, dtype=x.dtype)
    block = triton.next_power_of_2(H)
    warps = min(max(block // 256, 1), 8) if x.dtype == torch.bfloat16 else 4
    grid = lambda meta: (triton.cdiv(x2.numel(), meta["BLOCK"]),)
    _copy_kernel[grid](x2, out, x2.numel(), BLOCK=block, num_warps=warps)
    assert out.is_contiguous(), f"output {out.shape} {out.dtype} is not contiguous"
    sms = torch.cuda.get_device_properties(x.device).multi_processor_count if torch.cuda.is_available() else 1
    print("launched", T, H, sms, x.device.type, x.dtype.itemsize, torch.finfo(torch.float32).max)
    return out.view(x.shape)
    """
    report = lint_source(launcher(body), "rms_norm", OP_ARGS["rms_norm"])
    assert report.ok, report.summary()
    assert report.kernels == ("_copy_kernel",) and report.launched == ("_copy_kernel",)


def test_tl_name_suggests_real_names_with_version_and_line():
    src = PRELUDE.replace("tl.arange(0, BLOCK)", "tl.arange(0, BLOCK) + tl.exp2x(1.0)") + \
        "def rms_norm(x, weight, eps=1e-6):\n    y = torch.empty_like(x)\n    _copy_kernel[(1,)](x, y, 1, BLOCK=8)\n    return y\n"
    found = issues(src)
    assert [(i.code, i.line) for i in found] == [("tl-name", 8)]
    import triton
    message = found[0].message
    assert "tl.exp2x does not exist" in message and triton.__version__ in message
    assert "tl.exp2" in message.split("did you mean", 1)[1]


def test_tl_names_checked_through_submodules_and_from_imports():
    src = PRELUDE.replace("import triton.language as tl\n",
                          "import triton.language as tl\nfrom triton.language import sigmoidd\n") + \
        "def rms_norm(x, weight, eps=1e-6):\n    y = torch.empty_like(x)\n    _copy_kernel[(1,)](x, y, 1, BLOCK=8)\n" \
        "    z = tl.math.exp2\n    return y\n"
    found = issues(src)
    assert [i.code for i in found] == ["tl-name"] and "sigmoid" in found[0].message and found[0].line == 4


def test_syntax_error_reports_its_line():
    found = issues("import torch\n\ndef rms_norm(x, weight, eps=1e-6):\n    return (x\n")
    assert len(found) == 1 and found[0].code == "syntax" and found[0].line == 4


def test_missing_function_names_expected_signature():
    found = issues(PRELUDE + "def rmsnorm(x, weight, eps=1e-6):\n    return x\n")
    missing = [i for i in found if i.code == "missing-op"]
    assert missing and "rms_norm(x, weight, eps)" in missing[0].message


def test_wrong_signature_names_found_and_expected_parameters():
    src = launcher("return y", head="def rms_norm(weight, x, eps=1e-6):")
    found = [i for i in issues(src) if i.code == "signature"]
    assert found and found[0].line == PRELUDE_LINES + 1
    assert "(x, weight, eps)" in found[0].message and "weight, x" in found[0].message


def test_extra_parameters_are_a_signature_error_but_defaults_are_fine():
    assert "signature" in {i.code for i in issues(launcher("return y", head="def rms_norm(x, weight, eps=1e-6, *rest):"))}
    assert lint_source(launcher("return y", head="def rms_norm(x, weight, eps=1e-5):"), "rms_norm",
                       OP_ARGS["rms_norm"]).ok


def test_no_kernel_and_no_launch():
    no_kernel = "import torch\n\ndef rms_norm(x, weight, eps=1e-6):\n    return torch.empty_like(x)\n"
    assert "no-kernel" in {i.code for i in issues(no_kernel)}
    never = PRELUDE + "def rms_norm(x, weight, eps=1e-6):\n    return torch.empty_like(x)\n"
    assert "no-launch" in {i.code for i in issues(never)}
    unreachable = PRELUDE + ("def _unused(x, y):\n    _copy_kernel[(1,)](x, y, 1, BLOCK=8)\n\n"
                             "def rms_norm(x, weight, eps=1e-6):\n    return torch.empty_like(x)\n")
    report = lint_source(unreachable, "rms_norm", OP_ARGS["rms_norm"])
    assert report.launched == ("_copy_kernel",) and "no-launch" in {i.code for i in report.issues}


def test_launch_through_helper_counts():
    src = PRELUDE + ("def _launch(src, dst):\n    _copy_kernel[(1,)](src, dst, src.numel(), BLOCK=8)\n\n"
                     "def rms_norm(x, weight, eps=1e-6):\n    y = torch.empty_like(x)\n    _launch(x, y)\n    return y\n")
    assert lint_source(src, "rms_norm", OP_ARGS["rms_norm"]).ok


def test_import_allowlist():
    for bad in ("import os", "import gc", "import numpy as np", "from benchmarks.operators.gemm import operator",
                "import torch.nn.functional as F", "from triton.testing import do_bench", "from torch import *"):
        codes = {i.code for i in issues(bad + "\n" + launcher("return y"))}
        assert codes & {"import", "triton-api"}, (bad, codes)
    for good in ("import math", "import functools", "from typing import Optional",
                 "from triton.language.extra import libdevice",
                 "from triton.tools.tensor_descriptor import TensorDescriptor"):
        report = lint_source(good + "\n" + launcher("return y"), "rms_norm", OP_ARGS["rms_norm"])
        assert report.ok, (good, report.summary())


def test_module_level_cache_written_through_alias_or_helper_is_rejected():
    cache = "_CACHE = {}\n\ndef _put(d, k, v):\n    d[k] = v\n\n"
    src = cache + launcher("_put(_CACHE, 'k', y)\nreturn y")
    assert "global-state" in {i.code for i in issues(src)}
    src = "_CACHE = {}\n" + launcher("c = _CACHE.get('k')\nc.append(y)\nreturn y")
    assert "global-state" in {i.code for i in issues(src)}


def test_read_only_configs_are_fine():
    src = 'CONFIGS = {"BLOCK": 128, "num_warps": 4}\n' + launcher(
        'cfg = dict(CONFIGS)\ncfg["BLOCK"] = 64\nb = CONFIGS["BLOCK"] * 2\nreturn y')
    report = lint_source(src, "rms_norm", OP_ARGS["rms_norm"])
    assert report.ok, report.summary()


def test_module_level_torch_calls_and_classes():
    assert "module-level" in {i.code for i in issues("import torch\n_BUF = torch.empty(4)\n" + launcher("return y"))}
    assert "class" in {i.code for i in issues(launcher("return y") + "\nclass Holder:\n    pass\n")}


def test_shadowing_a_builtin_cannot_smuggle_it():
    src = "if False:\n    id = None\n" + launcher("return y")
    assert "escape" in {i.code for i in issues(src)}
    src = launcher("[0 for eval in ()]\nreturn y")
    assert "escape" in {i.code for i in issues(src)}


def test_kernel_local_names_may_shadow_builtins():
    src = PRELUDE.replace("def _copy_kernel(x_ptr", "def _copy_kernel(input, x_ptr").replace(
        "tl.load(x_ptr + offs", "tl.load(input + offs") + \
        "def rms_norm(x, weight, eps=1e-6):\n    y = torch.empty_like(x)\n    _copy_kernel[(1,)](x, x, y, 1, BLOCK=8)\n" \
        "    return y\n"
    assert lint_source(src, "rms_norm", OP_ARGS["rms_norm"]).ok


def test_torch_inside_kernel_is_rejected():
    src = PRELUDE.replace("    offs = ", "    z = torch.float32\n    offs = ") + \
        "def rms_norm(x, weight, eps=1e-6):\n    y = torch.empty_like(x)\n    _copy_kernel[(1,)](x, y, 1, BLOCK=8)\n" \
        "    return y\n"
    found = issues(src)
    assert [(i.code, i.line) for i in found] == [("torch-in-kernel", 8)]


def test_summary_lists_line_and_message():
    report = lint_source(launcher("return y + 1"), "rms_norm", OP_ARGS["rms_norm"])
    assert report.summary() == "\n".join(f"line {i.line}: {i.message}" for i in report.issues)
    assert report.summary().startswith(f"line {BODY_LINE}: ")


def test_reports_are_frozen():
    report = lint_source(launcher("return y"), "rms_norm", OP_ARGS["rms_norm"])
    with pytest.raises(Exception):
        report.ok = False  # type: ignore[misc]


def test_grid_and_heuristics_functions_take_triton_argument_dicts():
    src = PRELUDE.replace("@triton.jit\ndef _copy_kernel", "@triton.heuristics({\"BLOCK\": _pick_block})\n"
                          "@triton.jit\ndef _copy_kernel").replace(
        "import triton.language as tl\n",
        "import triton.language as tl\n\n\ndef _pick_block(args):\n    return triton.next_power_of_2(args['n']) * 1\n") + \
        ("def _grid(meta):\n    return (triton.cdiv(meta['n'], meta['BLOCK']) * 1,)\n\n"
         "def rms_norm(x, weight, eps=1e-6):\n    y = torch.empty_like(x)\n    _copy_kernel[_grid](x, y, x.numel())\n"
         "    return y\n")
    report = lint_source(src, "rms_norm", OP_ARGS["rms_norm"])
    assert report.ok, report.summary()
    # the same helper called with a tensor is tensor arithmetic
    bad = src.replace("    return y\n", "    return _pick_block(y)\n")
    assert "torch-compute" in {i.code for i in lint_source(bad, "rms_norm", OP_ARGS["rms_norm"]).issues}
