"""Modeled MI355X time of the FP8 indexer ops (mqa_fp8) on the emulator's timing model.

    python benchmarks/mqa_fp8_model.py [--samples N] [--json PATH] [--aiter DIR]
        [--shape decode:BxNEXT_NxMAX_CTX] [--shape prefill:SxS_KV] ...

Decode rows: the FP4 decode table's shapes (B x next_n x max_ctx, H64 D128, page 64), every context
max_ctx (the worst case of the ragged draws), both engine conventions: SGLang's (plain pages, the
tiles grid, no fill) and vLLM's (preshuffled pages, the -inf fill and the persistent grid per call; the
varctx schedule, built once per step for all layers, in its own column). Prefill rows: fp8_mqa_logits
at S x S_kv with causal windows, clean_logits. --shape (repeatable) models only the rows it names.
Each row gives its physical floor (flyaot.ops.floors: the largest of its HBM, MFMA and VALU terms) and
device time / floor (device time = the kernels plus the -inf fill, without the launch term). A row
that cannot be modeled makes the run exit with status 1, naming it. Sampled workgroups
(docs/timing-model.md); these are model outputs, not measurements.

--aiter DIR (an aiter checkout, e.g. at commit cae82635; needs triton >= 3.5 importable) adds the peer
in the same run: aiter's Gluon kernels compiled for gfx950 and modeled on the same inputs and
parameters (gluon_kernels.py), first checked against the torch reference at a small shape; decode rows
then also give the Gluon times and flyaot / Gluon.
"""
import argparse
import json
import pathlib
import sys

import torch

from flyaot.ops import floors, modeled

DECODE = [(2, 1, 512), (3, 1, 1024), (4, 1, 2048), (16, 1, 4352), (8, 1, 8192), (1, 1, 32768), (1, 1, 65536),
          (1, 1, 131072), (2, 2, 512), (32, 4, 32768)]
PREFILL = [(4096, 4096), (8192, 8192)]
HEADS, D, PAGE = 64, 128, 64


def _fp8_bytes(*shape):
    """Random finite E4M3 bytes (timing only: values do not matter, NaN codes avoided)."""
    return torch.randint(0, 0x70, shape, dtype=torch.uint8)


