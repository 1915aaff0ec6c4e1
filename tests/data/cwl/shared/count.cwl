cwlVersion: v1.2
class: CommandLineTool
baseCommand: [wc, -l]
inputs:
  inp: {type: File, inputBinding: {position: 1}}
stdout: count.txt
outputs:
  out: {type: stdout}
