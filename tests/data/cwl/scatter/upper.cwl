cwlVersion: v1.2
class: CommandLineTool
baseCommand: [tr, a-z, A-Z]
inputs:
  inp: {type: File, streamable: true}
stdin: $(inputs.inp.path)
stdout: upper.txt
outputs:
  out: {type: stdout}
