# expect: accept
# op: qk_rms_norm
# needs: cpu
# why: two launches of one row kernel, one for q with wq and one for k with wk; each program normalizes ROWS head rows taken from the flattened (token, head) index through the tensor's strides, the sum of squares over D in fp32
import torch
import triton
import triton.language as tl


@triton.jit
def _head_rows_kernel(x, w, y, N, H, D, stride_t, stride_h, eps, ROWS: tl.constexpr, BLOCK_D: tl.constexpr):
    r = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    rmask = r < N
    t = (r // H).to(tl.int64)
    h = (r % H).to(tl.int64)
    cols = tl.arange(0, BLOCK_D)
    m = rmask[:, None] & (cols < D)[None, :]
    v = tl.load(x + (t * stride_t + h * stride_h)[:, None] + cols[None, :], mask=m, other=0.0).to(tl.float32)
    ms = tl.sum(v * v, axis=1) / D
    g = tl.load(w + cols, mask=cols < D, other=0.0).to(tl.float32)
    out = v / tl.sqrt(ms + eps)[:, None] * g[None, :]
    tl.store(y + r.to(tl.int64)[:, None] * D + cols[None, :], out.to(y.dtype.element_ty), mask=m)


def _launch(x, w, eps):
    T, H, D = x.shape
    y = torch.empty((T, H, D), dtype=x.dtype, device=x.device)
    rows = 4
    _head_rows_kernel[(triton.cdiv(T * H, rows),)](x, w, y, T * H, H, D, x.stride(0), x.stride(1), eps, ROWS=rows,
                                                   BLOCK_D=triton.next_power_of_2(D))
    return y


def qk_rms_norm(q, k, wq, wk, eps=1e-6):
    return _launch(q, wq, eps), _launch(k, wk, eps)
