"""Figures: attention maps (:mod:`scanmt.viz.attention_map`), drawn with matplotlib's Agg backend."""
