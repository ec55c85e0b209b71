"""Device metadata of the prefill kernel, one FlyDSL kernel launch per table: the grouped 8-int
schedule (`groups`), the variable-qlen windows (`windows`) and the conversion of the one-row-per-CTA
6-int table (`convert`).

geometry.py (sizes, symbol, block), specs.py (the three specs), plan.py (launch plans: the module other
families use), kernel.py (FlyDSL), reference.py (the torch builders the kernels reproduce bit for bit).
"""
