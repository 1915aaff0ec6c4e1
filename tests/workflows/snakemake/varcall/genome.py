#!/usr/bin/env python3
"""Simulate a random reference genome and paired-end reads carrying a few SNPs.

The reference (FASTA) goes to stdout; reads go to the --r1/--r2 FASTQ files.
The true SNP positions are written to --truth so the caller can be checked.
"""
import argparse
import random
import sys

COMP = str.maketrans("ACGT", "TGCA")


def revcomp(s):
    return s.translate(COMP)[::-1]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--name", required=True)
    ap.add_argument("--length", type=int, default=20000)
    ap.add_argument("--pairs", type=int, default=2000)
    ap.add_argument("--read-len", type=int, default=100)
    ap.add_argument("--insert", type=int, default=300)
    ap.add_argument("--snps", type=int, default=10)
    ap.add_argument("--error", type=float, default=0.002)
    ap.add_argument("--r1", required=True)
    ap.add_argument("--r2", required=True)
    ap.add_argument("--truth", required=True)
    args = ap.parse_args()

    rng = random.Random(args.name)
    ref = "".join(rng.choice("ACGT") for _ in range(args.length))

    # the sample's genome differs from the reference at a few positions
    sample = list(ref)
    positions = sorted(rng.sample(range(args.insert, args.length - args.insert), args.snps))
    with open(args.truth, "w") as t:
        for p in positions:
            alt = rng.choice([b for b in "ACGT" if b != ref[p]])
            sample[p] = alt
            t.write(f"chr_{args.name}\t{p + 1}\t{ref[p]}\t{alt}\n")
    sample = "".join(sample)

    def mutate(read):
        out = []
        for b in read:
            if rng.random() < args.error:
                b = rng.choice("ACGT")
            out.append(b)
        return "".join(out)

    q = "I" * args.read_len
    with open(args.r1, "w") as f1, open(args.r2, "w") as f2:
        for i in range(args.pairs):
            start = rng.randrange(0, args.length - args.insert)
            frag = sample[start:start + args.insert]
            if rng.random() < 0.5:
                frag = revcomp(frag)
            r1 = mutate(frag[: args.read_len])
            r2 = mutate(revcomp(frag)[: args.read_len])
            f1.write(f"@{args.name}_{i}/1\n{r1}\n+\n{q}\n")
            f2.write(f"@{args.name}_{i}/2\n{r2}\n+\n{q}\n")

    sys.stdout.write(f">chr_{args.name}\n")
    for i in range(0, len(ref), 70):
        sys.stdout.write(ref[i:i + 70] + "\n")


if __name__ == "__main__":
    main()
