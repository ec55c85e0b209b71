"""Checked mode (FLYAOT_CHECK=1): index and length values that would send a kernel outside its tensors
or past the documented contract are ValueErrors naming the index and value, before any launch; valid
inputs pass and give the reference result on the emulator; off by default."""
import pytest
import torch

from flyaot import runtime
from flyaot.kernel_defs.mqa_common.reference import compare, passes
from flyaot.kernel_defs.mqa_decode.reference import pa_mqa_logits_reference, visible_mask
from flyaot.kernel_defs.mqa_runs_schedule.reference import varctx_reference as build_schedule
from flyaot.kernel_defs.mqa_prefill import reference as R
from flyaot.kernel_defs.mqa_prefill_meta import reference as meta_reference
from flyaot.ops import _mqa_decode as decode
from flyaot.ops import _mqa_prefill as prefill
from tests.hostile.guard_cases import MSL, decode_inputs, prefill_inputs, run_decode, run_prefill


@pytest.fixture
def checked(monkeypatch):
    monkeypatch.setenv("FLYAOT_CHECK", "1")
    runtime.reset()
    yield
    runtime.reset()


@pytest.fixture
def launches(monkeypatch):
    """Launch attempts are recorded, not run (value errors must come first)."""
    plans = []
    for module in (decode, prefill):
        monkeypatch.setattr(module.runtime, "launch", lambda plan, stream=None: plans.append(plan))
    return plans


# --- decode -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("heads", [64, 16])          # direct and staged paths
@pytest.mark.parametrize("entry", [-1, "pages"])
def test_decode_block_table_entry_outside_the_pool(checked, launches, heads, entry):
    a = decode_inputs(heads=heads)
    pages = a["kv_cache"].shape[0]
    a["block_tables"][0, 1] = -1 if entry == -1 else pages
    shown = -1 if entry == -1 else pages
    with pytest.raises(ValueError, match=rf"block_tables\[0, 1\]={shown} is outside \[0, {pages}\)"):
        run_decode(a)
    assert not launches


def test_decode_entries_past_the_context_are_not_read_so_not_checked(checked, launches):
    a = decode_inputs()                       # batch 1 (ctx 70) uses 2 of 3 columns; column 2 is padding
    assert int(a["block_tables"][1, 2]) == 0x7FFFFFFF
    run_decode(a)
    assert len(launches) == 1


def test_decode_context_beyond_the_table(checked, launches):
    a = decode_inputs()
    a["block_tables"] = a["block_tables"][:, :2]          # ctx 130 needs 3 pages of 64
    with pytest.raises(ValueError, match="block_tables: batch 0 needs 3 pages .* the table has 2 columns"):
        run_decode(a)
    a = decode_inputs()
    a["context_lens"][1] = -5
    with pytest.raises(ValueError, match=r"context_lens\[1\]=-5 is negative"):
        run_decode(a)
    assert not launches


def test_decode_bad_external_schedule(checked, launches):
    a = decode_inputs(heads=16)
    info, _ = build_schedule(a["context_lens"], 256, 4, MSL, 1)
    out = torch.full((2, MSL), float("-inf"))
    bad = info.clone()
    bad[1, 0] = 7                                          # row 7 of a 2-row output
    with pytest.raises(ValueError, match=r"cta_info\[1\]=\[7, .*row out of range"):
        run_decode(a, cta_info=bad, total_ctas=4, out=out)
    bad = info.clone()
    bad[0, 3] = 1000                                       # its ctx needs more pages than the table holds
    a["block_tables"] = a["block_tables"][:, :2].contiguous()
    a["context_lens"] = torch.tensor([100, 70], dtype=torch.int32)
    with pytest.raises(ValueError, match="batch 0 needs 3 pages .*ctx fields of cta_info"):
        run_decode(a, cta_info=bad, total_ctas=4, out=out)
    assert not launches


def test_checked_mode_is_off_by_default(monkeypatch, launches):
    monkeypatch.delenv("FLYAOT_CHECK", raising=False)
    runtime.reset()
    a = decode_inputs()
    a["block_tables"][0, 1] = -1
    run_decode(a)                                    # no value check, no sync: the kernel's own bounds apply
    assert len(launches) == 1


# --- prefill / varqlen --------------------------------------------------------------------------------

