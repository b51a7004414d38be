"""The lint's tensor provenance is sound by construction: calls propagate, unknown callees are rejected,
launch-time callbacks are launcher code, allowed modules are allowed by name, and honest launch styles
(launch helpers, functools.partial launches, heuristics on shapes) pass."""
from __future__ import annotations

import pytest

from sandbox.lint import lint_source
from tests.sandbox.test_lint import OP_ARGS, PRELUDE, launcher

HELPER = "\n\ndef _h(k, t):\n    return t * k\n"
STATE_HELPER = "\n\ndef _get():\n    return _C\n"
GEN_HELPER = "\n\ndef _gen(t):\n    yield t\n\n\ndef _first(g):\n    for v in g:\n        return v * 2\n"

# (id, module prelude, launcher body, helpers after the launcher, expected code)
PROVENANCE = [
    ("typing_cast", "import typing\n", "z = typing.cast(int, x)\nn = z * 2\nreturn y", "", "torch-compute"),
    ("torch_tensor_call", "", "z = torch.Tensor(x)\nreturn y", "", "torch-compute"),
    ("torch_size_sum", "", "s = sum(torch.Size(x))\nreturn y", "", "torch-compute"),
    ("torch_size_pow", "", "s = torch.Size(x)\nreturn y", "", "torch-compute"),
    ("descriptor_base", "from triton.tools.tensor_descriptor import TensorDescriptor\n",
     "d = TensorDescriptor.from_tensor(x, [16, 16])\nb = d.base * 2\nreturn y", "", "torch-compute"),
    ("subscript_call", "", "table = {'v': y.view}\nreturn table['v'](x)", "", "call"),
    ("call_result_call", "", "return _mk()(x)", "\n\ndef _mk():\n    return _h\n" + HELPER, "call"),
    ("partial_named", "import functools\n", "f = functools.partial(_h, 2)\nreturn f(x)", HELPER, "torch-compute"),
    ("partial_inline", "import functools\n", "return functools.partial(_h, 2)(x)", HELPER, "torch-compute"),
    ("lambda_named", "", "f = lambda t: t * 2\nreturn f(x)", "", "torch-compute"),
    ("lambda_inline", "", "return (lambda t: t * 2)(x)", "", "torch-compute"),
    ("builtin_alias", "_reduce = sum\n", "return _reduce([x, y])", "", "call"),
    ("builtin_as_key", "", "return sorted([x, y], key=float)", "", "call"),
    ("default_argument", "", "def h(t=x):\n    return t * 2\nreturn h()", "", "torch-compute"),
    ("lambda_default", "", "h = lambda t=x: t * 2\nreturn h()", "", "torch-compute"),
    ("helper_returns_state", "_C = {}\n", "_get()['k'] = y\nreturn y", STATE_HELPER, "global-state"),
    ("generator", "", "return _first(_gen(x))", GEN_HELPER, "torch-compute"),
    ("closure_appends", "", "acc = []\ndef put():\n    acc.append(x)\nput()\nreturn acc[0] + 1", "", "torch-compute"),
    ("dict_store", "", "d = {}\nd['a'] = x\nreturn d['a'] * 2", "", "torch-compute"),
    ("str_format", "", "s = '{}'.format(x)\nreturn y", "", "call"),
    ("list_index", "", "i = [x, y].index(y)\nreturn y", "", "call"),
    ("view_of_tensor_size", "", "return y.view(x.shape[0], x[0])", "", "torch-compute"),
    ("match_capture", "", "match [x, y]:\n    case [a, b]:\n        return a * 2\nreturn y", "", "torch-compute"),
    ("variable_call", "", "f = _h\nreturn f(2, x)", HELPER, "call"),
    ("parameter_call", "", "return _apply(_h, x)", "\n\ndef _apply(f, t):\n    return f(2, t)\n" + HELPER, "call"),
    ("kernel_without_grid", "", "_copy_kernel(x, y, 1, BLOCK=8)\nreturn y", "", "call"),
    ("partial_of_kernel_without_grid", "import functools\n",
     "f = functools.partial(_copy_kernel, x)\nf(y, 1, BLOCK=8)\nreturn y", "", "call"),
    ("stored_launcher", "", "run = _copy_kernel[(1,)]\nrun(x, y, 1, BLOCK=8)\nreturn y", "", "call"),
    ("partial_of_a_method", "import functools\n", "f = functools.partial('{}'.format)\ns = f(x)\nreturn y", "", "call"),
    ("partial_of_a_library_call", "import functools\n", "f = functools.partial(torch.Size)\ns = f(x)\nreturn y", "",
     "call"),
    ("truth_of_tensor_if", "", "if x[0, 0]:\n    pass\nreturn y", "", "host-sync"),
    ("truth_of_tensor_assert", "", "assert x\nreturn y", "", "host-sync"),
    ("truth_of_tensor_boolop", "", "z = x[0] and 3\nreturn y", "", "host-sync"),
    ("truth_in_comprehension", "", "zs = [1 for _ in range(2) if x[0]]\nreturn y", "", "host-sync"),
    ("reduce_over_tensors", "import functools\n", "n = functools.reduce(lambda a, b: a * b, [x, y])\nreturn y", "",
     "torch-compute"),
    # item 3: allowed modules are allowed by name
    ("typing_get_type_hints", "import typing\n", "h = typing.get_type_hints(_h)\nreturn y", HELPER, "escape"),
    ("typing_named_tuple", "import typing\n", "P = typing.NamedTuple('P', [('a', int)])\nreturn y", "", "escape"),
    ("tl_target_info_driver", "", "d = tl.target_info.driver.active.get_device_interface()\nreturn y", "", "escape"),
    ("tl_core_knobs", "", "k = tl.core.knobs\nreturn y", "", "escape"),
    ("tl_jit_callable", "", "k = tl.core.JITCallable\nreturn y", "", "escape"),
    ("triton_runtime_driver", "", "d = triton.runtime.driver.active\nreturn y", "", "triton-api"),
    ("triton_knobs", "", "k = triton.knobs\nreturn y", "", "triton-api"),
    ("triton_compiler", "", "c = triton.compiler.compile\nreturn y", "", "triton-api"),
]


