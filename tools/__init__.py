"""Developer tools: run from a checkout, never shipped in the wheel."""
