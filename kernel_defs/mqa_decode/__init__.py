"""FP4 paged MQA logits decode: geometry.py (sizes, spec tables, symbol, block), specs.py (the matrix),
inputs.py (the input checks), plan.py (kernel choice and launch plans), reference.py, kernel.py and
direct.py (FlyDSL; the only modules here that import flydsl)."""
