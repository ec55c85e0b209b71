"""GPU (NVIDIA): the graph-pinned decode sequences through flyaot.compat.aiter, captured in a CUDA graph
and replayed with new context lengths: SGLang's FP4 one and vLLM's FP8 one. Cubins compiled here with
nvcc stand in for flyaot's kernels of those sequences (same symbols and arguments as their code
objects): the varctx schedule kernel (one thread writes the table serially, by the rule of the torch
reference), the staged FP4 decode kernel (each CTA writes weight_scale * (row + 1) over the visible
tokens of the chunks its cta_info row names) and the FP8 paged varctx kernel (each CTA writes its row's
first weight over the visible tokens of the 64-token chunks its schedule row names), so the output shows
which schedule the replay ran."""
import os
import shutil
import subprocess

import pytest
import torch

pytestmark = pytest.mark.gpu

DECODE_PARAMS = {"path": "staged", "heads": 64, "head_dim": 128, "page_size": 64, "block_k": 256, "num_warps": 4,
                 "weight_load": "vector"}
DECODE_SYMBOL = "mqa_decode_staged_h64_d128_p64_bk256_w4"
DECODE_SOURCE = r"""
extern "C" __global__ void %s(float *out, const void *q, const void *q_scale, const void *kv_cache,
        const void *kv_scale, const int *block_tables, const void *weights, const int *cta_info, int next_n,
        int max_seq_len, long long stride_out, long long stride_kv, long long stride_ks, int stride_bt,
        float weight_scale, int rows, int num_pages, int bt_width) {
    const int *c = cta_info + 4 * blockIdx.x;
    int row = c[0], start = c[1] * 256, end = (c[1] + c[2]) * 256, ctx = c[3];
    int limit = min(ctx - next_n + 1 + row %% next_n, max_seq_len);
    for (int t = start + (int)threadIdx.x; t < end && t < limit; t += blockDim.x)
        out[row * stride_out + t] = weight_scale * (float)(row + 1);
}
""" % DECODE_SYMBOL
# (name, ctype, offset): the kernel's parameters as the C ABI lays them out
DECODE_ARGS = [("out", "void*", 0), ("q", "void*", 8), ("q_scale", "void*", 16), ("kv_cache", "void*", 24),
               ("kv_scale", "void*", 32), ("block_tables", "void*", 40), ("weights", "void*", 48),
               ("cta_info", "void*", 56), ("next_n", "int32_t", 64), ("max_seq_len", "int32_t", 68),
               ("stride_out", "int64_t", 72), ("stride_kv", "int64_t", 80), ("stride_ks", "int64_t", 88),
               ("stride_bt", "int32_t", 96), ("weight_scale", "float", 100), ("rows", "int32_t", 104),
               ("num_pages", "int32_t", 108), ("bt_width", "int32_t", 112)]

