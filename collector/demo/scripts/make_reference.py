"""Writes a random reference genome of N bases as FASTA (seeded: the same every run)."""
import random
import sys

n = int(sys.argv[1])
rng = random.Random(42)
seq = "".join(rng.choice("ACGT") for _ in range(n))
print(">chr1")
for i in range(0, n, 70):
    print(seq[i : i + 70])
