"""Samples N 100-base reads from a FASTA reference as FASTQ, with a few substitutions."""
import random
import sys

ref_path, sample, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
with open(ref_path) as f:
    seq = "".join(line.strip() for line in f if not line.startswith(">"))
rng = random.Random(sample)
for i in range(n):
    start = rng.randrange(0, len(seq) - 100)
    read = list(seq[start : start + 100])
    for _ in range(2):
        read[rng.randrange(100)] = rng.choice("ACGT")
    print(f"@{sample}_{i}\n{''.join(read)}\n+\n{'I' * 100}")
