"""Seed softmax over the vocabulary: p = exp(x - max) / sum(exp(x - max)), fp32 math and fp32 output.

Split rows: a row of V = 32k-201k logits is cut into SPLITS contiguous chunks, one program each, so decode
batches of 1-64 rows still fill the GPU. Pass 1 (_softmax_partials_kernel) keeps a running max and a
rescaled running sum per lane over its chunk and writes one (max, sum) pair per chunk; pass 2
(_softmax_normalize_kernel) combines the row's pairs (a few dozen floats) and writes its chunk's
probabilities, re-reading x. Two launches, no host synchronization (graph-capturable).

Structural switches (0 is the earlier seed): at T = 256 rows of 129k-152k bf16 logits x is 66-78 MB, more than
the H200's 50 MB L2, so pass 2 re-reads it from DRAM. REVERSE=1 runs pass 2's programs in the reverse order
(last row and chunk first): pass 1 ended on those, so the first part of pass 2 finds them still in L2 instead
of starting on the oldest (already evicted) lines. PASS1_EVICT_LAST=1 loads pass 1's tiles with
evict_last, asking L2 to keep them for the re-read.

Four more (0 or 1 is the seed before 2026-12-03; GROUP = 8 is the default now, the other three measured no
better on the H200 and stay off: benchmarks/results/new_ops_h200.md, session 15):
- GROUP = G > 1: pass 1 takes the max of each thread's G contiguous logits first (an in-register reduction
  of a [BLOCK_V / G, G] view) and rescales one running sum per group, so a logit costs one exp, not two
  (the rescale's exp is one per G). At T = 64-256 rows of 129k-152k logits pass 1 issues about as many
  exps as bytes it reads per ns of DRAM bandwidth: the exp unit, not memory, paced it.
- ROW_GROUP_BYTES = N > 0: when x is larger than N bytes, both passes run over groups of rows of at most N
  bytes, pass 1 then pass 2 for each group in turn, so pass 2 re-reads a group pass 1 has just left in L2
  rather than the first rows of a 66-78 MB input the L2 has long evicted.
- STORE_CS: pass 2 stores with the streaming hint (.cs), so the fp32 output (twice the bytes of bf16 x)
  passes through L2 without pushing out the x pass 2 is about to re-read.
- STAGES = S > 1: both passes' loops prefetch S - 1 tiles ahead (cp.async into shared memory, Triton's
  pipeliner); 1 is a plain loop, one 16-byte load a thread in flight, then its arithmetic. More bytes in
  flight per SM is what a streaming pass needs to reach DRAM bandwidth (Little's law).

ONE_READ = 1 (on a GPU, for an x larger than ONE_READ_MIN_BYTES; the default from 2026-12-04) reads x once:
each program holds one chunk of ONE_READ_BLOCK logits of a row in registers, publishes its chunk's (max, sum)
and waits until every chunk of its row has, then writes its probabilities from the registers. That is 6 bytes
an element for bf16 input against the two passes' 8 (Q counts 6), in one launch. The wait needs every chunk of
a row running at once: a program takes its chunk from a ticket (an atomic counter, in the order programs
start), so it only waits for chunks of its row that hold lower or nearby tickets; the lowest unfinished row's
started chunks hold at most all but one of its chunks, and a row never has more chunks than the GPU has SMs
(`_row_fits_at_once`; else the two passes), so a slot is always free for the next ticket and the wait ends.
Each (max, sum) pair is one 64-bit word written by one atomic exchange, the word itself the flag: a workspace
filled with -1 (whose low half has the sign bit set, which a sum of exps never has) means not yet published.
The wait is bounded (ONE_READ_MAX_SPINS rounds): a chunk that never arrives leaves NaN in the row's output,
never a plausible wrong value. Under Triton's interpreter programs run one after another, so a chunk could wait
for one that has not started: on the CPU the one-read path runs only when a row is one chunk.
"""
import torch
import triton
import triton.language as tl

