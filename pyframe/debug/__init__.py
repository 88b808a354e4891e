"""Seeing inside pyframe: the shared case corpus and the side-by-side comparison with torch._dynamo."""
