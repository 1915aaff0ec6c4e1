rule summary_input:
    input: "work/table.tsv"
    output: "work/summary_input.tsv"
    shell: "tail -n +2 {input} | cut -f2 > {output}"
