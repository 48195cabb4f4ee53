"""Forward AD through torch.distributed: collectives carry tangents (dual.py)."""
