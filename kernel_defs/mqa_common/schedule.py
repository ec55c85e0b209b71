"""Device-side search both families' schedule builders use (pure torch, no host sync: graph-capturable)."""
import torch


def smallest_fit(cost, budget: int, s_max: int, device) -> torch.Tensor:
    """Smallest s in [1, s_max] with cost(s) <= budget, for a `cost` (0-d int64 tensor -> 0-d tensor)
    that does not grow with s. Returns a 0-d int64 tensor; s_max when nothing fits (the caller decides
    what that means). A binary search with a trip count fixed by s_max, so no value is read back."""
    lo = torch.ones((), dtype=torch.int64, device=device)
    hi = torch.full((), s_max, dtype=torch.int64, device=device)
    for _ in range(s_max.bit_length() + 1):
        mid = (lo + hi) // 2
        fits = cost(mid) <= budget
        hi = torch.where(fits, mid, hi)
        lo = torch.where(fits, lo, mid + 1)
    return hi
