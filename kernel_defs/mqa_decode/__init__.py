"""FP4 paged MQA logits decode: specs.py (the matrix), geometry.py, plan.py, reference.py,
kernel.py (FlyDSL; the only module here that imports flydsl)."""