def test_prefill_row_to_batch_out_of_range(checked, launches):
    a = prefill_inputs()
    a["row_to_batch"][2] = 5
    with pytest.raises(ValueError, match=r"row_to_batch\[2\]=5 is outside \[0, 2\)"):
        run_prefill(a)
    a["row_to_batch"][2] = -1
    with pytest.raises(ValueError, match=r"row_to_batch\[2\]=-1"):
        run_prefill(a)
    # A row with an empty window may carry any batch (graph padding): accepted.
    a["local_ends"][2] = 0
    run_prefill(a)
    assert [p.family for p in launches] == ["mqa_prefill_meta", "mqa_prefill"]   # schedule, then logits


def test_prefill_window_past_the_block_table(checked, launches):
    a = prefill_inputs()
    a["block_tables"] = a["block_tables"][:, :2].contiguous()
    a["local_ends"][0] = 150                               # 3 pages of 64, the table has 2 columns
    with pytest.raises(ValueError, match=r"local_ends\[0\]=150 needs 3 pages of 64 tokens but block_tables has 2"):
        run_prefill(a)
    a = prefill_inputs()
    a["local_ends"][2] = 150                               # batch 1 (ctx 70) has only 2 pages: column 2 is padding
    with pytest.raises(ValueError, match=r"block_tables\[1, 2\]=2147483647 is outside"):
        run_prefill(a)
    assert not launches


def test_prefill_bad_external_schedule(checked, launches):
    a = prefill_inputs()
    # (launches are not run here, so the schedule comes from the builder the schedule kernel matches)
    info = meta_reference.build_schedule(a["row_to_batch"], a["local_starts"], a["local_ends"], page_size=64,
                                         max_seq_len=MSL, slots=8)
    n = 8
    out = torch.full((3, MSL), float("-inf"))
    for col, value, what in ((2, 9, "batch"), (5, 3, "last_page"), (0, 3, "first_row / n_rows")):
        bad = info.clone()
        bad[0, col] = value
        with pytest.raises(ValueError, match=rf"cta_info\[0\]=.*{what} out of range"):
            run_prefill(a, cta_info=bad, n_ctas=n, out=out)
    assert not launches
    run_prefill(a, cta_info=info, n_ctas=n, out=out)
    assert len(launches) == 1


@pytest.mark.parametrize("cu,match", [([1, 2, 3], r"cu_seq_q\[0\]=1 must be 0"),
                                      ([0, 3, 2], r"cu_seq_q\[2\]=2 is below cu_seq_q\[1\]=3"),
                                      ([0, 2, 9], r"cu_seq_q\[2\]=9 exceeds total_q=4")])
def test_varqlen_cu_seq_q_values(checked, cu, match):
    with pytest.raises(ValueError, match=match):
        prefill.compute_varqlen_windows(torch.tensor(cu, dtype=torch.int32), torch.tensor([9, 9], dtype=torch.int32), 4)


def test_varqlen_negative_context(checked):
    with pytest.raises(ValueError, match=r"context_lens\[0\]=-3 is negative"):
        prefill.compute_varqlen_windows(torch.tensor([0, 2, 4], dtype=torch.int32),
                                        torch.tensor([-3, 9], dtype=torch.int32), 4)


# --- valid inputs pass, on the emulator -------------------------------------------------------------

def test_checked_decode_matches_the_reference(checked):
    a = decode_inputs(ctx=(130, 0), heads=64, next_n=2)
    out = run_decode(a, next_n=2)
    cpu = (a["q_fp4"], a["q_scale"], a["kv_cache"], a["kv_scale"], a["block_tables"], a["weights"], a["context_lens"])
    ref = pa_mqa_logits_reference(*cpu, MSL, next_n=2)
    assert passes(compare(out, ref, visible_mask(a["context_lens"], 2, MSL)))


def test_checked_prefill_matches_the_reference(checked):
    a = prefill_inputs()
    out = run_prefill(a)
    ref = R.prefill_logits(a["q_fp4"], a["q_scale"], a["kv_cache"], a["kv_scale"], a["block_tables"], a["weights"],
                           a["row_to_batch"], a["local_starts"], a["local_ends"], MSL, 1.0)
    assert passes(compare(out, ref, R.visible(a["row_to_batch"], a["local_starts"], a["local_ends"], MSL)))


@pytest.mark.gpu
def test_checked_mode_refuses_graph_capture(checked):
    a = {k: v.cuda() for k, v in decode_inputs().items()}
    out = torch.full((2, MSL), float("-inf"), device="cuda")
    graph = torch.cuda.CUDAGraph()
    with pytest.raises(RuntimeError, match="graph capture"):
        with torch.cuda.graph(graph):
            run_decode(a, out=out)