SCHEDULE_PARAMS = {"layout": "varctx"}
SCHEDULE_SYMBOL = "mqa_runs_schedule_varctx"
SCHEDULE_SOURCE = r"""
__device__ long long chunks_of(const int *lens, int i, int block_k, int max_seq_len) {
    long long x = lens[i] < 0 ? 0 : lens[i];
    if (x > max_seq_len) x = max_seq_len;
    return (x + block_k - 1) / block_k;
}

__device__ long long runs_needed(const int *lens, int items, int block_k, int max_seq_len, long long s) {
    long long total = 0;
    for (int i = 0; i < items; ++i) total += (chunks_of(lens, i, block_k, max_seq_len) + s - 1) / s;
    return total;
}

extern "C" __global__ void mqa_runs_schedule_varctx(int *cta_info, int *safe_out, const int *context_lens,
        int items, int slots, int next_n, int block_k, int max_seq_len, int rounds) {
    if (threadIdx.x != 0 || blockIdx.x != 0) return;
    long long s_max = ((long long)max_seq_len + block_k - 1) / block_k, longest = 0;
    if (s_max < 1) s_max = 1;
    for (int i = 0; i < items; ++i) {
        long long c = chunks_of(context_lens, i, block_k, max_seq_len);
        if (c > longest) longest = c;
    }
    long long lo = 1, hi = s_max;
    for (int r = 0; r < rounds; ++r) {
        long long mid = (lo + hi) / 2;
        if (runs_needed(context_lens, items, block_k, max_seq_len, mid) <= slots) hi = mid; else lo = mid + 1;
    }
    long long safe = runs_needed(context_lens, items, block_k, max_seq_len, hi) <= slots ? hi
                     : (longest > 1 ? longest : 1);
    long long k = 0;
    for (int i = 0; i < items; ++i) {
        long long c = chunks_of(context_lens, i, block_k, max_seq_len);
        int ctx = context_lens[i] < 0 ? 0 : context_lens[i];
        for (long long start = 0; start < c && k < slots; start += safe, ++k)
            for (int n = 0; n < next_n; ++n) {
                int *row = cta_info + 4 * (k * next_n + n);
                row[0] = i * next_n + n; row[1] = (int)start; row[2] = (int)(c - start < safe ? c - start : safe);
                row[3] = ctx;
            }
    }
    for (; k < slots; ++k)
        for (int n = 0; n < next_n; ++n) {
            int *row = cta_info + 4 * (k * next_n + n);
            row[0] = 0; row[1] = 0; row[2] = 1; row[3] = 0;
        }
    *safe_out = (int)safe;
}
"""
SCHEDULE_ARGS = [("cta_info", "void*", 0), ("safe", "void*", 8), ("context_lens", "void*", 16),
                 ("items", "int32_t", 24), ("slots", "int32_t", 28), ("next_n", "int32_t", 32),
                 ("block_k", "int32_t", 36), ("max_seq_len", "int32_t", 40), ("rounds", "int32_t", 44)]

FP8_PARAMS = {"path": "paged", "heads": 64, "head_dim": 128, "page_size": 64, "layout": "preshuffle",
              "grid": "varctx"}
FP8_SYMBOL = "mqa_fp8_paged_h64_d128_p64_preshuffle_varctx"
FP8_SOURCE = r"""
extern "C" __global__ void mqa_fp8_paged_h64_d128_p64_preshuffle_varctx(float *out, const void *q,
        const void *kv_cache, const float *weights, const int *context_lens, const int *block_tables,
        const int *schedule, int next_n, int max_model_len, long long stride_out, long long stride_kv, int stride_w,
        int stride_bt, int num_pages, int bt_width, int batch) {
    const int *s = schedule + 4 * next_n * blockIdx.x;
    int row0 = s[0], first = s[1], count = s[2], ctx = s[3];
    if (row0 < 0 || row0 / next_n >= batch) return;
    for (int c = first; c < first + count; ++c)
        for (int n = 0; n < next_n; ++n) {
            int row = row0 + n, limit = min(ctx - next_n + 1 + n, max_model_len);
            for (int t = 64 * c + (int)threadIdx.x; t < 64 * (c + 1) && t < limit; t += blockDim.x)
                out[row * stride_out + t] = weights[(long long)row * stride_w];
        }
}
"""
FP8_ARGS = [("out", "void*", 0), ("q", "void*", 8), ("kv_cache", "void*", 16), ("weights", "void*", 24),
            ("context_lens", "void*", 32), ("block_tables", "void*", 40), ("schedule", "void*", 48),
            ("next_n", "int32_t", 56), ("max_model_len", "int32_t", 60), ("stride_out", "int64_t", 64),
            ("stride_kv", "int64_t", 72), ("stride_w", "int32_t", 80), ("stride_bt", "int32_t", 84),
            ("num_pages", "int32_t", 88), ("bt_width", "int32_t", 92), ("batch", "int32_t", 96)]

