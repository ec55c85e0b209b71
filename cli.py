"""`python -m flyaot`: the runtime's commands (env, list, verify, clear-cache) plus the ops' selftest
and bench. It sits above both rooms, so the runtime never imports the ops."""
from .runtime import cli as runtime_cli


def _hook_command(name: str):
    def run(a, config) -> int:
        from .ops import hooks     # imports torch and registers the ops: only for these two commands
        return getattr(hooks, f"cmd_{name}")(a, config)
    return run


def _hook_arguments(parser) -> None:
    parser.add_argument("--family", action="append")
    parser.add_argument("--device", help="cuda or cpu (the emulator); default: cpu with FLYAOT_DEVICE=emu, else cuda "
                                         "if available")


def _selftest_arguments(parser) -> None:
    _hook_arguments(parser)
    parser.add_argument("--sanitize", action="store_true",
                        help="run on the emulator under its sanitizer (races, waits, hazards, uninitialised "
                             "reads: FLYAOT_EMU_SANITIZE=1)")


def _model_arguments(parser) -> None:
    parser.add_argument("args", nargs="...", help="FAMILY SHAPE... [--samples N]: gemm N K M | decode B NEXT_N "
                                                     "MAX_CTX [HEADS] | prefill B Q KV [HEADS]")


def _model(a, config) -> int:
    from .ops import modeled      # the emulator's timing model: a MODEL of MI355X time, said so in its output
    return modeled.main(a.args)


COMMANDS = (("selftest", "each family against its torch reference", _selftest_arguments, _hook_command("selftest")),
            ("bench", "each family's benchmark", _hook_arguments, _hook_command("bench")),
            ("model", "modeled MI355X time of an op at a shape (the emulator's timing model; not a measurement)",
             _model_arguments, _model))


def main(argv=None) -> int:
    return runtime_cli.main(argv, extra_commands=COMMANDS)
