"""`python -m flyaot`: see flyaot.cli."""
import sys

from .cli import main

sys.exit(main())
