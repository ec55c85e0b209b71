"""Pieces shared by the FP4 paged MQA logits families (mqa_decode, mqa_prefill).

- fp4.py: E2M1 / E8M0 decode, nibble packing, the MX (block 32) quantizer. Pure torch.
- layouts.py: the kernel ABI layouts (Q-scale swizzle, KV page value/scale planes for any page size,
  strided page pools) and test-data makers built on them. Pure torch.
- blocks.py: FlyDSL building blocks both kernels use (imports flydsl; only kernel.py files import it).
"""
