rule summarise:
    input: "work/summary_input.tsv"
    output: "work/summary.txt"
    params: times=1
    shell: "for i in $(seq 1 {params.times}); do awk '{{s += $1}} END {{print s * %d}}' {input}; done > {output}" % config["scale"]
