values = [int(line.split("\t")[1]) for line in open(snakemake.input[0])]
with open(snakemake.output[0], "w") as out:
    out.write(f"{snakemake.wildcards.sample}\t{len(values)}\t{sum(values)}\n")
