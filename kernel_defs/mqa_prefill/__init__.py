"""FP4 paged MQA logits, prefill (ragged windows / variable qlen): four same-batch query rows per CTA.

geometry.py (compile-time sizes), kernel.py (FlyDSL), plan.py (checks, launch), reference.py (torch
reference, window rule, test data), specs.py (the prebuilt set and its resource budget). Its schedule,
windows and table conversion are built by the mqa_prefill_meta family, the one-row-per-CTA table of
serving engines by mqa_runs_schedule.
"""
