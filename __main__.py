"""`python -m flyaot`: see flyaot.runtime.cli."""
import sys

from .runtime.cli import main

sys.exit(main())
