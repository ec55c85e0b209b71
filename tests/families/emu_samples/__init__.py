"""emu_samples: small test-only FlyDSL kernels covering the instruction kinds the emulator executes."""
