"""Per-target ISA data of the emulator: one package per target."""
