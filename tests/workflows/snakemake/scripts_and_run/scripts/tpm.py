import sys

lengths = {}
with open(snakemake.input.genes) as fh:
    next(fh)
    for line in fh:
        g, l = line.split()
        lengths[g] = int(l)

counts = []
with open(snakemake.input.counts) as fh:
    next(fh)
    for line in fh:
        g, c = line.split()
        counts.append((g, int(c)))

rpk = [(g, c / (lengths[g] / 1000.0)) for g, c in counts]
scale = sum(v for _, v in rpk) / 1e6

with open(snakemake.output[0], "w") as out:
    out.write("gene\ttpm\n")
    for g, v in rpk:
        out.write(f"{g}\t{v / scale:.3f}\n")

with open(snakemake.log[0], "w") as log:
    print(f"{snakemake.wildcards.sample}: {len(counts)} genes, "
          f"{sum(c for _, c in counts)} reads", file=log)
