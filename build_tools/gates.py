"""Refuse code objects that must not ship. Every check reads the code object's own metadata."""
from ..formats import codeobject
from ..formats.codeobject import user_args
from ..formats.manifest import SLOT_CTYPES

LDS_LIMIT = 160 * 1024          # gfx950 LDS per workgroup
TARGET_MACH = "gfx950"


def check(co: codeobject.CodeObject, *, symbol: str, block: tuple, traced_block: tuple,
          arg_ctypes: tuple, budget) -> list:
    """All violations of one code object, as readable strings (empty list: it may ship)."""
    problems = []
    if co.mach != TARGET_MACH or not co.target.endswith(TARGET_MACH):
        problems.append(f"target is {co.mach} ({co.target!r}), not {TARGET_MACH}")
    names = [k.name for k in co.kernels]
    if symbol not in names:
        return problems + [f"expected kernel symbol {symbol!r} not found (has {names})"]
    try:
        co.descriptor(symbol)
    except (codeobject.CodeObjectError, ValueError) as e:
        problems.append(f"kernel descriptor for {symbol!r} unreadable: {e}")
    k = co.kernel(symbol)
    r = k.resources
    if r.scratch:
        problems.append(f"uses {r.scratch} bytes of scratch per lane")
    if r.vgpr_spill or r.sgpr_spill:
        problems.append(f"spills registers (vgpr {r.vgpr_spill}, sgpr {r.sgpr_spill})")
    if r.uses_dynamic_stack:
        problems.append("uses a dynamic stack")
    if r.lds > LDS_LIMIT:
        problems.append(f"LDS {r.lds} bytes exceeds {LDS_LIMIT}")
    if r.wavefront_size != 64:
        problems.append(f"wavefront size {r.wavefront_size}, expected 64")
    block = tuple(block)
    threads = block[0] * block[1] * block[2]
    if tuple(traced_block) != block:
        problems.append(f"kernel was traced with workgroup {tuple(traced_block)}, launch plan uses {block}")
    if k.reqd_workgroup_size and tuple(k.reqd_workgroup_size) != block:
        problems.append(f"required workgroup size {k.reqd_workgroup_size} differs from the launch plan's {block}")
    if r.max_workgroup_size and r.max_workgroup_size < threads:
        problems.append(f"max workgroup size {r.max_workgroup_size} < launch plan's {threads} threads")
    args = user_args(k)
    if len(args) != len(arg_ctypes):
        problems.append(f"metadata lists {len(args)} arguments, the kernel signature has {len(arg_ctypes)}")
    else:
        for i, (a, ct) in enumerate(zip(args, arg_ctypes)):
            if SLOT_CTYPES.get(ct, (None,))[0] != a.size:
                problems.append(f"argument {i} is {a.size} bytes in metadata but {ct} in the signature")
    problems += _budget_violations(r, budget)
    return problems


def _budget_violations(r, budget) -> list:
    out = []
    limits = [("max_vgpr", r.vgpr, "VGPRs"), ("max_agpr", r.agpr, "AGPRs"),
              ("max_vgpr_plus_agpr", r.vgpr + r.agpr, "VGPRs+AGPRs"), ("max_sgpr", r.sgpr, "SGPRs"),
              ("max_lds", r.lds, "LDS bytes")]
    for field, value, what in limits:
        limit = getattr(budget, field)
        if limit is not None and value > limit:
            out.append(f"budget: {value} {what} > {limit}")
    if budget.exact_lds is not None and r.lds != budget.exact_lds:
        out.append(f"budget: LDS {r.lds} bytes, family requires exactly {budget.exact_lds}")
    return out
