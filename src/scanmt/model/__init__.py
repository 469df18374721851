"""Encoder, attention (scores + transform + fertility bounds), decoder, generator, NMT model; building
it (:mod:`.build`) and the typed schema of the checkpoint file (:mod:`.checkpoint`)."""
