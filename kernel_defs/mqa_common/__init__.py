"""Pieces shared by the FP4 paged MQA logits families (mqa_decode, mqa_prefill).

- fp4.py: E2M1 / E8M0 decode, nibble packing, the MX (block 32) quantizer. Pure torch.
- layouts.py: the kernel ABI layouts (Q-scale swizzle, KV page value/scale planes for any page size,
  strided page pools) and test-data makers built on them. Pure torch.
- inputs.py: the (H, D, P) axes both families prebuild, the alignment their loads need and the KV-page
  checks both families' inputs.py run. Pure torch.
- schedule.py: the fixed-trip-count device binary search of both schedule builders. Pure torch.
- reference.py: the scoring formula and the acceptance metrics. Pure torch.
- blocks.py: FlyDSL building blocks both kernels use (imports flydsl; only the kernel modules import it).
"""