def _codes(source: str) -> set[str]:
    return {i.code for i in lint_source(source, "rms_norm", OP_ARGS["rms_norm"]).issues}


@pytest.mark.parametrize("case", PROVENANCE, ids=lambda c: c[0])
def test_provenance_and_escape_cases_are_rejected_for_their_reason(case):
    _, mod, body, after, code = case
    report = lint_source(mod + launcher(body) + after, "rms_norm", OP_ARGS["rms_norm"])
    assert code in {i.code for i in report.issues}, report.summary()


def test_unresolved_call_message_says_how_to_write_it():
    report = lint_source(launcher("table = {'v': y.view}\nreturn table['v'](x)"), "rms_norm", OP_ARGS["rms_norm"])
    msg = next(i.message for i in report.issues if i.code == "call")
    assert "call functions by name" in msg and "table['v']" in msg


def test_honest_forms_of_the_same_calls_pass():
    body = ("T = typing.cast(int, x.shape[0])\nn = sum(x.shape) + T\ns = torch.Size((T, n))\n"
            "outs = [y]\nouts.append(torch.empty(s, device=x.device))\nk = max(x.shape, key=lambda d: d * 2)\n"
            "try:\n    w = x.stride(0)\nexcept ValueError as e:\n    raise ValueError(f'bad stride: {e}') from e\n"
            "f = functools.partial(_sizes, 2)\nm = f(x.shape[0]) * 2\n"
            "numel = functools.reduce(lambda a, b: a * b, x.shape, 1)\nassert x.is_contiguous() and numel > 0\n"
            "return outs[0]")
    src = "import functools\nimport typing\n" + launcher(body) + "\n\ndef _sizes(k, n):\n    return n * k\n"
    report = lint_source(src, "rms_norm", OP_ARGS["rms_norm"])
    assert report.ok, report.summary()


# ---------------------------------------------------------------- launch-time callbacks (item 2)

def _kernel_with(decorator: str, helpers: str = "") -> str:
    return PRELUDE.replace("@triton.jit\ndef _copy_kernel", decorator + "\n@triton.jit\ndef _copy_kernel").replace(
        "import triton.language as tl\n", "import triton.language as tl\n" + helpers)


OP = "def rms_norm(x, weight, eps=1e-6):\n    y = torch.empty_like(x)\n"
LAUNCH = "    _copy_kernel[(1,)](x, y, x.numel())\n    return y\n"

