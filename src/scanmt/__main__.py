"""``python -m scanmt`` (also what ``torchrun -m scanmt`` runs)."""

from scanmt.cli.main import main

if __name__ == "__main__":
    raise SystemExit(main())
