cwlVersion: v1.2
class: CommandLineTool
baseCommand: rev
inputs:
  inp: {type: File, inputBinding: {position: 1}}
stdout: reversed.txt
outputs:
  out: {type: stdout}
