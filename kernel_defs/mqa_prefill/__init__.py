"""FP4 paged MQA logits, prefill (ragged windows / variable qlen): four same-batch query rows per CTA.

geometry.py (compile-time sizes), kernel.py (FlyDSL), plan.py (checks, launch), schedule.py (device-side
row groups, work list and varqlen windows), reference.py (torch reference, window rule, test data),
specs.py (the prebuilt set and its resource budget).
"""
