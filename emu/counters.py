"""Per-launch counters: wave-instructions by class and the bytes each memory level moved."""
from dataclasses import dataclass, fields

CLASSES = ("salu", "valu", "mfma", "smem", "vmem", "lds", "branch", "other")


@dataclass
class Counters:
    salu: int = 0
    valu: int = 0
    mfma: int = 0
    smem: int = 0
    vmem: int = 0
    lds: int = 0
    branch: int = 0
    other: int = 0
    global_bytes_read: int = 0
    global_bytes_written: int = 0
    lds_bytes_read: int = 0
    lds_bytes_written: int = 0
    barriers: int = 0
    waves: int = 0
    workgroups: int = 0

    @property
    def instructions(self) -> int:
        return sum(getattr(self, c) for c in CLASSES)

    def add(self, other: "Counters") -> None:
        for f in fields(self):
            setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))

    def as_dict(self) -> dict:
        d = {f.name: getattr(self, f.name) for f in fields(self)}
        d["instructions"] = self.instructions
        return d


def classify(enc: str, op: str) -> str:
    """The counter class of an instruction from its encoding and mnemonic."""
    if enc == "SOPP":
        if op.startswith("s_cbranch") or op in ("s_branch", "s_setpc_b64", "s_swappc_b64"):
            return "branch"
        return "other"
    if enc in ("SOP1", "SOP2", "SOPK", "SOPC"):
        if op in ("s_setpc_b64", "s_swappc_b64", "s_getpc_b64"):
            return "branch"
        return "salu"
    if enc == "SMEM":
        return "smem"
    if enc == "MAI" or op.startswith("v_mfma") or op.startswith("v_smfmac"):
        return "mfma"
    if enc in ("MUBUF", "MTBUF", "FLAT", "GLOBAL", "SCRATCH"):
        return "vmem"
    if enc == "DS":
        return "lds"
    if enc.startswith("VOP"):
        return "valu"
    return "other"