# (family, params, symbol, CUDA source, arguments, workgroup, kernarg bytes) of each stand-in
STAND_INS = [("mqa_decode", DECODE_PARAMS, DECODE_SYMBOL, DECODE_SOURCE, DECODE_ARGS, [256, 1, 1], 116),
             ("mqa_runs_schedule", SCHEDULE_PARAMS, SCHEDULE_SYMBOL, SCHEDULE_SOURCE, SCHEDULE_ARGS, [256, 1, 1], 48),
             ("mqa_fp8", FP8_PARAMS, FP8_SYMBOL, FP8_SOURCE, FP8_ARGS, [64, 1, 1], 100)]
SIZES = {"void*": 8, "int32_t": 4, "int64_t": 8, "float": 4}


@pytest.fixture
def stand_in(tmp_path, monkeypatch):
    if torch.version.hip or not torch.cuda.is_available():
        pytest.skip("the cubin stand-in needs an NVIDIA GPU")
    nvcc = shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"
    if not os.path.exists(nvcc):
        pytest.skip("nvcc not found")
    import sys
    sys.path.insert(0, str(__import__("pathlib").Path(__file__).parents[1] / "runtime"))
    from runtime_helpers import write_store

    from flyaot import runtime
    from flyaot.formats.manifest import Spec
    from flyaot.runtime.dispatch import current_id
    major, minor = torch.cuda.get_device_capability(0)
    target = f"sm_{major}{minor}"
    specs = {}
    for family, params, symbol, source, args, block, kernarg_size in STAND_INS:
        (tmp_path / f"{symbol}.cu").write_text(source)
        subprocess.run([nvcc, "--cubin", f"-arch={target}", "-o", str(tmp_path / f"{symbol}.cubin"),
                        str(tmp_path / f"{symbol}.cu")], check=True, capture_output=True, timeout=300)
        spec = Spec.make(family, params, target)
        entry = {"family": family, "params": params, "key": spec.key, "symbol": symbol, "block": block,
                 "kernarg_size": kernarg_size, "kernarg_align": 8,
                 "args": [{"name": n, "ctype": c, "kind": "global_buffer" if c == "void*" else "by_value",
                           "offset": o, "size": SIZES[c]} for n, c, o in args],
                 "resources": {"vgpr": 0, "agpr": 0, "sgpr": 0, "lds": 0, "scratch": 0, "vgpr_spill": 0,
                               "sgpr_spill": 0, "wavefront_size": 32, "max_workgroup_size": 1024,
                               "uses_dynamic_stack": False}}
        # The entry's id is the content id a build from these kernel sources gets, so the runtime serves it.
        specs[current_id(spec)] = (entry, (tmp_path / f"{symbol}.cubin").read_bytes())
    store = write_store(tmp_path / "store", target, specs)
    monkeypatch.setenv("FLYAOT_PREBUILT_PATH", str(store))
    monkeypatch.setenv("FLYAOT_DISABLE_JIT", "1")
    runtime.reset()
    yield
    runtime.reset()


def _inputs(batch, pages, dev):
    u8 = dict(dtype=torch.uint8, device=dev)
    return (torch.zeros(batch, 1, 64, 64, **u8), torch.zeros(batch, 1, 1, 4, 16, 4, **u8),
            torch.zeros(pages, 1, 4, 64, 16, **u8), torch.zeros(pages, 1, 4, 64, **u8),
            torch.zeros(batch, 8, dtype=torch.int32, device=dev), torch.zeros(batch, 64, dtype=torch.bfloat16, device=dev))


def _expected(lens, msl, weight_scale, fill):
    rows = len(lens)
    want = torch.full((rows, msl), fill)
    for r, c in enumerate(lens):
        want[r, :min(c, msl)] = weight_scale * (r + 1)
    return want


