"""The decoded-instruction contract between the gfx950 decoder and the executor.

The decoder (decode.py) turns .text bytes into `Instr` values; the executor (exec engine and the
semantics modules) consumes nothing else. Mnemonics and operand order follow llvm-objdump
--mcpu=gfx950, which is the decoder's test oracle.
"""
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Operand:
    """One source or destination operand.

    kind:
      'sgpr' / 'vgpr' / 'agpr' / 'ttmp': register range starting at `index`, `count` dwords
      'special': named register in `name` (vcc, vcc_lo, vcc_hi, exec, exec_lo, exec_hi, m0, scc,
                 flat_scratch*, xnack_mask*, src_shared_base, ... as llvm prints them), `count` dwords
      'const': inline constant; `value` is the raw 32-bit pattern the hardware would read
               (for f16/bf16/packed forms the decoder leaves interpretation to the executor; `name`
               keeps llvm's spelling, e.g. '1.0', '-4', '0.15915494')
      'literal': 32-bit literal that followed the instruction; `value` raw 32 bits
      'label': branch target; `value` is the absolute byte address in .text
    """
    kind: str
    index: int = 0
    count: int = 1
    value: int = 0
    name: str = ""


@dataclass(frozen=True)
class Instr:
    addr: int                       # byte offset of the instruction in .text
    size: int                       # bytes, literal included
    enc: str                        # SOP1 SOP2 SOPK SOPC SOPP SMEM VOP1 VOP2 VOPC VOP3 VOP3P MAI
                                    # MUBUF FLAT GLOBAL SCRATCH DS (DPP/SDWA forms keep their base enc
                                    # and set mods['dpp'] / mods['sdwa'])
    op: str                         # llvm mnemonic without the _e32/_e64/_dpp/_sdwa suffix
    dst: tuple = ()                 # Operands written, in llvm's printed order
    src: tuple = ()                 # Operands read, in llvm's printed order
    mods: dict = field(default_factory=dict, compare=False, hash=False)
                                    # encoding fields: neg, abs, neg_hi, clamp, omod, op_sel, op_sel_hi,
                                    # offset, offen, idxen, glc, slc, nt, sc0, sc1, lds, gds, offset0/1,
                                    # cbsz, abid, blgp, dpp {ctrl,row_mask,bank_mask,bound_ctrl},
                                    # sdwa {...}, simm16, ...
    text: str = ""                  # the line as llvm-objdump prints it (without address/bytes)
