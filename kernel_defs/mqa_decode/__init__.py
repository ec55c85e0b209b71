"""FP4 paged MQA logits decode: specs.py (the matrix), geometry.py, plan.py, schedule.py, reference.py,
kernel.py (FlyDSL; the only module here that imports flydsl)."""
