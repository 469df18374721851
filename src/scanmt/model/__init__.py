"""Encoder, attention (scores + transform + fertility bounds), decoder, generator, NMT model."""