# BLOCK_V: elements a program handles per step; TARGET_PROGRAMS: programs the split aims for (a multiple
# of the H200's 132 SMs), so SPLITS = TARGET_PROGRAMS / T chunks per row, at least one tile each.
# REVERSE with 8 warps: the variant `reverse_b2048_w8`, 14-18% faster than the earlier seed on every hot shape on
# the H200 (2026-12-02). GROUP 8 with 4096-wide steps: the variant `group8_b4096`, 0.85-0.93 of that on every hot
# shape (2026-12-03: T256-V151936 90.0 us against 98.1, T64-V129280 19.8 against 23.3; new_ops_h200.md).
# STORE_CS 1 with REVERSE 0: found by `aka optimize` (the offline search) at the T = 64 shapes on an H100 (session
# 31, benchmarks/results/optimize_h200.md), then timed beside the seed on all seven hot shapes in 5 paired rounds on
# an H100 (2026-12-07, softmax_search_h100.md): 0.914-0.924 of the seed's time in every round at T = 64, 0.976-1.010
# at T = 2, 0.992-1.010 at T = 256 (the one-read path, which has neither switch). Not yet timed on the H200 (the
# variant `before_s32` restores the earlier pair).
CONFIGS = {
    "BLOCK_V": 4096,
    "TARGET_PROGRAMS": 528,
    "MAX_SPLITS": 64,
    "num_warps": 8,
    "REVERSE": 0,
    "PASS1_EVICT_LAST": 0,
    "GROUP": 8,
    "ROW_GROUP_BYTES": 0,
    "STORE_CS": 1,
    "STAGES": 1,
    # the one-read path: a chunk a program; the chunk halves (down to ONE_READ_MIN_BLOCK) while the grid has
    # fewer than TARGET_PROGRAMS programs, so a few rows still fill the GPU. Only for an x of more than
    # ONE_READ_MIN_BYTES: a smaller x stays in the 50 MB L2 for the two passes' re-read, and there the two passes
    # were faster (2026-12-04: T = 64, V = 129280-151936, 19-23 MB: 19.8-23.6 us against 22.5-25.5; T = 256,
    # 66-78 MB: one read 72.8-79.4 against 76.1-89.4; the variants `two_pass` and the seed, new_ops_h200.md)
    "ONE_READ": 1,
    "ONE_READ_MIN_BYTES": 48 << 20,
    "ONE_READ_BLOCK": 8192,
    "ONE_READ_MIN_BLOCK": 2048,
    "ONE_READ_WARPS": 8,
    "ONE_READ_MAX_SPINS": 1 << 22,
    # the wait's polls as plain volatile loads instead of atomic reads (_read_words): at T = 256 some 4096 programs
    # each poll their row's words while the others publish theirs by atomics on the same lines. Untimed (the
    # variant `one_read_poll_loads`, 2026-12-06); 0 keeps the atomic reads.
    "ONE_READ_POLL_LOADS": 0,
    # Programmatic dependent launch on GPUs that have it (compute capability 9+): each kernel may start while the
    # one before it in the stream finishes (pass 2 while pass 1 drains), waits for it (gdc_wait) before its first
    # load and lets the next one start at once (gdc_launch_dependents). 1: for an x of at most PDL_MAX_BYTES;
    # 2: every call; 0: none. On an H100 (2026-12-05, benchmarks/results/session22_h100.md, one timing a shape,
    # PDL on every call) it took 0.79 / 0.80 of the time at T = 2 (1.0-1.2 MB, two passes of about 2.5 us:
    # 4.00 / 4.31 us at V = 129280 / 151936 against 5.08 / 5.42), 1.03 at T = 64 (19-23 MB, two passes:
    # 29.98 / 25.10 against 29.22 / 24.27) and 1.00 at T = 256 (the one-read path). Not yet timed on the H200.
    "PDL": 1,
    "PDL_MAX_BYTES": 4 << 20,
}
SEARCH_SPACE = {"REVERSE": [0, 1], "PASS1_EVICT_LAST": [0, 1], "GROUP": [1, 4, 8], "STORE_CS": [0, 1],
                "STAGES": [1, 2, 3],
                "ROW_GROUP_BYTES": [0, 16 << 20, 24 << 20, 32 << 20],
                "ONE_READ": [0, 1], "ONE_READ_MIN_BYTES": [0, 24 << 20, 48 << 20],
                "ONE_READ_BLOCK": [4096, 8192, 16384], "ONE_READ_WARPS": [4, 8, 16], "ONE_READ_POLL_LOADS": [0, 1],
                "PDL": [0, 1, 2]}


