import math

groups = snakemake.params.groups
pseudo = float(snakemake.params.pseudo)

with open(snakemake.input.matrix) as fh:
    header = fh.readline().rstrip("\n").split("\t")[1:]
    rows = [line.rstrip("\n").split("\t") for line in fh]

ctrl = [i for i, s in enumerate(header) if groups[s] == "control"]
trt = [i for i, s in enumerate(header) if groups[s] == "treated"]


def mean(vals):
    return sum(vals) / len(vals)


with open(snakemake.output.table, "w") as out:
    out.write("gene\tlog2fc\tmean_control\tmean_treated\n")
    for row in rows:
        vals = [float(v) for v in row[1:]]
        c = mean([vals[i] for i in ctrl])
        t = mean([vals[i] for i in trt])
        lfc = math.log2((t + pseudo) / (c + pseudo))
        out.write(f"{row[0]}\t{lfc:.4f}\t{c:.3f}\t{t:.3f}\n")
