# expect: reject
# stage: correctness
# op: qk_rms_norm
# needs: cpu
# dims: T=4 Hq=4 Hk=1 D=128 | T=3 Hq=3 Hk=2 D=96
# cause: exceed
# why: normalizes each head by the rms of all heads of its token (an RMSNorm over the [Hq*D] row, Qwen3's q_norm misread as a hidden-size norm): heads differ in scale, so each is scaled wrongly; right only where Hk = 1
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
    # the rms of the token's whole row (all H heads), as rms_norm over hidden would compute it
    ms = tl.zeros([ROWS], dtype=tl.float32)
    for hh in range(0, H):
        u = tl.load(x + (t * stride_t + hh * stride_h)[:, None] + cols[None, :], mask=m, other=0.0).to(tl.float32)
        ms += tl.sum(u * u, axis=1)
    ms = ms / (H * D)
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
