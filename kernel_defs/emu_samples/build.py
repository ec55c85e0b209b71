"""Compile emu_samples kernels into a folder, in a process of their own (tests call this).

    python -m flyaot.kernel_defs.emu_samples.build OUT_DIR [KERNEL ...]

writes OUT_DIR/<kernel>.co for each kernel (all of them by default). Compiling needs the FlyDSL
toolchain environment, which this sets up before importing flydsl, so a test process never has to.
"""
import argparse
import pathlib


def main(argv=None):
    from flyaot.build_tools.toolchain import setup_process_env
    from .plan import KERNELS

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out_dir")
    ap.add_argument("kernels", nargs="*", help=f"any of {', '.join(KERNELS)} (default: all)")
    args = ap.parse_args(argv)
    unknown = set(args.kernels) - set(KERNELS)
    if unknown:
        ap.error(f"unknown kernels {sorted(unknown)}")
    setup_process_env()
    from .kernel import build

    out = pathlib.Path(args.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    for k in args.kernels or KERNELS:
        kb = build({"kernel": k})
        (out / f"{k}.co").write_bytes(kb.code_object)


if __name__ == "__main__":
    main()
