"""Drop-in surfaces of other kernel libraries' Python APIs, served by flyaot's ops.

`flyaot.compat.aiter` has the names, signatures, defaults and return conventions of
`aiter.ops.flydsl` for the FP4 MQA logits ops, their schedule builders and the A16WFP4 GEMM, so a
serving engine switches by changing only the import line.
"""
