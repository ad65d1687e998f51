"""``python -m ladr_core.calibrate``: see ladr_core.calibrate.cli."""

from .cli import main

if __name__ == "__main__":
    raise SystemExit(main())