@triton.jit
def _softmax_partials_kernel(x_ptr, part_ptr, V, stride_x, CHUNK, SPLITS, BLOCK_V: tl.constexpr,
                             EVICT_LAST: tl.constexpr, GROUP: tl.constexpr, STAGES: tl.constexpr,
                             USE_PDL: tl.constexpr = False):
    if USE_PDL:
        tl.extra.cuda.gdc_wait()
        tl.extra.cuda.gdc_launch_dependents()
    row = tl.program_id(0).to(tl.int64)
    split = tl.program_id(1)
    start = split * CHUNK
    end = tl.minimum(start + CHUNK, V)
    cols = tl.arange(0, BLOCK_V)
    # A finite floor instead of -inf for the running max: lanes that only ever see the masked tail keep
    # m = -1e30 and s = 0, and no -inf - -inf (NaN) is ever formed.
    m = tl.full([BLOCK_V // GROUP], -1.0e30, tl.float32)
    s = tl.zeros([BLOCK_V // GROUP], dtype=tl.float32)
    for off in tl.range(start, end, BLOCK_V, num_stages=STAGES):
        c = off + cols
        if EVICT_LAST:
            x = tl.load(x_ptr + row * stride_x + c, mask=c < end, other=float("-inf"),
                        eviction_policy="evict_last").to(tl.float32)
        else:
            x = tl.load(x_ptr + row * stride_x + c, mask=c < end, other=float("-inf")).to(tl.float32)
        if GROUP > 1:
            # each group is GROUP contiguous logits, the ones a thread's vector load brought in: the max and
            # the sum below stay in registers
            xg = tl.reshape(x, [BLOCK_V // GROUP, GROUP])
            m_new = tl.maximum(m, tl.max(xg, axis=1))
            s = s * tl.exp(m - m_new) + tl.sum(tl.exp(xg - m_new[:, None]), axis=1)
        else:
            m_new = tl.maximum(m, x)
            s = s * tl.exp(m - m_new) + tl.exp(x - m_new)
        m = m_new
    m_all = tl.max(m, axis=0)
    s_all = tl.sum(s * tl.exp(m - m_all), axis=0)
    base = part_ptr + (row * SPLITS + split) * 2
    tl.store(base, m_all)
    tl.store(base + 1, s_all)


@triton.jit
def _softmax_normalize_kernel(x_ptr, part_ptr, y_ptr, V, stride_x, stride_y, CHUNK, SPLITS,
                              BLOCK_V: tl.constexpr, BLOCK_S: tl.constexpr, REVERSE: tl.constexpr,
                              STORE_CS: tl.constexpr, STAGES: tl.constexpr, USE_PDL: tl.constexpr = False):
    if USE_PDL:
        tl.extra.cuda.gdc_wait()
        tl.extra.cuda.gdc_launch_dependents()
    if REVERSE:     # the programs pass 1 ran last first: their tiles are the ones still in L2
        row = (tl.num_programs(0) - 1 - tl.program_id(0)).to(tl.int64)
        split = tl.num_programs(1) - 1 - tl.program_id(1)
    else:
        row = tl.program_id(0).to(tl.int64)
        split = tl.program_id(1)
    sp = tl.arange(0, BLOCK_S)
    pm = tl.load(part_ptr + (row * SPLITS + sp) * 2, mask=sp < SPLITS, other=-1.0e30)
    ps = tl.load(part_ptr + (row * SPLITS + sp) * 2 + 1, mask=sp < SPLITS, other=0.0)
    m = tl.max(pm, axis=0)
    total = tl.sum(ps * tl.exp(pm - m), axis=0)
    inv = 1.0 / total
    start = split * CHUNK
    end = tl.minimum(start + CHUNK, V)
    cols = tl.arange(0, BLOCK_V)
    for off in tl.range(start, end, BLOCK_V, num_stages=STAGES):
        c = off + cols
        mask = c < end
        x = tl.load(x_ptr + row * stride_x + c, mask=mask, other=float("-inf"),
                    eviction_policy="evict_first").to(tl.float32)
        if STORE_CS:
            tl.store(y_ptr + row * stride_y + c, tl.exp(x - m) * inv, mask=mask, cache_modifier=".cs")
        else:
            tl.store(y_ptr + row * stride_y + c, tl.exp(x - m) * inv, mask=mask)


@triton.jit
def _read_words(slots, sp, smask, POLL_LOADS: tl.constexpr):
    """The row's packed (max, sum) words: atomic reads (acquire), or with POLL_LOADS plain volatile loads, which
    take no L2 atomic unit and suffice: a word is its own flag and its whole payload, written by one 64-bit
    atomic exchange, and an aligned 64-bit load sees either the -1 or the whole word (nothing else written by
    another program is read after it, so no acquire ordering is needed)."""
    if POLL_LOADS:
        return tl.load(slots + sp, mask=smask, other=0, volatile=True)
    return tl.atomic_add(slots + sp, 0, mask=smask, sem="acquire")


@triton.jit
def _softmax_one_read_kernel(x_ptr, ws_ptr, y_ptr, V, stride_x, stride_y, SPLITS, max_spins,
                             BLOCK: tl.constexpr, BLOCK_S: tl.constexpr, POLL_LOADS: tl.constexpr = False,
                             USE_PDL: tl.constexpr = False):
    # ws[0]: the ticket counter (from -1); ws[1 + row * SPLITS + chunk]: the chunk's packed (max, sum), -1
    # until published
    if USE_PDL:
        tl.extra.cuda.gdc_wait()
        tl.extra.cuda.gdc_launch_dependents()
    ticket = tl.atomic_add(ws_ptr, 1) + 1
    row = (ticket // SPLITS).to(tl.int64)
    chunk = ticket % SPLITS
    c = chunk * BLOCK + tl.arange(0, BLOCK)
    mask = c < V
    x = tl.load(x_ptr + row * stride_x + c, mask=mask, other=float("-inf")).to(tl.float32)
    m = tl.maximum(tl.max(x, axis=0), -1.0e30)        # a finite floor: an all -inf chunk gives e = 0, not NaN
    e = tl.exp(x - m)
    s = tl.sum(e, axis=0)
    # the high word the max's bits, the low word the sum's with the sign bit cleared (a sum of exps is >= 0
    # or NaN): a published word never equals the -1 of an empty slot
    m_bits = m.to(tl.int32, bitcast=True).to(tl.int64)
    s_bits = (s.to(tl.int32, bitcast=True) & 0x7FFFFFFF).to(tl.int64)
    slots = ws_ptr + 1 + row * SPLITS
    tl.atomic_xchg(slots + chunk, (m_bits << 32) | s_bits, sem="release")
    sp = tl.arange(0, BLOCK_S)
    smask = sp < SPLITS
    words = _read_words(slots, sp, smask, POLL_LOADS)
    pending = tl.sum((smask & (words == -1)).to(tl.int32), axis=0)
    spins = 0
    while pending > 0:
        words = _read_words(slots, sp, smask, POLL_LOADS)
        pending = tl.sum((smask & (words == -1)).to(tl.int32), axis=0)
        spins += 1
        pending = tl.where(spins >= max_spins, 0, pending)     # give up: the -1 words unpack to NaN below
    pm = (words >> 32).to(tl.int32).to(tl.float32, bitcast=True)
    ps = (words & 0xFFFFFFFF).to(tl.int32).to(tl.float32, bitcast=True)
    pm = tl.where(smask, pm, -1.0e30)
    ps = tl.where(smask, ps, 0.0)
    m_row = tl.max(pm, axis=0)
    total = tl.sum(ps * tl.exp(pm - m_row), axis=0)
    scale = tl.exp(m - m_row) / total
    tl.store(y_ptr + row * stride_y + c, e * scale, mask=mask)


def _split(T: int, V: int, block_v: int) -> tuple[int, int]:
    """(chunk, splits): chunks of whole tiles, none empty, about TARGET_PROGRAMS programs in all."""
    tiles = triton.cdiv(V, block_v)
    want = max(1, min(CONFIGS["MAX_SPLITS"], tiles, triton.cdiv(CONFIGS["TARGET_PROGRAMS"], T)))
    chunk = triton.cdiv(tiles, want) * block_v
    return chunk, triton.cdiv(V, chunk)


def _row_groups(T: int, row_bytes: int) -> list[tuple[int, int]]:
    """[(first row, end row)] of the groups both passes run over in turn: all T rows at once unless
    ROW_GROUP_BYTES is set and x is larger, then equal groups of at most that many bytes (one row at least)."""
    limit = CONFIGS["ROW_GROUP_BYTES"]
    if limit <= 0 or T * row_bytes <= limit:
        return [(0, T)]
    n = triton.cdiv(T, max(1, limit // row_bytes))
    size = triton.cdiv(T, n)
    return [(r, min(r + size, T)) for r in range(0, T, size)]


def _softmax_rows(x, y, part, block_v: int) -> None:
    """Both passes over the rows of x (a [T, V] view), into y (a [T, V] view)."""
    T, V = x.shape
    chunk, splits = _split(T, V, block_v)
    part = part[:T * splits * 2]
    grid = (T, splits)
    pdl = _pdl_for(x)
    _softmax_partials_kernel[grid](x, part, V, x.stride(0), chunk, splits, BLOCK_V=block_v,
                                   EVICT_LAST=CONFIGS["PASS1_EVICT_LAST"], GROUP=CONFIGS["GROUP"],
                                   STAGES=CONFIGS["STAGES"], USE_PDL=pdl, launch_pdl=pdl,
                                   num_warps=CONFIGS["num_warps"])
    _softmax_normalize_kernel[grid](x, part, y, V, x.stride(0), y.stride(0), chunk, splits, BLOCK_V=block_v,
                                    BLOCK_S=triton.next_power_of_2(splits), REVERSE=CONFIGS["REVERSE"],
                                    STORE_CS=CONFIGS["STORE_CS"], STAGES=CONFIGS["STAGES"], USE_PDL=pdl,
                                    launch_pdl=pdl, num_warps=CONFIGS["num_warps"])


def _pdl(t) -> bool:
    """CONFIGS["PDL"] on a GPU with programmatic dependent launch (compute capability 9 and later)."""
    return bool(CONFIGS["PDL"]) and t.is_cuda and torch.cuda.get_device_capability(t.device)[0] >= 9


def _pdl_for(x) -> bool:
    """Whether this call launches with PDL: _pdl, and x at most PDL_MAX_BYTES unless PDL is 2 (every call)."""
    return _pdl(x) and (CONFIGS["PDL"] == 2 or x.numel() * x.element_size() <= CONFIGS["PDL_MAX_BYTES"])


def _one_read_block(T: int, V: int) -> int:
    """The one-read path's chunk: ONE_READ_BLOCK, halved while T rows give fewer than TARGET_PROGRAMS
    programs, never below ONE_READ_MIN_BLOCK (nor above the row's width rounded up to a power of two)."""
    block = min(CONFIGS["ONE_READ_BLOCK"], max(16, triton.next_power_of_2(V)))
    while block > CONFIGS["ONE_READ_MIN_BLOCK"] and T * triton.cdiv(V, block) < CONFIGS["TARGET_PROGRAMS"]:
        block //= 2
    return block


def _sm_count(x) -> int:
    return torch.cuda.get_device_properties(x.device).multi_processor_count


def _row_fits_at_once(splits: int, sm_count: int) -> bool:
    """Whether a row's chunks can all run at once, which the one-read wait needs to end: a GPU runs at least one
    program an SM (any that launches at all), so a row of at most sm_count chunks always can. More (a small GPU,
    a vocabulary of more than sm_count * ONE_READ_MIN_BLOCK) take the two passes."""
    return splits <= sm_count


def _softmax_one_read(x, y, block: int) -> None:
    """Softmax of x's rows into y, x read once (see ONE_READ above); one fill of the workspace, one launch."""
    T, V = x.shape
    splits = triton.cdiv(V, block)
    ws = torch.full((1 + T * splits,), -1, dtype=torch.int64, device=x.device)
    pdl = _pdl_for(x)
    _softmax_one_read_kernel[(T * splits,)](x, ws, y, V, x.stride(0), y.stride(0), splits,
                                             CONFIGS["ONE_READ_MAX_SPINS"], BLOCK=block,
                                             BLOCK_S=triton.next_power_of_2(splits),
                                             POLL_LOADS=bool(CONFIGS["ONE_READ_POLL_LOADS"]), USE_PDL=pdl,
                                             launch_pdl=pdl,
                                             num_warps=CONFIGS["ONE_READ_WARPS"])


def softmax(x):
    if x.dim() != 2:
        raise ValueError(f"softmax expects x[T,V]; got x {tuple(x.shape)}")
    if x.stride(1) != 1:
        x = x.contiguous()
    T, V = x.shape
    y = torch.empty((T, V), dtype=torch.float32, device=x.device)
    if T == 0 or V == 0:
        return y
    if CONFIGS["ONE_READ"] and T * V * x.element_size() > CONFIGS["ONE_READ_MIN_BYTES"]:
        block = _one_read_block(T, V)
        # the interpreter runs programs in turn: one chunk a row only
        if block >= V or (x.is_cuda and _row_fits_at_once(triton.cdiv(V, block), _sm_count(x))):
            _softmax_one_read(x, y, block)
            return y
    block_v = CONFIGS["BLOCK_V"]
    groups = _row_groups(T, V * x.element_size())
    # one partials buffer, as large as the most any group needs (a shorter last group can take more splits a
    # row, and more pairs in all); groups run one after another on the stream
    pairs = max((r1 - r0) * _split(r1 - r0, V, block_v)[1] for r0, r1 in groups)
    part = torch.empty(pairs * 2, dtype=torch.float32, device=x.device)
    for r0, r1 in groups:
        _softmax_rows(x[r0:r1], y[r0:r1], part, block_v)
    return y