def decode_row(b, nn, ctx, samples, peer=None):
    from flyaot.ops import fp8_paged_mqa_logits, fp8_paged_mqa_logits_schedule
    floor = floors.mqa_fp8_decode([ctx] * b, nn, HEADS, max_seq_len=ctx, page=PAGE)
    pages = b * -(-ctx // PAGE)
    cache = _fp8_bytes(pages, PAGE, 1, D + 4)
    cache.view(pages, -1)[:, PAGE * D:] = torch.ones(pages, PAGE).view(torch.uint8)
    bt = torch.arange(pages, dtype=torch.int32).reshape(b, -1)
    q = _fp8_bytes(b, nn, HEADS, D)
    w = torch.randn(b * nn, HEADS)
    cl = torch.full((b,), ctx, dtype=torch.int32)
    out = torch.empty(b * nn, ctx)
    tiles = modeled.modeled_call(lambda: fp8_paged_mqa_logits(q, cache, w, cl, bt, ctx, kv_block_size=PAGE, out=out),
                                 samples=samples)
    sched = fp8_paged_mqa_logits_schedule(cl, ctx, nn)
    build = modeled.modeled_call(lambda: fp8_paged_mqa_logits_schedule(cl, ctx, nn, out=sched), samples=samples)
    varctx = modeled.modeled_call(lambda: fp8_paged_mqa_logits(q, cache, w, cl, bt, ctx, kv_block_size=PAGE,
                                                               preshuffle=True, schedule=sched, out=out),
                                  out.numel() * 4, samples)
    row = {"family": "decode", "shape": f"{b}x{nn}x{ctx}", "sglang_tiles": tiles, "vllm_varctx": varctx,
           "vllm_schedule": build, **_floor(floor)}
    if peer is not None:
        import gluon_kernels
        row.update(gluon_kernels.decode(peer, q, cache, w, cl, bt, ctx, samples))
    return row


def prefill_row(s, s_kv, samples, peer=None):
    from flyaot.ops import fp8_mqa_logits
    floor = floors.mqa_fp8_prefill(s, s_kv, HEADS)
    q = _fp8_bytes(s, HEADS, D)
    kv = _fp8_bytes(s_kv, D)
    scales = torch.ones(s_kv)
    w = torch.randn(s, HEADS)
    ends = torch.arange(s_kv - s + 1, s_kv + 1, dtype=torch.int32)
    starts = torch.zeros(s, dtype=torch.int32)
    out = torch.empty(s, s_kv)
    r = modeled.modeled_call(lambda: fp8_mqa_logits(q, kv, scales, w, starts, ends, out=out), samples=samples)
    row = {"family": "prefill", "shape": f"1x{s}x{s_kv}", "flyaot": r, **_floor(floor)}
    if peer is not None:
        import gluon_kernels
        row.update(gluon_kernels.prefill(peer, q, kv, scales, w, starts, ends, samples))
    return row


def _floor(f):
    return {"floor_us": f.us, "floor_terms_us": f.terms, "floor_bound": f.bound}


def parse_shape(spec: str):
    """--shape decode:BxNEXT_NxMAX_CTX | prefill:SxS_KV -> (family, dims)."""
    fam, _, dims = spec.partition(":")
    try:
        vals = tuple(int(x) for x in dims.split("x"))
    except ValueError:
        vals = ()
    ok = {"decode": len(vals) == 3, "prefill": len(vals) == 2 and vals[1] >= vals[0]}.get(fam, False)
    if not ok or min(vals) < 1:
        raise SystemExit(f"--shape {spec!r}: expected decode:BxNEXT_NxMAX_CTX or prefill:SxS_KV with S_KV >= S "
                         f"(positive integers)")
    return fam, vals


HEADERS = {
    "decode": "decode H64 D128 page 64, modeled us (dev/flr: device time / floor)\n"
              f"  {'shape':>14}   {'tiles':>9}   {'varctx':>9}   {'schedule':>9}   {'floor':>8} {'bound':>5}   "
              f"{'tiles dev/flr':>13}   {'varctx dev/flr':>14}",
    "peer": "decode, aiter's Gluon kernel on the same model (split: Preshuffle, SplitKV grid; varctx: vLLM's "
            "call), modeled us\n"
            f"  {'shape':>14}   {'g split':>9}   {'g varctx':>9}   {'g sched':>9}   {'tiles/split':>11}   "
            f"{'varctx/varctx':>13}",
    "prefill": "prefill fp8_mqa_logits H64 D128, causal, modeled us (dev/flr: device time / floor)\n"
               f"  {'shape':>14}   {'flyaot':>9}   {'floor':>8} {'bound':>5}   {'dev/flr':>7}",
    "prefill_peer": f"   {'gluon':>9}   {'flyaot/gluon':>11}"}


def _ratio(r, floor_us):
    return r["device_us"] / floor_us


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--samples", type=int, default=8, help="workgroups emulated per launch")
    ap.add_argument("--shape", action="append", default=[],
                    help="model this row instead of the default tables (repeatable): decode:BxNEXT_NxMAX_CTX "
                         "(H64, page 64) or prefill:SxS_KV (H64, causal)")
    ap.add_argument("--json", help="write the rows here")
    ap.add_argument("--aiter", help="an aiter checkout: add its Gluon kernels as the peer (needs triton)")
    a = ap.parse_args(argv)
    if a.samples < 1:
        ap.error("--samples must be >= 1")
    if a.aiter and not pathlib.Path(a.aiter).is_dir():
        ap.error(f"--aiter {a.aiter}: not a folder")
    peer = None
    if a.aiter:
        import gluon_kernels
        peer = gluon_kernels.GluonPeer(a.aiter)
        print(gluon_kernels.check(peer), flush=True)
    shapes = [parse_shape(x) for x in a.shape] or [("decode", r) for r in DECODE] + [("prefill", r) for r in PREFILL]
    rows, failed, table, peers = [], [], None, []
    for fam, dims in shapes:
        if table != fam:
            table = fam
            print(HEADERS[fam] + (HEADERS["prefill_peer"] if fam == "prefill" and peer is not None else ""), flush=True)
        label = f"{fam} {'x'.join(map(str, dims))}"
        try:
            r = (decode_row if fam == "decode" else prefill_row)(*dims, a.samples, peer)
        except Exception as e:        # reported with the row, and the run fails at the end
            err = f"{type(e).__name__}: {e}"[:300]
            failed.append(f"{label}: {err}")
            print(f"  {label} FAILED {err}", flush=True)
            continue
        rows.append(r)
        fl = r["floor_us"]
        if fam == "decode":
            print(f"  {r['shape']:>14}   {r['sglang_tiles']['us']:9.2f}   {r['vllm_varctx']['us']:9.2f}   "
                  f"{r['vllm_schedule']['us']:9.2f}   {fl:8.2f} {r['floor_bound']:>5}   "
                  f"{_ratio(r['sglang_tiles'], fl):13.2f}   {_ratio(r['vllm_varctx'], fl):14.2f}", flush=True)
            if peer is not None:
                peers.append(r)
        else:
            gluon = f"   {r['gluon']['us']:9.2f}   {r['flyaot']['us'] / r['gluon']['us']:11.2f}" if peer else ""
            print(f"  {r['shape']:>14}   {r['flyaot']['us']:9.2f}   {fl:8.2f} {r['floor_bound']:>5}   "
                  f"{_ratio(r['flyaot'], fl):7.2f}{gluon}", flush=True)
    if peers:
        print(HEADERS["peer"])
        for r in peers:
            t, v = r["sglang_tiles"]["us"], r["vllm_varctx"]["us"]
            gs, gv = r["gluon_split"]["us"], r["gluon_varctx"]["us"]
            print(f"  {r['shape']:>14}   {gs:9.2f}   {gv:9.2f}   {r['gluon_schedule']['us']:9.2f}   {t / gs:11.2f}   "
                  f"{v / gv:13.2f}")
    print("Modeled times are outputs of a calibrated model, not measurements.")
    if a.json:
        path = pathlib.Path(a.json)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(json.dumps({"samples": a.samples, "rows": rows}, indent=1))
        tmp.replace(path)
    if failed:
        print(f"{len(failed)} rows could not be modeled:\n  " + "\n  ".join(failed), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
