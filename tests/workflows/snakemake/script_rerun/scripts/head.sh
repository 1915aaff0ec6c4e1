tmp="$(mktemp)"
head -n "${snakemake_params[lines]}" "${snakemake_input[0]}" > "$tmp"
cp "$tmp" "${snakemake_output[0]}"
rm -f "$tmp"
