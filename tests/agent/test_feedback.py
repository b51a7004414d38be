"""agent/feedback.py: feedback text from real EvalResults, and the chat prompt from configs/prompts/."""
from agent.feedback import build_feedback, build_prompt, corrective_message, failing_line
from agent.types import IterationRecord, OperatorContract, ProposalContext, Snippet
from sandbox.verdict import EvalResult, ShapeResult

CONTRACT = OperatorContract(
    name="rms_norm", signature="rms_norm(x[T,H], weight[H], eps=1e-6) -> [T,H]",
    description="Root-mean-square normalization of each row of x.", arg_names=("x", "weight", "eps"),
    tolerances={"bf16": {"atol": 0.02, "rtol": 0.02, "rel_l2": 0.01}},
    shapes=({"id": "T64-H4096", "dims": {"T": 64, "H": 4096}, "dtype": "bf16", "weight": 0.6},
            {"id": "T1-H8192", "dims": {"T": 1, "H": 8192}, "dtype": "bf16", "weight": 0.4}))

TRITON_COMPILE_ERROR = """Traceback (most recent call last):
  File "/work/main/.venv/lib/python3.11/site-packages/triton/compiler/compiler.py", line 307, in compile
    module = src.make_ir(target, options, codegen_fns, module_map, context)
triton.compiler.errors.CompilationError: at 4:12:
def _rms_norm_kernel(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n)
    y = x * undefined_name
            ^
NameError('undefined_name is not defined')
"""

PYTHON_TRACEBACK = """Traceback (most recent call last):
  File "/tmp/aka-worker-1/candidate.py", line 41, in rms_norm
    grid = (triton.cdiv(T, ROWS_PER_PROGRAM),)
  File "/work/main/.venv/lib/python3.11/site-packages/triton/runtime/jit.py", line 12, in cdiv
    return (x + y - 1) // y
ZeroDivisionError: integer division or modulo by zero
"""


def _visible(id_, dims, **kw):
    return ShapeResult(id=id_, dims=dims, dtype="bf16", weight=kw.pop("weight", 0.5), **kw)


def _hidden(id_, dims, error=None):
    return ShapeResult(id=id_, dims=dims, dtype="bf16", weight=0.0, holdout=True, error=error)


def test_rejected_compile_result_names_the_failing_kernel_line():
    result = EvalResult(op="rms_norm", verdict="rejected", failed_stage="compile",
                        reasons=["compile gate: kernel _rms_norm_kernel: NameError"],
                        shapes=[_visible("T64-H4096", {"T": 64, "H": 4096})], stderr_tail=TRITON_COMPILE_ERROR)
    text = build_feedback(CONTRACT, result, [])
    assert "rejected at the compile stage" in text
    assert "Failing line: _rms_norm_kernel line 4: y = x * undefined_name" in text
    assert "NameError('undefined_name is not defined')" in text


def test_python_traceback_points_at_the_candidate_frame_not_the_library():
    line = failing_line(PYTHON_TRACEBACK)
    assert line.startswith("line 41 in rms_norm: grid = (triton.cdiv(T, ROWS_PER_PROGRAM),)")
    assert "ZeroDivisionError" in line and "jit.py" not in line


def test_correctness_failure_shows_the_row_error():
    result = EvalResult(op="rms_norm", verdict="rejected", failed_stage="correctness",
                        reasons=["T64-H4096: max_rel_err 0.31 > rtol 0.02"],
                        shapes=[_visible("T64-H4096", {"T": 64, "H": 4096}, error="max_rel_err 0.31 > rtol 0.02",
                                         max_rel_err=0.31)])
    text = build_feedback(CONTRACT, result, [])
    # w: the shape's share of the shown set (one shape: 1.000), as the system prompt shows it
    assert "T64-H4096 [T=64 H=4096 bf16, w=1.000]: FAILED: max_rel_err 0.31 > rtol 0.02" in text


def test_accepted_result_lists_attainment_and_bound_per_shape():
    result = EvalResult(op="rms_norm", verdict="accepted", weighted_attainment=0.6125, s_i=0.55, shapes=[
        _visible("T64-H4096", {"T": 64, "H": 4096}, t_us=4.0, t_roof_us=2.6, attainment=0.65, bound="memory",
                 timing_mode="graph", weight=0.6),
        _visible("T1-H8192", {"T": 1, "H": 8192}, t_us=2.0, t_roof_us=1.1, attainment=0.55, bound="memory",
                 timing_mode="graph", weight=0.4)])
    text = build_feedback(CONTRACT, result, ["[T=64 H=4096] _rms_norm_kernel: memory-bound at 81% of DRAM peak"])
    assert "Verdict: accepted." in text
    assert "T64-H4096 [T=64 H=4096 bf16, w=0.600]: t=4.00 us, roof=2.60 us, att=0.650, memory-bound" in text
    assert "T1-H8192 [T=1 H=8192 bf16, w=0.400]: t=2.00 us, roof=1.10 us, att=0.550, memory-bound" in text
    assert "Weighted attainment: 0.613; median attainment S_i: 0.550." in text
    assert "memory-bound at 81% of DRAM peak" in text
    assert "Failing line" not in text


