"""Reading a model's reply: the candidate kernel, its one-line summary, and secret scrubbing.

Models wrap code in fenced blocks, but not always tidily: a missing language tag, prose before
and after, several blocks (a snippet quoted from the prompt, then the full file), or a final
fence the reply was cut off before closing. `extract_kernel` takes every fenced block (and the
unterminated tail), keeps those that define the operator's function and an @triton.jit kernel,
prefers ones that parse, and returns the last of the best: models put their final answer last.
"""
from __future__ import annotations

import ast
import re

from agent.config import env

_FENCE = re.compile(r"^[ \t]*(`{3,}|~{3,})[ \t]*([\w+.-]*)[^\n]*$")
# Tags that are surely not Python; anything else (none, python, py, python3, text...) is tried.
_NOT_PYTHON = frozenset({"bash", "sh", "shell", "console", "json", "yaml", "cpp", "c", "cuda", "diff", "ptx"})


def fenced_blocks(text: str) -> list[tuple[str, str]]:
    """(language tag, body) of every fenced block, in order; an unclosed last fence runs to the end."""
    blocks: list[tuple[str, str]] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        fence, tag = m.group(1), m.group(2).lower()
        body: list[str] = []
        i += 1
        while i < len(lines):
            stripped = lines[i].strip()
            if stripped.startswith(fence[0] * len(fence)) and not stripped.strip(fence[0]):
                break
            body.append(lines[i])
            i += 1
        blocks.append((tag, "\n".join(body).strip("\n") + "\n"))
        i += 1
    return blocks


def _decorator_is_jit(dec: ast.expr) -> bool:
    node = dec.func if isinstance(dec, ast.Call) else dec
    name = node.attr if isinstance(node, ast.Attribute) else getattr(node, "id", "")
    return name == "jit"


def _defines(tree: ast.Module, function_name: str) -> tuple[bool, bool]:
    has_fn = any(isinstance(n, ast.FunctionDef) and n.name == function_name for n in tree.body)
    has_jit = any(isinstance(n, ast.FunctionDef) and any(_decorator_is_jit(d) for d in n.decorator_list)
                  for n in tree.body)
    return has_fn, has_jit


def defines_candidate(code: str, function_name: str) -> bool:
    """True when the file parses and defines `function_name` and at least one @triton.jit kernel."""
    return _rank(code, function_name) == 2


def _rank(code: str, function_name: str) -> int:
    """2: parses and defines both; 1: textually defines both but does not parse; 0: not a candidate."""
    try:
        has_fn, has_jit = _defines(ast.parse(code), function_name)
        return 2 if has_fn and has_jit else 0
    except SyntaxError:
        textual = re.search(rf"^def\s+{re.escape(function_name)}\s*\(", code, re.M) and "triton.jit" in code
        return 1 if textual else 0   # a broken kernel still reaches the sandbox, whose error is feedback


def _unfenced_code(text: str, function_name: str) -> str | None:
    """A reply that is bare code (no fences): from the first import to the end, trimming trailing prose."""
    lines = text.splitlines()
    start = next((i for i, ln in enumerate(lines) if re.match(r"^(import|from)\s+\w", ln)), None)
    if start is None:
        return None
    for end in range(len(lines), start, -1):
        code = "\n".join(lines[start:end]).rstrip() + "\n"
        try:
            if all(_defines(ast.parse(code), function_name)):
                return code
        except SyntaxError:
            continue
    return None


def extract_kernel(reply: str, function_name: str) -> str | None:
    """The candidate file in a reply, or None when the reply holds none."""
    best_rank, best = 0, None
    for tag, body in fenced_blocks(reply):
        if tag in _NOT_PYTHON:
            continue
        r = _rank(body, function_name)
        if r and r >= best_rank:   # >=: the last of equally good blocks wins
            best_rank, best = r, body
    if best is not None:
        return best
    return _unfenced_code(reply, function_name)


def summary_lines(reply: str) -> tuple[str, str]:
    """The reply's `CHANGED:` and `WHY:` lines (the prompt asks for both), else its first prose line."""
    def grab(label: str) -> str:
        m = re.search(rf"^\W*{label}\W*:?\**\s*(.+)$", reply, re.I | re.M)
        return m.group(1).strip().strip("*").strip() if m else ""

    changed, why = grab("changed"), grab("why")
    if not changed:
        prose = [ln.strip() for ln in reply.split("```", 1)[0].splitlines() if ln.strip()]
        changed = prose[0] if prose else ""
    return changed[:200], why[:300]


# --- secrets -------------------------------------------------------------------------------------

KEY_ENV_VARS = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "OPENROUTER_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY",
                "MISTRAL_API_KEY", "DEEPSEEK_API_KEY", "TOGETHER_API_KEY", "TOGETHERAI_API_KEY", "GROQ_API_KEY",
                "XAI_API_KEY", "FIREWORKS_API_KEY", "HOSTED_VLLM_API_KEY", "AZURE_API_KEY", "COHERE_API_KEY",
                "HF_TOKEN", "HUGGINGFACE_API_KEY", "LITELLM_API_KEY")
_KEY_PATTERNS = (
    re.compile(r"\bsk-[A-Za-z0-9_\-]{8,}"),                       # openai, anthropic (sk-ant-), openrouter (sk-or-)
    re.compile(r"\bAIza[0-9A-Za-z_\-]{20,}"),                     # google
    re.compile(r"\b(?:hf|gsk|xai|pplx|fw)_[A-Za-z0-9]{16,}"),     # huggingface, groq, xai, perplexity, fireworks
    re.compile(r"(?i)\bBearer\s+[A-Za-z0-9._\-]{8,}"),
    re.compile(r"(?i)((?:api[_-]?key|x-api-key|token|secret|authorization)[\"']?\s*[:=]\s*[\"']?)[^\s\"',}]{8,}"),
)


def scrub_secrets(text: str) -> str:
    """Replace anything that looks like an API key: the exact values of the key variables in the
    environment, and the usual key shapes. Used on every error message the proposer records."""
    if not text:
        return text
    for var in KEY_ENV_VARS:
        value = env(var)
        if value and len(value) >= 6:
            text = text.replace(value, "[REDACTED]")
    for pat in _KEY_PATTERNS:
        text = pat.sub(lambda m: (m.group(1) if m.groups() else "") + "[REDACTED]", text)
    return text