def test_graph_pinned_decode_captures_and_replays(stand_in):
    from flyaot.compat import aiter
    from flyaot.kernel_defs.mqa_runs_schedule.reference import varctx_reference
    dev, batch, msl, units = torch.device("cuda"), 3, 512, 8
    q, qs, kv, ks, bt, w = _inputs(batch, 16, dev)
    lens = torch.tensor([300, 5, 0], dtype=torch.int32, device=dev)
    cta_info = torch.empty(units, 4, dtype=torch.int32, device=dev)
    out = torch.empty(batch, msl, device=dev)

    def step():
        aiter.compute_varctx_schedule(lens, 256, units, msl, next_n=1, cta_info_out=cta_info)
        out.fill_(float("-inf"))
        aiter.flydsl_pa_mqa_logits_fp4(q, qs, kv, ks, bt, w, lens, msl, next_n=1, block_k=256, kv_block_size=64,
                                       num_warps=4, weight_scale=0.5, cta_info=cta_info, total_ctas=units, out=out)

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        step()                                             # loads the module outside the capture
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    assert torch.equal(out.cpu(), _expected([300, 5, 0], msl, 0.5, float("-inf")))
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        step()
    for new in ([512, 0, 257], [1, 600, 64]):
        lens.copy_(torch.tensor(new, dtype=torch.int32))
        graph.replay()
        torch.cuda.synchronize()
        assert torch.equal(cta_info.cpu(), varctx_reference(lens.cpu(), 256, units, msl, 1)[0]), new
        assert torch.equal(out.cpu(), _expected(new, msl, 0.5, float("-inf"))), new


def test_graph_pinned_fp8_sequence_captures_and_replays(stand_in):
    """vLLM's ROCm indexer step: the schedule, then the preshuffled 64-token-page kernel on it."""
    from flyaot.compat import aiter
    from flyaot.kernel_defs.mqa_runs_schedule.reference import varctx_reference
    dev, batch, next_n, msl = torch.device("cuda"), 3, 2, 512
    u8 = dict(dtype=torch.uint8, device=dev)
    q, kv = torch.zeros(batch, next_n, 64, 128, **u8), torch.zeros(24, 64, 1, 132, **u8)
    bt = torch.zeros(batch, 8, dtype=torch.int32, device=dev)
    w = (torch.arange(batch * next_n, dtype=torch.float32, device=dev)[:, None] + 1).expand(-1, 64).contiguous()
    lens = torch.tensor([300, 5, 0], dtype=torch.int32, device=dev)
    out = torch.empty(batch * next_n, msl, device=dev)
    tables = []

    def step():
        sched = aiter.deepgemm_fp8_paged_mqa_logits_schedule(batch, next_n, lens, msl, ChunkK=256, WavePerEU=2)
        name = aiter.deepgemm_fp8_paged_mqa_logits(q, kv, w, out, lens, bt, msl, Preshuffle=True, KVBlockSize=64,
                                                   ChunkK=256, WavePerEU=2, VarCtxSchedule=sched)
        tables.append(sched)
        return name

    def expected(new):
        want = torch.full((batch * next_n, msl), float("-inf"))
        for b, c in enumerate(new):
            for n in range(next_n):
                want[b * next_n + n, :max(0, min(c - next_n + 1 + n, msl))] = b * next_n + n + 1
        return want

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        assert step() == FP8_SYMBOL                        # loads the modules outside the capture
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    assert torch.equal(out.cpu(), expected([300, 5, 0]))
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        step()
    slots = tables[-1].shape[0]
    for new in ([512, 0, 257], [1, 600, 64]):
        lens.copy_(torch.tensor(new, dtype=torch.int32))
        out.fill_(7.0)                                     # the replayed -inf fill must cover every cell
        graph.replay()
        torch.cuda.synchronize()
        assert torch.equal(tables[-1].cpu(), varctx_reference(lens.cpu(), 64, slots, msl, next_n)[0]), new
        assert torch.equal(out.cpu(), expected(new)), new


