"""Vector compares (v_cmp_*, v_cmpx_*, v_cmp_class_*): a lane mask into VCC / an SGPR pair,
and for v_cmpx also into EXEC. Lanes inactive in EXEC produce 0 bits."""
import numpy as np

from . import handles, specializes
from .common import fast_src, plain, src_f16, src_f32, src_f64, src_u16, src_u32, src_u64

_FLOAT = {
    "f": lambda a, b: np.zeros(a.shape, bool), "lt": np.less, "eq": np.equal, "le": np.less_equal,
    "gt": np.greater, "lg": lambda a, b: (a < b) | (a > b), "ge": np.greater_equal,
    "o": lambda a, b: ~(np.isnan(a) | np.isnan(b)), "u": lambda a, b: np.isnan(a) | np.isnan(b),
    "nge": lambda a, b: ~(a >= b), "nlg": lambda a, b: ~((a < b) | (a > b)),
    "ngt": lambda a, b: ~(a > b), "nle": lambda a, b: ~(a <= b), "neq": lambda a, b: ~(a == b),
    "nlt": lambda a, b: ~(a < b), "tru": lambda a, b: np.ones(a.shape, bool),
}
_INT = {
    "f": _FLOAT["f"], "lt": np.less, "eq": np.equal, "le": np.less_equal, "gt": np.greater,
    "ne": np.not_equal, "lg": np.not_equal, "ge": np.greater_equal, "t": _FLOAT["tru"],
}
_READ = {
    "f16": src_f16, "f32": src_f32, "f64": src_f64,
    "i16": lambda w, ins, i: src_u16(w, ins, i).view(np.int16), "u16": src_u16,
    "i32": lambda w, ins, i: src_u32(w, ins, i).view(np.int32), "u32": src_u32,
    "i64": lambda w, ins, i: src_u64(w, ins, i).view(np.int64), "u64": src_u64,
}
_TABLE: dict = {}


def _class_mask(x, bits):
    """v_cmp_class: bit 0 sNaN, 1 qNaN, 2 -inf, 3 -normal, 4 -denormal, 5 -0, 6 +0, 7 +denormal,
    8 +normal, 9 +inf."""
    x = np.asarray(x)
    info = np.finfo(x.dtype)
    nan = np.isnan(x)
    raw = x.view({2: np.uint16, 4: np.uint32, 8: np.uint64}[x.itemsize])
    quiet_bit = raw.dtype.type(1 << (info.nmant - 1))
    qnan = nan & ((raw & quiet_bit) != 0)
    snan = nan & ~qnan
    neg = np.signbit(x)
    inf = np.isinf(x)
    zero = x == 0
    denorm = ~nan & ~zero & ~inf & (np.abs(x) < info.tiny)
    normal = ~nan & ~zero & ~inf & ~denorm
    classes = [snan, qnan, inf & neg, normal & neg, denorm & neg, zero & neg, zero & ~neg,
               denorm & ~neg, normal & ~neg, inf & ~neg]
    out = np.zeros(x.shape, dtype=bool)
    for k, c in enumerate(classes):
        out |= c & (((bits >> np.uint32(k)) & np.uint32(1)) != 0)
    return out


def _write_result(w, ins, res):
    res = res & w.exec
    if ins.dst:
        w.write_mask(ins.dst[0], res)
    else:
        w.vcc = res
    if ins.op.startswith("v_cmpx"):
        w.exec = res.copy()


def _cmp(w, ins):
    fn, rd = _TABLE[ins.op]
    _write_result(w, ins, np.asarray(fn(rd(w, ins, 0), rd(w, ins, 1)), dtype=bool))


def _cmp_class(w, ins):
    t = ins.op.rsplit("_", 1)[1]
    _write_result(w, ins, _class_mask(_READ[t](w, ins, 0), src_u32(w, ins, 1)))


for _x in ("v_cmp", "v_cmpx"):
    for _t in ("f16", "f32", "f64"):
        for _c, _f in _FLOAT.items():
            _TABLE[f"{_x}_{_c}_{_t}"] = (_f, _READ[_t])
        handles(f"{_x}_class_{_t}")(_cmp_class)
    for _t in ("i16", "u16", "i32", "u32", "i64", "u64"):
        for _c, _f in _INT.items():
            _TABLE[f"{_x}_{_c}_{_t}"] = (_f, _READ[_t])
handles(*_TABLE)(_cmp)


_DT32 = {"i32": np.int32, "u32": None, "f32": np.float32}


def _fast_cmp(ins):
    """32-bit compares of plain operands into VCC or an SGPR pair (and EXEC for v_cmpx)."""
    fn, _ = _TABLE[ins.op]
    t = ins.op.rsplit("_", 1)[1]
    if t not in _DT32 or len(ins.src) != 2 or not plain(ins):
        return None
    r0, r1 = fast_src(ins.src[0], _DT32[t]), fast_src(ins.src[1], _DT32[t])
    if None in (r0, r1):
        return None
    dst = ins.dst[0] if ins.dst else None
    to_vcc = dst is None or (dst.kind == "special" and dst.name == "vcc")
    if not to_vcc and dst.kind != "sgpr":
        return None
    cmpx = ins.op.startswith("v_cmpx")

    def run(w, ins):
        res = fn(r0(w), r1(w)) & w.exec
        if to_vcc:
            w.vcc = res
        else:
            w.write_mask(dst, res)
        if cmpx:
            w.exec = res.copy()
    return run


specializes(*(op for op in _TABLE if op.rsplit("_", 1)[1] in _DT32))(_fast_cmp)
