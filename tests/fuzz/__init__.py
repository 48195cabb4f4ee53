"""Differential fuzzing of dualgen.forward_ad against torch.autograd.forward_ad."""
