"""Greedy and batched beam search; penalties are pure functions in :mod:`.penalties`."""
