import random

# `snakemake` is injected by the script: directive
sample = snakemake.wildcards.sample
condition = snakemake.params.condition
depth = int(snakemake.params.depth)

rng = random.Random(sample)
base = random.Random(7)  # shared "true" expression across samples

with open(snakemake.input.genes) as fh:
    next(fh)
    genes = [line.split("\t")[0] for line in fh]

weights = []
for i, g in enumerate(genes):
    w = base.lognormvariate(0, 1.5)
    if condition == "treated" and i % 25 == 0:
        w *= 8.0  # a handful of induced genes
    weights.append(w * rng.uniform(0.8, 1.2))

total = sum(weights)
with open(snakemake.output.counts, "w") as out:
    out.write("gene\tcount\n")
    for g, w in zip(genes, weights):
        out.write(f"{g}\t{int(depth * w / total)}\n")
