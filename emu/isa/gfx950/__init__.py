"""gfx950 (CDNA4) ISA data: opcode tables generated from llvm-mc."""
