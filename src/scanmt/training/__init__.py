"""Trainer loop, optimizers and schedules, resume (checkpoints: :mod:`scanmt.model.checkpoint`), torch.distributed."""
