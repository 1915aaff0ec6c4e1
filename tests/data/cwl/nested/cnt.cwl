cwlVersion: v1.2
class: CommandLineTool
baseCommand: [wc, -c]
inputs:
  inp: {type: File, inputBinding: {position: 1}}
stdout: chars.txt
outputs:
  out: {type: stdout}
