"""The scoring formula both MQA logits families share (docs/families/mqa_decode.md#operation), in float64.

L[r, t] = weight_scale * sum_h w[r, h] * relu(sum_d Qd[r, h, d] * Kd[t, d])

Dequantized FP4 x E8M0 products are exact in float64 and the sums carry far more precision than the
kernel's fp32 accumulation, so this is the "true" value the kernels are compared against.
"""
import torch


def weighted_relu_logits(q: torch.Tensor, k: torch.Tensor, w: torch.Tensor, weight_scale: float) -> torch.Tensor:
    """q [R, H, D] float, k [T, D] float, w [R, H] (bf16 or float) -> float32 [R, T]."""
    s = torch.einsum("rhd,td->rht", q.double(), k.double())
    return (weight_scale * (s.clamp_min(0) * w.double().unsqueeze(-1)).sum(dim=1)).float()


def compare(out: torch.Tensor, ref: torch.Tensor, visible: torch.Tensor) -> dict:
    """Acceptance metrics over visible cells: cosine, max |err| relative to max |ref|, and whether every
    invisible cell is exactly -inf. `visible` is a bool mask of out's shape."""
    o, r = out[visible].double(), ref[visible].double()
    hidden = out[~visible]
    if o.numel():
        denom = (o.norm() * r.norm()).item()
        cos = 1.0 if denom == 0 and o.abs().max() == 0 and r.abs().max() == 0 else (o @ r).item() / max(denom, 1e-300)
        rel = ((o - r).abs().max() / r.abs().max().clamp_min(1e-30)).item()
        finite = bool(torch.isfinite(o).all())
    else:
        cos, rel, finite = 1.0, 0.0, True
    hidden_ok = bool((hidden == float("-inf")).all())
    return {"cosine": cos, "max_rel_err": rel, "finite": finite, "hidden_all_neg_inf": hidden_ok}


def passes(metrics: dict) -> bool:
    """Acceptance (docs/families/mqa_decode.md#numerics): cosine >= 0.99999, max |err| <= 1e-3 max|ref|,
    invisible cells exactly -inf."""
    return (metrics["finite"] and metrics["cosine"] >= 0.99999 and metrics["max_rel_err"] <= 1e-3
            and metrics["hidden_all_neg_inf"])
