"""Symbolic execution of 3.11 bytecode into a torch.fx graph (see instructions.py)."""
