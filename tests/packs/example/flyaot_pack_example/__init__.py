"""An add-on pack: this folder holds a flyaot store of one target (manifest.json + <id>.co), written by
`python -m flyaot.build_tools build --from-misses misses.jsonl --out flyaot_pack_example` (or
`--family F`); flyaot never imports this module."""