def test_checked_mode_refuses_capture_naming_the_op(stand_in, monkeypatch):
    """FLYAOT_CHECK=1 reads index values back, which a graph capture forbids: each paged op refuses
    before any launch, by its own name."""
    from flyaot import runtime
    from flyaot.ops import fp8_paged_mqa_logits, pa_mqa_logits_fp4
    monkeypatch.setenv("FLYAOT_CHECK", "1")
    runtime.reset()
    dev = torch.device("cuda")
    q8, kv8 = torch.zeros(2, 1, 64, 128, dtype=torch.uint8, device=dev), torch.zeros(4, 64, 1, 132, dtype=torch.uint8,
                                                                                       device=dev)
    w8, bt8 = torch.zeros(2, 64, device=dev), torch.zeros(2, 4, dtype=torch.int32, device=dev)
    q, qs, kv, ks, bt, w = _inputs(2, 8, dev)
    lens = torch.tensor([200, 17], dtype=torch.int32, device=dev)
    calls = {"fp8_paged_mqa_logits": lambda: fp8_paged_mqa_logits(q8, kv8, w8, lens, bt8, 256, kv_block_size=64,
                                                                  preshuffle=True),
             "pa_mqa_logits_fp4": lambda: pa_mqa_logits_fp4(q, qs, kv, ks, bt, w, lens, 256, parallel_unit_num=4)}
    for op, call in calls.items():
        with pytest.raises(RuntimeError, match=f"^{op}: checked mode"):
            with torch.cuda.graph(torch.cuda.CUDAGraph()):
                call()


def test_stream_argument_orders_the_schedule_and_the_kernel(stand_in):
    from flyaot.compat import aiter
    dev, batch, msl = torch.device("cuda"), 2, 256
    q, qs, kv, ks, bt, w = _inputs(batch, 8, dev)
    lens = torch.tensor([200, 17], dtype=torch.int32, device=dev)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    out = aiter.flydsl_pa_mqa_logits_fp4(q, qs, kv, ks, bt, w, lens, msl, next_n=1, parallel_unit_num=4,
                                         weight_scale=2.0, stream=s)
    s.synchronize()
    assert torch.equal(out.cpu(), _expected([200, 17], msl, 2.0, float("-inf")))


def test_stream_kinds_on_a_gpu(stand_in):
    """compat takes upstream's raw handle (as a torch ExternalStream of the inputs' device) and a
    device-generic torch.Stream; the flyaot op takes the torch streams and refuses the raw handle."""
    from flyaot.compat import aiter
    from flyaot.ops import pa_mqa_logits_fp4
    dev, batch, msl = torch.device("cuda"), 2, 256
    q, qs, kv, ks, bt, w = _inputs(batch, 8, dev)
    lens = torch.tensor([200, 17], dtype=torch.int32, device=dev)
    want = _expected([200, 17], msl, 2.0, float("-inf"))
    s = torch.cuda.Stream()
    generic = torch.Stream(device="cuda")
    for stream in (s.cuda_stream, s, generic):
        s.wait_stream(torch.cuda.current_stream())
        out = aiter.flydsl_pa_mqa_logits_fp4(q, qs, kv, ks, bt, w, lens, msl, next_n=1, parallel_unit_num=4,
                                             weight_scale=2.0, stream=stream)
        torch.cuda.synchronize()
        assert torch.equal(out.cpu(), want), type(stream)
    out = pa_mqa_logits_fp4(q, qs, kv, ks, bt, w, lens, msl, parallel_unit_num=4, weight_scale=2.0, stream=generic)
    torch.cuda.synchronize()
    assert torch.equal(out.cpu(), want)
    with pytest.raises(TypeError, match="^stream: expected a torch stream"):
        pa_mqa_logits_fp4(q, qs, kv, ks, bt, w, lens, msl, parallel_unit_num=4, stream=s.cuda_stream)
    with pytest.raises(ValueError, match="^stream: on cuda"):
        pa_mqa_logits_fp4(q.cpu(), qs.cpu(), kv.cpu(), ks.cpu(), bt.cpu(), w.cpu(), lens.cpu(), msl, stream=s)
