"""Sums the mapped-read counts from samtools flagstat outputs into one table."""
import sys

print("sample\tmapped")
for path in sys.argv[1:]:
    with open(path) as f:
        mapped = next(line for line in f if " mapped (" in line).split()[0]
    print(f"{path}\t{mapped}")