CALLBACKS = [
    ("heuristics_reads_tensor", _kernel_with("@triton.heuristics({'BLOCK': lambda a: int(a['x_ptr'][0]) + 8})") + OP
     + LAUNCH, {"host-sync", "torch-compute"}),
    ("heuristics_arith", _kernel_with("@triton.heuristics({'BLOCK': lambda a: a['x_ptr'] * 2})") + OP + LAUNCH,
     {"torch-compute"}),
    ("heuristics_iterates_dict", _kernel_with("@triton.heuristics({'BLOCK': _b})",
                                              "\n\ndef _b(args):\n    return sum(v for v in args.values())\n")
     + OP + LAUNCH, {"torch-compute"}),
    ("grid_lambda_reads_tensor", PRELUDE + OP + "    _copy_kernel[lambda m: (int(m['x_ptr'].sum()),)](x, y, 1, BLOCK=8)\n"
     "    return y\n", {"host-sync", "torch-compute"}),
    ("grid_def_arith", PRELUDE + "def _g(meta):\n    return (meta['y_ptr'] + 1,)\n\n" + OP
     + "    _copy_kernel[_g](x, y, 1, BLOCK=8)\n    return y\n", {"torch-compute"}),
    ("config_pre_hook_computes", _kernel_with("@triton.autotune(configs=[triton.Config({'BLOCK': 8}, pre_hook=lambda a: "
                                              "a['y_ptr'].fill_(a['x_ptr'] * 2))], key=['n'])") + OP + LAUNCH,
     {"torch-compute"}),
    ("prune_callback_arith", _kernel_with("@triton.autotune(configs=[triton.Config({'BLOCK': 8})], key=['n'], "
                                          "prune_configs_by={'early_config_prune': _prune})",
                                          "\n\ndef _prune(configs, named, **kw):\n    s = named['x_ptr'] * 1\n"
                                          "    return configs\n") + OP + LAUNCH, {"torch-compute"}),
    ("grid_partial_reads_tensor", "import functools\n" + PRELUDE + "def _g(k, m):\n    return (m['x_ptr'] * k,)\n\n"
     + OP + "    _copy_kernel[functools.partial(_g, 2)](x, y, 1, BLOCK=8)\n    return y\n", {"torch-compute"}),
    ("grid_partial_named_reads_tensor", "import functools\n" + PRELUDE + "def _g(k, m):\n    return (m['x_ptr'] * k,)\n\n"
     + OP + "    g = functools.partial(_g, 2)\n    _copy_kernel[g](x, y, 1, BLOCK=8)\n    return y\n", {"torch-compute"}),
    ("grid_through_launch_helper", PRELUDE + "def _launch(kernel, grid, src, dst):\n    kernel[grid](src, dst, 1, BLOCK=8)\n\n"
     + OP + "    _launch(_copy_kernel, lambda m: (m['x_ptr'] * 1,), x, y)\n    return y\n", {"torch-compute"}),
]


@pytest.mark.parametrize("case", CALLBACKS, ids=lambda c: c[0])
def test_launch_time_callbacks_are_launcher_code(case):
    _, src, codes = case
    assert _codes(src) & codes


