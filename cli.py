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


COMMANDS = (("selftest", "each family against its torch reference", _hook_arguments, _hook_command("selftest")),
            ("bench", "each family's benchmark", _hook_arguments, _hook_command("bench")))


def main(argv=None) -> int:
    return runtime_cli.main(argv, extra_commands=COMMANDS)
