"""Refuse code objects that must not ship. Every check reads the code object's own metadata and
compares it with the limits the target's row in targets.py declares."""
from ..formats import codeobject
from ..formats.codeobject import EF_AMDGPU_MACH, user_args
from ..formats.manifest import SLOT_CTYPES


def check(co: codeobject.CodeObject, *, target, symbol: str, block: tuple, traced_block: tuple,
          arg_ctypes: tuple, budget) -> list:
    """All violations of one code object built for `target` (a targets.GPUTarget), as readable
    strings (empty list: it may ship)."""
    problems = []
    arch = co.target.split(":")[0].rsplit("-", 1)[-1]
    if co.e_flags & EF_AMDGPU_MACH != target.mach or arch != target.arch:
        problems.append(f"target is {co.mach} ({co.target!r}), not {target.arch}")
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
    if r.lds > target.lds_bytes:
        problems.append(f"LDS {r.lds} bytes exceeds {target.arch}'s {target.lds_bytes}")
    # SGPRs are not compared: the metadata count includes VCC and other implicit registers.
    try:
        regs = r.registers(target.unified_vgprs)
    except codeobject.CodeObjectError as e:
        return problems + [str(e)]
    for used, limit, what in zip(regs, (target.vgprs, target.agprs, target.vgprs + target.agprs),
                                 ("VGPRs", "AGPRs", "VGPRs+AGPRs")):
        if used > limit:
            problems.append(f"{used} {what} exceed {target.arch}'s {limit}")
    if r.wavefront_size != target.warp_size:
        problems.append(f"wavefront size {r.wavefront_size}, {target.arch} runs {target.warp_size}")
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
    problems += _budget_violations(r, regs, budget)
    return problems


def _budget_violations(r, regs, budget) -> list:
    out = []
    arch_vgprs, agprs, total = regs
    limits = [("max_vgpr", arch_vgprs, "VGPRs"), ("max_agpr", agprs, "AGPRs"),
              ("max_vgpr_plus_agpr", total, "VGPRs+AGPRs"), ("max_sgpr", r.sgpr, "SGPRs"),
              ("max_lds", r.lds, "LDS bytes")]
    for field, value, what in limits:
        limit = getattr(budget, field)
        if limit is not None and value > limit:
            out.append(f"budget: {value} {what} > {limit}")
    if budget.exact_lds is not None and r.lds != budget.exact_lds:
        out.append(f"budget: LDS {r.lds} bytes, family requires exactly {budget.exact_lds}")
    return out