HONEST = [
    ("heuristics_reads_shapes", _kernel_with("@triton.heuristics({'BLOCK': lambda a: triton.next_power_of_2("
                                             "a['x_ptr'].shape[0] + a['n'])})") + OP + LAUNCH),
    ("grid_lambda_reads_meta", PRELUDE + OP + "    _copy_kernel[lambda m: (triton.cdiv(m['n'], m['BLOCK']),)](x, y, "
     "x.numel(), BLOCK=8)\n    return y\n"),
    ("pre_hook_zeroes_output", _kernel_with("@triton.autotune(configs=[triton.Config({'BLOCK': 8}, pre_hook=lambda a: "
                                            "a['y_ptr'].zero_())], key=['n'])") + OP + LAUNCH),
    ("launch_helper", PRELUDE + "def _launch(kernel, src, dst):\n    kernel[(1,)](src, dst, src.numel(), BLOCK=8)\n\n"
     + OP + "    _launch(_copy_kernel, x, y)\n    return y\n"),
    ("launch_helper_with_grid", PRELUDE + "def _launch(kernel, grid, src, dst):\n    kernel[grid](src, dst, src.numel(), "
     "BLOCK=8)\n\n" + OP + "    _launch(_copy_kernel, lambda m: (triton.cdiv(m['n'], m['BLOCK']),), x, y)\n    return y\n"),
    ("partial_launch", "import functools\n" + PRELUDE + OP + "    run = functools.partial(_copy_kernel[(1,)], x, y)\n"
     "    run(x.numel(), BLOCK=8)\n    return y\n"),
    ("partial_launch_inline", "import functools\n" + PRELUDE + OP
     + "    functools.partial(_copy_kernel[(1,)], BLOCK=8)(x, y, x.numel())\n    return y\n"),
    ("partial_launch_module_level", "import functools\n" + PRELUDE + "_RUN = functools.partial(_copy_kernel[(1,)], "
     "BLOCK=8)\n\n" + OP + "    _RUN(x, y, x.numel())\n    return y\n"),
    ("set_allocator", PRELUDE + OP + "    triton.set_allocator(lambda size, align, stream: torch.empty(size, "
     "dtype=torch.int8, device=x.device))\n    _copy_kernel[(1,)](x, y, x.numel(), BLOCK=8)\n    return y\n"),
    ("tl_propagate_nan", PRELUDE.replace("tl.load(x_ptr + offs, mask=offs < n)", "tl.maximum(tl.load(x_ptr + offs, "
                                         "mask=offs < n), 0.0, propagate_nan=tl.PropagateNan.ALL)") + OP + LAUNCH
     .replace("x.numel())", "x.numel(), BLOCK=8)")),
]


@pytest.mark.parametrize("case", HONEST, ids=lambda c: c[0])
def test_honest_launch_styles_pass(case):
    _, src = case
    report = lint_source(src, "rms_norm", OP_ARGS["rms_norm"])
    assert report.ok, report.summary()
    assert report.launched == ("_copy_kernel",)


def test_launch_helper_given_a_non_kernel_is_rejected():
    src = PRELUDE + ("def _launch(kernel, src, dst):\n    return kernel[(1,)](src, dst)\n\n" + OP
                     + "    _launch(_copy_kernel, x, y)\n    _launch({(1,): _copy_kernel}, x, y)\n    return y\n")
    assert "call" in _codes(src)


def test_launch_helper_passed_around_is_not_a_launch():
    src = PRELUDE + ("def _launch(kernel, src, dst):\n    kernel[(1,)](src, dst, 1, BLOCK=8)\n\n" + OP
                     + "    f = _launch\n    f(_copy_kernel, x, y)\n    return y\n")
    assert "call" in _codes(src)


def test_an_analysis_that_does_not_settle_rejects_instead_of_guessing():
    chain = "".join(f"\n\ndef _h{i}(t):\n    return _h{i + 1}(t)\n" for i in range(60)) + "\n\ndef _h60(t):\n    return t\n"
    report = lint_source(launcher("return _h0(x) * 2") + chain, "rms_norm", OP_ARGS["rms_norm"])
    assert any(i.code == "call" and "did not settle" in i.message for i in report.issues), report.summary()


def test_partials_of_partials_are_followed_only_so_far():
    body = "\n".join(f"p{i} = functools.partial(p{(i + 1) % 8}, 1)\np{i} = functools.partial(p{(i + 2) % 8}, 1)"
                     for i in range(8)) + "\n" + "\n".join(f"p{i}(x)" for i in range(8)) + "\nreturn y"
    assert "call" in _codes("import functools\n" + launcher(body))


def test_a_launch_helper_may_only_launch_or_pass_on_its_kernel():
    src = PRELUDE + ("def _launch(kernel, src, dst):\n    b = kernel.create_binder\n"
                     "    kernel[(1,)](src, dst, src.numel(), BLOCK=8)\n\n" + OP + "    _launch(_copy_kernel, x, y)\n    return y\n")
    assert "kernel-attr" in _codes(src)


def test_a_kernel_goes_only_to_launch_helpers():
    src = PRELUDE + OP + "    d = dict(k=_copy_kernel)\n    _copy_kernel[(1,)](x, y, 1, BLOCK=8)\n    return y\n"
    assert "kernel-attr" in _codes(src)