def test_holdout_shapes_appear_only_as_counts():
    result = EvalResult(op="rms_norm", verdict="rejected", failed_stage="correctness", reasons=[
        "hold-out 3 (T=77, H=4099): max_rel_err 0.4",
        "out of bounds at element 315623 of x",          # 77 * 4099: a tensor size of the hidden shape
        "T64-H4096 passed"],
        shapes=[_visible("T64-H4096", {"T": 64, "H": 4096}, t_us=None),
                _hidden("holdout-a", {"T": 77, "H": 4099}, error="max_rel_err 0.4 at T=77"),
                _hidden("holdout-b", {"T": 3, "H": 5121}),
                _hidden("holdout-c", {"T": 1, "H": 4096})])
    text = build_feedback(CONTRACT, result, ["[T=77 H=4099] _rms_norm_kernel: latency-bound"])
    for leak in ("77", "4099", "5121", "315623", "holdout-a", "holdout-b"):
        assert leak not in text, leak
    assert "Hidden shapes: 2 passed, 1 failed" in text
    assert "T64-H4096 passed" in text          # visible facts survive
    assert "a hidden shape failed (details withheld" in text


def test_interpreter_results_say_timings_are_not_scores():
    result = EvalResult(op="rms_norm", verdict="accepted", interpreter=True,
                        shapes=[_visible("T64-H4096", {"T": 4, "H": 64}, timing_mode="interpreter", max_rel_err=1e-7)])
    text = build_feedback(CONTRACT, result, [])
    assert "CPU interpreter" in text and "passed (interpreter: no timing)" in text


def test_no_result_yet():
    assert "No evaluation yet" in build_feedback(CONTRACT, None, [])


def _ctx(**kw):
    base = dict(contract=CONTRACT, incumbent_source="import triton\n# INCUMBENT-MARKER\n", incumbent_score=0.41,
                feedback="FEEDBACK-MARKER: memory-bound", iteration=7,
                snippets=(Snippet("use eviction_policy='evict_first' on streamed loads", "notes", "", "Eviction"),
                          Snippet("tl.load(pointer, mask=None, other=None)", "api", "triton/language/core.py", "tl.load")),
                memory=(IterationRecord(3, "abc", "num_warps 4 -> 8", "", "rejected", "correctness", None,
                                        lesson="wrong rows"),))
    base.update(kw)
    return ProposalContext(**base)


def test_prompt_carries_contract_incumbent_feedback_snippets_and_memory():
    messages = build_prompt(_ctx())
    assert [m["role"] for m in messages] == ["system", "user"]
    system, user = messages[0]["content"], messages[1]["content"]
    assert "rms_norm(x[T,H], weight[H], eps=1e-6) -> [T,H]" in system
    assert "def rms_norm(x, weight, eps)" in system
    assert "bf16: atol=0.02, rel_l2=0.01, rtol=0.02" in system
    assert "T64-H4096: T=64 H=4096 bf16 weight=0.600" in system
    assert "INCUMBENT-MARKER" in user and "weighted attainment 0.410" in user
    assert "FEEDBACK-MARKER: memory-bound" in user
    assert "## [notes] Eviction\n" in user            # empty source: no "(source: )"
    assert "## [api] tl.load (source: triton/language/core.py)" in user
    assert "- #3 rejected at correctness score=n/a: num_warps 4 -> 8 -- wrong rows" in user
    assert "INCUMBENT-MARKER" not in system           # the system block stays stable (prompt caching)


def test_prompt_fence_is_longer_than_any_backtick_run_in_the_incumbent():
    src = 'import triton\nDOC = """```python\nx\n```"""\n'
    user = build_prompt(_ctx(incumbent_source=src, snippets=(), memory=()))[1]["content"]
    assert "````python\n" + src.strip() + "\n````" in user
    assert "Knowledge that may help" not in user and "What was tried" not in user


def test_corrective_message_names_the_function():
    msg = corrective_message(CONTRACT)
    assert msg["role"] == "user" and "def rms_norm(x, weight, eps)" in msg["content"]
