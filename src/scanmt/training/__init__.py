"""Trainer loop, optimizers and schedules, atomic checkpoints with resume, torch.distributed."""
