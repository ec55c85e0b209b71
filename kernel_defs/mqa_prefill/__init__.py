"""FP4 paged MQA logits, prefill (ragged windows / variable qlen): four same-batch query rows per CTA.

geometry.py (compile-time sizes, symbol, block), specs.py (the prebuilt set and its resource budget),
inputs.py (input checks), plan.py (launches), kernel.py (FlyDSL), reference.py (torch reference, window
rule, test data). Its schedule, windows and table conversion are built by the mqa_prefill_meta family
(through its plan.py), the one-row-per-CTA table of serving engines by mqa_runs_schedule.
"""
