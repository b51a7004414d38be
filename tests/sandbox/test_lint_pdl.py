"""The lint's programmatic-dependent-launch rule (sandbox/lint_pdl.py), one case per branch: a kernel launched with
launch_pdl waits first (unconditionally, or gated on the launch's own value), and the option appears nowhere the
rule cannot follow."""
import textwrap

import pytest

from sandbox.lint import lint_source

KERNEL = '''\
import functools

import torch
import triton
import triton.language as tl


@triton.jit
def _copy_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr, USE_PDL: tl.constexpr = False, OTHER: tl.constexpr = False):
{first}
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)


def rms_norm(x, weight, eps=1e-6):
    y = torch.empty_like(x)
    pdl = x.is_cuda
{launch}
    return y
'''
WAIT = "    tl.extra.cuda.gdc_wait()"
GATED = "    if USE_PDL:\n        tl.extra.cuda.gdc_wait()"
LAUNCH = "    _copy_kernel[(1,)](x, y, x.numel(), BLOCK=128{kw})"


def _codes(first: str, launch: str) -> list[str]:
    src = KERNEL.format(first=first or "    pass", launch=launch)
    return [i.code for i in lint_source(src, "rms_norm", ("x", "weight", "eps")).issues]


@pytest.mark.parametrize("first, kw", [
    (WAIT, ", launch_pdl=True"),                                  # waits unconditionally
    (GATED, ", USE_PDL=pdl, launch_pdl=pdl"),                     # gated on the launch's own value
    ('    """docstring"""\n' + GATED, ", USE_PDL=pdl, launch_pdl=pdl"),
    (GATED + "\n        tl.extra.cuda.gdc_launch_dependents()", ", USE_PDL=pdl, launch_pdl=pdl"),   # more after it
    ("", ", launch_pdl=False"),                                   # PDL off: nothing to wait for
    ("", ""),
])
def test_allowed(first, kw):
    assert _codes(first, LAUNCH.format(kw=kw)) == []


@pytest.mark.parametrize("first, launch", [
    ("", LAUNCH.format(kw=", launch_pdl=True")),                                     # no wait at all
    ("    offs0 = tl.program_id(0)\n" + WAIT, LAUNCH.format(kw=", launch_pdl=True")),  # the wait is not first
    (GATED, LAUNCH.format(kw=", USE_PDL=False, launch_pdl=pdl")),                     # gate off, PDL on
    (GATED, LAUNCH.format(kw=", launch_pdl=pdl")),                                    # gate left at its default
    ("    if OTHER:\n        tl.extra.cuda.gdc_wait()", LAUNCH.format(kw=", USE_PDL=pdl, launch_pdl=pdl")),
    ("    if USE_PDL:\n        tl.extra.cuda.gdc_launch_dependents()\n        tl.extra.cuda.gdc_wait()",
     LAUNCH.format(kw=", USE_PDL=pdl, launch_pdl=pdl")),
    ("    if USE_PDL:\n        tl.extra.cuda.gdc_wait()\n    else:\n        pass", LAUNCH.format(kw=", USE_PDL=pdl, launch_pdl=pdl")),
    (WAIT, "    run = functools.partial(_copy_kernel[(1,)], launch_pdl=True)\n    run(x, y, x.numel(), BLOCK=128)"),
    (WAIT, "    opts = {'launch_pdl': True}\n" + LAUNCH.format(kw=", **opts")),
    (WAIT, "    opts = dict(launch_pdl=True)\n" + LAUNCH.format(kw=", **opts")),
], ids=["no_wait", "wait_not_first", "gate_off", "gate_default", "other_gate", "trigger_before_wait", "gate_with_else",
        "partial",
        "string_key", "dict_keyword"])
def test_rejected_with_the_fix(first, launch):
    codes = _codes(first, launch)
    assert "pdl" in codes, codes


def test_the_message_names_the_kernel_the_value_and_the_fix():
    src = KERNEL.format(first="    pass", launch=LAUNCH.format(kw=", launch_pdl=pdl"))
    (issue,) = [i for i in lint_source(src, "rms_norm", ("x", "weight", "eps")).issues if i.code == "pdl"]
    assert "_copy_kernel is launched with launch_pdl=pdl" in issue.message and "gdc_wait()" in issue.message
    assert issue.line == textwrap.dedent(src).splitlines().index(LAUNCH.format(kw=", launch_pdl=pdl")) + 1
